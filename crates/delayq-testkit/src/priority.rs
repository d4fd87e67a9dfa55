//! Conformance tests of priorities (issue 13): among due jobs the higher priority is claimed
//! first, then the earlier due time; never before the due time; bad priorities refused; the due
//! listing follows the claim order.

use std::time::Duration;

use super::{Time, id, req};
use delayq::{Backend, Inspect, InvalidInput, NewJob, Producer, QueueName};

fn prq() -> QueueName {
    QueueName::new("prio").unwrap()
}

/// 1,000 due jobs of mixed priority, drained by one consumer, come out by priority, then by
/// due time; a high-priority job not yet due waits.
pub async fn priorities_order_due_jobs<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), prq());
    let jobs: Vec<NewJob> = (0..1000u32)
        .map(|i| {
            NewJob::new(i.to_string())
                .id(id(&format!("j{i:04}")))
                .delay(Duration::from_millis(u64::from(i % 50)))
                .priority((i * 7 % 10) as u8)
        })
        .collect();
    for chunk in jobs.chunks(250) {
        p.enqueue_batch(chunk.to_vec()).await.unwrap();
    }
    p.enqueue(
        NewJob::new("later")
            .id(id("later"))
            .delay(Duration::from_secs(60))
            .priority(9),
    )
    .await
    .unwrap();
    t.pass(Duration::from_millis(120)).await;
    let st = b.stats(&prq()).await.unwrap();
    assert_eq!((st.waiting(), st.due), (1001, 1000), "{st:?}");
    let mut out = Vec::new();
    loop {
        let got = b.claim(&prq(), req(10, 60_000)).await.unwrap().jobs;
        if got.is_empty() {
            break;
        }
        let acks = got.iter().map(|j| j.to_ack()).collect();
        out.extend(got.into_iter().map(|j| (j.priority, j.due_at_ms, j.id)));
        b.ack(&prq(), acks).await.unwrap();
    }
    assert_eq!(out.len(), 1000, "every due job, not the one due later");
    for w in out.windows(2) {
        let (a, b2) = (&w[0], &w[1]);
        assert!(
            a.0 > b2.0 || (a.0 == b2.0 && a.1 <= b2.1),
            "out of order: {a:?} before {b2:?}"
        );
    }
    assert_eq!(out[0].0, 9);
    assert_eq!(out[999].0, 0);
    let left = b.stats(&prq()).await.unwrap();
    assert_eq!((left.waiting(), left.due), (1, 0));
    // A due job of a queue with priorities can still be cancelled and rescheduled.
    p.enqueue(NewJob::new("c").id(id("c")).priority(1))
        .await
        .unwrap();
    p.enqueue(NewJob::new("r").id(id("r"))).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let listed = b
        .list(
            &prq(),
            delayq::ListRequest::new(delayq::ListState::Due, 10, None),
        )
        .await
        .unwrap();
    assert_eq!(listed.jobs.len(), 2, "{listed:?}");
    assert_eq!(
        b.cancel(&prq(), &id("c")).await.unwrap(),
        delayq::CancelOutcome::Cancelled
    );
    b.reschedule(
        &prq(),
        &id("r"),
        delayq::Due::Delay(Duration::from_secs(30)),
    )
    .await
    .unwrap();
    assert!(
        b.claim(&prq(), req(10, 60_000))
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
    // Out of range: refused, nothing stored.
    let e = p
        .enqueue(NewJob::new("x").id(id("x")).priority(10))
        .await
        .unwrap_err();
    assert!(
        matches!(e, delayq::Error::Invalid(InvalidInput::Priority(10))),
        "{e}"
    );
    assert!(b.get(&prq(), &id("x")).await.unwrap().is_none());
}

/// The due listing of a queue with priorities pages through the due jobs in claim order
/// (priority, then due time), so what an operator sees first is what runs first.
pub async fn due_listing_follows_claim_order<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), prq());
    let jobs: Vec<NewJob> = (0..30u32)
        .map(|i| {
            NewJob::new("x")
                .id(id(&format!("j{i:02}")))
                .delay(Duration::from_millis(u64::from(i % 3)))
                .priority((i * 7 % 10) as u8)
        })
        .collect();
    p.enqueue_batch(jobs).await.unwrap();
    t.pass(Duration::from_millis(20)).await;
    let (mut listed, mut cursor) = (Vec::new(), None);
    loop {
        let page = b
            .list(
                &prq(),
                delayq::ListRequest::new(delayq::ListState::Due, 4, cursor),
            )
            .await
            .unwrap();
        listed.extend(page.jobs.into_iter().map(|j| j.id));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    let claimed: Vec<_> = b
        .claim(&prq(), req(100, 60_000))
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(claimed.len(), 30);
    assert_eq!(listed, claimed, "the due listing is the claim order");
}

/// A low-priority job cannot starve: it gains a level per `limits::PRIORITY_AGING` it waits.
/// Needs a store clock the test moves (ten minutes pass).
pub async fn low_priorities_age<B: Backend + Inspect>(b: B, t: Time) {
    if matches!(t, Time::Real) {
        return; // ten minutes of real time: the Redis suite checks aging white-box
    }
    let p = Producer::new(b.clone(), prq());
    p.enqueue(NewJob::new("old").id(id("old")).priority(0))
        .await
        .unwrap();
    t.pass(Duration::from_secs(10 * 60)).await;
    let fresh = (0..20).map(|i| NewJob::new("new").id(id(&format!("n{i}"))).priority(9));
    p.enqueue_batch(fresh.collect()).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&prq(), req(1, 60_000)).await.unwrap().jobs;
    assert_eq!(
        got[0].id.as_str(),
        "old",
        "waited 10 min: ahead of fresh priority-9 jobs"
    );
    let next = b.claim(&prq(), req(1, 60_000)).await.unwrap().jobs;
    assert_eq!(next[0].priority, 9);
}
