//! Waiting long polls share one claim loop per queue: a job that becomes due costs a claim or
//! two however many polls wait; every job goes to exactly one poll; a poll that leaves gives
//! its jobs back.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use delayq::{Inspect, NewJob, Producer, QueueName};
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use tower::ServiceExt;

fn claim_request(wait_ms: u64) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri("/v1/queues/lp/claim")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Body::from(format!(
            r#"{{"max":1,"wait_ms":{wait_ms},"lease_ms":60000}}"#
        )))
        .unwrap()
}

async fn ids_of(resp: axum::response::Response) -> Vec<String> {
    assert_eq!(resp.status(), 200);
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    crate::common::ids(&serde_json::from_slice(&body).unwrap())
}

async fn until(mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_polls_share_one_claim_loop() {
    const POLLS: usize = 50;
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let state = AppState::new(backend.clone(), HttpConfig::default(), None);
    let router = delayq_http::router(state.clone());
    let q = QueueName::new("lp").unwrap();

    let mut polls = Vec::new();
    for _ in 0..POLLS {
        let r = router.clone();
        polls.push(tokio::spawn(async move {
            ids_of(r.oneshot(claim_request(20_000)).await.unwrap()).await
        }));
    }
    until(|| state.waiting_polls() == POLLS).await;

    // One job for 50 waiting polls: a claim or two, not one per poll.
    let before = server.scripts_run();
    let p = Producer::new(backend.clone(), q.clone());
    p.enqueue(NewJob::new("one").id(delayq::JobId::new("one").unwrap()))
        .await
        .unwrap();
    until(|| state.waiting_polls() == POLLS - 1).await;
    let spent = server.scripts_run() - before;
    assert!(
        spent <= 4,
        "{spent} scripts for one job and {POLLS} waiting polls (enqueue + claims)"
    );

    // The rest in one batch: each remaining poll gets exactly one job.
    let batch = (1..POLLS)
        .map(|i| NewJob::new("x").id(delayq::JobId::new(format!("j{i}")).unwrap()))
        .collect();
    p.enqueue_batch(batch).await.unwrap();
    let mut got = Vec::new();
    for t in polls {
        let ids = tokio::time::timeout(Duration::from_secs(10), t)
            .await
            .expect("every poll answers")
            .unwrap();
        assert_eq!(ids.len(), 1, "{ids:?}");
        got.extend(ids);
    }
    got.sort();
    got.dedup();
    assert_eq!(got.len(), POLLS, "each job to exactly one poll");
    assert_eq!(state.waiting_polls(), 0);
    let stats = backend.stats(&q).await.unwrap();
    assert_eq!(stats.leased, POLLS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_that_leaves_holds_no_jobs() {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let state = AppState::new(backend.clone(), HttpConfig::default(), None);
    let router = delayq_http::router(state.clone());
    let q = QueueName::new("lp").unwrap();

    // A poll whose client goes away (the request future dropped) while it waits.
    let r = router.clone();
    let gone = tokio::spawn(async move { r.oneshot(claim_request(20_000)).await });
    until(|| state.waiting_polls() == 1).await;
    gone.abort();
    let _ = gone.await;
    // A job due now is not lost to the departed poll's lease: it stays claimable.
    let p = Producer::new(backend.clone(), q.clone());
    p.enqueue(NewJob::new("x").id(delayq::JobId::new("x").unwrap()))
        .await
        .unwrap();
    let ids = ids_of(router.clone().oneshot(claim_request(3_000)).await.unwrap()).await;
    assert_eq!(ids, ["x"]);
    until(|| state.waiting_polls() == 0).await;
}
