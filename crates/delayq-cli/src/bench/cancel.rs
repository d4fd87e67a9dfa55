//! What cancelling a running job takes (issue 47): `n` due jobs all running at once in one
//! in-process consumer (concurrency `n`), each handler waiting on its job's cancellation; each
//! job cancelled in turn with `cancel_running`. Reports the time from the cancel's answer to
//! the handler's wake-up (p50 / p99 / max) — at most the consumer's check period
//! (`delayq::cancellation::CHECK_EVERY`, 500 ms) and a round trip — and the store's cost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::{
    CancelOutcome, Consumer, ConsumerOptions, Inspect, Job, JobId, NewJob, Producer, QueueName,
};

use super::Row;
use super::env::{Env, per_job};
use crate::percentiles::percentiles;

/// Enqueues `n` due jobs, runs them all, cancels each while it runs.
pub(super) async fn cancel_running(env: &mut Env, n: usize) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let before = env.cost().await?;
    let q = QueueName::new("bench-cancel")?;
    let p = Producer::new(b.clone(), q.clone());
    let ids: Vec<JobId> = (0..n)
        .map(|i| JobId::new(format!("export-{i}")))
        .collect::<Result<_, _>>()?;
    let jobs = ids
        .iter()
        .map(|id| NewJob::new(b"{}".to_vec()).id(id.clone()))
        .collect();
    p.enqueue_batch(jobs).await?;
    let started: Arc<Mutex<usize>> = Arc::default();
    let heard: Arc<Mutex<HashMap<JobId, Instant>>> = Arc::default();
    let opts = ConsumerOptions {
        concurrency: n,
        prefetch: 0,
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(b.clone(), q.clone(), opts)?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let (s, h) = (started.clone(), heard.clone());
    let run = tokio::spawn(c.run(
        move |j: Job| {
            let (s, h) = (s.clone(), h.clone());
            async move {
                *s.lock().unwrap() += 1;
                j.cancellation.cancelled().await;
                h.lock().unwrap().insert(j.id.clone(), Instant::now());
                Ok::<(), String>(())
            }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    while *started.lock().unwrap() < n {
        anyhow::ensure!(Instant::now() < deadline, "not every job started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut asked = HashMap::new();
    for id in &ids {
        let out = p.cancel_running(id).await?;
        asked.insert(id.clone(), Instant::now());
        anyhow::ensure!(out == CancelOutcome::Cancelling, "{id}: {out:?}");
        // Spread over the check period, as cancels arrive in practice.
        tokio::time::sleep(Duration::from_millis(7)).await;
    }
    while heard.lock().unwrap().len() < n {
        anyhow::ensure!(
            Instant::now() < deadline,
            "not every handler heard of its cancel"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.send(true)?;
    let report = run.await?.context("the consumer")?;
    anyhow::ensure!(
        report.cancelled == n as u64 && report.acked == 0,
        "{report:?}"
    );
    anyhow::ensure!(
        b.stats(&q).await?.leased == 0,
        "a cancelled job is still leased"
    );
    let heard = heard.lock().unwrap().clone();
    let took: Vec<f64> = ids
        .iter()
        .map(|id| (heard[id] - asked[id]).as_secs_f64() * 1000.0)
        .collect();
    let pc = percentiles(took);
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    env.reset().await?;
    Ok(Row {
        workload: "cancel".into(),
        variant: format!("{n} running jobs, each cancelled while it runs (one consumer)"),
        n,
        p50_ms: Some(pc.p50),
        p90_ms: Some(pc.p90),
        p99_ms: Some(pc.p99),
        max_ms: Some(pc.max),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: Some("time from the cancel's answer to the handler hearing of it".into()),
        ..Row::default()
    })
}
