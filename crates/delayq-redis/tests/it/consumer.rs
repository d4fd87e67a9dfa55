//! The consumer engine against a real Redis: acks, retries with backoff, dead letters,
//! panics, lease extension, fencing, graceful shutdown, crash recovery and the server clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use delayq::{
    Backend, Backoff, Consumer, ConsumerOptions, Error, Failure, Inspect, Job, JobState, NewJob,
    OffsetClock, Producer,
};
use tokio::sync::watch;

fn opts(concurrency: usize, lease_ms: u64) -> ConsumerOptions {
    ConsumerOptions {
        concurrency,
        lease: Duration::from_millis(lease_ms),
        max_idle: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
        ..ConsumerOptions::default()
    }
}

type Seen = Arc<Mutex<Vec<Job>>>;

/// Starts a consumer whose handler records each job and then runs `f` on it.
fn spawn_consumer<F>(
    b: &delayq_redis::RedisBackend,
    q: &delayq::QueueName,
    o: ConsumerOptions,
    f: F,
) -> (
    Seen,
    watch::Sender<bool>,
    tokio::task::JoinHandle<delayq::RunReport>,
)
where
    F: Fn(&Job) -> Result<(), Failure> + Send + Sync + 'static,
{
    let seen: Seen = Arc::default();
    let (stop, rx) = watch::channel(false);
    let c = Consumer::new(b.clone(), q.clone(), o).unwrap();
    let s = seen.clone();
    let f = Arc::new(f);
    let h = tokio::spawn(async move {
        c.run(
            move |job: Job| {
                let s = s.clone();
                let f = f.clone();
                async move {
                    s.lock().unwrap().push(job.clone());
                    f(&job)
                }
            },
            shutdown_on(rx),
        )
        .await
        .unwrap()
    });
    (seen, stop, h)
}

#[tokio::test]
async fn handled_jobs_are_acked_and_deleted() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    for i in 0..20 {
        p.enqueue(job(&format!("j{i}"), 0)).await.unwrap();
    }
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(4, 5000), |_| Ok(()));
    assert!(eventually(10, || seen.lock().unwrap().len() >= 20).await);
    stop.send(true).unwrap();
    let report = h.await.unwrap();
    assert_eq!(report.acked, 20);
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.leased, st.dead), (0, 0, 0));
    assert!(p.get(&id("j0")).await.unwrap().is_none());
    assert!(seen.lock().unwrap().iter().all(|j| j.attempt == 1));
}

#[tokio::test]
async fn failures_retry_with_backoff_then_dead_letter() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(
        job("bad", 0)
            .max_attempts(3)
            .backoff(Backoff::Fixed { delay_ms: 100 }),
    )
    .await
    .unwrap();
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(2, 5000), |j| {
        Err(Failure::retry(format!("boom {}", j.attempt)))
    });
    assert!(eventually(10, || seen.lock().unwrap().len() >= 3).await);
    assert!(until(5, || async { b.stats(&q).await.unwrap().dead == 1 }).await);
    stop.send(true).unwrap();
    let report = h.await.unwrap();
    assert_eq!((report.retried, report.dead), (2, 1));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(|j| j.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(seen[1].last_error.as_deref(), Some("boom 1"));
    assert_eq!(seen[2].last_error.as_deref(), Some("boom 2"));
    // The backoff was respected between deliveries.
    assert!(seen[1].due_at_ms >= seen[0].due_at_ms + 100);
    let dead = b
        .list(
            &q,
            delayq::ListRequest::new(delayq::ListState::Dead, 10, None),
        )
        .await
        .unwrap()
        .jobs;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attempt, 3);
    assert_eq!(dead[0].last_error.as_deref(), Some("boom 3"));
    assert_eq!(dead[0].payload, b"bad");
    assert_eq!(dead[0].state, JobState::Dead);
}

#[tokio::test]
async fn failure_dead_and_retry_in_are_obeyed() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("perm", 0).max_attempts(10)).await.unwrap();
    p.enqueue(job("later", 0).max_attempts(10)).await.unwrap();
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(2, 5000), |j| match j.id.as_str() {
        "perm" => Err(Failure::dead("invalid order")),
        _ if j.attempt == 1 => Err(Failure::retry_in("not yet", Duration::from_millis(200))),
        _ => Ok(()),
    });
    assert!(eventually(10, || seen.lock().unwrap().len() >= 3).await);
    stop.send(true).unwrap();
    let r = h.await.unwrap();
    assert_eq!((r.dead, r.retried, r.acked), (1, 1, 1));
    let seen = seen.lock().unwrap().clone();
    let later: Vec<_> = seen.iter().filter(|j| j.id.as_str() == "later").collect();
    assert!(later[1].due_at_ms >= later[0].due_at_ms + 200);
    let dead = b.get(&q, &id("perm")).await.unwrap().unwrap();
    assert_eq!((dead.state, dead.attempt), (JobState::Dead, 1));
}

