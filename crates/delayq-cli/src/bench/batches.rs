//! What batches cost (issue 35): `n` due jobs enqueued as batches of 1,000 with a callback
//! each, drained by one in-process consumer at concurrency 50 while a batch sweep runs (as in
//! `delayq serve` and a Redis `delayq worker`) — against the same jobs enqueued plainly. Reports
//! the enqueue and drain rates, the store's cost per job, and how long after the last job
//! ended the last callback was there.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use delayq::{
    BatchId, BatchSpec, Batches, Callback, Consumer, ConsumerOptions, Failure, Inspect, Job,
    NewJob, Producer, QueueName,
};

use super::Row;
use super::env::{Env, per_job};
use super::util::{PREFETCH, bar, now_ms_f64};

/// Jobs per batch.
const PER_BATCH: usize = 1000;

/// Enqueues and drains `n` jobs, in batches with callbacks (`batched`) or plainly.
pub(super) async fn batches(env: &mut Env, n: usize, batched: bool) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let before = env.cost().await?;
    let (q, cb) = (
        QueueName::new("bench-batch")?,
        QueueName::new("bench-batch-done")?,
    );
    let p = Producer::new(b.clone(), q.clone());
    let pb = bar(n, "batch enqueue");
    let started = now_ms_f64();
    let mut i = 0;
    let mut ids = Vec::new();
    while i < n {
        let end = (i + PER_BATCH).min(n);
        let jobs: Vec<NewJob> = (i..end)
            .map(|j| NewJob::new(format!("{j}").into_bytes()))
            .collect();
        if batched {
            let spec = BatchSpec {
                on_complete: Some(Callback::new(cb.clone())),
                ..BatchSpec::default()
            };
            let id = BatchId::new(format!("bench-{i}"))?;
            p.create_batch(Some(id.clone()), spec, jobs, false).await?;
            ids.push(id);
        } else {
            p.enqueue_batch(jobs).await?;
        }
        pb.inc((end - i) as u64);
        i = end;
    }
    pb.finish_and_clear();
    let enqueued = now_ms_f64();
    let sweep = tokio::spawn(delayq::batch::BatchSweeper::new(b.clone()).run());
    let done = Arc::new(AtomicUsize::new(0));
    let opts = ConsumerOptions {
        concurrency: 50,
        prefetch: PREFETCH.load(Ordering::Relaxed),
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(b.clone(), q.clone(), opts)?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let count = done.clone();
    let run = tokio::spawn(c.run(
        move |_j: Job| {
            count.fetch_add(1, Ordering::Relaxed);
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let pb = bar(n, "batch drain");
    while done.load(Ordering::Relaxed) < n && std::time::Instant::now() < deadline {
        pb.set_position(done.load(Ordering::Relaxed) as u64);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pb.finish_and_clear();
    let drained = now_ms_f64();
    // The callbacks: every batch done once its last ack reached the store.
    stop.send(true)?;
    run.await?.context("the consumer")?;
    let mut called = 0;
    while batched && std::time::Instant::now() < deadline {
        called = b.stats(&cb).await?.due as usize;
        if called >= ids.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let last_callback = now_ms_f64();
    sweep.abort();
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    for id in ids.iter().take(1) {
        let info = b.batch(&q, id).await?.context("the batch")?;
        anyhow::ensure!(info.counts.succeeded == PER_BATCH.min(n) as u64, "{info:?}");
    }
    let note = if batched {
        format!(
            "enqueue {:.0} jobs/s; {called} of {} callbacks {:.0} ms after the last job ended",
            n as f64 / ((enqueued - started) / 1000.0),
            ids.len(),
            last_callback - drained
        )
    } else {
        format!(
            "enqueue {:.0} jobs/s",
            n as f64 / ((enqueued - started) / 1000.0)
        )
    };
    let row = Row {
        workload: "batches".into(),
        variant: if batched {
            format!("{PER_BATCH} jobs a batch with a callback, concurrency 50")
        } else {
            format!("the same jobs enqueued {PER_BATCH} a call, no batch (baseline)")
        },
        n,
        jobs_per_s: Some(n as f64 / ((drained - enqueued) / 1000.0)),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: Some(note),
        ..Row::default()
    };
    env.reset().await?;
    Ok(row)
}
