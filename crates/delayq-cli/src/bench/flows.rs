//! Jobs that wait for other jobs (issue 47): `chains` three-step chains and `chains / 10`
//! fan-ins of 10 enqueued waiting, then drained by one consumer (concurrency 50). Reports the
//! time from a dependent's last dependency's end (its handler returning) to the dependent's
//! start (p50 / p99 / max), and the store's cost per job — beside the same number of plain
//! jobs drained the same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::{Consumer, ConsumerOptions, DepRef, Inspect, Job, JobId, NewJob, Producer, QueueName};

use super::Row;
use super::env::{Env, per_job};
use crate::percentiles::percentiles;

/// Each job with the jobs it waits for.
fn graph(chains: usize) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for i in 0..chains {
        let (a, b, c) = (format!("c{i}a"), format!("c{i}b"), format!("c{i}c"));
        out.push((a.clone(), vec![]));
        out.push((b.clone(), vec![a]));
        out.push((c, vec![b]));
    }
    for i in 0..chains / 10 {
        let parts: Vec<String> = (0..10).map(|k| format!("f{i}p{k}")).collect();
        out.extend(parts.iter().map(|p| (p.clone(), vec![])));
        out.push((format!("f{i}j"), parts));
    }
    out
}

/// Runs the flows (`with_deps`) or the same jobs without dependencies.
pub(super) async fn flows(env: &mut Env, chains: usize, with_deps: bool) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let q = QueueName::new("bench-flows")?;
    let p = Producer::new(b.clone(), q.clone());
    let all = graph(chains);
    let n = all.len();
    let before = env.cost().await?;
    let t0 = Instant::now();
    for chunk in all.chunks(1000) {
        let jobs = chunk
            .iter()
            .map(|(id, deps)| {
                let j = NewJob::new(b"{}".to_vec()).id(JobId::new(id.clone()).unwrap());
                if with_deps && !deps.is_empty() {
                    j.depends_on(deps.iter().map(|d| DepRef {
                        queue: q.clone(),
                        id: JobId::new(d.clone()).unwrap(),
                    }))
                } else {
                    j
                }
            })
            .collect();
        p.enqueue_batch(jobs).await?;
    }
    let enqueue_s = t0.elapsed().as_secs_f64();
    let started: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let ended: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let opts = ConsumerOptions {
        concurrency: 50,
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(b.clone(), q.clone(), opts)?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let (s, e) = (started.clone(), ended.clone());
    let t1 = Instant::now();
    let run = tokio::spawn(c.run(
        move |j: Job| {
            let (s, e) = (s.clone(), e.clone());
            async move {
                s.lock().unwrap().insert(j.id.to_string(), Instant::now());
                e.lock().unwrap().insert(j.id.to_string(), Instant::now());
                Ok::<(), String>(())
            }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    let deadline = Instant::now() + Duration::from_secs(600);
    while started.lock().unwrap().len() < n {
        anyhow::ensure!(Instant::now() < deadline, "not every job ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain_s = t1.elapsed().as_secs_f64();
    stop.send(true)?;
    run.await?.context("the consumer")?;
    anyhow::ensure!(b.stats(&q).await?.awaiting == 0, "jobs left waiting");
    let (started, ended) = (
        started.lock().unwrap().clone(),
        ended.lock().unwrap().clone(),
    );
    let mut took = Vec::new();
    for (id, deps) in &all {
        if deps.is_empty() {
            continue;
        }
        let last = deps.iter().map(|d| ended[d]).max().unwrap();
        anyhow::ensure!(
            !with_deps || started[id] >= last,
            "{id} started before its last dependency ended"
        );
        let ms = started[id].saturating_duration_since(last).as_secs_f64() * 1000.0;
        if std::env::var_os("FLOWS_DEBUG").is_some() && ms > 1000.0 {
            eprintln!("slow {id}: {ms:.0} ms after {deps:?}");
        }
        took.push(ms);
    }
    let pc = percentiles(took);
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    env.reset().await?;
    let what = if with_deps {
        "with dependencies"
    } else {
        "the same jobs without dependencies"
    };
    Ok(Row {
        workload: "flows".into(),
        variant: format!(
            "{chains} three-step chains and {} fan-ins of 10, {what}",
            chains / 10
        ),
        n,
        jobs_per_s: Some(n as f64 / drain_s),
        jobs_per_s_all: Some(n as f64 / (enqueue_s + drain_s)),
        p50_ms: with_deps.then_some(pc.p50),
        p90_ms: with_deps.then_some(pc.p90),
        p99_ms: with_deps.then_some(pc.p99),
        max_ms: with_deps.then_some(pc.max),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: Some(
            "jobs/s: the drain; incl.: enqueue and drain; ms: last dependency's end to the dependent's start"
                .into(),
        ),
        ..Row::default()
    })
}
