//! Conformance tests of a queue's throttle — its rate and concurrency limits: enforced
//! inside the claim on the store's clock, held-back consumers told when to come back or woken
//! when a slot frees, what waits shown in stats, bad settings refused with nothing stored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Time, job, req};
use delayq::{
    Backend, Consumer, ConsumerOptions, Failure, Inspect, InvalidInput, Job, Producer, QueueName,
    QueueSettings, Rate,
};

/// The queue these tests limit: its own, of one shard, whatever the suite's queue is made of
/// (a sharded queue divides its limits among shards: `throttles_hold_across_consumers`).
fn lq() -> QueueName {
    QueueName::new("limited").unwrap()
}

async fn due_jobs<B: Backend>(b: &B, queue: &QueueName, n: usize) {
    let p = Producer::new(b.clone(), queue.clone());
    let jobs = (0..n).map(|i| job(&format!("j{i:04}"), 0)).collect();
    p.enqueue_batch(jobs).await.unwrap();
}

/// A token bucket in the claim: a burst, then one job per token, and a held-back claim says
/// when the next token is due.
pub async fn rate_limit_in_the_claim<B: Backend + Inspect>(b: B, t: Time) {
    let s = QueueSettings {
        rate: Some(Rate {
            per_s: 1.0,
            burst: 3,
        }),
        ..QueueSettings::default()
    };
    assert_eq!(b.configure(&lq(), s.clone()).await.unwrap(), s);
    assert_eq!(b.settings(&lq()).await.unwrap(), s);
    due_jobs(&b, &lq(), 10).await;
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert_eq!(first.jobs.len(), 3, "the burst");
    let stats = b.stats(&lq()).await.unwrap();
    assert_eq!(stats.waiting_on_limit, 7);
    let held = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert!(held.jobs.is_empty(), "no token left");
    let next = held.next_due_in.expect("told when the next token is due");
    assert!(
        next > Duration::from_millis(800) && next <= Duration::from_millis(1000),
        "{next:?}"
    );
    t.pass(Duration::from_millis(1100)).await;
    let one = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert_eq!(one.jobs.len(), 1, "one token a second");
    // Removing the limit lets everything due go.
    b.configure(&lq(), QueueSettings::default()).await.unwrap();
    assert_eq!(b.settings(&lq()).await.unwrap(), QueueSettings::default());
    let rest = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert_eq!(rest.jobs.len(), 6);
    assert_eq!(b.stats(&lq()).await.unwrap().waiting_on_limit, 0);
}

/// `max_in_flight` bounds leased jobs over every claim; a claim held back by it sleeps until a
/// slot frees and is woken then.
pub async fn max_in_flight_in_the_claim<B: Backend + Inspect>(b: B, t: Time) {
    let s = QueueSettings {
        max_in_flight: Some(2),
        ..QueueSettings::default()
    };
    b.configure(&lq(), s).await.unwrap();
    due_jobs(&b, &lq(), 5).await;
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert_eq!(first.jobs.len(), 2);
    let mut wake = b.wakeups(&lq()).await.unwrap();
    wake.borrow_and_update();
    let held = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert!(held.jobs.is_empty(), "two leased already");
    assert!(
        held.next_due_in.is_none_or(|d| d > Duration::from_secs(20)),
        "held back until a slot frees (or the lease expires): {:?}",
        held.next_due_in
    );
    assert_eq!(b.stats(&lq()).await.unwrap().waiting_on_limit, 3);
    b.ack(&lq(), vec![first.jobs[0].to_ack()]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), wake.changed())
        .await
        .expect("the freed slot wakes the held-back consumer")
        .unwrap();
    let next = b.claim(&lq(), req(10, 30_000)).await.unwrap();
    assert_eq!(next.jobs.len(), 1, "one slot freed");
    // A nack frees a slot too.
    b.nack(
        &lq(),
        first.jobs[1].lease_ref(),
        delayq::Nack::error("try later"),
    )
    .await
    .unwrap();
    assert_eq!(b.claim(&lq(), req(10, 30_000)).await.unwrap().jobs.len(), 1);
    assert_eq!(b.stats(&lq()).await.unwrap().leased, 2);
}

