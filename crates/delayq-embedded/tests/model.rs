//! Model-based property test: random operation sequences give the same observable results
//! on this backend as on the in-memory reference model.

use std::sync::atomic::{AtomicUsize, Ordering};

use delayq::testkit::model;
use proptest::prelude::*;

static CASE: AtomicUsize = AtomicUsize::new(0);

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    })
}

proptest! {
    // A fixed seed keeps CI deterministic; set PROPTEST_RNG_SEED to explore other cases.
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x00de_1a70),
        ..ProptestConfig::default()
    })]
    #[test]
    fn backend_matches_the_model(ops in model::ops(40)) {
        let n = CASE.fetch_add(1, Ordering::Relaxed);
        let dir = tempfile::tempdir().unwrap();
        rt().block_on(async {
            let b = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
            let q = delayq::QueueName::new(format!("model{n}")).unwrap();
            model::check(b, q, ops).await;
        });
    }
}
