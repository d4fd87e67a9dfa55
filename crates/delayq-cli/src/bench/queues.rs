//! Beyond one queue (issue 35): the weighted multi-queue drain — two backlogged queues,
//! weights 3 and 1, one in-process consumer over both; how fast it drains and what share of
//! the jobs handled while both were backlogged came from the weight-3 queue (the weights say
//! 0.75) — and fairness among keys (`fair`).

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

/// The fairness workload (issue 35): key A with `n` jobs and key B with 100, all due at the
/// same moment, one in-process consumer at concurrency 16 with a no-op handler. Reports when
/// B's last job started after that moment and A's drain rate; `keyed: false` runs the same
/// jobs without keys (B then waits behind A's backlog), the baseline.
pub(super) async fn fair(env: &mut Env, n: usize, keyed: bool) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let before = env.cost().await?;
    let q = QueueName::new("bench-fair")?;
    // Due together once every job is in: 1 s plus the enqueue's time at 5,000 jobs/s (below
    // the embedded store's pace; Redis waits longer than it needs).
    let at = delayq::job::system_now_ms() + 1000 + (n as u64) / 5;
    let p = delayq::Producer::new(b.clone(), q.clone());
    let key = |k: &str| keyed.then(|| delayq::JobKey::new(k).expect("key"));
    let pb = bar(n + 100, "fairness enqueue");
    for (k, count) in [("A", n), ("B", 100)] {
        let mut i = 0;
        while i < count {
            let end = (i + 1000).min(count);
            let jobs = (i..end)
                .map(|j| {
                    let mut job =
                        delayq::NewJob::new(format!("{k}{j}").into_bytes()).due(Due::At(at));
                    job.key = key(k);
                    job
                })
                .collect();
            p.enqueue_batch(jobs).await?;
            pb.inc((end - i) as u64);
            i = end;
        }
    }
    pb.finish_and_clear();
    let late = delayq::job::system_now_ms().saturating_sub(at);
    anyhow::ensure!(
        late == 0,
        "enqueueing took {late} ms past the due time: fewer jobs"
    );
    // (is B, handler start ms)
    let seen: Arc<Mutex<Vec<(bool, f64)>>> = Arc::default();
    let opts = ConsumerOptions {
        concurrency: 16,
        prefetch: PREFETCH.load(std::sync::atomic::Ordering::Relaxed),
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(b.clone(), q.clone(), opts)?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let log = seen.clone();
    let run = tokio::spawn(c.run(
        move |j: Job| {
            log.lock()
                .expect("lock")
                .push((j.payload.first() == Some(&b'B'), now_ms_f64()));
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let pb = bar(n + 100, "fairness drain");
    loop {
        let done = seen.lock().expect("lock").len();
        pb.set_position(done as u64);
        if done >= n + 100 || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pb.finish_and_clear();
    stop.send(true)?;
    run.await?.context("the consumer")?;
    let (cpu, cmds) = per_job(before, env.cost().await?, n + 100);
    let seen = seen.lock().expect("lock").clone();
    let due = at as f64;
    let b_last = seen
        .iter()
        .filter(|(is_b, _)| *is_b)
        .map(|r| r.1)
        .fold(0.0, f64::max);
    let a: Vec<f64> = seen
        .iter()
        .filter(|(is_b, _)| !*is_b)
        .map(|r| r.1)
        .collect();
    let (a_first, a_last) = (
        a.iter().copied().fold(f64::MAX, f64::min),
        a.iter().copied().fold(0.0, f64::max),
    );
    let row = Row {
        workload: "fair".into(),
        variant: format!(
            "key A {n} jobs, key B 100, due together, concurrency 16, {}",
            if keyed { "keys" } else { "no keys (baseline)" }
        ),
        n: n + 100,
        jobs_per_s: Some(a.len() as f64 / ((a_last - a_first) / 1000.0)),
        unique: Some(seen.len()),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: Some(format!(
            "B's last job started {:.0} ms after the due time; A drained at the rate shown",
            b_last - due
        )),
        ..Row::default()
    };
    env.reset().await?;
    Ok(row)
}
