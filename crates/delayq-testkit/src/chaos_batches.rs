//! A chaos run of batches any backend can host: batches of jobs are created while consumers
//! run them and sweepers finish batches; consumers and sweepers are killed (tasks aborted: a
//! SIGKILL as the store sees it) and the caller's fault strikes (a Redis restart). The check,
//! per batch, of the guarantees of `delayq::batch`:
//!
//! - never early: when its callback runs, none of its jobs is still in the store (each was
//!   acked, and an acked job without retention is gone);
//! - never twice: its callback job was created once (every run of it sees one creation time);
//! - never lost: after the drain its callback has run and the batch is done with every job
//!   counted as succeeded.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::chaos::worker;
use delayq::batch::{BatchState, Batches};
use delayq::{
    Backend, BatchId, BatchSpec, Callback, Consumer, ConsumerOptions, Failure, Inspect, Job, JobId,
    NewJob, Producer, QueueName,
};

/// How a batch run goes.
pub struct BatchPlan {
    /// Batches created.
    pub batches: usize,
    /// Jobs per batch.
    pub jobs: usize,
    /// Consumer (and sweeper) kills, spread over the run.
    pub kills: usize,
    /// The caller's fault, struck after half the batches are created.
    pub fault: Option<Box<dyn FnOnce() + Send>>,
    /// Lease of the consumers.
    pub lease: Duration,
    /// Longest final drain.
    pub drain: Duration,
}

/// What the check found.
#[derive(Debug, Default)]
pub struct BatchReport {
    /// Batches whose callback ran.
    pub called_back: usize,
    /// Batches whose callback ran while one of their jobs was still in the store.
    pub early: Vec<String>,
    /// Batches whose callback job was created more than once.
    pub twice: Vec<String>,
    /// Batches created whose callback never ran, or that are not done with every job counted.
    pub lost: Vec<String>,
    /// Batches whose create call failed (an outage): not checked.
    pub not_created: usize,
}

/// What the callback consumer saw: per batch, each creation time of its callback job and the
/// members still in the store at a run.
#[derive(Default)]
struct Seen {
    created: HashMap<String, HashSet<u64>>,
    early: HashSet<String>,
}

fn member_ids(batch: usize, jobs: usize) -> Vec<String> {
    (0..jobs).map(|j| format!("b{batch}-j{j}")).collect()
}

/// A sweeper finishing batches every 50 ms.
pub(crate) fn sweeper<B: Batches>(b: B) -> tokio::task::JoinHandle<()> {
    tokio::spawn(
        delayq::batch::BatchSweeper::new(b)
            .every(Duration::from_millis(50))
            .run(),
    )
}

