//! The conformance suite and the model check on the Redis backend (time is the server's `TIME`: it passes by
//! sleeping).

use delayq::testkit::Time;

async fn setup() -> (
    delayq_test_support::RedisServer,
    delayq_redis::RedisBackend,
    Time,
) {
    let server = delayq_test_support::RedisServer::start();
    let b = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    (server, b, Time::Real)
}

delayq::conformance_tests!(setup);

// The model check (random operation sequences, half with an injected fault) on the same set-up.
delayq::model_tests!(setup);
