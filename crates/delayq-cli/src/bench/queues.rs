//! The weighted multi-queue drain (issue 35): two backlogged queues, weights 3 and 1, one
//! in-process consumer over both; how fast it drains and what share of the jobs handled while
//! both were backlogged came from the weight-3 queue (the weights say 0.75).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use delayq::{Consumer, ConsumerOptions, Due, Failure, Job, QueueName, QueueOrder};

use super::Row;
use super::env::{Env, per_job};
use super::util::{PREFETCH, bar, fill_in, now_ms_f64};

/// Drains `n` jobs, half in each queue, at `concurrency`.
pub(super) async fn weighted(env: &mut Env, n: usize, concurrency: usize) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let before = env.cost().await?;
    let (heavy, light) = (QueueName::new("bench-a")?, QueueName::new("bench-b")?);
    let half = n / 2;
    fill_in(&b, &heavy, 0..half, "multi-queue enqueue", |_| Due::Now).await?;
    fill_in(&b, &light, half..2 * half, "multi-queue enqueue", |_| {
        Due::Now
    })
    .await?;
    let seen: Arc<Mutex<Vec<(bool, f64)>>> = Arc::default();
    let opts = ConsumerOptions {
        concurrency,
        prefetch: PREFETCH.load(std::sync::atomic::Ordering::Relaxed),
        ..ConsumerOptions::default()
    };
    let queues = vec![(heavy.clone(), 3), (light.clone(), 1)];
    let c = Consumer::over(b.clone(), queues, QueueOrder::Weighted, opts)?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let log = seen.clone();
    let heavy_name = heavy.clone();
    let started = now_ms_f64();
    let run = tokio::spawn(c.run(
        move |j: Job| {
            log.lock()
                .expect("lock")
                .push((j.queue == heavy_name, now_ms_f64()));
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let pb = bar(2 * half, "multi-queue drain");
    loop {
        let done = seen.lock().expect("lock").len();
        pb.set_position(done as u64);
        if done >= 2 * half || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pb.finish_and_clear();
    stop.send(true)?;
    run.await?.context("the consumer")?;
    let (cpu, cmds) = per_job(before, env.cost().await?, 2 * half);
    let seen = seen.lock().expect("lock").clone();
    // While both were backlogged: until the weight-3 queue's last job.
    let both = seen.iter().rposition(|(h, _)| *h).map_or(0, |k| k + 1);
    let share = seen[..both].iter().filter(|(h, _)| *h).count() as f64 / both.max(1) as f64;
    let first = seen.iter().map(|r| r.1).fold(f64::MAX, f64::min);
    let last = seen.iter().map(|r| r.1).fold(0.0, f64::max);
    let row = Row {
        workload: "multi".into(),
        variant: format!("2 queues, weights 3:1, concurrency {concurrency}"),
        n: 2 * half,
        jobs_per_s: Some(seen.len() as f64 / ((last - first) / 1000.0)),
        jobs_per_s_all: Some(seen.len() as f64 / ((last - started) / 1000.0)),
        unique: Some(seen.len()),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: Some(format!(
            "weight-3 share while both were backlogged: {share:.3} of {both} jobs (weights: 0.750)"
        )),
        ..Row::default()
    };
    env.reset().await?;
    Ok(row)
}