/// Runs `plan`: `connect` makes a backend per consumer, sweeper and checker (like separate
/// processes).
pub async fn run<B, F, Fut>(queue: QueueName, connect: F, mut plan: BatchPlan) -> BatchReport
where
    B: Backend + Inspect + Batches,
    F: Fn() -> Fut,
    Fut: Future<Output = B>,
{
    let cb = QueueName::new(format!("{queue}-done")).expect("valid name");
    let seen = Arc::new(Mutex::new(Seen::default()));
    // The callback consumer checks each run against the store.
    let checker = connect().await;
    let cb_consumer = {
        let opts = ConsumerOptions {
            concurrency: 4,
            lease: plan.lease,
            max_idle: Duration::from_secs(1),
            ..ConsumerOptions::default()
        };
        let c = Consumer::new(connect().await, cb.clone(), opts).expect("valid options");
        let (seen, store, q, per) = (seen.clone(), checker.clone(), queue.clone(), plan.jobs);
        tokio::spawn(async move {
            let _ = c
                .run(
                    move |job: Job| {
                        let (seen, store, q) = (seen.clone(), store.clone(), q.clone());
                        async move {
                            let v: serde_json::Value =
                                serde_json::from_slice(&job.payload).map_err(Failure::retry)?;
                            let id = v["batch"]["id"].as_str().unwrap_or_default().to_owned();
                            let n: usize = id.trim_start_matches('b').parse().unwrap_or(0);
                            let mut left = false;
                            for m in member_ids(n, per) {
                                let m = JobId::new(m).expect("valid id");
                                if store.get(&q, &m).await.map_err(Failure::retry)?.is_some() {
                                    left = true;
                                }
                            }
                            let mut s = seen.lock().expect("lock");
                            if left {
                                s.early.insert(id.clone());
                            }
                            s.created.entry(id).or_default().insert(job.created_at_ms);
                            Ok::<(), Failure>(())
                        }
                    },
                    std::future::pending(),
                )
                .await;
        })
    };
    let mut workers: Vec<_> = Vec::new();
    for _ in 0..3 {
        workers.push(worker(connect().await, &queue, plan.lease));
    }
    let mut sweepers = vec![sweeper(connect().await), sweeper(connect().await)];
    let producer = Producer::new(connect().await, queue.clone());
    let kill_every = (plan.batches / (plan.kills + 1)).max(1);
    let mut created = Vec::new();
    let mut report = BatchReport::default();
    for n in 0..plan.batches {
        let jobs: Vec<NewJob> = member_ids(n, plan.jobs)
            .into_iter()
            .map(|id| {
                NewJob::new(id.clone().into_bytes())
                    .id(JobId::new(id).expect("valid id"))
                    .delay(Duration::from_millis(rand::random::<u64>() % 500))
            })
            .collect();
        let spec = BatchSpec {
            on_complete: Some(Callback::new(cb.clone())),
            ..BatchSpec::default()
        };
        let id = BatchId::new(format!("b{n}")).expect("valid id");
        // Retried through an outage as any client would: the batch is created once, and a
        // retry after a create that closed it is refused (it exists, closed).
        let mut done = false;
        for _ in 0..50 {
            match producer
                .create_batch(Some(id.clone()), spec.clone(), jobs.clone(), false)
                .await
            {
                Ok(_) => {
                    done = true;
                    break;
                }
                Err(delayq::Error::Conflict(_)) => {
                    done = true;
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        if done {
            created.push(n);
        } else {
            report.not_created += 1;
        }
        if plan.kills > 0 && (n + 1) % kill_every == 0 {
            // A worker and a sweeper die (their leases and steps left half done).
            let w = workers.remove(0);
            w.abort();
            let _ = w.await;
            workers.push(worker(connect().await, &queue, plan.lease));
            let s = sweepers.remove(0);
            s.abort();
            let _ = s.await;
            sweepers.push(sweeper(connect().await));
        }
        if n + 1 == plan.batches / 2
            && let Some(f) = plan.fault.take()
        {
            let _ = tokio::task::spawn_blocking(f).await;
        }
    }
    // Drain until every batch created has called back.
    let deadline = Instant::now() + plan.drain;
    while Instant::now() < deadline {
        let called = seen.lock().expect("lock").created.len();
        if called >= created.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in workers.into_iter().chain(sweepers) {
        t.abort();
    }
    cb_consumer.abort();
    let (created_times, early) = {
        let s = seen.lock().expect("lock");
        (s.created.clone(), s.early.clone())
    };
    report.called_back = created_times.len();
    report.early = early.into_iter().collect();
    report.twice = created_times
        .iter()
        .filter(|(_, times)| times.len() > 1)
        .map(|(id, _)| id.clone())
        .collect();
    for n in created {
        let id = format!("b{n}");
        let info = checker
            .batch(&queue, &BatchId::new(id.clone()).expect("valid id"))
            .await
            .ok()
            .flatten();
        let counted = info
            .is_some_and(|i| i.state == BatchState::Done && i.counts.succeeded == plan.jobs as u64);
        if !created_times.contains_key(&id) || !counted {
            report.lost.push(id);
        }
    }
    report
}
