//! W1–W7 of docs/BENCHMARKS.md, each as written there.

use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::{Due, NewJob, Producer};
use rand::{Rng, SeedableRng};

use super::Row;
use super::env::{Ceiling, Env, per_job};
use super::util::{
    Recorder, WorkerProcess, bar, fill, job, now_ms_f64, percentiles, queue, read_records, tally,
};

const SEED: u64 = 0x00de_1a70;

/// The delays of `n` jobs, uniform in `[lo_ms, hi_ms]` (seeded); with `--one-delay` all the
/// middle of the range.
pub(super) fn delays(n: usize, lo_ms: u64, hi_ms: u64) -> Vec<u64> {
    if super::util::ONE_DELAY.load(std::sync::atomic::Ordering::Relaxed) {
        return vec![lo_ms.midpoint(hi_ms); n];
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    (0..n).map(|_| rng.random_range(lo_ms..=hi_ms)).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// W1: enqueue, awaited one by one and in batches of 1,000 (also with one delay per batch, as
/// ChasquiMQ's bulk enqueue takes); median of 3 repetitions.
pub(super) async fn w1(env: &mut Env, ceiling: &Ceiling, n: usize) -> anyhow::Result<Vec<Row>> {
    let d = delays(n, 3_600_000, 7_200_000);
    let mut rows = Vec::new();
    // The third variant is not docs/BENCHMARKS.md's: ChasquiMQ's bulk enqueue takes one delay per call,
    // so its anchor schedules each batch with its first job's delay; the same here measures
    // what per-job due times cost a batch (inserts spread over the whole due index). Nor is the
    // fourth: 50 producers sharing the connection, each awaiting its single enqueues (a web
    // server enqueuing one job per request, 50 requests at a time).
    for (variant, batch, producers, one_delay) in [
        ("awaited", 1usize, 1usize, false),
        ("batch-1000", 1000, 1, false),
        (
            "batch-1000, one delay per batch (as ChasquiMQ's)",
            1000,
            1,
            true,
        ),
        ("awaited, 50 producers at once", 1, 50, false),
    ] {
        let mut rates = Vec::new();
        let mut cost = (None, None);
        for rep in 0..3 {
            env.reset().await?;
            let b = env.backend().await?;
            let p = Producer::new(b, queue());
            let jobs: Vec<_> = (0..n)
                .map(|i| {
                    let at = if one_delay { i - i % batch } else { i };
                    job(i, Due::Delay(Duration::from_millis(d[at])))
                })
                .collect();
            let pb = bar(n, &format!("W1 {variant} rep {}", rep + 1));
            let before = env.cost().await?;
            let t = Instant::now();
            if batch == 1 {
                // `producers` tasks on the one connection, each awaiting its single enqueues
                // (job k is task k mod producers's).
                let mut each: Vec<Vec<NewJob>> = (0..producers).map(|_| Vec::new()).collect();
                for (k, j) in jobs.into_iter().enumerate() {
                    each[k % producers].push(j);
                }
                let tasks: Vec<_> = each
                    .into_iter()
                    .map(|mine| {
                        let (p, pb) = (p.clone(), pb.clone());
                        tokio::spawn(async move {
                            for (k, j) in mine.into_iter().enumerate() {
                                p.enqueue(j).await?;
                                if k % 1000 == 999 {
                                    pb.inc(1000);
                                }
                            }
                            Ok::<_, delayq::Error>(())
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await??;
                }
            } else {
                let mut it = jobs.into_iter().peekable();
                while it.peek().is_some() {
                    let chunk: Vec<_> = it.by_ref().take(batch).collect();
                    pb.inc(chunk.len() as u64);
                    p.enqueue_batch(chunk).await?;
                }
            }
            let secs = t.elapsed().as_secs_f64();
            cost = per_job(before, env.cost().await?, n);
            pb.finish_and_clear();
            rates.push(n as f64 / secs);
        }
        let (ceiling_name, ceiling_rate) = if producers > 1 {
            ("zadd", ceiling.zadd)
        } else if batch == 1 {
            ("zadd -c 1", ceiling.zadd_c1)
        } else {
            ("zadd -P 16", ceiling.zadd_p16)
        };
        rows.push(Row {
            workload: "w1".into(),
            variant: variant.into(),
            n,
            jobs_per_s: Some(median(rates.clone())),
            reps_jobs_per_s: Some(rates),
            redis_cpu_us_per_job: cost.0,
            redis_cmds_per_job: cost.1,
            ceiling_name: Some(ceiling_name.into()),
            ceiling_jobs_per_s: ceiling_rate,
            ..Row::default()
        });
    }
    env.reset().await?;
    Ok(rows)
}

/// W4: memory per delayed job after W1's enqueue.
pub(super) async fn w4(env: &mut Env, n: usize) -> anyhow::Result<Vec<Row>> {
    env.reset().await?;
    let d = delays(n, 3_600_000, 7_200_000);
    let b = env.backend().await?;
    // Client set-up done (connection, scripts loaded by a first call on an empty queue).
    delayq::Inspect::stats(&b, &queue()).await?;
    let base = env.used_memory().await?;
    let before = env.cost().await?;
    fill(&b, 0..n, "W4 enqueue", |i| {
        Due::Delay(Duration::from_millis(d[i]))
    })
    .await?;
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    let after = env.used_memory().await?;
    let row = Row {
        workload: "w4".into(),
        variant: "100-byte payload".into(),
        n,
        bytes_per_job: Some((after.saturating_sub(base)) as f64 / n as f64),
        dbsize: Some(env.dbsize().await?),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        ..Row::default()
    };
    env.reset().await?;
    Ok(vec![row])
}

/// How W2 consumes.
#[derive(Clone, Copy)]
pub(super) enum Drain {
    /// One in-process consumer with this concurrency.
    InProcess(usize),
    /// This many `delayq worker` processes, concurrency 50 each.
    Processes(usize),
}

/// W2: drain `n` due jobs; `backlog` far-future jobs sit in the same queue (W6).
pub(super) async fn drain(
    env: &mut Env,
    n: usize,
    how: Drain,
    backlog: usize,
) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let before = env.cost().await?;
    if backlog > 0 {
        // Far-future jobs (30-60 days), indices after the due ones.
        fill(&b, n..n + backlog, "W6 backlog", |i| {
            Due::Delay(Duration::from_millis(
                30 * 86_400_000 + (i as u64 % 1000) * 86_400,
            ))
        })
        .await?;
    }
    let d = delays(n, 1000, 2000);
    let enq_start = now_ms_f64();
    fill(&b, 0..n, "W2 enqueue", |i| {
        Due::Delay(Duration::from_millis(d[i]))
    })
    .await?;
    // Wait until all are due.
    let all_due = enq_start + 2000.0 + 50.0;
    let wait = (all_due - now_ms_f64()).max(0.0);
    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    let timeout = Duration::from_secs(300);
    let (variant, started, records): (String, f64, Vec<(usize, f64)>) = match how {
        Drain::InProcess(c) => {
            let r = Recorder::start(env.backend().await?, c)
                .await
                .context("starting the consumer")?;
            let started = r.started_ms;
            r.wait_for(n, timeout, &format!("W2 drain c={c}")).await;
            let recs = r.stop().await.context("stopping the consumer")?;
            (
                format!("concurrency {c}"),
                started,
                recs.into_iter().map(|(i, t, _)| (i, t)).collect(),
            )
        }
        Drain::Processes(k) => {
            let dir = tempfile::tempdir()?;
            let started = now_ms_f64();
            let mut workers = Vec::new();
            for w in 0..k {
                let f = dir.path().join(format!("w{w}.txt"));
                workers.push(WorkerProcess::start(env, &f, 50, "30s", 0)?);
            }
            let files: Vec<_> = workers.iter().map(|w| w.file.clone()).collect();
            let pb = bar(n, &format!("W2 drain {k} procs"));
            let deadline = Instant::now() + timeout;
            loop {
                let (unique, _, _) = tally(read_records(&files).into_iter().map(|r| r.0), n);
                pb.set_position(unique as u64);
                if unique >= n || Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            pb.finish_and_clear();
            for w in workers {
                tokio::task::spawn_blocking(move || w.stop()).await?;
            }
            (
                format!("{k} processes x concurrency 50"),
                started,
                read_records(&files),
            )
        }
    };
    let (cpu, cmds) = per_job(before, env.cost().await?, n + backlog);
    let (unique, duplicates, missing) = tally(records.iter().map(|r| r.0), n);
    let first = records.iter().map(|r| r.1).fold(f64::MAX, f64::min);
    let last = records.iter().map(|r| r.1).fold(0.0, f64::max);
    let leftover = delayq::Inspect::stats(&b, &queue()).await?;
    let row = Row {
        workload: if backlog > 0 { "w6" } else { "w2" }.into(),
        variant,
        n,
        jobs_per_s: Some(unique as f64 / ((last - first) / 1000.0)),
        jobs_per_s_all: Some(unique as f64 / ((last - started) / 1000.0)),
        unique: Some(unique),
        duplicates: Some(duplicates),
        missing: Some(missing),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        backlog: Some(backlog),
        note: (leftover.leased + leftover.due > 0).then(|| {
            format!(
                "left unacked: {} leased, {} due",
                leftover.leased, leftover.due
            )
        }),
        ..Row::default()
    };
    env.reset().await?;
    Ok(row)
}

/// W3: lateness of 2,000 jobs spread over 20 s, the consumer running for `idle` first.
pub(super) async fn w3(env: &mut Env, idle: Duration, label: &str) -> anyhow::Result<Row> {
    env.reset().await?;
    let n = 2000;
    let b = env.backend().await?;
    let p = Producer::new(b, queue());
    let lead = Duration::from_secs(5);
    let before = env.cost().await?;
    // t_first = t_enq + 5 s; the consumer starts at t_first - idle.
    let mut consumer = None;
    let early_start = idle.saturating_sub(lead);
    if idle > lead {
        consumer = Some(Recorder::start(env.backend().await?, 1).await?);
        tokio::time::sleep(early_start).await;
    }
    let t_enq = now_ms_f64();
    let t_first = t_enq + lead.as_millis() as f64;
    let start_at = t_first - idle.as_millis() as f64;
    // With time windows (--lane-window) the jobs come in a scattered order (7,919 is prime to
    // n), so that all but the first lane jobs wait in windows, not in the one-delay lane.
    let scattered = env.lane_window_ms.is_some();
    for k in 0..n {
        let i = if scattered { k * 7_919 % n } else { k };
        let due = t_first + 20_000.0 * (i as f64 + 0.5) / n as f64;
        p.enqueue(job(i, Due::At(due.round() as u64))).await?;
        if consumer.is_none() && now_ms_f64() >= start_at {
            consumer = Some(Recorder::start(env.backend().await?, 1).await?);
        }
    }
    let enqueue_done = now_ms_f64();
    if consumer.is_none() {
        let wait = (start_at - now_ms_f64()).max(0.0);
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        consumer = Some(Recorder::start(env.backend().await?, 1).await?);
    }
    let c = consumer.expect("started");
    let ok = c
        .wait_for(n, Duration::from_secs(20 + 5 + 30), &format!("W3 {label}"))
        .await;
    let recs = c.stop().await?;
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    let lateness: Vec<f64> = recs.iter().map(|(_, at, due)| at - *due as f64).collect();
    let pc = percentiles(lateness);
    let (unique, duplicates, missing) = tally(recs.iter().map(|r| r.0), n);
    let mut note = Vec::new();
    if enqueue_done > t_first {
        note.push("enqueue not over before t_first".to_owned());
    }
    if !ok {
        note.push("timed out".to_owned());
    }
    env.reset().await?;
    let variant = if scattered {
        format!("{label}, enqueued in a scattered order")
    } else {
        label.into()
    };
    Ok(Row {
        workload: "w3".into(),
        variant,
        n,
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: (!note.is_empty()).then(|| note.join("; ")),
        ..Row::default()
    }
    .lateness(pc, (unique, duplicates, missing)))
}

/// W5: a consumer process SIGKILLed mid-run, a fresh one started.
pub(super) async fn w5(env: &mut Env) -> anyhow::Result<Row> {
    env.reset().await?;
    let n = 1000;
    let b = env.backend().await?;
    let before = env.cost().await?;
    fill(&b, 0..n, "W5 enqueue", |_| {
        Due::Delay(Duration::from_secs(1))
    })
    .await?;
    // Worker processes own the store from here on (the embedded store has one owner).
    drop(b);
    env.release();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("done.txt");
    let mut first = WorkerProcess::start(env, &file, 1, "5s", 20)?;
    let files = vec![file.clone()];
    let deadline = Instant::now() + Duration::from_secs(120);
    while read_records(&files).len() < 300 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    first.child.kill()?; // SIGKILL
    let t_kill = now_ms_f64();
    first.child.wait()?;
    let before_kill: std::collections::HashSet<usize> = read_records(&files)
        .into_iter()
        .filter(|r| r.1 <= t_kill)
        .map(|r| r.0)
        .collect();
    let second = WorkerProcess::start(env, &file, 1, "5s", 20)?;
    let pb = bar(n, "W5 recovery");
    loop {
        let (unique, _, _) = tally(read_records(&files).into_iter().map(|r| r.0), n);
        pb.set_position(unique as u64);
        if unique >= n || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pb.finish_and_clear();
    tokio::task::spawn_blocking(move || second.stop()).await?;
    let recs = read_records(&files);
    let (unique, _, missing) = tally(recs.iter().map(|r| r.0), n);
    let mut count = vec![0u32; n];
    for r in &recs {
        count[r.0] += 1;
    }
    let twice = count.iter().filter(|c| **c >= 2).count();
    let last = recs.iter().map(|r| r.1).fold(0.0, f64::max);
    // The job in flight at the kill: not completed before it, and whose lease had to expire.
    let first_after: Vec<f64> = (0..n)
        .filter(|i| !before_kill.contains(i))
        .filter_map(|i| {
            recs.iter()
                .filter(|r| r.0 == i)
                .map(|r| r.1)
                .reduce(f64::min)
        })
        .collect();
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    env.reset().await?;
    Ok(Row {
        workload: "w5".into(),
        variant: "5 s lease".into(),
        n,
        completed_before_kill: Some(before_kill.len()),
        unique: Some(unique),
        lost: Some(missing),
        missing: Some(missing),
        duplicates: Some(twice),
        kill_to_last_s: Some((last - t_kill) / 1000.0),
        note: Some(format!(
            "{} jobs were left after the kill; the 5 s lease bounds the recovery of the one in flight",
            first_after.len()
        )),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        ..Row::default()
    })
}

/// W7: 100,000 jobs due in the same second, a concurrency-50 consumer already running.
pub(super) async fn w7(env: &mut Env, n: usize) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let c = Recorder::start(env.backend().await?, 50).await?;
    let before = env.cost().await?;
    let due = (now_ms_f64() + 3000.0).round() as u64;
    let t = Instant::now();
    fill(&b, 0..n, "W7 enqueue", |_| Due::At(due)).await?;
    let enqueue_s = t.elapsed().as_secs_f64();
    c.wait_for(n, Duration::from_secs(120), "W7 burst").await;
    let recs = c.stop().await?;
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    let pc = percentiles(recs.iter().map(|(_, at, d)| at - *d as f64).collect());
    let (unique, duplicates, missing) = tally(recs.iter().map(|r| r.0), n);
    let last = recs.iter().map(|r| r.1).fold(0.0, f64::max);
    env.reset().await?;
    Ok(Row {
        workload: "w7".into(),
        variant: "concurrency 50".into(),
        n,
        p50_ms: Some(pc.p50),
        p99_ms: Some(pc.p99),
        max_ms: Some(pc.max),
        min_ms: Some(pc.min),
        last_done_after_due_s: Some((last - due as f64) / 1000.0),
        unique: Some(unique),
        duplicates: Some(duplicates),
        missing: Some(missing),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: (enqueue_s > 3.0)
            .then(|| format!("enqueue took {enqueue_s:.1} s, past the due time")),
        ..Row::default()
    })
}
