//! Cancelling a job while it runs (`Backend::cancel_running`): what the store does with the
//! job and its lease, and what a consumer's handler hears.

use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq::{
    AckOutcome, Backend, CancelOutcome, Consumer, ConsumerOptions, Error, Inspect, Job, Nack,
    Producer, QueueName, QueueSettings,
};

use super::{Time, id, job, req};

fn cq() -> QueueName {
    QueueName::new("cancel-running").unwrap()
}

/// A running job is ended cancelled at once: gone, its lease refused as `cancelled` by extend,
/// ack and nack (and reported by `cancelled`), its in-flight slot free; a scheduled job is
/// cancelled as by a plain cancel; a plain cancel still refuses a running job; a second cancel
/// finds nothing.
pub async fn running_jobs_are_cancelled<B: Backend + Inspect>(b: B, t: Time) {
    let q = cq();
    let s = QueueSettings {
        max_in_flight: Some(1),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![job("run", 0), job("later", 60_000), job("next", 0)])
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&q, req(1, 30_000)).await.unwrap();
    // Both are due: whichever is leased runs, the other waits for the slot.
    let run = first.jobs.into_iter().next().expect("one job leased");
    assert!(
        b.claim(&q, req(1, 30_000)).await.unwrap().jobs.is_empty(),
        "max_in_flight 1 holds `next` back"
    );
    assert_eq!(p.cancel(&run.id).await.unwrap(), CancelOutcome::Leased);
    assert_eq!(
        p.cancel_running(&id("later")).await.unwrap(),
        CancelOutcome::Cancelled,
        "a scheduled job is cancelled as by a plain cancel"
    );
    assert_eq!(
        p.cancel_running(&run.id).await.unwrap(),
        CancelOutcome::Cancelling
    );
    assert!(b.get(&q, &run.id).await.unwrap().is_none(), "ended at once");
    assert_eq!(b.stats(&q).await.unwrap().leased, 0);
    // The lease is refused as cancelled, whatever the consumer tries.
    let stale = delayq::LeaseRef {
        id: run.id.clone(),
        token: run.lease_token + 1,
    };
    assert_eq!(
        b.cancelled(&q, vec![stale.clone(), run.lease_ref()])
            .await
            .unwrap(),
        vec![false, true],
        "only the cancelled lease is reported"
    );
    let extend = b.extend(&q, run.lease_ref(), Duration::from_secs(30)).await;
    assert!(matches!(extend, Err(Error::Cancelled { .. })), "{extend:?}");
    let nack = b.nack(&q, run.lease_ref(), Nack::error("x")).await;
    assert!(matches!(nack, Err(Error::Cancelled { .. })), "{nack:?}");
    assert_eq!(
        b.ack(&q, vec![run.to_ack(), stale.into()]).await.unwrap(),
        vec![AckOutcome::Cancelled, AckOutcome::NotFound]
    );
    // The slot it held is free: `next` is claimed now.
    let next = b.claim(&q, req(1, 30_000)).await.unwrap();
    assert_eq!(next.jobs.len(), 1, "the cancelled job's slot is free");
    // Acks riding on a claim say so too.
    let mut with_ack = req(0, 30_000);
    with_ack.acks = vec![run.to_ack()];
    assert_eq!(
        b.claim(&q, with_ack).await.unwrap().acks,
        vec![AckOutcome::Cancelled]
    );
    assert_eq!(
        p.cancel_running(&run.id).await.unwrap(),
        CancelOutcome::NotFound,
        "a second cancel finds nothing"
    );
    assert_eq!(
        p.cancel_running(&id("never")).await.unwrap(),
        CancelOutcome::NotFound
    );
}

/// A consumer's handler hears of its job's cancellation through `Job::cancellation` (within
/// the watch's half second), the job is neither acked nor nacked, and the run counts it.
pub async fn consumers_stop_cancelled_handlers<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("cancel-consumer").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("long", 0)).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let started = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::new(tokio::sync::Notify::new());
    let (s1, s2) = (started.clone(), stopped.clone());
    let c = Consumer::new(b.clone(), q.clone(), ConsumerOptions::default()).unwrap();
    let (stop, mut halt) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(c.run(
        move |j: Job| {
            let (s1, s2) = (s1.clone(), s2.clone());
            async move {
                s1.notify_one();
                j.cancellation.cancelled().await;
                s2.notify_one();
                Ok::<(), String>(())
            }
        },
        async move {
            let _ = halt.wait_for(|v| *v).await;
        },
    ));
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the handler starts");
    let asked = Instant::now();
    assert_eq!(
        p.cancel_running(&id("long")).await.unwrap(),
        CancelOutcome::Cancelling
    );
    tokio::time::timeout(Duration::from_secs(5), stopped.notified())
        .await
        .expect("the handler hears of its cancellation");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "told within the watch's period: {:?}",
        asked.elapsed()
    );
    stop.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(
        (report.cancelled, report.acked, report.retried),
        (1, 0, 0),
        "{report:?}"
    );
    assert!(b.get(&q, &id("long")).await.unwrap().is_none());
}

