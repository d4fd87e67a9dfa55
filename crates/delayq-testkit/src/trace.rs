//! Conformance test of trace contexts (issue 34): a job's W3C trace context travels with it
//! through claims, retries, dead-lettering, requeue, reschedule and replace; a job without
//! one has none.

use std::time::Duration;

use super::{Time, id, job, req};
use delayq::{Backend, Due, Inspect, Nack, Producer, QueueName, TraceContext};

/// The context is stored, returned by every read and claim, and kept by every transition.
pub async fn traces_travel_with_the_job<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("traced").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let ctx = TraceContext::new(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
    )
    .unwrap();
    p.enqueue(job("a", 0).trace(ctx.clone()).max_attempts(2))
        .await
        .unwrap();
    p.enqueue(job("plain", 0)).await.unwrap();
    let trace_of = |name: &'static str| {
        let b = b.clone();
        let q = q.clone();
        async move { b.get(&q, &id(name)).await.unwrap().unwrap().trace }
    };
    assert_eq!(trace_of("a").await.as_ref(), Some(&ctx));
    assert_eq!(trace_of("plain").await, None);
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 30_000)).await.unwrap().jobs;
    let a = got.iter().find(|j| j.id.as_str() == "a").unwrap();
    let plain = got.iter().find(|j| j.id.as_str() == "plain").unwrap();
    assert_eq!(a.trace.as_ref(), Some(&ctx));
    assert_eq!(plain.trace, None);
    // A retry keeps it (the scripts re-encode the record), and so does the next attempt.
    b.nack(&q, a.lease_ref(), Nack::error("first try failed"))
        .await
        .unwrap();
    assert_eq!(trace_of("a").await.as_ref(), Some(&ctx));
    p.reschedule(&id("a"), Due::Now).await.unwrap();
    assert_eq!(trace_of("a").await.as_ref(), Some(&ctx));
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(1, 30_000)).await.unwrap().jobs;
    assert_eq!(got[0].trace.as_ref(), Some(&ctx));
    assert_eq!(got[0].attempt, 2);
    // Dead-lettered and requeued: still there.
    b.nack(&q, got[0].lease_ref(), Nack::error("second try failed"))
        .await
        .unwrap();
    let dead = b.get(&q, &id("a")).await.unwrap().unwrap();
    assert_eq!(dead.state, delayq::JobState::Dead);
    assert_eq!(dead.trace.as_ref(), Some(&ctx));
    b.dead_requeue(&q, &id("a")).await.unwrap();
    assert_eq!(trace_of("a").await.as_ref(), Some(&ctx));
    // Replace writes the new job's context (or none).
    let other = TraceContext::new(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
        None,
    )
    .unwrap();
    p.enqueue(job("a", 60_000).trace(other.clone()).replace())
        .await
        .unwrap();
    assert_eq!(trace_of("a").await.as_ref(), Some(&other));
    p.enqueue(job("a", 60_000).replace()).await.unwrap();
    assert_eq!(trace_of("a").await, None);
}
