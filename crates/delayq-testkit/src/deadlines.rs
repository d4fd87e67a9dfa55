//! Conformance tests of job deadlines (issue 13): `expires_at` / `expire_after_ms` (a job not
//! started by then is dead-lettered as `expired`, never started) and `timeout_ms` (carried to
//! the consumer, which cancels a handler past it); and replace-on-conflict (debounce).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{Time, id, job, q, req};
use delayq::{
    Backend, Backoff, Consumer, ConsumerOptions, Due, Expiry, Failure, Inspect, Job, JobState,
    NewJob, Producer, QueueName,
};

/// A due job past its expiry is dead-lettered as `expired` by the claim and never handed out;
/// one within it is leased as usual. Both expiry forms are stored and read back.
pub async fn expired_jobs_are_never_started<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    let now = t.now_ms();
    let after = job("after", 0).expires(Expiry::AfterDue(Duration::from_millis(50)));
    let delayed = job("delayed", 100).expires(Expiry::AfterDue(Duration::from_millis(50)));
    let fresh = job("fresh", 0).expires(Expiry::At(now + 60_000));
    let past = job("past", 0).expires(Expiry::At(now.saturating_sub(1)));
    p.enqueue_batch(vec![after, delayed, fresh, past])
        .await
        .unwrap();
    let info = b.get(&q(), &id("delayed")).await.unwrap().unwrap();
    assert_eq!(
        info.expires_at_ms,
        Some(info.due_at_ms + 50),
        "expire_after counts from the due time"
    );
    assert_eq!(
        b.get(&q(), &id("fresh"))
            .await
            .unwrap()
            .unwrap()
            .expires_at_ms,
        Some(now + 60_000)
    );
    t.pass(Duration::from_millis(220)).await;
    let got = b.claim(&q(), req(10, 30_000)).await.unwrap();
    let ids: Vec<&str> = got.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["fresh"], "only the unexpired job starts");
    assert_eq!(got.jobs[0].expires_at_ms, Some(now + 60_000));
    for name in ["after", "delayed", "past"] {
        let j = b.get(&q(), &id(name)).await.unwrap().unwrap();
        assert_eq!(j.state, JobState::Dead, "{name}");
        assert_eq!(j.last_error.as_deref(), Some("expired"), "{name}");
        assert_eq!(j.attempt, 0, "{name} never started");
    }
    let s = b.stats(&q()).await.unwrap();
    assert_eq!((s.waiting(), s.leased, s.dead), (0, 1, 3));
    // A job without an expiry is untouched however late it is.
    p.enqueue(job("late", 0)).await.unwrap();
    t.pass(Duration::from_millis(50)).await;
    assert_eq!(b.claim(&q(), req(10, 30_000)).await.unwrap().jobs.len(), 1);
}

/// `timeout_ms` is stored with the job and handed to the consumer with every claim.
pub async fn timeouts_travel_with_the_job<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("t", 0).timeout(Duration::from_millis(250)))
        .await
        .unwrap();
    p.enqueue(job("plain", 0)).await.unwrap();
    assert_eq!(
        b.get(&q(), &id("t")).await.unwrap().unwrap().timeout_ms,
        Some(250)
    );
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q(), req(10, 30_000)).await.unwrap().jobs;
    let by_id = |name: &str| got.iter().find(|j| j.id.as_str() == name).unwrap();
    assert_eq!(by_id("t").timeout, Some(Duration::from_millis(250)));
    assert_eq!(by_id("plain").timeout, None);
    // Out of range: refused, nothing stored.
    for bad in [Duration::from_millis(1), Duration::from_secs(25 * 3600)] {
        let e = p.enqueue(job("bad", 0).timeout(bad)).await.unwrap_err();
        assert!(
            matches!(e, delayq::Error::Invalid(delayq::InvalidInput::Deadline(_))),
            "{e}"
        );
    }
    assert!(b.get(&q(), &id("bad")).await.unwrap().is_none());
}

