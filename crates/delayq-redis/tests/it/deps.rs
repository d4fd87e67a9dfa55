//! Jobs that wait for other jobs, after a crash: what the store's sweep finishes. A crash
//! between a dependent's write and its registration, or between a dependency's end and its
//! delivery, is simulated by undoing the step the crash would have cut (raw commands), then
//! the sweep (`Batches::finish_batches`, run by every serve and worker) is shown to finish it
//! — so a dependent is never left waiting for a dependency that ended.

use delayq::{Backend, Batches, Inspect, JobState, Producer};
use delayq_redis::RedisBackend;
use delayq_test_support::shared;
use redis::AsyncCommands;

use crate::common::{claim_req, id, job, queue};

/// A backend in a namespace of its own, and a raw connection, with the namespace's prefix.
async fn setup() -> (RedisBackend, redis::aio::MultiplexedConnection, String) {
    let ns = shared::namespace();
    let mut o = delayq_redis::ConnectOptions::new(shared::redis().url());
    o.namespace = Some(ns.clone());
    let b = RedisBackend::connect_with(o).await.unwrap();
    let c = redis::Client::open(shared::redis().url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (b, c, format!("dq:{ns}:"))
}

#[tokio::test]
async fn a_registration_cut_short_is_finished_by_the_sweep() {
    let (b, mut c, p) = setup().await;
    let q = queue();
    let dep = delayq::DepRef {
        queue: q.clone(),
        id: id("first"),
    };
    let prod = Producer::new(b.clone(), q.clone());
    prod.enqueue(job("first", 0)).await.unwrap();
    prod.enqueue(job("then", 0).depends_on([dep]))
        .await
        .unwrap();
    // The crash: the dependent is written and noted as registering, its waiter never was.
    let _: () = c.del(format!("{p}{{{q}}}:dw:first")).await.unwrap();
    let _: () = c.zadd(format!("{p}{{{q}}}:dreg"), "then", 1).await.unwrap();
    let got = b.claim(&q, claim_req(10, 60_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 1);
    b.ack(&q, vec![got[0].to_ack()]).await.unwrap();
    let waiting = b.get(&q, &id("then")).await.unwrap().unwrap();
    assert_eq!(waiting.state, JobState::Waiting, "nobody told it yet");
    b.finish_batches(true).await.unwrap();
    let then = b.get(&q, &id("then")).await.unwrap().unwrap();
    assert_eq!(
        then.state,
        JobState::Scheduled,
        "the sweep registered it: {then:?}"
    );
    let in_reg: Option<f64> = c.zscore(format!("{p}{{{q}}}:dreg"), "then").await.unwrap();
    assert_eq!(in_reg, None);
}

#[tokio::test]
async fn an_end_left_in_the_outbox_is_delivered_by_the_sweep() {
    let (b, mut c, p) = setup().await;
    let q = queue();
    let dep = delayq::DepRef {
        queue: q.clone(),
        id: id("first"),
    };
    let prod = Producer::new(b.clone(), q.clone());
    prod.enqueue(job("first", 60_000)).await.unwrap();
    prod.enqueue(job("then", 0).depends_on([dep]))
        .await
        .unwrap();
    // The crash: "first" was cancelled and its end posted, never delivered.
    let member = format!("{p}{{{q}}}:\0then\0{q}\0first\0o");
    let _: () = c
        .zadd(format!("{p}{{{q}}}:dout"), member.as_bytes(), 1)
        .await
        .unwrap();
    assert_eq!(
        b.get(&q, &id("then")).await.unwrap().unwrap().state,
        JobState::Waiting
    );
    b.finish_batches(true).await.unwrap();
    assert_eq!(
        b.get(&q, &id("then")).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
    let left: usize = c.zcard(format!("{p}{{{q}}}:dout")).await.unwrap();
    assert_eq!(left, 0, "delivered once, then removed");
    // Delivered again (a crash after the delivery, before the removal): counted once.
    let _: () = c
        .zadd(format!("{p}{{{q}}}:dout"), member.as_bytes(), 1)
        .await
        .unwrap();
    b.finish_batches(true).await.unwrap();
    assert_eq!(
        b.get(&q, &id("then")).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
}