/// Out-of-range limits are refused with a typed error and nothing is stored.
pub async fn bad_throttles_are_refused<B: Backend + Inspect>(b: B, _t: Time) {
    let before = b.settings(&lq()).await.unwrap();
    let bad = [
        (Some((-1.0, 10)), None),
        (Some((f64::NAN, 10)), None),
        (Some((0.0, 10)), None),
        (Some((10.0, 0)), None),
        (None, Some(0)),
    ];
    for (rate, max_in_flight) in bad {
        let s = QueueSettings {
            rate: rate.map(|(per_s, burst)| Rate { per_s, burst }),
            max_in_flight,
            ..before.clone()
        };
        let e = b.configure(&lq(), s).await.unwrap_err();
        assert!(
            matches!(e, delayq::Error::Invalid(InvalidInput::Settings(_))),
            "{e}"
        );
    }
    assert_eq!(b.settings(&lq()).await.unwrap(), before);
}

/// 10 consumers over a queue with `rate` 100/s (burst 10) and then with `max_in_flight` 5:
/// no 1-second window (store clock) holds more than 110 starts; never more than 5 leased.
/// With `shards` > 1 each shard keeps its share of the limits, so the queue's figures hold
/// too. Real time: call it with a store on this host's clock.
pub async fn throttles_hold_across_consumers<B: Backend + Inspect>(b: B, shards: u32) {
    let rated = QueueName::new("rated").unwrap();
    b.configure(
        &rated,
        QueueSettings {
            rate: Some(Rate {
                per_s: 100.0,
                burst: 10,
            }),
            ..QueueSettings::with_shards(shards)
        },
    )
    .await
    .unwrap();
    due_jobs(&b, &rated, 500).await;
    // Claim times on the store's clock: the lease deadline minus the lease.
    let starts: Arc<Mutex<Vec<u64>>> = Arc::default();
    let log = starts.clone();
    run_consumers(&b, &rated, 500, Duration::from_secs(30), move |j: &Job| {
        log.lock()
            .unwrap()
            .push(j.lease_deadline_ms - j.lease.as_millis() as u64);
    })
    .await;
    let mut starts = std::mem::take(&mut *starts.lock().unwrap());
    starts.sort_unstable();
    assert_eq!(starts.len(), 500);
    let most = (0..starts.len())
        .map(|i| starts[i..].partition_point(|&s| s < starts[i] + 1000))
        .max()
        .unwrap();
    assert!(most <= 110, "{most} starts in one second");
    assert!(most >= 90, "the limit is not far under its rate: {most}");

    let narrow = QueueName::new("narrow").unwrap();
    b.configure(
        &narrow,
        QueueSettings {
            max_in_flight: Some(5),
            ..QueueSettings::with_shards(shards)
        },
    )
    .await
    .unwrap();
    due_jobs(&b, &narrow, 200).await;
    let (running, peak): (Arc<Mutex<i64>>, Arc<Mutex<i64>>) = Default::default();
    let sampler = {
        let (b, narrow, peak) = (b.clone(), narrow.clone(), peak.clone());
        tokio::spawn(async move {
            loop {
                let s = b.stats(&narrow).await.unwrap();
                {
                    let mut p = peak.lock().unwrap();
                    *p = (*p).max(s.leased as i64);
                }
                if s.waiting() + s.leased == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };
    let r = running.clone();
    run_consumers(&b, &narrow, 200, Duration::from_secs(30), move |_| {
        *r.lock().unwrap() += 1;
    })
    .await;
    sampler.await.unwrap();
    let peak = *peak.lock().unwrap();
    assert!(peak <= 5, "{peak} leased at once");
    assert!(peak >= 1);
}

/// Runs 10 consumers (concurrency 4, handlers of 2 ms) until `n` jobs are handled.
async fn run_consumers<B: Backend>(
    b: &B,
    queue: &QueueName,
    n: usize,
    limit: Duration,
    on_start: impl Fn(&Job) + Send + Sync + Clone + 'static,
) {
    let done: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let (stop, rx) = tokio::sync::watch::channel(false);
    let mut runs = Vec::new();
    for _ in 0..10 {
        let opts = ConsumerOptions {
            concurrency: 4,
            ..Default::default()
        };
        let c = Consumer::new(b.clone(), queue.clone(), opts).unwrap();
        let (done, on_start, mut rx) = (done.clone(), on_start.clone(), rx.clone());
        runs.push(tokio::spawn(c.run(
            move |j: Job| {
                on_start(&j);
                *done.lock().unwrap().entry(j.id.to_string()).or_default() += 1;
                async {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok::<(), Failure>(())
                }
            },
            async move {
                let _ = rx.wait_for(|v| *v).await;
            },
        )));
    }
    let t = Instant::now();
    while done.lock().unwrap().len() < n && t.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Stopping lets the consumers send their last acks before they return.
    stop.send(true).unwrap();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    let done = done.lock().unwrap();
    assert_eq!(done.len(), n, "every job handled in {limit:?}");
    assert!(done.values().all(|c| *c == 1));
}
