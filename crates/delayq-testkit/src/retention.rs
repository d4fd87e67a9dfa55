//! Conformance tests of retention (issue 13): completed jobs kept as `done` (readable,
//! listable, counted) for `keep_done_ms`, their ids refused for `dedupe_ms`, then trimmed by
//! the acks that follow; a job's own retention overrides its queue's.

use std::time::Duration;

use super::{Time, id, job, req};
use delayq::{
    Backend, Inspect, JobState, ListState, Producer, QueueName, QueueSettings, Retention,
};

fn kq() -> QueueName {
    QueueName::new("kept").unwrap()
}

async fn run_one<B: Backend>(b: &B, t: &Time) -> String {
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&kq(), req(1, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 1);
    let acks = b.ack(&kq(), vec![got[0].to_ack()]).await.unwrap();
    assert_eq!(acks, [delayq::AckOutcome::Acked]);
    got[0].id.to_string()
}

/// Done jobs are readable, then trimmed; a repeat within the dedupe window is refused, after
/// it accepted.
pub async fn retention_and_dedupe<B: Backend + Inspect>(b: B, t: Time) {
    let s = QueueSettings {
        retention: Retention {
            keep_done_ms: 1_000,
            dedupe_ms: 300,
        },
        ..QueueSettings::default()
    };
    b.configure(&kq(), s.clone()).await.unwrap();
    assert_eq!(b.settings(&kq()).await.unwrap(), s);
    let p = Producer::new(b.clone(), kq());
    p.enqueue(job("a", 0)).await.unwrap();
    let before = t.now_ms();
    assert_eq!(run_one(&b, &t).await, "a");
    let done = b.get(&kq(), &id("a")).await.unwrap().expect("kept");
    assert_eq!(done.state, JobState::Done);
    assert!(done.completed_at_ms.unwrap() >= before);
    assert_eq!(done.payload, b"a");
    let st = b.stats(&kq()).await.unwrap();
    assert_eq!((st.done, st.waiting(), st.leased), (1, 0, 0));
    let listed = b
        .list(&kq(), delayq::ListRequest::new(ListState::Done, 10, None))
        .await
        .unwrap();
    assert_eq!(listed.jobs.len(), 1);
    assert_eq!(listed.jobs[0].state, JobState::Done);
    // Within the dedupe window: refused, the original outcome answered.
    let again = p.enqueue(job("a", 0)).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.existing, Some(JobState::Done));
    assert_eq!(b.stats(&kq()).await.unwrap().waiting(), 0);
    // Replace does not touch it either.
    let replaced = p.enqueue(job("a", 0).replace()).await.unwrap();
    assert!(!replaced.replaced && !replaced.created);
    // Nor does a batch (which reads its ids at once), new ids beside it are created.
    let batch = p
        .enqueue_batch(vec![job("a", 0), job("n1", 0), job("a", 0).replace()])
        .await
        .unwrap();
    let seen: Vec<_> = batch.iter().map(|e| (e.created, e.existing)).collect();
    assert_eq!(
        seen,
        [
            (false, Some(JobState::Done)),
            (true, None),
            (false, Some(JobState::Done))
        ]
    );
    assert_eq!(run_one(&b, &t).await, "n1");
    // After the window: the id is free again, in a batch too (once: the repeat is its copy).
    t.pass(Duration::from_millis(400)).await;
    let batch = p
        .enqueue_batch(vec![job("n1", 0), job("n1", 0), job("n2", 0)])
        .await
        .unwrap();
    let seen: Vec<_> = batch.iter().map(|e| (e.created, e.existing)).collect();
    assert_eq!(seen, [(true, None), (false, None), (true, None)]);
    let st = b.stats(&kq()).await.unwrap();
    assert_eq!(
        (st.waiting(), st.done),
        (2, 1),
        "n1 and n2 scheduled, a kept"
    );
    assert_eq!(run_one(&b, &t).await, "n1");
    assert_eq!(run_one(&b, &t).await, "n2");
    let fresh = p.enqueue(job("a", 0)).await.unwrap();
    assert!(fresh.created, "accepted after the dedupe window");
    assert_eq!(
        b.get(&kq(), &id("a")).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
    assert_eq!(run_one(&b, &t).await, "a");
    // A job's own retention overrides the queue's: this one is deleted at once.
    p.enqueue(job("gone", 0).retention(Retention::default()))
        .await
        .unwrap();
    assert_eq!(run_one(&b, &t).await, "gone");
    assert!(b.get(&kq(), &id("gone")).await.unwrap().is_none());
    assert!(p.enqueue(job("gone", 0)).await.unwrap().created);
    assert_eq!(run_one(&b, &t).await, "gone");
    // Past keep_done_ms, the next ack trims them.
    t.pass(Duration::from_millis(1_100)).await;
    p.enqueue(job("b", 0)).await.unwrap();
    assert_eq!(run_one(&b, &t).await, "b");
    assert!(b.get(&kq(), &id("a")).await.unwrap().is_none(), "trimmed");
    assert!(
        b.get(&kq(), &id("gone")).await.unwrap().is_none(),
        "trimmed"
    );
    assert_eq!(b.stats(&kq()).await.unwrap().done, 1, "only b is kept");
    // Off again: completed jobs are deleted.
    b.configure(&kq(), QueueSettings::default()).await.unwrap();
    p.enqueue(job("c", 0)).await.unwrap();
    assert_eq!(run_one(&b, &t).await, "c");
    assert!(b.get(&kq(), &id("c")).await.unwrap().is_none());
}

