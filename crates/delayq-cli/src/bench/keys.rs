//! Every job of one key (issue 47): 10 keys of 100 jobs among `n` jobs of 10,000 other keys,
//! all scheduled; each of the 10 keys listed (a page of 100), moved (a shift) and cancelled in
//! one call. Reports each call's time (p50 / p99 / max over the 10 keys) and the store's cost
//! per call — which follows the key's 100 jobs, not the queue's `n`.

use std::time::{Duration, Instant};

use delayq::{Inspect, JobKey, KeyJobsRequest, KeyMove, NewJob, Producer, QueueName};

use super::Row;
use super::env::{Env, per_job};
use crate::percentiles::percentiles;

/// Keys measured, and jobs each.
const KEYS: usize = 10;
const PER_KEY: usize = 100;

/// Enqueues the jobs, then lists, moves and cancels each measured key.
pub(super) async fn keys(env: &mut Env, n: usize) -> anyhow::Result<Vec<Row>> {
    env.reset().await?;
    let b = env.backend().await?;
    let q = QueueName::new("bench-keys")?;
    let p = Producer::new(b.clone(), q.clone());
    let hour = Duration::from_secs(3600);
    let job = |k: &JobKey| NewJob::new(b"{}".to_vec()).key(k.clone()).delay(hour);
    let others: Vec<JobKey> = (0..10_000)
        .map(|i| JobKey::new(format!("tenant-{i}")))
        .collect::<Result<_, _>>()?;
    for start in (0..n).step_by(1000) {
        let batch = (start..(start + 1000).min(n))
            .map(|i| job(&others[i % others.len()]))
            .collect();
        p.enqueue_batch(batch).await?;
    }
    let measured: Vec<JobKey> = (0..KEYS)
        .map(|i| JobKey::new(format!("deleted-user-{i}")))
        .collect::<Result<_, _>>()?;
    for k in &measured {
        p.enqueue_batch((0..PER_KEY).map(|_| job(k)).collect())
            .await?;
    }
    let mut rows = Vec::new();
    for what in ["list", "reschedule", "cancel"] {
        let before = env.cost().await?;
        let mut took = Vec::with_capacity(KEYS);
        for k in &measured {
            let t = Instant::now();
            let got = match what {
                "list" => {
                    let req = KeyJobsRequest {
                        state: None,
                        limit: PER_KEY,
                        after: None,
                    };
                    b.key_jobs(&q, k, req).await?.jobs.len() as u64
                }
                "reschedule" => b.reschedule_key(&q, k, KeyMove::Shift(60_000)).await?,
                _ => b.cancel_key(&q, k, false).await?.cancelled,
            };
            took.push(t.elapsed().as_secs_f64() * 1000.0);
            anyhow::ensure!(got == PER_KEY as u64, "{what} {k}: {got} jobs");
        }
        let (cpu, cmds) = per_job(before, env.cost().await?, KEYS);
        let pc = percentiles(took);
        rows.push(Row {
            workload: "keys".into(),
            variant: format!("{what} a key's {PER_KEY} jobs among {n} others"),
            n,
            p50_ms: Some(pc.p50),
            p90_ms: Some(pc.p90),
            p99_ms: Some(pc.p99),
            max_ms: Some(pc.max),
            redis_cpu_us_per_job: cpu,
            redis_cmds_per_job: cmds,
            note: Some("per call (one key); redis columns per call, not per job".into()),
            ..Row::default()
        });
    }
    let left = b.stats(&q).await?;
    anyhow::ensure!(
        left.scheduled + left.due == n as u64,
        "the other keys' jobs stay: {left:?}"
    );
    env.reset().await?;
    Ok(rows)
}
