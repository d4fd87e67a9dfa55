//! The cold tier (issue 48): `n` jobs due over a year in a queue with a one-hour
//! `cold_after_ms`, PostgreSQL started by the bench (beside Redis on CPU 0, `fsync` off,
//! `shared_buffers` 64 MB). The first million (at most) are enqueued through the tier in
//! batches of 1,000 — a fifth due at random over the year, the rest in due order: the enqueue
//! rates; the rest are written by
//! SQL in the tier's own row format, in due order (a tier filled by jobs that each wait about
//! as long as the last), a million a statement — the fill is not the enqueue path and is
//! reported apart, and so is the `VACUUM (ANALYZE)` that follows it (autovacuum's work over
//! the months a real tier takes to fill, done before the figures below instead of during
//! them). Then: how much Redis memory grew (it should not: every job is in
//! PostgreSQL), PostgreSQL's bytes per job (the tier's tables and indexes), the move rate into
//! Redis (the window widened over about a million jobs, or all of them when fewer, and one
//! mover moving them), and W3's lateness for jobs that went through the tier (2,000 jobs due
//! 70–90 s ahead in a queue with a one-minute window: cold first, moved by a mover running
//! every second, then run by one consumer) with the tier at its full size, beside plain W3
//! (warm) in the same sitting.

use std::time::{Duration, Instant};

use delayq::{Due, Inspect, Producer, QueueName};
use delayq_postgres::Tiered;
use delayq_postgres::tokio_postgres::types::ToSql;

use super::Row;
use super::env::Env;
use super::util::{Recorder, job, now_ms_f64, order_id, percentiles, queue, tally};

/// Jobs enqueued through the tier at most; the rest are filled by SQL.
const THROUGH: usize = 1_000_000;
/// Rows a fill statement writes.
const FILL_CHUNK: usize = 1_000_000;
const HOUR: u64 = 3_600_000;
const YEAR: u64 = 365 * 24 * HOUR;

