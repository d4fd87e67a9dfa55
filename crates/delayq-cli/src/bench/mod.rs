//! `delayq bench`: the workloads of docs/BENCHMARKS.md, run exactly as written there,
//! with the redis-benchmark ceiling measured in the same run and the server's cost per job.
//!
//! Without `--redis` it starts its own `redis-server` (`--save '' --appendonly no`, the rest
//! default), pins it to CPU 0 and itself and its worker processes to CPU 1.

mod batches;
mod breakdown;
mod cancel;
mod cold;
mod env;
mod flows;
mod keys;
mod push;
mod queues;
mod tx;
pub(crate) mod util;
mod workloads;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use serde::Serialize;

use env::{Ceiling, Env};
use workloads::Drain;

/// Arguments of `delayq bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Workload to run.
    #[arg(long, value_enum, default_value = "all")]
    pub workload: Workload,
    /// Jobs per workload where the workloads (docs/BENCHMARKS.md) say 100,000 (W1, W2, W4,
    /// W6's due jobs, W7).
    #[arg(long, default_value_t = 100_000)]
    pub n: usize,
    /// Backlogs of W6, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,1000000,10000000")]
    pub backlog: Vec<usize>,
    /// Write one JSON object per workload run to this file (JSON lines).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run on embedded stores in a temporary directory (W1, W2, W3, W5).
    #[arg(long, conflicts_with = "flush_ok")]
    pub embedded: bool,
    /// With --redis: allow FLUSHALL of that server before and after each workload.
    #[arg(long)]
    pub flush_ok: bool,
    /// Shards of the bench queue (Redis): W1, W2, W3 on a sharded queue.
    #[arg(long, default_value_t = 1)]
    pub shards: u32,
    /// Start a local Redis Cluster of this many masters (every node on CPU 0) instead of one
    /// server; reports Redis CPU per job summed over masters and each master's share.
    #[arg(long, conflicts_with_all = ["embedded", "flush_ok"])]
    pub cluster: Option<usize>,
    /// Give job i the priority i mod 10 (what priorities cost a queue that uses them).
    #[arg(long)]
    pub priorities: bool,
    /// Give every job of W1, W2 and W4 one delay (the middle of the workload's range), as a
    /// queue like "cancel the unpaid order after 30 minutes" has.
    #[arg(long)]
    pub one_delay: bool,
    /// Give the bench queue the one-delay lane (Redis; `QueueSettings::lane`).
    #[arg(long, conflicts_with = "embedded")]
    pub lane: bool,
    /// With --lane: the width of its time windows in ms (default 10,000; 100 puts W2's and
    /// W3's jobs in windows, which their claims move to the sorted sets).
    #[arg(long, requires = "lane")]
    pub lane_window: Option<u32>,
    /// The consumers' prefetch.
    #[arg(long, default_value_t = delayq::consumer::DEFAULT_PREFETCH)]
    pub prefetch: usize,
    /// In-process consumers return a result of this many bytes per job, kept by a queue that
    /// keeps done jobs for 10 minutes (what results cost a queue that uses them); with 0 and
    /// --keep-done, what the retention alone costs.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=65_535))]
    pub result_bytes: u32,
    /// The bench queue keeps done jobs for 10 minutes (implied by --result-bytes).
    #[arg(long)]
    pub keep_done: bool,
}

