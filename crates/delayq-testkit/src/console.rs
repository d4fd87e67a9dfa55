//! Conformance tests of what the operator console needs from a store: stable listings by
//! state, search, the one-job and bulk actions, pause and resume, and the series.

use std::time::Duration;

use super::{Time, id, job, q, req};
use delayq::{Backend, Due, Error, Inspect, InvalidInput, JobState, ListState, Nack, Producer};

fn ids(jobs: &[delayq::JobInfo]) -> Vec<String> {
    jobs.iter().map(|j| j.id.to_string()).collect()
}

/// Listings are ordered by (score, id) and a cursor continues strictly after the last job
/// handed out, even when that job has left the state (ties on one due time included).
pub async fn listings_page_stably<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    // One batch: the due jobs share (or nearly share) one due time, so ties are exercised.
    let due: Vec<_> = (0..7).map(|i| job(&format!("a{i}"), 0)).collect();
    p.enqueue_batch(due).await.unwrap();
    for i in 0..3 {
        p.enqueue(job(&format!("s{i}"), 60_000 + i * 1000))
            .await
            .unwrap();
    }
    t.pass(Duration::from_millis(5)).await;
    let first = b
        .list(&q(), delayq::ListRequest::new(ListState::Due, 2, None))
        .await
        .unwrap();
    assert_eq!(first.jobs.len(), 2);
    let cursor = first.next.clone().expect("more due jobs");
    // The cursor's own job leaves, and a job ahead of the cursor leaves: nothing shifts.
    b.cancel(&q(), &first.jobs[1].id).await.unwrap();
    b.cancel(&q(), &first.jobs[0].id).await.unwrap();
    let mut seen = ids(&first.jobs);
    let mut next = Some(cursor);
    while let Some(c) = next {
        let page = b
            .list(&q(), delayq::ListRequest::new(ListState::Due, 2, Some(c)))
            .await
            .unwrap();
        assert!(page.jobs.len() <= 2);
        seen.extend(ids(&page.jobs));
        next = page.next;
    }
    let mut want: Vec<String> = (0..7).map(|i| format!("a{i}")).collect();
    // Due order is (due time, id): sort what we saw by the same key to compare as sets
    // without assuming the batch got one due time; then check the order separately.
    let mut sorted = seen.clone();
    sorted.sort();
    want.sort();
    assert_eq!(sorted, want, "every due job exactly once: {seen:?}");
    let scheduled = b
        .list(
            &q(),
            delayq::ListRequest::new(ListState::Scheduled, 10, None),
        )
        .await
        .unwrap();
    assert_eq!(ids(&scheduled.jobs), ["s0", "s1", "s2"]);
    assert!(scheduled.next.is_none());
    assert!(
        scheduled
            .jobs
            .iter()
            .all(|j| j.state == JobState::Scheduled && j.due_at_ms > t.now_ms())
    );
    // Leased: ordered by lease deadline.
    let claimed = b.claim(&q(), req(2, 30_000)).await.unwrap().jobs;
    assert_eq!(claimed.len(), 2);
    let leased = b
        .list(&q(), delayq::ListRequest::new(ListState::Leased, 10, None))
        .await
        .unwrap();
    assert_eq!(leased.jobs.len(), 2);
    assert!(
        leased
            .jobs
            .iter()
            .all(|j| j.state == JobState::Leased && j.lease_deadline_ms.is_some())
    );
    let due_now = b
        .list(&q(), delayq::ListRequest::new(ListState::Due, 1000, None))
        .await
        .unwrap();
    assert_eq!(due_now.jobs.len(), 3, "7 due, 2 cancelled, 2 leased");
    // Limits out of range are refused.
    for bad in [0, delayq::listing::MAX_PAGE + 1] {
        assert!(matches!(
            b.list(&q(), delayq::ListRequest::new(ListState::Due, bad, None))
                .await,
            Err(Error::Invalid(InvalidInput::Query(_)))
        ));
    }
    // Search: by prefix where the store can, else the exact id.
    let found = b.search(&q(), "s1", 10).await.unwrap();
    assert_eq!(ids(&found.jobs), ["s1"]);
    let found = b.search(&q(), "s", 10).await.unwrap();
    if found.by_prefix {
        assert_eq!(ids(&found.jobs), ["s0", "s1", "s2"]);
    } else {
        assert!(found.jobs.is_empty(), "no job is called exactly \"s\"");
    }
}

/// Deleting one dead job, and cancelling every scheduled or every due job, say what they did.
pub async fn dead_delete_and_cancel_all<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("d", 0)).await.unwrap();
    let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
    let nack = Nack {
        dead: true,
        ..Nack::error("boom")
    };
    b.nack(&q(), j.lease_ref(), nack).await.unwrap();
    p.enqueue(job("later", 60_000)).await.unwrap();
    assert!(matches!(
        b.dead_delete(&q(), &id("later")).await,
        Err(Error::WrongState {
            state: JobState::Scheduled,
            expected: JobState::Dead,
            ..
        })
    ));
    b.dead_delete(&q(), &id("d")).await.unwrap();
    assert!(b.get(&q(), &id("d")).await.unwrap().is_none());
    assert!(matches!(
        b.dead_delete(&q(), &id("d")).await,
        Err(Error::NotFound { .. })
    ));
    for i in 0..3 {
        p.enqueue(job(&format!("n{i}"), 0)).await.unwrap();
    }
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(b.cancel_all(&q(), ListState::Scheduled).await.unwrap(), 1);
    assert!(b.get(&q(), &id("later")).await.unwrap().is_none());
    assert_eq!(b.stats(&q()).await.unwrap().due, 3, "due jobs stay");
    assert_eq!(b.cancel_all(&q(), ListState::Due).await.unwrap(), 3);
    assert_eq!(b.stats(&q()).await.unwrap().waiting(), 0);
    assert!(matches!(
        b.cancel_all(&q(), ListState::Dead).await,
        Err(Error::Invalid(InvalidInput::Query(_)))
    ));
    // "Run now" is a reschedule to now: a job far ahead becomes due.
    p.enqueue(job("far", 3_600_000)).await.unwrap();
    b.reschedule(&q(), &id("far"), Due::Now).await.unwrap();
    assert_eq!(b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.len(), 1);
}

