//! Server time of a look-up and a cancel by id on a queue with the one-delay lane and on one
//! without (ARCHITECTURE.md, "The lane"): fills N (default 100,000) W4-shaped jobs of one delay,
//! then times 10,000 `get`s and 10,000 `cancel`s of ids spread over the queue by the server's
//! `INFO commandstats` (EVALSHA µs per call).
//!
//! With `cancels` it measures the headline use instead ("cancel the unpaid order": most jobs
//! are cancelled before they are due): N jobs due in 3 s, nine in ten cancelled, what the
//! cancelled ones still cost in memory, then the drain of the rest by claims of 64.
//!
//! `cargo run --release -p delayq-redis --example lane_ops -- redis://127.0.0.1:PORT lane|sets [N] [cancels]`
//! (it runs FLUSHALL on that server).
use delayq::{Backend, ClaimRequest, Inspect, JobId, NewJob, Producer, QueueName, QueueSettings};
use std::time::{Duration, Instant};

mod common;
use common::job_in;

fn job(i: usize) -> NewJob {
    job_in(i, 5_400_000)
}

async fn used_memory(c: &mut redis::aio::MultiplexedConnection) -> f64 {
    let s: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(c)
        .await
        .unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// N jobs due in 3 s, nine in ten cancelled (spread over the queue), then the rest drained.
async fn cancels(
    b: &delayq_redis::RedisBackend,
    c: &mut redis::aio::MultiplexedConnection,
    q: &QueueName,
    n: usize,
) {
    let p = Producer::new(b.clone(), q.clone());
    let base = used_memory(c).await;
    let start = Instant::now();
    for k in (0..n).step_by(1000) {
        let jobs = (k..(k + 1000).min(n)).map(|i| job_in(i, 3000)).collect();
        p.enqueue_batch(jobs).await.unwrap();
    }
    let full = used_memory(c).await;
    let mut cancelled = 0;
    for i in (0..n).filter(|i| i % 10 != 0) {
        b.cancel(q, &JobId::new(format!("1{i:019}")).unwrap())
            .await
            .unwrap();
        cancelled += 1;
    }
    let after = used_memory(c).await;
    let per_job = (full - base) / n as f64;
    let freed = (full - after) / cancelled as f64;
    println!(
        "{n} jobs: {per_job:.1} B a job; {cancelled} cancelled in {:.1} s, {freed:.1} B freed a cancel: \
         a cancelled job still costs {:.1} B until its due time; {:.2} MB in all",
        start.elapsed().as_secs_f64(),
        per_job - freed,
        (after - base) / 1e6
    );
    tokio::time::sleep(Duration::from_millis(3000).saturating_sub(start.elapsed())).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (c0, u0) = usec(c).await;
    let t = Instant::now();
    let (mut got, mut claims, mut acks) = (0, 0, vec![]);
    while got < n - cancelled {
        let req = ClaimRequest {
            max: 64,
            lease: Duration::from_secs(30),
            acks: std::mem::take(&mut acks),
        };
        let batch = b.claim(q, req).await.unwrap();
        claims += 1;
        got += batch.jobs.len();
        acks = batch.jobs.iter().map(|j| j.to_ack()).collect();
    }
    let wall = t.elapsed().as_secs_f64();
    let (c1, u1) = usec(c).await;
    println!(
        "drained {got} in {wall:.3} s ({:.0} jobs/s) by {claims} claims: {:.1} µs a claim on the server",
        got as f64 / wall,
        (u1 - u0) / (c1 - c0)
    );
}

async fn usec(c: &mut redis::aio::MultiplexedConnection) -> (f64, f64) {
    let s: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(c)
        .await
        .unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha"))
        .unwrap();
    let f = |k: &str| -> f64 {
        line.split([',', ':'])
            .find_map(|p| p.strip_prefix(k))
            .unwrap()
            .parse()
            .unwrap()
    };
    (f("calls="), f("usec="))
}

#[tokio::main]
async fn main() {
    let url = std::env::args().nth(1).unwrap();
    let lane = std::env::args().nth(2).as_deref() == Some("lane");
    let n: usize = std::env::args()
        .nth(3)
        .map_or(100_000, |s| s.parse().expect("N: a number of jobs"));
    let b = delayq_redis::RedisBackend::connect(&url).await.unwrap();
    let mut c = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
    let cancel_mode = std::env::args().nth(4).as_deref() == Some("cancels");
    let q = QueueName::new("ops").unwrap();
    b.configure(
        &q,
        QueueSettings {
            lane,
            ..QueueSettings::default()
        },
    )
    .await
    .unwrap();
    if cancel_mode {
        return cancels(&b, &mut c, &q, n).await;
    }
    let p = Producer::new(b.clone(), q.clone());
    for k in (0..n).step_by(1000) {
        p.enqueue_batch((k..k + 1000).map(job).collect())
            .await
            .unwrap();
    }
    let ids: Vec<JobId> = (0..10_000)
        .map(|i| JobId::new(format!("1{:019}", (i * 7919) % n)).unwrap())
        .collect();
    let (c0, u0) = usec(&mut c).await;
    for id in &ids {
        assert!(b.get(&q, id).await.unwrap().is_some());
    }
    let (c1, u1) = usec(&mut c).await;
    for id in &ids {
        b.cancel(&q, id).await.unwrap();
    }
    let (c2, u2) = usec(&mut c).await;
    println!(
        "{} get {:.2} µs/call, cancel {:.2} µs/call (server, EVALSHA)",
        if lane { "lane" } else { "sorted sets" },
        (u1 - u0) / (c1 - c0),
        (u2 - u1) / (c2 - c1)
    );
}