/// A handler that never returns is cancelled at the job's timeout, retried, then
/// dead-lettered with `timeout`. Real time: call it with a store on this host's clock.
pub async fn handlers_past_their_timeout_are_cancelled<B: Backend + Inspect>(b: B) {
    let queue = QueueName::new("timeouts").unwrap();
    let p = Producer::new(b.clone(), queue.clone());
    p.enqueue(
        NewJob::new("stuck")
            .id(id("stuck"))
            .due(Due::Now)
            .max_attempts(2)
            .backoff(Backoff::Fixed { delay_ms: 10 })
            .timeout(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let started = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicU32::new(0));
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    let c = Consumer::new(
        b.clone(),
        queue.clone(),
        ConsumerOptions {
            concurrency: 2,
            lease: Duration::from_secs(30),
            ..Default::default()
        },
    )
    .unwrap();
    let (s, d) = (started.clone(), dropped.clone());
    let run = tokio::spawn(c.run(
        move |_j: Job| {
            s.fetch_add(1, Ordering::SeqCst);
            let guard = DropCount(d.clone());
            async move {
                let _g = guard;
                std::future::pending::<()>().await;
                Ok::<(), Failure>(())
            }
        },
        async move {
            let _ = rx.wait_for(|v| *v).await;
        },
    ));
    let t0 = Instant::now();
    let dead = loop {
        let j = b.get(&queue, &id("stuck")).await.unwrap().unwrap();
        if j.state == JobState::Dead {
            break j;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still {:?}",
            j.state
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stop.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(started.load(Ordering::SeqCst), 2, "two attempts");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2,
        "each handler future dropped"
    );
    assert_eq!(report.dead, 1);
    assert!(
        dead.last_error
            .as_deref()
            .unwrap_or("")
            .starts_with("timeout"),
        "{:?}",
        dead.last_error
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(400),
        "two attempts of 200 ms"
    );
}

struct DropCount(Arc<AtomicU32>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// `on_conflict: replace` (debounce): a scheduled job gets the new payload and due time; a
/// leased or dead one is untouched and the answer says which; `keep` stays the default.
pub async fn replace_on_conflict<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    let payload = |name: &'static str| payload_of(&b, name);
    let first = p
        .enqueue(NewJob::new("v1").id(id("d")).delay(Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(first.created);
    let again = p
        .enqueue(
            NewJob::new("v2")
                .id(id("d"))
                .delay(Duration::from_secs(120))
                .replace(),
        )
        .await
        .unwrap();
    assert!(again.replaced && !again.created && again.existing.is_none());
    assert!(
        again.due_at_ms >= first.due_at_ms + 59_000,
        "the new due time"
    );
    assert_eq!(payload("d").await, b"v2");
    let info = b.get(&q(), &id("d")).await.unwrap().unwrap();
    assert_eq!(info.due_at_ms, again.due_at_ms);
    let kept = p.enqueue(NewJob::new("v3").id(id("d"))).await.unwrap();
    assert!(!kept.created && !kept.replaced);
    assert_eq!(kept.due_at_ms, again.due_at_ms);
    assert_eq!(payload("d").await, b"v2", "keep is the default");
    // Replaced to due now: claimable at once.
    p.enqueue(NewJob::new("v4").id(id("d")).replace())
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q(), req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, b"v4");
    // Leased: not touched.
    let leased = p
        .enqueue(NewJob::new("v5").id(id("d")).replace())
        .await
        .unwrap();
    assert!(!leased.replaced && !leased.created);
    assert_eq!(leased.existing, Some(JobState::Leased));
    assert_eq!(payload("d").await, b"v4");
    // Dead: not touched.
    b.nack(
        &q(),
        got[0].lease_ref(),
        delayq::Nack {
            dead: true,
            ..delayq::Nack::error("no")
        },
    )
    .await
    .unwrap();
    let dead = p
        .enqueue(NewJob::new("v6").id(id("d")).replace())
        .await
        .unwrap();
    assert_eq!(dead.existing, Some(JobState::Dead));
    assert_eq!(payload("d").await, b"v4");
    // A new id is created as usual.
    let fresh = p
        .enqueue(NewJob::new("x").id(id("new")).replace())
        .await
        .unwrap();
    assert!(fresh.created && !fresh.replaced);
    // A job waiting for its retry keeps its attempts when replaced.
    p.enqueue(NewJob::new("r1").id(id("r"))).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    // (`new` above is due too: both are leased, `r` is failed once.)
    let got = b.claim(&q(), req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 2);
    let r = got.iter().find(|j| j.id.as_str() == "r").unwrap();
    b.nack(&q(), r.lease_ref(), delayq::Nack::error("again"))
        .await
        .unwrap();
    let replaced = p
        .enqueue(
            NewJob::new("r2")
                .id(id("r"))
                .delay(Duration::from_secs(60))
                .replace(),
        )
        .await
        .unwrap();
    assert!(replaced.replaced);
    let info = b.get(&q(), &id("r")).await.unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempt, info.payload.as_slice()),
        (JobState::Scheduled, 1, b"r2".as_slice())
    );
    // A replacement's priority is the job's from then on.
    p.enqueue(NewJob::new("slow").id(id("p9"))).await.unwrap();
    let prio = p
        .enqueue(NewJob::new("urgent").id(id("p9")).priority(9).replace())
        .await
        .unwrap();
    assert!(prio.replaced);
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q(), req(10, 30_000)).await.unwrap().jobs;
    let p9 = got.iter().find(|j| j.id.as_str() == "p9").unwrap();
    assert_eq!(
        (p9.priority, p9.payload.as_slice()),
        (9, b"urgent".as_slice())
    );
}

async fn payload_of<B: Inspect>(b: &B, name: &str) -> Vec<u8> {
    b.get(&q(), &id(name)).await.unwrap().unwrap().payload
}
