//! Shared set-up of the Redis backend tests: a throwaway server and a unique queue per test.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use delayq::{ClaimRequest, Job, JobId, NewJob, QueueName};
use delayq_redis::RedisBackend;
pub(crate) use delayq_test_support::RedisServer;

static N: AtomicUsize = AtomicUsize::new(0);

/// A unique queue name.
pub(crate) fn queue() -> QueueName {
    QueueName::new(format!(
        "q{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
    .unwrap()
}

/// A fresh server, a connected backend and a queue.
pub(crate) async fn setup() -> (RedisServer, RedisBackend, QueueName) {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    (server, backend, queue())
}

pub(crate) fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

pub(crate) fn job(id_: &str, delay_ms: u64) -> NewJob {
    NewJob::new(id_.as_bytes().to_vec())
        .id(id(id_))
        .delay(Duration::from_millis(delay_ms))
}

pub(crate) fn now_ms() -> u64 {
    delayq::job::system_now_ms()
}

/// A future that completes when the watch flips to true.
pub(crate) async fn shutdown_on(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Polls `f` until it is true, at most `secs` seconds.
pub(crate) async fn eventually<F: FnMut() -> bool>(secs: u64, mut f: F) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

pub(crate) fn payload_str(j: &Job) -> String {
    String::from_utf8_lossy(&j.payload).into_owned()
}

/// Polls the async check `f` until it is true, at most `secs` seconds.
pub(crate) async fn until<F, Fut>(secs: u64, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f().await
}

/// A claim of up to `max` due jobs under a `lease_ms` lease, acknowledging nothing.
pub(crate) fn claim_req(max: usize, lease_ms: u64) -> ClaimRequest {
    ClaimRequest {
        max,
        lease: Duration::from_millis(lease_ms),
        acks: vec![],
    }
}

/// Connects, retrying for up to 30 s while the server is down, refusing or failing over (as a
/// restarting process would).
pub(crate) async fn connect_retrying(url: &str) -> RedisBackend {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match RedisBackend::connect(url).await {
            Ok(b) => return b,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("connect: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}
