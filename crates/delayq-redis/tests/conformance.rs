//! The conformance suite on the Redis backend.

async fn setup() -> (delayq_test_support::RedisServer, delayq_redis::RedisBackend) {
    let server = delayq_test_support::RedisServer::start();
    let b = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    (server, b)
}

delayq::conformance_tests!(setup);
