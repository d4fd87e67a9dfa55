//! Issue 13's features that need real time and several consumers, on the embedded store (on
//! this host's clock): rate and concurrency limits shared by 10 consumers, handlers cancelled
//! at their timeout.

fn backend() -> (tempfile::TempDir, delayq_embedded::EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
    (dir, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_ten_consumers() {
    let (_dir, b) = backend();
    delayq_testkit::throttle::throttles_hold_across_consumers(b, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_past_their_timeout_are_cancelled() {
    let (_dir, b) = backend();
    delayq_testkit::deadlines::handlers_past_their_timeout_are_cancelled(b).await;
}