#[tokio::test]
async fn a_panicking_handler_counts_as_a_failure() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("p", 0).backoff(Backoff::Fixed { delay_ms: 10 }))
        .await
        .unwrap();
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(1, 5000), |j| {
        if j.attempt == 1 {
            panic!("handler bug");
        }
        Ok(())
    });
    assert!(eventually(10, || seen.lock().unwrap().len() >= 2).await);
    stop.send(true).unwrap();
    let r = h.await.unwrap();
    assert_eq!((r.retried, r.acked), (1, 1));
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen[1]
            .last_error
            .as_deref()
            .unwrap()
            .contains("handler panicked: handler bug")
    );
}

#[tokio::test]
async fn long_handlers_keep_their_lease() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("long", 0)).await.unwrap();
    let count = Arc::new(Mutex::new(0));
    let mut handles = Vec::new();
    for _ in 0..2 {
        let c = Consumer::new(b.clone(), q.clone(), opts(1, 500)).unwrap();
        let count = count.clone();
        let (stop, rx) = watch::channel(false);
        handles.push((
            stop,
            tokio::spawn(c.run(
                move |_job: Job| {
                    let count = count.clone();
                    async move {
                        *count.lock().unwrap() += 1;
                        // Real time: the handler outlives its 500 ms lease 2.4 times.
                        tokio::time::sleep(Duration::from_millis(1200)).await;
                        Ok::<(), Failure>(())
                    }
                },
                shutdown_on(rx),
            )),
        ));
    }
    // What is tested is the consumer's own timer extending a 500 ms lease over a 1.2 s
    // handler, against the server's clock: had the lease run out, the other consumer would
    // have claimed the job before it was acked.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while p.get(&id("long")).await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "never acked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (stop, h) in handles {
        stop.send(true).unwrap();
        h.await.unwrap().unwrap();
    }
    assert_eq!(
        *count.lock().unwrap(),
        1,
        "a 500 ms lease held over a 1.2 s handler"
    );
    assert!(p.get(&id("long")).await.unwrap().is_none(), "acked");
}

#[tokio::test]
async fn expired_leases_come_back_or_die_when_attempts_are_used_up() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("crash", 0).max_attempts(3)).await.unwrap();
    p.enqueue(job("last", 0).max_attempts(1)).await.unwrap();
    // A consumer claims both and dies: it never acks.
    let got = b.claim(&q, claim_req(10, 100)).await.unwrap();
    assert_eq!(got.jobs.len(), 2);
    assert_eq!(
        got.next_due_in.map(|d| d <= Duration::from_millis(100)),
        Some(true)
    );
    // A new consumer recovers them in its normal claim path; no other process runs.
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(2, 5000), |_| Ok(()));
    assert!(eventually(10, || !seen.lock().unwrap().is_empty()).await);
    // Real time: a wrong second delivery (the dead-lettered "last") would come within it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(true).unwrap();
    h.await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].id.as_str(), "crash");
    assert_eq!(seen[0].attempt, 2);
    assert!(
        seen[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("lease expired")
    );
    let dead = b.get(&q, &id("last")).await.unwrap().unwrap();
    assert_eq!(dead.state, JobState::Dead);
    assert!(dead.last_error.unwrap().contains("lease expired"));
}

#[tokio::test]
async fn an_idle_consumer_is_woken_by_an_earlier_job() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("far", 30_000)).await.unwrap();
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(1, 5000), |_| Ok(()));
    // Real time, a claim's round trip and more: the consumer is then asleep until the far job
    // (30 s) — or max_idle (60 s). (Not yet asleep, the test would only ask less.)
    tokio::time::sleep(Duration::from_millis(100)).await;
    let e = p.enqueue(job("near", 200)).await.unwrap();
    assert!(eventually(5, || !seen.lock().unwrap().is_empty()).await);
    let handled_at = now_ms();
    stop.send(true).unwrap();
    h.await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0].id.as_str(), "near");
    assert!(handled_at >= e.due_at_ms, "never early");
    assert!(
        handled_at < e.due_at_ms + 3000,
        "woken for the earlier job, not by a 30 s timer: {} ms late",
        handled_at - e.due_at_ms
    );
}

