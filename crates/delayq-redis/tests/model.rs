//! Model-based property test: random operation sequences give the same observable results
//! on this backend as on the in-memory reference model.

use std::sync::atomic::{AtomicUsize, Ordering};

use delayq::testkit::model;
use proptest::prelude::*;

static CASE: AtomicUsize = AtomicUsize::new(0);

struct Shared {
    rt: tokio::runtime::Runtime,
    _server: delayq_test_support::RedisServer,
    backend: delayq_redis::RedisBackend,
}

fn shared() -> &'static Shared {
    static S: std::sync::OnceLock<Shared> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = delayq_test_support::RedisServer::start();
        let backend = rt
            .block_on(delayq_redis::RedisBackend::connect(&server.url()))
            .unwrap();
        Shared {
            rt,
            _server: server,
            backend,
        }
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
        let s = shared();
        s.rt.block_on(async {
            let q = delayq::QueueName::new(format!("model{n}")).unwrap();
            model::check(s.backend.clone(), q, ops).await;
        });
    }
}
