//! The conformance suite and the model check on the Redis backend. Every test shares the
//! binary's server, each in a namespace of its own, and moves time instead of waiting for it:
//! the scripts read the server's `TIME` plus the test clock's offset (feature `test-clock`).

use delayq_test_support::shared;
use delayq_testkit::Time;

async fn setup() -> ((), delayq_redis::RedisBackend, Time) {
    let mut o = delayq_redis::ConnectOptions::new(shared::redis().url());
    o.namespace = Some(shared::namespace());
    let b = delayq_redis::RedisBackend::connect_with(o).await.unwrap();
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    ((), b, Time::Driven(clock))
}

delayq_testkit::conformance_tests!(setup);
delayq_testkit::conformance_tests!(@batches setup);
delayq_testkit::conformance_tests!(@deps setup);

// The model check (random operation sequences, half with an injected fault) on the same set-up.
delayq_testkit::model_tests!(setup);

/// The same suite on queues with the one-delay lane (`QueueSettings::lane`): each queue the
/// suite uses is given the lane before it starts, so every job whose due time is not earlier
/// than the lane's last goes to the lane, the others to the sorted sets beside it.
mod lane {
    use delayq::{Inspect, QueueName, QueueSettings};

    pub(super) async fn setup() -> ((), delayq_redis::RedisBackend, delayq_testkit::Time) {
        with_windows(QueueSettings::default().lane_window_ms).await
    }

    /// The suite's queues with the lane and time windows `window_ms` wide.
    pub(super) async fn with_windows(
        window_ms: u32,
    ) -> ((), delayq_redis::RedisBackend, delayq_testkit::Time) {
        let (server, b, time) = super::setup().await;
        let names = [
            "conformance",
            "timeouts",
            "limited",
            "rated",
            "narrow",
            "periodic",
            "prio",
            "hooks",
            "plain",
            "defaulted",
            "kept",
        ];
        let models = (0..80).map(|n| format!("model{n}"));
        for name in names.into_iter().map(str::to_owned).chain(models) {
            let q = QueueName::new(name).unwrap();
            let s = QueueSettings {
                lane: true,
                lane_window_ms: window_ms,
                ..QueueSettings::default()
            };
            b.configure(&q, s).await.unwrap();
        }
        (server, b, time)
    }

    // Every test of the suite but `bad_input_writes_nothing`, which checks that no queue
    // exists afterwards (this set-up creates them).
    delayq_testkit::conformance_tests!(@on_existing_queues setup);
    delayq_testkit::conformance_tests!(@deps setup);
    delayq_testkit::model_tests!(setup);
}

/// The same suite on lane queues whose time windows are the narrowest (100 ms): every job due
/// more than 200 ms ahead that does not fit the one-delay lane waits in a window, and the
/// suite's jobs due within a second or two move to the sorted sets while it runs (a claim
/// moves a window one width before it starts).
mod windows {
    async fn setup() -> ((), delayq_redis::RedisBackend, delayq_testkit::Time) {
        super::lane::with_windows(delayq::settings::MIN_LANE_WINDOW_MS).await
    }

    delayq_testkit::conformance_tests!(@on_existing_queues setup);
    delayq_testkit::conformance_tests!(@deps setup);
    delayq_testkit::model_tests!(setup);
}