/// Runs the workload.
pub(super) async fn cold(env: &mut Env, n: usize) -> anyhow::Result<Vec<Row>> {
    env.reset().await?;
    let b = env.backend().await?;
    let (pg, opts) = super::tx::postgres().await?;
    let c = opts.connect(None).await?;
    let t = Tiered::new(b.clone(), opts.pool(4)?);
    let q = QueueName::new("bench-cold")?;
    let cold = t.cold().expect("a tier");
    cold.set_cold_after(&q, Some(HOUR)).await?;
    let mem_before = env.used_memory().await?;
    let now = delayq::job::system_now_ms();
    let through = n.min(THROUGH);
    // The first fifth due at random over the year (inserts all over the tier's indexes), the
    // rest in due order (each job waiting about as long as the last: the common case).
    let random = through / 5;
    let p = Producer::new(t.clone(), q.clone());
    let mut rows = Vec::new();
    for (range, label) in [
        (0..random, "due at random over a year"),
        (random..through, "in due order over a year"),
    ] {
        let count = range.len();
        let t0 = Instant::now();
        for start in range.clone().step_by(1000) {
            let jobs = (start..(start + 1000).min(range.end))
                .map(|i| {
                    let due = if i < random {
                        // A fixed stride over the year.
                        now + 2 * HOUR + (i as u64 * 7_919_993) % YEAR
                    } else {
                        now + 2 * HOUR + ((i - random) as f64 * YEAR as f64 / count as f64) as u64
                    };
                    job(i, Due::At(due))
                })
                .collect();
            p.enqueue_batch(jobs).await?;
        }
        rows.push(Row {
            workload: "cold".into(),
            variant: format!("enqueue into the cold tier, {label} (window 1 h, batches of 1,000)"),
            n: count,
            jobs_per_s: Some(count as f64 / t0.elapsed().as_secs_f64()),
            ..Row::default()
        });
    }
    if n > through {
        let s = fill(&c, &q, now, through, n).await?;
        rows.push(Row {
            workload: "cold".into(),
            variant: "fill by SQL in the tier's row format, in due order (not the enqueue path)"
                .into(),
            n: n - through,
            jobs_per_s: Some((n - through) as f64 / s),
            ..Row::default()
        });
    }
    // The tier at rest: what autovacuum would have done over the months the tier took to
    // fill (its inserts mark pages visible and analyze each partition) done now, not during
    // the move and W3 below — a bulk fill's vacuum backlog on Redis's CPU is not the mover's.
    let t_vac = Instant::now();
    c.batch_execute("VACUUM (ANALYZE) delayq.cold").await?;
    rows.push(Row {
        workload: "cold".into(),
        variant: "VACUUM (ANALYZE) of the filled tier (autovacuum's work, done before measuring)"
            .into(),
        n,
        jobs_per_s: Some(n as f64 / t_vac.elapsed().as_secs_f64()),
        ..Row::default()
    });
    let mem_after = env.used_memory().await?;
    anyhow::ensure!(cold.count(&q).await? == n as u64, "not every job went cold");
    let one = |sql: &'static str| {
        let c = &c;
        async move { anyhow::Ok(c.query_one(sql, &[]).await?.get::<_, i64>(0)) }
    };
    let bytes = one(
        "SELECT sum(pg_total_relation_size(inhrelid))::int8 FROM pg_inherits \
         WHERE inhparent = 'delayq.cold'::regclass",
    )
    .await?;
    let partitions =
        one("SELECT count(*) FROM pg_inherits WHERE inhparent = 'delayq.cold'::regclass").await?;
    let grew = mem_after.saturating_sub(mem_before);
    rows.push(Row {
        workload: "cold".into(),
        variant: format!("held cold ({partitions} monthly partitions)"),
        n,
        note: Some(format!(
            "Redis memory grew {grew} bytes; PostgreSQL {:.0} bytes per job ({:.1} GB)",
            bytes as f64 / n as f64,
            bytes as f64 / 1e9
        )),
        ..Row::default()
    });

    // About a million jobs (or all) into the window: one mover moves them.
    let window = if n <= THROUGH {
        2 * YEAR
    } else {
        2 * HOUR + (YEAR as f64 * THROUGH as f64 / n as f64) as u64
    };
    cold.set_cold_after(&q, Some(window)).await?;
    let t1 = Instant::now();
    let mut moved = 0;
    loop {
        let m = t.move_due().await?;
        if m == 0 {
            break;
        }
        moved += m;
    }
    let move_s = t1.elapsed().as_secs_f64();
    anyhow::ensure!(moved > 0, "the mover moved nothing");
    anyhow::ensure!(
        b.stats(&q).await?.scheduled as usize == moved,
        "not every moved job reached Redis"
    );
    rows.push(Row {
        workload: "cold".into(),
        variant: format!(
            "move into Redis (one mover; the window widened to {:.1} days)",
            window as f64 / 86_400_000.0
        ),
        n: moved,
        jobs_per_s: Some(moved as f64 / move_s),
        ..Row::default()
    });
    // Back to a one-hour window (the mover reads the near partitions only), the moved jobs
    // gone from Redis: W3's queue alone.
    cold.set_cold_after(&q, Some(HOUR)).await?;
    b.cancel_all(&q, delayq::ListState::Scheduled).await?;
    // Plain W3 (warm) in the same sitting, beside it: the host's lateness without the tier.
    rows.push(
        super::workloads::w3(env, Duration::from_millis(500), "warm, the same sitting").await?,
    );
    rows.push(w3_moved(env, &t, n - moved).await?);
    env.reset().await?;
    drop((t, c));
    drop(pg);
    Ok(rows)
}

