//! The cold tier (issue 48): `n` jobs due over a year enqueued into a queue with a one-hour
//! `cold_after_ms`, in batches of 1,000, through the tier (PostgreSQL started by the bench,
//! beside Redis on CPU 0, `fsync` off). Reports the enqueue rate, how much Redis memory grew
//! (it should not: every job is in PostgreSQL), PostgreSQL's bytes per job (the tier's tables
//! and indexes), then the move rate into Redis: the window widened to cover every job, the
//! mover (one process) moves them all.

use std::time::Instant;

use delayq::{Due, Inspect, QueueName};
use delayq_postgres::Tiered;

use super::Row;
use super::env::Env;
use super::util::job;

/// Runs the workload.
pub(super) async fn cold(env: &mut Env, n: usize) -> anyhow::Result<Vec<Row>> {
    env.reset().await?;
    let b = env.backend().await?;
    let (pg, opts) = super::tx::postgres().await?;
    let c = opts.connect(None).await?;
    let t = Tiered::new(b.clone(), opts.pool(4)?);
    let q = QueueName::new("bench-cold")?;
    let cold = t.cold().expect("a tier");
    cold.set_cold_after(&q, Some(3_600_000)).await?;
    let mem_before = env.used_memory().await?;
    let now = delayq::job::system_now_ms();
    let year = 365 * 24 * 3_600_000u64;
    let p = delayq::Producer::new(t.clone(), q.clone());
    let t0 = Instant::now();
    for start in (0..n).step_by(1000) {
        let jobs = (start..(start + 1000).min(n))
            .map(|i| {
                // Spread over a year from two hours on, by a fixed stride.
                let due = now + 2 * 3_600_000 + (i as u64 * 7_919_993) % year;
                job(i, Due::At(due))
            })
            .collect();
        p.enqueue_batch(jobs).await?;
    }
    let enqueue_s = t0.elapsed().as_secs_f64();
    let mem_after = env.used_memory().await?;
    anyhow::ensure!(cold.count(&q).await? == n as u64, "not every job went cold");
    let bytes: i64 = c
        .query_one(
            "SELECT sum(pg_total_relation_size(inhrelid))::int8 FROM pg_inherits \
             WHERE inhparent = 'delayq.cold'::regclass",
            &[],
        )
        .await?
        .get(0);
    let partitions: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'delayq.cold'::regclass",
            &[],
        )
        .await?
        .get(0);
    // Every job into the window: the mover moves them all.
    cold.set_cold_after(&q, Some(2 * year)).await?;
    let t1 = Instant::now();
    let mut moved = 0;
    while moved < n {
        let m = t.move_due().await?;
        anyhow::ensure!(m > 0, "the mover moved nothing with {moved} of {n} moved");
        moved += m;
    }
    let move_s = t1.elapsed().as_secs_f64();
    anyhow::ensure!(
        b.stats(&q).await?.scheduled as usize == n,
        "not every job reached Redis"
    );
    env.reset().await?;
    drop((t, c));
    drop(pg);
    let grew = mem_after.saturating_sub(mem_before);
    Ok(vec![
        Row {
            workload: "cold".into(),
            variant: format!(
                "enqueue into the cold tier (due over a year, window 1 h, batches of 1,000; \
                 {partitions} monthly partitions)"
            ),
            n,
            jobs_per_s: Some(n as f64 / enqueue_s),
            note: Some(format!(
                "Redis memory grew {grew} bytes; PostgreSQL {:.0} bytes per job",
                bytes as f64 / n as f64
            )),
            ..Row::default()
        },
        Row {
            workload: "cold".into(),
            variant: "move every job into Redis (one mover, batches of 5,000)".into(),
            n,
            jobs_per_s: Some(n as f64 / move_s),
            ..Row::default()
        },
    ])
}
