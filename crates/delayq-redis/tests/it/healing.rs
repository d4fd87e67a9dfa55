//! Connections that heal: a connection that stops answering without closing (a half-open
//! socket after a NAT or load balancer dropped its state) is replaced — the command
//! connection after one response timeout, the wake-up subscription after its idle health
//! check — while a fresh connection would work at once.

use std::time::{Duration, Instant};

use delayq::{Backend, NewJob, QueueName};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use delayq_test_support::proxy::Proxy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_dead_connection_is_replaced() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    let b = RedisBackend::connect(&format!("redis://127.0.0.1:{}", proxy.port()))
        .await
        .unwrap();
    let q = QueueName::new("heal").unwrap();
    let mut wake = b.wakeups(&q).await.unwrap();
    b.enqueue(&q, vec![NewJob::new("a")]).await.unwrap();
    let before = proxy.accepted();

    proxy.stall_existing();
    let stalled_at = Instant::now();
    let first = b.enqueue(&q, vec![NewJob::new("b")]).await;
    assert!(
        matches!(&first, Err(e) if e.is_retryable()),
        "a stalled connection times out with a retryable error: {first:?}"
    );
    // Without healing every later call would time out the same way.
    let mut ok = false;
    while stalled_at.elapsed() < Duration::from_secs(20) {
        if b.enqueue(&q, vec![NewJob::new("c")]).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "the command connection was replaced");
    assert!(proxy.accepted() > before, "through a new connection");

    // The wake-up connection notices at its next health check (every 10 s, 5 s to answer)
    // and reconnects; reconnecting wakes every waiting consumer.
    wake.borrow_and_update();
    tokio::time::timeout(Duration::from_secs(25), wake.changed())
        .await
        .expect("the wake-up connection was replaced")
        .unwrap();
    // And wake-ups flow again: an enqueue into the empty queue publishes one.
    let mut conn = b.connection();
    let _: () = redis::cmd("DEL")
        .arg("dq:{heal}:sched")
        .query_async(&mut conn)
        .await
        .unwrap();
    wake.borrow_and_update();
    b.enqueue(&q, vec![NewJob::new("d")]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.changed())
        .await
        .expect("a wake-up after healing")
        .unwrap();
}

/// The health check keeps a live subscription: a subscribed connection answers `PING` with
/// an array (`pong`, ""), which must count as an answer — not as a dead connection replaced
/// every check (a reconnection every 10 s, and wake-ups published meanwhile lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_live_subscription_is_kept() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port());
    // A check every 200 ms instead of 10 s (the interval is a setting): the same checks, sooner.
    let mut o = delayq_redis::ConnectOptions::new(format!("redis://127.0.0.1:{}", proxy.port()));
    o.health_check = Duration::from_millis(200);
    let b = RedisBackend::connect_with(o).await.unwrap();
    let q = QueueName::new("idle").unwrap();
    let mut wake = b.wakeups(&q).await.unwrap();
    b.enqueue(&q, vec![NewJob::new("a").delay(Duration::from_secs(60))])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.changed())
        .await
        .unwrap()
        .unwrap();
    let connections = proxy.accepted();
    // Past three health checks (every 200 ms here): real time, the checks are the server's.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        proxy.accepted(),
        connections,
        "no connection was replaced while everything answered"
    );
    wake.borrow_and_update();
    // Due before the head: the enqueue publishes a wake-up.
    b.enqueue(&q, vec![NewJob::new("b")]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.changed())
        .await
        .expect("the kept subscription still carries wake-ups")
        .unwrap();
}
