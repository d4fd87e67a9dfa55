//! Model-based property test: random operation sequences (some with an injected fault) give
//! the same observable results on this backend as on the in-memory reference model. The
//! server lives for this test only.

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

delayq::model_tests!(setup);