/// A job's own retention on a queue without one; out-of-range values are refused.
pub async fn per_job_retention<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), kq());
    let keep = Retention {
        keep_done_ms: 60_000,
        dedupe_ms: 60_000,
    };
    p.enqueue(job("own", 0).retention(keep)).await.unwrap();
    p.enqueue(job("plain", 0)).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&kq(), req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 2);
    b.ack(&kq(), got.iter().map(|j| j.to_ack()).collect())
        .await
        .unwrap();
    assert_eq!(
        b.get(&kq(), &id("own")).await.unwrap().unwrap().state,
        JobState::Done
    );
    // Fenced as ever: the lease that completed it is stale now, whatever the record keeps.
    let own = got
        .iter()
        .find(|j| j.id.as_str() == "own")
        .unwrap()
        .lease_ref();
    let again = b
        .ack(&kq(), vec![delayq::Ack::from(own.clone())])
        .await
        .unwrap();
    assert_ne!(
        again,
        [delayq::AckOutcome::Acked],
        "a second ack completes nothing"
    );
    let nack = b
        .nack(&kq(), own.clone(), delayq::Nack::error("late"))
        .await;
    assert!(
        matches!(nack, Err(delayq::Error::LeaseLost { .. })),
        "{nack:?}"
    );
    let extend = b.extend(&kq(), own, Duration::from_secs(30)).await;
    assert!(
        matches!(extend, Err(delayq::Error::LeaseLost { .. })),
        "{extend:?}"
    );
    assert_eq!(
        b.get(&kq(), &id("own")).await.unwrap().unwrap().state,
        JobState::Done,
        "nothing changed"
    );
    assert!(b.get(&kq(), &id("plain")).await.unwrap().is_none());
    assert_eq!(
        p.enqueue(job("own", 0)).await.unwrap().existing,
        Some(JobState::Done)
    );
    let e = p
        .enqueue(job("x", 0).retention(Retention {
            keep_done_ms: 31 * 24 * 3_600_000,
            dedupe_ms: 0,
        }))
        .await
        .unwrap_err();
    assert!(matches!(e, delayq::Error::Invalid(_)), "{e}");
    // Its own retention is honoured on a queue without one: once its time is up, a later
    // ack — of a job without retention — trims it.
    let short = Retention {
        keep_done_ms: 2_000,
        dedupe_ms: 0,
    };
    p.enqueue(job("brief", 0).retention(short)).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&kq(), req(10, 30_000)).await.unwrap().jobs;
    b.ack(&kq(), got.iter().map(|j| j.to_ack()).collect())
        .await
        .unwrap();
    assert_eq!(
        b.get(&kq(), &id("brief")).await.unwrap().map(|i| i.state),
        Some(JobState::Done)
    );
    t.pass(Duration::from_millis(3_000)).await;
    p.enqueue(job("later", 0)).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&kq(), req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 1);
    b.ack(&kq(), got.iter().map(|j| j.to_ack()).collect())
        .await
        .unwrap();
    assert!(
        b.get(&kq(), &id("brief")).await.unwrap().is_none(),
        "trimmed once its own 2 s were up"
    );
}