/// The workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Workload {
    /// Enqueue.
    W1,
    /// Drain.
    W2,
    /// Lateness.
    W3,
    /// Memory per job.
    W4,
    /// Crash.
    W5,
    /// Backlog.
    W6,
    /// Burst.
    W7,
    /// HTTP push to a local receiver: drain and lateness (not part of `all`).
    Push,
    /// One consumer over two backlogged queues, weights 3:1: drain rate and the heavy
    /// queue's share (not part of `all`).
    Multi,
    /// Fairness among keys: key A with n jobs and key B with 100 due together, one consumer
    /// at concurrency 16, with keys and without (not part of `all`).
    Fair,
    /// Batches of 1,000 jobs with a callback each against the same jobs enqueued plainly:
    /// enqueue and drain rates, cost per job, callback delay (not part of `all`).
    Batches,
    /// Cancelling running jobs: time from the cancel to the handler hearing of it (not part
    /// of `all`).
    Cancel,
    /// Every job of one key: list, move and cancel 10 keys of 100 jobs among `n` of other
    /// keys — time and store cost per call (not part of `all`).
    Keys,
    /// Jobs that wait for other jobs: three-step chains and fan-ins of 10 against the same
    /// jobs without dependencies (not part of `all`).
    Flows,
    /// Enqueue inside a PostgreSQL transaction (`SELECT delayq.enqueue(…)`), relayed into
    /// the store: commits/s and commit-to-store latency, 1 and 8 connections, and 8 paced at
    /// 2,000/s (not part of `all`; starts its own PostgreSQL).
    Tx,
    /// The cold tier: `n` jobs due over a year kept in PostgreSQL (Redis memory, PostgreSQL
    /// bytes per job), then moved into Redis (jobs/s) (not part of `all`).
    Cold,
    /// Where an awaited enqueue's time goes, layer by layer (Redis; not part of `all`).
    Breakdown,
    /// All of them (W1-W7).
    All,
}

/// One workload run, with the field names of docs/BENCHMARKS.md.
#[derive(Serialize, Default, Debug, Clone)]
pub(crate) struct Row {
    system: &'static str,
    workload: String,
    variant: String,
    n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    jobs_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jobs_per_s_all: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reps_jobs_per_s: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_per_job: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dbsize: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p90_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p99_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unique: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicates: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lost: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_before_kill: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kill_to_last_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_done_after_due_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    backlog: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_empty_backlog: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redis_cpu_us_per_job: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redis_cmds_per_job: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ceiling_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ceiling_jobs_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_ceiling: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_share_by_master: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shards: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    redis_version: String,
    placement: String,
}

impl Row {
    /// The row with the lateness of its jobs (`pc`, ms) and the tally of those handled
    /// (distinct, repeated, never seen).
    pub(crate) fn lateness(
        mut self,
        pc: crate::percentiles::Percentiles,
        (unique, duplicates, missing): (usize, usize, usize),
    ) -> Self {
        self.p50_ms = Some(pc.p50);
        self.p90_ms = Some(pc.p90);
        self.p99_ms = Some(pc.p99);
        self.max_ms = Some(pc.max);
        self.min_ms = Some(pc.min);
        self.unique = Some(unique);
        self.duplicates = Some(duplicates);
        self.missing = Some(missing);
        self
    }
}

/// Runs `delayq bench`.
pub(crate) async fn run(
    redis: Option<String>,
    wait_replicas: u32,
    a: BenchArgs,
) -> anyhow::Result<u8> {
    if a.embedded && redis.is_some() {
        bail!("give --redis URL or --embedded, not both");
    }
    util::PRIORITIES.store(a.priorities, std::sync::atomic::Ordering::Relaxed);
    util::PREFETCH.store(a.prefetch, std::sync::atomic::Ordering::Relaxed);
    util::ONE_DELAY.store(a.one_delay, std::sync::atomic::Ordering::Relaxed);
    util::RESULT_BYTES.store(
        a.result_bytes as usize,
        std::sync::atomic::Ordering::Relaxed,
    );
    if redis.is_some() && !a.flush_ok {
        bail!("every workload runs FLUSHALL: pass --flush-ok to allow it on the given server");
    }
    let (env, ceiling) = if a.embedded {
        let env = Env::embedded()?;
        eprintln!(
            "delayq bench: {} (W1, W2, W3 and W5 run here)",
            env.placement
        );
        (env, Ceiling::default())
    } else {
        let mut env = Env::new(redis, a.shards, a.cluster).await?;
        if a.lane {
            env.lane = true;
            env.lane_window_ms = a.lane_window;
            env.placement = format!("{}; queue with the one-delay lane", env.placement);
        }
        env.wait_replicas = wait_replicas;
        if a.keep_done || a.result_bytes > 0 {
            env.keep_done = true;
            env.placement = format!(
                "{}; queue keeps done jobs 10 min, result {} B",
                env.placement, a.result_bytes
            );
        }
        if wait_replicas > 0 {
            env.placement = format!("{}; --wait-replicas {wait_replicas}", env.placement);
        }
        eprintln!(
            "delayq bench: Redis {} at {} — {}",
            env.redis_version,
            delayq_redis::mask(&env.url),
            env.placement
        );
        if env.is_cluster() {
            eprintln!("no redis-benchmark ceiling on a cluster");
            return run_workloads(env, Ceiling::default(), a).await;
        }
        eprintln!("measuring the ceiling (redis-benchmark)…");
        let ceiling = Ceiling::measure(&mut env).await?;
        eprintln!(
            "ceiling: zadd {} /s, zadd -P 16 {} /s, zadd -c 1 {} /s, eval {} /s",
            fmt_rate(ceiling.zadd),
            fmt_rate(ceiling.zadd_p16),
            fmt_rate(ceiling.zadd_c1),
            fmt_rate(ceiling.eval)
        );
        (env, ceiling)
    };
    run_workloads(env, ceiling, a).await
}