/// A paused queue accepts jobs and leases none, but still recovers expired leases; resuming
/// wakes consumers.
pub async fn pause_stops_leasing<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("x", 0)).await.unwrap();
    let x = b.claim(&q(), req(1, 100)).await.unwrap().jobs.remove(0);
    b.set_paused(&q(), true).await.unwrap();
    assert!(b.stats(&q()).await.unwrap().paused);
    p.enqueue(job("y", 0)).await.unwrap();
    t.pass(Duration::from_millis(150)).await;
    let batch = b.claim(&q(), req(10, 30_000)).await.unwrap();
    assert!(batch.jobs.is_empty(), "a paused queue leases nothing");
    let info = b.get(&q(), &x.id).await.unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempt),
        (JobState::Scheduled, 1),
        "the expired lease was recovered while paused"
    );
    let mut wake = b.wakeups(&q()).await.unwrap();
    wake.borrow_and_update();
    b.set_paused(&q(), false).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.changed())
        .await
        .expect("resume wakes consumers")
        .unwrap();
    assert!(!b.stats(&q()).await.unwrap().paused);
    assert_eq!(b.claim(&q(), req(10, 30_000)).await.unwrap().jobs.len(), 2);
}

/// The series count what happened: created (not duplicate) enqueues, starts with their
/// lateness, completions, retries and dead letters.
pub async fn series_count_transitions<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q());
    for i in 0..3 {
        p.enqueue(job(&format!("c{i}"), 0)).await.unwrap();
    }
    p.enqueue(job("c0", 0)).await.unwrap();
    let mut jobs = b.claim(&q(), req(3, 30_000)).await.unwrap().jobs;
    assert_eq!(jobs.len(), 3);
    let (j0, j1, j2) = (jobs.remove(0), jobs.remove(0), jobs.remove(0));
    b.ack(&q(), vec![j0.to_ack()]).await.unwrap();
    b.nack(&q(), j1.lease_ref(), Nack::error("again"))
        .await
        .unwrap();
    let dead = Nack {
        dead: true,
        ..Nack::error("no")
    };
    b.nack(&q(), j2.lease_ref(), dead).await.unwrap();
    let s = b.series(&q()).await.unwrap();
    let t = &s.totals;
    assert_eq!(
        (t.enqueued, t.started, t.completed, t.retried, t.dead),
        (3, 3, 1, 1, 1),
        "{s:?}"
    );
    assert_eq!(t.lateness.iter().sum::<u64>(), 3);
    let mut sum = delayq::Counts::default();
    for i in &s.intervals {
        assert_eq!(i.start_ms % s.interval_ms, 0);
        sum.add(&i.counts);
    }
    assert_eq!(&sum, t, "the last hour holds everything counted");
    assert!(t.lateness_quantile(0.99).is_some());
}

/// One meaning per count: for each state, `stats` counts exactly the jobs a listing of that
/// state returns — `scheduled` the jobs due later, `due` the ones due now, `leased`, `dead`.
pub async fn counts_match_listings<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    for i in 0..3 {
        p.enqueue(job(&format!("later{i}"), 60_000 + i * 1000))
            .await
            .unwrap();
    }
    for i in 0..4 {
        p.enqueue(job(&format!("now{i}"), 0)).await.unwrap();
    }
    t.pass(Duration::from_millis(5)).await;
    let got = b.claim(&q(), req(2, 30_000)).await.unwrap();
    assert_eq!(got.jobs.len(), 2);
    let dead = Nack {
        error: "poison".into(),
        retry_in: None,
        dead: true,
    };
    b.nack(&q(), got.jobs[0].lease_ref(), dead).await.unwrap();
    let listed = |state| {
        let b = b.clone();
        async move {
            let mut n = 0u64;
            let mut next = None;
            loop {
                let page = b
                    .list(&q(), delayq::ListRequest::new(state, 2, next))
                    .await
                    .unwrap();
                n += page.jobs.len() as u64;
                match page.next {
                    Some(c) => next = Some(c),
                    None => break n,
                }
            }
        }
    };
    let st = b.stats(&q()).await.unwrap();
    let counts = (st.scheduled, st.due, st.leased, st.dead);
    let lists = (
        listed(ListState::Scheduled).await,
        listed(ListState::Due).await,
        listed(ListState::Leased).await,
        listed(ListState::Dead).await,
    );
    assert_eq!(counts, (3, 2, 1, 1), "{st:?}");
    assert_eq!(counts, lists, "stats against the listings");
    assert_eq!(st.waiting(), 5);
}