#[tokio::test]
async fn an_idle_consumer_sleeps_exactly_until_the_next_due_job() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let (seen, stop, h) = spawn_consumer(&b, &q, opts(1, 5000), |_| Ok(()));
    // Real time, a claim's round trip and more: the consumer then sleeps on an empty queue.
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Enqueued while the consumer sleeps on an empty queue (max_idle 60 s).
    let e1 = p.enqueue(job("a", 700)).await.unwrap();
    let e2 = p.enqueue(job("b", 1400)).await.unwrap();
    let at = Arc::new(Mutex::new(HashMap::new()));
    let at2 = at.clone();
    let seen2 = seen.clone();
    assert!(
        eventually(6, move || {
            for j in seen2.lock().unwrap().iter() {
                at2.lock()
                    .unwrap()
                    .entry(j.id.to_string())
                    .or_insert_with(now_ms);
            }
            at2.lock().unwrap().len() == 2
        })
        .await
    );
    stop.send(true).unwrap();
    h.await.unwrap();
    let at = at.lock().unwrap();
    for (name, e) in [("a", &e1), ("b", &e2)] {
        let t = at[name];
        assert!(t >= e.due_at_ms, "{name} early");
        assert!(t < e.due_at_ms + 2000, "{name} {} ms late", t - e.due_at_ms);
    }
}

/// Runs a consumer whose handler takes `handler_time`, signals shutdown once the handler has
/// started, and returns the run's report.
async fn shutdown_while_running(
    b: &delayq_redis::RedisBackend,
    q: &delayq::QueueName,
    o: ConsumerOptions,
    handler_time: Duration,
) -> delayq::RunReport {
    let c = Consumer::new(b.clone(), q.clone(), o).unwrap();
    let (stop, rx) = watch::channel(false);
    let started = Arc::new(tokio::sync::Notify::new());
    let st = started.clone();
    let h = tokio::spawn(c.run(
        move |_j: Job| {
            let st = st.clone();
            async move {
                st.notify_one();
                tokio::time::sleep(handler_time).await;
                Ok::<(), Failure>(())
            }
        },
        shutdown_on(rx),
    ));
    started.notified().await;
    stop.send(true).unwrap();
    h.await.unwrap().unwrap()
}

#[tokio::test]
async fn graceful_shutdown_finishes_running_handlers() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("g", 0)).await.unwrap();
    let r = shutdown_while_running(&b, &q, opts(1, 5000), Duration::from_millis(400)).await;
    assert_eq!((r.acked, r.aborted), (1, 0));
    assert!(p.get(&id("g")).await.unwrap().is_none());
}

#[tokio::test]
async fn shutdown_grace_over_releases_the_lease() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("stuck", 0)).await.unwrap();
    let o = ConsumerOptions {
        shutdown_grace: Duration::from_millis(200),
        ..opts(1, 60_000)
    };
    let r = shutdown_while_running(&b, &q, o, Duration::from_secs(60)).await;
    assert_eq!(r.aborted, 1);
    let info = p.get(&id("stuck")).await.unwrap().unwrap();
    assert_eq!(
        info.state,
        JobState::Scheduled,
        "released, not held for the 60 s lease"
    );
    assert_eq!(b.stats(&q).await.unwrap().due, 1);
}

#[tokio::test]
async fn release_without_start_does_not_count_an_attempt() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("r", 0)).await.unwrap();
    let got = b.claim(&q, claim_req(1, 60_000)).await.unwrap();
    b.release(&q, vec![got.jobs[0].lease_ref()], true)
        .await
        .unwrap();
    let info = p.get(&id("r")).await.unwrap().unwrap();
    assert_eq!((info.state, info.attempt), (JobState::Scheduled, 0));
}