async fn run_workloads(mut env: Env, ceiling: Ceiling, a: BenchArgs) -> anyhow::Result<u8> {
    let redis_only = !env.is_embedded();
    let mut json = match &a.json {
        Some(p) => Some(std::fs::File::create(p)?),
        None => None,
    };
    let want = |w: Workload| {
        a.workload == w
            || (a.workload == Workload::All
                && !matches!(
                    w,
                    Workload::Push
                        | Workload::Multi
                        | Workload::Fair
                        | Workload::Batches
                        | Workload::Cancel
                        | Workload::Keys
                        | Workload::Flows
                        | Workload::Tx
                        | Workload::Cold
                ))
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut emit = |mut batch: Vec<Row>, env: &Env| -> anyhow::Result<()> {
        for r in &mut batch {
            r.system = "delayq";
            r.redis_version = env.redis_version.clone();
            r.placement = env.placement.clone();
            r.shards = (env.shards > 1).then_some(env.shards);
            if a.one_delay && ["w1", "w2", "w4"].contains(&r.workload.as_str()) {
                r.variant.push_str(", one delay");
            }
            if env.lane {
                r.variant.push_str(", lane");
                if let Some(w) = env.lane_window_ms {
                    r.variant.push_str(&format!(" ({w}-ms windows)"));
                }
            }
            if r.redis_cpu_us_per_job.is_some() {
                r.cpu_share_by_master = env.spread.clone();
            }
            if let (Some(v), Some(c)) = (r.jobs_per_s, r.ceiling_jobs_per_s) {
                r.ratio_to_ceiling = Some(v / c);
            }
            print_row(r);
            if let Some(f) = json.as_mut() {
                writeln!(f, "{}", serde_json::to_string(r)?)?;
            }
        }
        rows.extend(batch);
        Ok(())
    };
    if want(Workload::W1) {
        emit(workloads::w1(&mut env, &ceiling, a.n).await?, &env)?;
    }
    if want(Workload::W4) && redis_only {
        emit(workloads::w4(&mut env, a.n).await?, &env)?;
    }
    if want(Workload::W2) {
        for how in [
            Drain::InProcess(1),
            Drain::InProcess(4),
            Drain::InProcess(50),
            Drain::Processes(4),
        ] {
            if matches!(how, Drain::Processes(_)) && !redis_only {
                // One process owns an embedded store.
                continue;
            }
            let mut row = workloads::drain(&mut env, a.n, how, 0).await?;
            if let Drain::InProcess(1) = how {
                row.ceiling_name = Some("zadd -c 1".into());
                row.ceiling_jobs_per_s = ceiling.zadd_c1;
            }
            emit(vec![row], &env)?;
        }
    }
    if want(Workload::W3) {
        for (idle, label) in [(500, "warm (idle 0.5 s)"), (15_000, "idle 15 s")] {
            let row = workloads::w3(&mut env, Duration::from_millis(idle), label).await?;
            emit(vec![row], &env)?;
        }
    }
    if want(Workload::W5) {
        emit(vec![workloads::w5(&mut env).await?], &env)?;
    }
    if want(Workload::W6) && redis_only {
        let mut empty = None;
        for &backlog in &a.backlog {
            let mut row = workloads::drain(&mut env, a.n, Drain::InProcess(50), backlog).await?;
            row.workload = "w6".into();
            row.variant = format!("backlog {backlog}");
            if backlog == 0 {
                empty = row.jobs_per_s;
            }
            row.ratio_to_empty_backlog = empty.zip(row.jobs_per_s).map(|(e, v)| v / e);
            emit(vec![row], &env)?;
        }
    }
    if want(Workload::W7) && redis_only {
        emit(vec![workloads::w7(&mut env, a.n).await?], &env)?;
    }
    if want(Workload::Multi) {
        for c in [1, 50] {
            emit(vec![queues::weighted(&mut env, a.n, c).await?], &env)?;
        }
    }
    if want(Workload::Fair) {
        for keyed in [true, false] {
            emit(vec![queues::fair(&mut env, a.n, keyed).await?], &env)?;
        }
    }
    if want(Workload::Batches) {
        for batched in [true, false] {
            emit(vec![batches::batches(&mut env, a.n, batched).await?], &env)?;
        }
    }
    if want(Workload::Cancel) {
        emit(
            vec![cancel::cancel_running(&mut env, a.n.min(1000)).await?],
            &env,
        )?;
    }
    if want(Workload::Flows) {
        let chains = a.n.min(10_000);
        for with_deps in [true, false] {
            emit(vec![flows::flows(&mut env, chains, with_deps).await?], &env)?;
        }
    }
    if want(Workload::Tx) {
        for (conns, rate) in [(1, None), (8, None), (8, Some(2000.0))] {
            emit(vec![tx::tx(&mut env, a.n, conns, rate).await?], &env)?;
        }
    }
    if want(Workload::Cold) && redis_only {
        emit(cold::cold(&mut env, a.n).await?, &env)?;
    }
    if want(Workload::Keys) {
        emit(keys::keys(&mut env, a.n).await?, &env)?;
    }
    if want(Workload::Push) {
        emit(push::push(&mut env, a.n).await?, &env)?;
    }
    if want(Workload::Breakdown) && redis_only {
        emit(breakdown::breakdown(&mut env, a.n).await?, &env)?;
    }
    Ok(0)
}

fn fmt_rate(r: Option<f64>) -> String {
    r.map_or("n/a".into(), |r| format!("{r:.0}"))
}

fn print_row(r: &Row) {
    let mut parts = Vec::new();
    if let Some(v) = r.jobs_per_s {
        parts.push(format!("{v:.0} jobs/s"));
    }
    if let Some(v) = r.jobs_per_s_all {
        parts.push(format!("{v:.0} jobs/s incl. start-up"));
    }
    if let (Some(x), Some(c)) = (r.ratio_to_ceiling, &r.ceiling_name) {
        parts.push(format!("{x:.2} x {c}"));
    }
    if let Some(v) = r.bytes_per_job {
        parts.push(format!("{v:.0} B/job, dbsize {}", r.dbsize.unwrap_or(0)));
    }
    if let (Some(p50), Some(p99), Some(max)) = (r.p50_ms, r.p99_ms, r.max_ms) {
        parts.push(format!(
            "lateness p50 {p50:.2} p99 {p99:.2} max {max:.2} ms"
        ));
    }
    if let Some(v) = r.last_done_after_due_s {
        parts.push(format!("last done {v:.2} s after due"));
    }
    if let Some(v) = r.completed_before_kill {
        parts.push(format!("{v} before kill"));
    }
    if let Some(v) = r.kill_to_last_s {
        parts.push(format!("kill→last {v:.2} s"));
    }
    if let Some(v) = r.lost {
        parts.push(format!("lost {v}"));
    }
    if let (Some(u), Some(d), Some(m)) = (r.unique, r.duplicates, r.missing) {
        parts.push(format!("unique {u} dup {d} missing {m}"));
    }
    if let Some(v) = r.ratio_to_empty_backlog {
        parts.push(format!("{v:.2} x empty backlog"));
    }
    if let (Some(c), Some(k)) = (r.redis_cpu_us_per_job, r.redis_cmds_per_job) {
        parts.push(format!("redis {c:.1} µs/job {k:.2} cmds/job"));
    }
    if let Some(s) = &r.cpu_share_by_master {
        let s: Vec<String> = s.iter().map(|x| format!("{:.0}%", x * 100.0)).collect();
        parts.push(format!("CPU by master {}", s.join("/")));
    }
    if let Some(n) = &r.note {
        parts.push(format!("({n})"));
    }
    println!(
        "{:<4} {:<28} n={:<8} {}",
        r.workload,
        r.variant,
        r.n,
        parts.join(" | ")
    );
}
