//! Issue 13's features that need real time and several consumers, on Redis: rate and
//! concurrency limits shared by 10 consumers, handlers cancelled at their timeout.

async fn backend() -> (delayq_test_support::RedisServer, delayq_redis::RedisBackend) {
    let server = delayq_test_support::RedisServer::start();
    let b = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    (server, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_ten_consumers() {
    let (_server, b) = backend().await;
    delayq::testkit::limits::limits_hold_across_consumers(b, 1).await;
}

/// A queue of 4 shards: each keeps its share of the limits (rate 25/s, burst 2, 1 in flight),
/// so the queue's figures hold together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_limits_hold_across_ten_consumers() {
    let (_server, b) = backend().await;
    delayq::testkit::limits::limits_hold_across_consumers(b, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_past_their_timeout_are_cancelled() {
    let (_server, b) = backend().await;
    delayq::testkit::deadlines::handlers_past_their_timeout_are_cancelled(b).await;
}
