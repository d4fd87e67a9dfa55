//! A chaos run of jobs that wait for other jobs ([`delayq::deps`]), any backend: chains and
//! fan-ins are enqueued while consumers run them and sweepers finish what crashes leave;
//! consumers and sweepers are killed (tasks aborted: a SIGKILL as the store sees it) and the
//! caller's fault strikes (a Redis restart). The check, per job:
//!
//! - never early: when a job starts, none of its dependencies is still in the store (each was
//!   acked, and an acked job without retention is gone);
//! - never left waiting: after the drain every job has run, and the queue holds none waiting.
//!
//! (The sweepers are `chaos_batches`': the store's sweep finishes dependencies too.)

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::chaos_batches::sweeper;
use delayq::batch::Batches;
use delayq::{
    Backend, Consumer, ConsumerOptions, DepRef, Failure, Inspect, Job, JobId, NewJob, Producer,
    QueueName,
};

/// How a run goes.
pub struct DepsPlan {
    /// Three-step chains (`c<i>-a` → `c<i>-b` → `c<i>-c`).
    pub chains: usize,
    /// Fan-ins: `width` jobs, then one that waits for all of them.
    pub fan_ins: usize,
    /// Jobs a fan-in waits for.
    pub width: usize,
    /// Consumer and sweeper kills, spread over the run.
    pub kills: usize,
    /// The caller's fault, struck after half the graphs are enqueued.
    pub fault: Option<Box<dyn FnOnce() + Send>>,
    /// Lease of the consumers.
    pub lease: Duration,
    /// Longest final drain.
    pub drain: Duration,
}

/// What the check found.
#[derive(Debug, Default)]
pub struct DepsReport {
    /// Jobs that ran.
    pub ran: usize,
    /// Jobs that started while a dependency was still in the store.
    pub early: Vec<String>,
    /// Jobs enqueued that never ran.
    pub lost: Vec<String>,
    /// Jobs still waiting after the drain.
    pub waiting: u64,
    /// Graphs whose enqueue failed (an outage): not checked.
    pub not_enqueued: usize,
}

/// The graphs: each job with the jobs it waits for.
fn graphs(plan: &DepsPlan) -> Vec<Vec<(String, Vec<String>)>> {
    let mut out = Vec::new();
    for i in 0..plan.chains {
        let (a, b, c) = (format!("c{i}-a"), format!("c{i}-b"), format!("c{i}-c"));
        out.push(vec![
            (c.clone(), vec![b.clone()]),
            (b.clone(), vec![a.clone()]),
            (a, vec![]),
        ]);
    }
    for i in 0..plan.fan_ins {
        let parts: Vec<String> = (0..plan.width).map(|k| format!("f{i}-{k}")).collect();
        let mut g = vec![(format!("f{i}-join"), parts.clone())];
        g.extend(parts.into_iter().map(|p| (p, vec![])));
        out.push(g);
    }
    out
}

/// Runs `plan` on `queue`: `connect` makes a backend per consumer, sweeper and checker (like
/// separate processes).
pub async fn run<B, F, Fut>(queue: QueueName, connect: F, mut plan: DepsPlan) -> DepsReport
where
    B: Backend + Inspect + Batches,
    F: Fn() -> Fut,
    Fut: Future<Output = B>,
{
    let all = graphs(&plan);
    let deps_of: Arc<HashMap<String, Vec<String>>> =
        Arc::new(all.iter().flatten().cloned().collect());
    let ran: Arc<Mutex<HashSet<String>>> = Arc::default();
    let early: Arc<Mutex<HashSet<String>>> = Arc::default();
    let checker = connect().await;
    let consumer = |b: B| {
        let opts = ConsumerOptions {
            concurrency: 8,
            lease: plan.lease,
            max_idle: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(1),
            ..ConsumerOptions::default()
        };
        let c = Consumer::new(b, queue.clone(), opts).expect("valid options");
        let (deps_of, ran, early, store, q) = (
            deps_of.clone(),
            ran.clone(),
            early.clone(),
            checker.clone(),
            queue.clone(),
        );
        tokio::spawn(async move {
            let _ = c
                .run(
                    move |job: Job| {
                        let (deps_of, ran, early, store, q) = (
                            deps_of.clone(),
                            ran.clone(),
                            early.clone(),
                            store.clone(),
                            q.clone(),
                        );
                        async move {
                            let id = job.id.to_string();
                            for d in deps_of.get(&id).into_iter().flatten() {
                                let d = JobId::new(d.clone()).expect("valid id");
                                if store.get(&q, &d).await.map_err(Failure::retry)?.is_some() {
                                    early.lock().expect("lock").insert(id.clone());
                                }
                            }
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            ran.lock().expect("lock").insert(id);
                            Ok::<(), Failure>(())
                        }
                    },
                    std::future::pending(),
                )
                .await;
        })
    };
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(consumer(connect().await));
    }
    let mut sweepers = vec![sweeper(connect().await), sweeper(connect().await)];
    let producer = Producer::new(connect().await, queue.clone());
    let kill_every = (all.len() / (plan.kills + 1)).max(1);
    let mut enqueued: Vec<String> = Vec::new();
    let mut report = DepsReport::default();
    let half = all.len() / 2;
    for (n, g) in all.iter().enumerate() {
        // Dependents first in the batch: the store writes their dependencies first.
        let jobs: Vec<NewJob> = g
            .iter()
            .map(|(id, deps)| {
                let j = NewJob::new(id.clone().into_bytes()).id(JobId::new(id.clone()).unwrap());
                if deps.is_empty() {
                    j
                } else {
                    j.depends_on(deps.iter().map(|d| DepRef {
                        queue: queue.clone(),
                        id: JobId::new(d.clone()).unwrap(),
                    }))
                }
            })
            .collect();
        // Retried through an outage as any client would: the ids make a repeat harmless.
        let mut done = false;
        for _ in 0..50 {
            if producer.enqueue_batch(jobs.clone()).await.is_ok() {
                done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if done {
            enqueued.extend(g.iter().map(|(id, _)| id.clone()));
        } else {
            report.not_enqueued += 1;
        }
        if plan.kills > 0 && (n + 1) % kill_every == 0 {
            let w = workers.remove(0);
            w.abort();
            let _ = w.await;
            workers.push(consumer(connect().await));
            let s = sweepers.remove(0);
            s.abort();
            let _ = s.await;
            sweepers.push(sweeper(connect().await));
        }
        if n + 1 == half
            && let Some(f) = plan.fault.take()
        {
            let _ = tokio::task::spawn_blocking(f).await;
        }
    }
    let deadline = Instant::now() + plan.drain;
    while Instant::now() < deadline {
        let left = {
            let r = ran.lock().expect("lock");
            enqueued.iter().filter(|id| !r.contains(*id)).count()
        };
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in workers.into_iter().chain(sweepers) {
        t.abort();
    }
    let r = ran.lock().expect("lock").clone();
    report.ran = r.len();
    report.early = early.lock().expect("lock").iter().cloned().collect();
    report.lost = enqueued.into_iter().filter(|id| !r.contains(id)).collect();
    report.waiting = checker
        .stats(&queue)
        .await
        .map(|s| s.awaiting)
        .unwrap_or(u64::MAX);
    report
}