/// A keyed job cancelled while it runs frees its key's slot at once: the key's next job is
/// claimed (`key_max_in_flight` 1).
pub async fn cancelled_running_jobs_free_their_key<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("cancel-keyed").unwrap();
    let s = QueueSettings {
        key_max_in_flight: Some(1),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let key = delayq::JobKey::new("tenant-7").unwrap();
    p.enqueue_batch(vec![
        job("k-a", 0).key(key.clone()),
        job("k-b", 0).key(key.clone()),
    ])
    .await
    .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&q, req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(first.len(), 1, "one of the key's jobs at a time");
    assert!(b.claim(&q, req(10, 30_000)).await.unwrap().jobs.is_empty());
    assert_eq!(
        p.cancel_running(&first[0].id).await.unwrap(),
        CancelOutcome::Cancelling
    );
    t.pass(Duration::from_millis(2)).await;
    let next = b.claim(&q, req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(next.len(), 1, "the key's slot is free");
    assert_ne!(next[0].id, first[0].id);
}

/// A keyed job held back by its key's limit (parked until a slot frees) is still a job that
/// waits: a cancel removes it, and a cancel with `running` too.
pub async fn parked_keyed_jobs_are_cancelled<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("cancel-parked").unwrap();
    let s = QueueSettings {
        key_max_in_flight: Some(1),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let key = delayq::JobKey::new("tenant-9").unwrap();
    let names = ["p-a", "p-b", "p-c"];
    p.enqueue_batch(names.iter().map(|n| job(n, 0).key(key.clone())).collect())
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&q, req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(first.len(), 1, "one of the key's jobs at a time");
    // The other two are held back now (on Redis: parked under their key).
    assert!(b.claim(&q, req(10, 30_000)).await.unwrap().jobs.is_empty());
    let waiting: Vec<_> = names
        .iter()
        .map(|n| id(n))
        .filter(|i| *i != first[0].id)
        .collect();
    assert_eq!(
        p.cancel(&waiting[0]).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert_eq!(
        p.cancel_running(&waiting[1]).await.unwrap(),
        CancelOutcome::Cancelled
    );
    for w in &waiting {
        assert!(b.get(&q, w).await.unwrap().is_none(), "{w} is gone");
    }
    b.ack(&q, vec![first[0].to_ack()]).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    assert!(
        b.claim(&q, req(10, 30_000)).await.unwrap().jobs.is_empty(),
        "nothing of the key is left to run"
    );
}

/// A cancel with `running` changes nothing it may not: a dead job stays dead (`Dead`, for the
/// dead-letter tools), a job kept as done stays done (`NotFound`, as for a plain cancel).
pub async fn cancel_running_leaves_dead_and_done_jobs<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("cancel-ended").unwrap();
    let s = QueueSettings {
        retention: delayq::Retention {
            keep_done_ms: 600_000,
            dedupe_ms: 0,
        },
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![job("e-dead", 0), job("e-done", 0)])
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    for j in b.claim(&q, req(10, 30_000)).await.unwrap().jobs {
        if j.id.as_str() == "e-dead" {
            let nack = Nack {
                dead: true,
                ..Nack::error("gone bad")
            };
            b.nack(&q, j.lease_ref(), nack).await.unwrap();
        } else {
            b.ack(&q, vec![j.to_ack()]).await.unwrap();
        }
    }
    assert_eq!(
        p.cancel_running(&id("e-dead")).await.unwrap(),
        CancelOutcome::Dead
    );
    assert_eq!(
        p.cancel_running(&id("e-done")).await.unwrap(),
        CancelOutcome::NotFound
    );
    let state = |n: &'static str| {
        let (b, q) = (b.clone(), q.clone());
        async move { b.get(&q, &id(n)).await.unwrap().map(|i| i.state) }
    };
    assert_eq!(state("e-dead").await, Some(delayq::JobState::Dead));
    assert_eq!(state("e-done").await, Some(delayq::JobState::Done));
}