/// Writes jobs `from..to` into the tier by SQL: the body of job 0 (enqueued through the tier)
/// with each one's id, due evenly over a year from two hours after `now`, in due order.
/// Returns the seconds it took.
async fn fill(
    c: &delayq_postgres::tokio_postgres::Client,
    q: &QueueName,
    now: u64,
    from: usize,
    to: usize,
) -> anyhow::Result<f64> {
    let id0 = order_id(0);
    let body: String = c
        .query_one(
            "SELECT body FROM delayq.cold WHERE queue = $1 AND id = $2",
            &[&q.as_str(), &id0.as_str()],
        )
        .await?
        .get(0);
    for m in 0..=13u32 {
        c.execute(
            "SELECT delayq.cold_partition(to_timestamp($1::float8 / 1000) + $2 * interval '1 month')",
            &[&(now as f64), &(m as f64)],
        )
        .await?;
    }
    let step = YEAR as f64 / (to - from) as f64;
    let first = (now + 2 * HOUR) as f64;
    let t = Instant::now();
    let pb = super::util::bar(to - from, "cold fill");
    for lo in (from..to).step_by(FILL_CHUNK) {
        let hi = (lo + FILL_CHUNK).min(to);
        c.execute(
            "INSERT INTO delayq.cold (queue, id, due_at, body) \
             SELECT $1, id, to_timestamp(($2::float8 + (i - $3)::float8 * $4::float8) / 1000), \
                    replace($5, $6, id) \
             FROM generate_series($7::int8, $8::int8) AS i, \
                  LATERAL (SELECT '1' || lpad(i::text, 19, '0') AS id) AS named",
            &[
                &q.as_str() as &(dyn ToSql + Sync),
                &first,
                &(from as i64),
                &step,
                &body,
                &id0,
                &(lo as i64),
                &(hi as i64 - 1),
            ],
        )
        .await?;
        c.execute(
            "INSERT INTO delayq.cold_counts (queue, slot, n) VALUES ($1, 0, $2) \
             ON CONFLICT (queue, slot) DO UPDATE SET n = delayq.cold_counts.n + excluded.n",
            &[&q.as_str() as &(dyn ToSql + Sync), &((hi - lo) as i64)],
        )
        .await?;
        pb.set_position((hi - from) as u64);
    }
    pb.finish_and_clear();
    Ok(t.elapsed().as_secs_f64())
}

/// W3 through the tier: 2,000 jobs due 70–90 s ahead into a queue with a one-minute window
/// (so each goes cold), a mover every second moving them into Redis once due within the
/// minute, one consumer running them (started half a second before the first is due, as W3
/// warm's); their lateness (start − due).
async fn w3_moved(
    env: &mut Env,
    t: &Tiered<crate::backend::AnyBackend>,
    size: usize,
) -> anyhow::Result<Row> {
    let n = 2000;
    let q = queue();
    let cold = t.cold().expect("a tier");
    cold.set_cold_after(&q, Some(60_000)).await?;
    let p = Producer::new(t.clone(), q.clone());
    let t_first = now_ms_f64() + 70_000.0;
    for i in 0..n {
        let due = t_first + 20_000.0 * (i as f64 + 0.5) / n as f64;
        p.enqueue(job(i, Due::At(due.round() as u64))).await?;
    }
    anyhow::ensure!(
        cold.count(&q).await? == n as u64,
        "W3's jobs did not go cold"
    );
    let (stop, rx) = tokio::sync::watch::channel(false);
    // The mover on a thread and runtime of its own, as in the server process that runs it
    // (`delayq serve` / `worker`), not on the consumer's: the consumer stands for the
    // application's worker.
    let mover = {
        let t = t.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the mover");
            rt.block_on(t.run_mover(Duration::from_secs(1), async move {
                let mut rx = rx;
                let _ = rx.wait_for(|v| *v).await;
            }));
        })
    };
    // Warm, as W3's: the consumer starts half a second before the first job is due.
    let wait = t_first - 500.0 - now_ms_f64();
    tokio::time::sleep(Duration::from_millis(wait.max(0.0) as u64)).await;
    let c = Recorder::start(env.backend().await?, 1).await?;
    let ok = c
        .wait_for(
            n,
            Duration::from_secs(70 + 20 + 30),
            "W3 through the cold tier",
        )
        .await;
    let recs = c.stop().await?;
    let _ = stop.send(true);
    let _ = tokio::task::spawn_blocking(move || mover.join()).await;
    let pc = percentiles(recs.iter().map(|(_, at, due)| at - *due as f64).collect());
    let counts = tally(recs.iter().map(|r| r.0), n);
    cold.set_cold_after(&q, None).await?;
    Ok(Row {
        workload: "cold".into(),
        variant: format!(
            "W3 lateness of jobs moved from the tier (window 1 min, mover every 1 s; tier holding \
             {size} jobs)"
        ),
        n,
        note: (!ok).then(|| "timed out".to_owned()),
        ..Row::default()
    }
    .lateness(pc, counts))
}
