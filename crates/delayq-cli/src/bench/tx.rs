//! Enqueue inside a PostgreSQL transaction (issue 48): `n` jobs, each its own transaction
//! (`BEGIN; SELECT delayq.enqueue(…); COMMIT`, three round trips, as an application does) from
//! `conns` connections at once, relayed into the bench's store by one in-process relay (as a
//! `delayq serve --postgres` runs it). Jobs are W1's (100-byte payload, due in 1-2 hours).
//! Run as fast as the connections go, and paced (a load the machine carries without queueing:
//! the latency a relay adds). Reports the commit rate, the rate at which jobs reach the store, and the time from a
//! transaction's commit returning to its job's creation in the store (the record's
//! `created_at`, the store's clock — the same host's; ms resolution), p50 / p99 / max over a
//! sample of up to 10,000 jobs. PostgreSQL runs beside Redis on CPU 0 (`fsync` off: the
//! figure is delayq's part, not the disk's).

use std::sync::Arc;
use std::time::Instant;

use delayq::{Inspect, JobId, QueueName};

use super::Row;
use super::env::{Env, per_job};
use super::util::{now_ms_f64, order_id};
use crate::percentiles::percentiles;

/// Runs the workload with `conns` producing connections.
pub(super) async fn tx(
    env: &mut Env,
    n: usize,
    conns: usize,
    rate: Option<f64>,
) -> anyhow::Result<Row> {
    env.reset().await?;
    let b = env.backend().await?;
    let (pg, opts) = postgres().await?;
    let relay = delayq_postgres::Relay::new(b.clone(), opts.clone());
    let status = relay.status();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let relaying = tokio::spawn(relay.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    let q = QueueName::new("bench-tx")?;
    let now = now_ms_f64();
    let before = env.cost().await?;
    let committed: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new(
        (0..n)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect(),
    );
    let t0 = Instant::now();
    let mut producers = Vec::new();
    for k in 0..conns {
        let opts = opts.clone();
        let committed = committed.clone();
        producers.push(tokio::spawn(async move {
            let mut c = opts.connect(None).await?;
            let stmt = c
                .prepare(
                    "SELECT delayq.enqueue($1, $2, $3::text::jsonb, \
                     to_timestamp($4::float8 / 1000))",
                )
                .await?;
            let began = tokio::time::Instant::now();
            for (m, i) in (k..n).step_by(conns).enumerate() {
                if let Some(r) = rate {
                    // This connection's share of the rate.
                    let at =
                        began + std::time::Duration::from_secs_f64(m as f64 * conns as f64 / r);
                    tokio::time::sleep_until(at).await;
                }
                let id = order_id(i);
                let payload = format!(
                    r#"{{"orderId":"{id}","action":"cancel","pad":"{}"}}"#,
                    "x".repeat(39)
                );
                // W1's delays: 1-2 hours, spread by a fixed stride.
                let due = now + 3_600_000.0 + ((i * 7_919) % 3_600) as f64 * 1000.0;
                let tx = c.transaction().await?;
                tx.execute(&stmt, &[&"bench-tx", &id, &payload, &due])
                    .await?;
                tx.commit().await?;
                committed[i].store(
                    (now_ms_f64() * 1000.0) as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    for p in producers {
        p.await??;
    }
    let commit_s = t0.elapsed().as_secs_f64();
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    while (b.stats(&q).await?.scheduled as usize) < n {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the relay did not move every job within 2 minutes: {:?} {:?}",
            status.totals(),
            status.problem()
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let all_s = t0.elapsed().as_secs_f64();
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    let step = (n / 10_000).max(1);
    let mut took = Vec::new();
    for i in (0..n).step_by(step) {
        let job = b
            .get(&q, &JobId::new(order_id(i))?)
            .await?
            .ok_or_else(|| anyhow::anyhow!("job {i} missing"))?;
        let at = committed[i].load(std::sync::atomic::Ordering::Relaxed) as f64 / 1000.0;
        took.push((job.created_at_ms as f64 - at).max(0.0));
    }
    let pc = percentiles(took);
    stop.send(true)?;
    let _ = relaying.await;
    anyhow::ensure!(
        status.totals().relayed == n as u64,
        "relayed {:?}",
        status.totals()
    );
    env.reset().await?;
    drop(pg);
    Ok(Row {
        workload: "tx".into(),
        variant: format!(
            "one transaction per job, {conns} connection(s){}; one relay into the store",
            rate.map(|r| format!(" paced at {r:.0}/s"))
                .unwrap_or_default()
        ),
        n,
        jobs_per_s: Some(n as f64 / commit_s),
        jobs_per_s_all: Some(n as f64 / all_s),
        p50_ms: Some(pc.p50),
        p90_ms: Some(pc.p90),
        p99_ms: Some(pc.p99),
        max_ms: Some(pc.max),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: Some(
            "jobs_per_s: commits/s; jobs_per_s_all: into the store; ms: commit → created in \
             the store (ms resolution)"
                .into(),
        ),
        ..Row::default()
    })
}

/// A PostgreSQL server for a workload, beside Redis on CPU 0 (its backends, forked later,
/// inherit that), with a database migrated: the server and the database's options.
pub(super) async fn postgres() -> anyhow::Result<(
    delayq_test_support::postgres::PgServer,
    delayq_postgres::PgOptions,
)> {
    let pg = delayq_test_support::postgres::PgServer::start();
    if let Some(pid) = pg.pid() {
        let _ = std::process::Command::new("taskset")
            .args(["-a", "-cp", "0", &pid.to_string()])
            .output();
    }
    let db = pg.database();
    let opts = delayq_postgres::PgOptions::new(pg.url(&db));
    let mut c = opts.connect(None).await?;
    delayq_postgres::migrate(&mut c).await?;
    Ok((pg, opts))
}
