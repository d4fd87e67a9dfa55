//! `delayq bench --workload push`: HTTP push to a local receiver that answers 204 at once —
//! a drain of `n` due jobs (W2's shape: jobs/s, Redis CPU and commands per job) and the
//! lateness of 2,000 jobs due over 20 s while the pusher runs (W3's shape: receive time minus
//! due time, measured at the receiver).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::{Due, NewJob, Producer, Target};
use delayq_push::{HostLimits, Pusher, PusherOptions};
use delayq_test_support::receiver::{OnRequest, Received, Receiver};

use super::Row;
use super::env::{Env, per_job};
use super::util::{bar, now_ms_f64, percentiles, queue};

/// Requests in flight per queue and per host: the pusher's default per-queue concurrency,
/// and no host limit below it (the receiver is ours).
const CONCURRENCY: usize = 64;

fn pushed(i: usize, url: &str, schedule: Due) -> NewJob {
    NewJob::new(format!("{{\"order\":{i}}}"))
        .id(delayq::JobId::new(super::util::order_id(i)).expect("valid id"))
        .due(schedule)
        .target(Target::post(url))
}

fn pusher(b: crate::backend::AnyBackend) -> anyhow::Result<Pusher<crate::backend::AnyBackend>> {
    Ok(Pusher::new(
        b,
        PusherOptions {
            // Signed, as in production: the HMAC of each request is part of the cost.
            secrets: vec![
                delayq_push::Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
                    .expect("a valid secret"),
            ],
            allow_private: true,
            concurrency: CONCURRENCY,
            hosts: HostLimits {
                concurrency: CONCURRENCY,
                per_s: 1e9,
                burst: 1_000_000,
            },
            queues: Some(vec![queue()]),
            ..PusherOptions::default()
        },
    )?)
}

/// Lateness (ms) of each request as it arrives: now − `delayq-due-at`.
fn lateness_hook(into: Arc<Mutex<Vec<f64>>>) -> OnRequest {
    Arc::new(move |r: &Received| {
        if let Some(due) = r
            .header("delayq-due-at")
            .and_then(delayq::rfc3339::parse_ms)
        {
            into.lock().unwrap().push(now_ms_f64() - due as f64);
        }
    })
}

/// The drain and the lateness run.
pub(super) async fn push(env: &mut Env, n: usize) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    // Drain: n due jobs enqueued first, then one pusher.
    env.reset().await?;
    let rx = Receiver::start_with(false, None).await;
    let url = rx.url("/nocontent");
    let b = env.backend().await?;
    let p = Producer::new(b.clone(), queue());
    let pb = bar(n, "push enqueue");
    for start in (0..n).step_by(1000) {
        let end = (start + 1000).min(n);
        p.enqueue_batch((start..end).map(|i| pushed(i, &url, Due::Now)).collect())
            .await?;
        pb.inc((end - start) as u64);
    }
    pb.finish_and_clear();
    let before = env.cost().await?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let t = Instant::now();
    let run = tokio::spawn(pusher(b.clone())?.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    let pb = bar(n, "push drain");
    let deadline = Instant::now() + Duration::from_secs(600);
    while rx.count() < n as u64 && Instant::now() < deadline {
        pb.set_position(rx.count());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    // Let the last acks ride their claim before stopping.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(true);
    run.await?;
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    let got = rx.count() as usize;
    rows.push(Row {
        workload: "push".into(),
        variant: format!("drain, concurrency {CONCURRENCY}"),
        n,
        jobs_per_s: Some(got.min(n) as f64 / secs),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        note: (got != n).then(|| format!("{got} requests for {n} jobs")),
        ..Row::default()
    });
    drop(rx);

    // Lateness: 2,000 jobs due over 20 s, 5 s from now, the pusher already running.
    env.reset().await?;
    let late = Arc::new(Mutex::new(Vec::new()));
    let rx = Receiver::start_with(false, Some(lateness_hook(late.clone()))).await;
    let url = rx.url("/nocontent");
    let b = env.backend().await?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(pusher(b.clone())?.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    let m = 2000;
    let first = now_ms_f64() + 5_000.0;
    let p = Producer::new(b.clone(), queue());
    let before = env.cost().await?;
    for i in 0..m {
        let due = first + 20_000.0 * (i as f64 + 0.5) / m as f64;
        p.enqueue(pushed(i, &url, Due::At(due.round() as u64)))
            .await?;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while rx.count() < m as u64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(true);
    run.await?;
    let (cpu, cmds) = per_job(before, env.cost().await?, m);
    let pc = percentiles(late.lock().unwrap().clone());
    rows.push(Row {
        workload: "push".into(),
        variant: "lateness (W3 shape)".into(),
        n: m,
        p50_ms: Some(pc.p50),
        p90_ms: Some(pc.p90),
        p99_ms: Some(pc.p99),
        max_ms: Some(pc.max),
        min_ms: Some(pc.min),
        redis_cpu_us_per_job: cpu,
        redis_cmds_per_job: cmds,
        ..Row::default()
    });
    env.reset().await?;
    Ok(rows)
}
