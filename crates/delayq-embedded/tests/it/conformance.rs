//! The conformance suite and the model check on the embedded backend, with a clock the tests move forward.

use std::sync::Arc;

use delayq::TestClock;
use delayq_testkit::Time;

async fn setup() -> (tempfile::TempDir, delayq_embedded::EmbeddedBackend, Time) {
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::new();
    let b = delayq_embedded::EmbeddedBackend::open_with_clock(dir.path(), Arc::new(clock.clone()))
        .unwrap();
    (dir, b, Time::Driven(clock))
}

delayq_testkit::conformance_tests!(setup);

// The model check (random operation sequences, half with an injected fault) on the same set-up.
delayq_testkit::model_tests!(setup);
delayq_testkit::conformance_tests!(@batches setup);
delayq_testkit::conformance_tests!(@deps setup);