#[tokio::test]
async fn skewed_client_clocks_do_not_move_jobs() {
    let (_s, b, q) = setup().await;
    let hour = 3_600_000;
    let p = Producer::new(b.clone(), q.clone()).with_clock(Arc::new(OffsetClock(hour)));
    let o = ConsumerOptions {
        clock: Arc::new(OffsetClock(-hour)),
        ..opts(1, 5000)
    };
    let (seen, stop, h) = spawn_consumer(&b, &q, o, |_| Ok(()));
    let before = now_ms();
    let e = p.enqueue(job("skew", 500)).await.unwrap();
    // Due time comes from the server's clock (this host's, here), not the producer's.
    assert!(e.due_at_ms >= before + 500 && e.due_at_ms <= now_ms() + 500);
    assert!(eventually(5, || !seen.lock().unwrap().is_empty()).await);
    let handled = now_ms();
    stop.send(true).unwrap();
    h.await.unwrap();
    assert!(handled >= e.due_at_ms);
    assert!(
        handled < e.due_at_ms + 2000,
        "{} ms late",
        handled - e.due_at_ms
    );
}

#[tokio::test]
async fn per_job_lease_overrides_the_consumer_lease() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("l", 0).lease(Duration::from_millis(700)))
        .await
        .unwrap();
    let got = b.claim(&q, claim_req(1, 60_000)).await.unwrap();
    assert_eq!(got.jobs[0].lease, Duration::from_millis(700));
    let info = b.get(&q, &id("l")).await.unwrap().unwrap();
    assert!(info.lease_deadline_ms.unwrap() <= now_ms() + 700);
}

#[tokio::test]
async fn four_consumers_handle_twenty_thousand_jobs_exactly_once_never_early() {
    let server = RedisServer::start();
    let q = queue();
    let b = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let n = 20_000;
    let mut jobs = Vec::new();
    for i in 0..n {
        // Due over ~3 s, spread deterministically.
        let delay = 500 + (i * 7919 % 3000) as u64;
        jobs.push(job(&format!("{i}"), delay));
    }
    for chunk in jobs.chunks(1000) {
        p.enqueue_batch(chunk.to_vec()).await.unwrap();
    }
    let early = Arc::new(Mutex::new(Vec::new()));
    let mut consumers = Vec::new();
    let mut all_seen = Vec::new();
    for _ in 0..4 {
        // Each consumer with its own connections, as separate services would have.
        let bc = delayq_redis::RedisBackend::connect(&server.url())
            .await
            .unwrap();
        let early = early.clone();
        let (seen, stop, h) = spawn_consumer(&bc, &q, opts(8, 10_000), move |j| {
            let now = now_ms();
            if now < j.due_at_ms {
                early
                    .lock()
                    .unwrap()
                    .push((j.id.to_string(), j.due_at_ms - now));
            }
            Ok(())
        });
        all_seen.push(seen);
        consumers.push((stop, h));
    }
    let total = || {
        all_seen
            .iter()
            .map(|s| s.lock().unwrap().len())
            .sum::<usize>()
    };
    assert!(
        eventually(60, || total() >= n).await,
        "handled {} of {n}",
        total()
    );
    // Real time: a duplicate delivery still in flight would land within it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut acked = 0;
    for (stop, h) in consumers {
        stop.send(true).unwrap();
        acked += h.await.unwrap().acked;
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    for s in &all_seen {
        for j in s.lock().unwrap().iter() {
            *count.entry(j.id.to_string()).or_default() += 1;
        }
    }
    assert_eq!(count.len(), n, "every job handled");
    assert!(count.values().all(|c| *c == 1), "each exactly once");
    assert_eq!(acked, n as u64);
    assert_eq!(
        early.lock().unwrap().len(),
        0,
        "early: {:?}",
        early.lock().unwrap()
    );
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.leased, st.dead), (0, 0, 0));
    // All pending acks were flushed: the records are gone.
    assert_eq!(
        server.command(&["EXISTS", &format!("dq:{{{q}}}:jobs")]),
        "0"
    );
}

#[tokio::test]
async fn consumer_options_are_validated() {
    let (_s, b, q) = setup().await;
    assert!(Consumer::new(b.clone(), q.clone(), opts(0, 5000)).is_err());
    assert!(matches!(
        Consumer::new(b.clone(), q.clone(), opts(1, 1)),
        Err(Error::Invalid(_))
    ));
    // Extending with an absurd lease is refused too.
    Producer::new(b.clone(), q.clone())
        .enqueue(job("e", 0))
        .await
        .unwrap();
    let got = b.claim(&q, claim_req(1, 5_000)).await.unwrap();
    assert!(matches!(
        b.extend(
            &q,
            got.jobs[0].lease_ref(),
            Duration::from_secs(365 * 86400)
        )
        .await,
        Err(Error::Invalid(_))
    ));
    let _ = NewJob::new("unused");
}
