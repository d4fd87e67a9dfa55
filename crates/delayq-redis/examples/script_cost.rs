//! A fixed amount of script work for measuring what the scripts cost the server, not the
//! clock: run it against a `redis-server` under `valgrind --tool=callgrind
//! --toggle-collect=evalGenericCommand` and divide the instructions by the jobs. The same
//! program on two builds of the scripts compares them exactly (the VM's speed does not enter).
//!
//! Phases (W1 and W2 of docs/BENCHMARKS.md, smaller): `awaited` enqueues N jobs one call each
//! (delays 1–2 h), `batch` enqueues N in batches of 1,000 (`batch-one-delay`: all due 1.5 h
//! ahead, as ChasquiMQ's bulk enqueue), `drain` enqueues N due jobs in
//! batches and drains them with claims of 64 (`CLAIM=n` in the environment: n) whose acks
//! travel with the next claim.
//!
//! `cargo run --release -p delayq-redis --example script_cost -- redis://127.0.0.1:PORT
//! awaited|batch|batch-one-delay|drain [N]` (it runs FLUSHALL on that server).
use std::time::Duration;

use delayq::{Backend, ClaimRequest, Producer, QueueName};

mod common;
use common::job_in as job;

/// A delay in 1–2 h from a fixed sequence (the same jobs on every run).
fn delay(i: usize) -> u64 {
    3_600_000 + (i as u64).wrapping_mul(2_654_435_761) % 3_600_000
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args.next().expect("a redis:// URL");
    let phase = args.next().expect("awaited, batch or drain");
    let n: usize = args.next().map_or(10_000, |s| s.parse().expect("N"));
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
    let b = delayq_redis::RedisBackend::connect(&url).await.unwrap();
    let q = QueueName::new("cost").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    match phase.as_str() {
        "awaited" => {
            for i in 0..n {
                p.enqueue(job(i, delay(i))).await.unwrap();
            }
        }
        "batch" => {
            for start in (0..n).step_by(1000) {
                let jobs = (start..(start + 1000).min(n)).map(|i| job(i, delay(i)));
                p.enqueue_batch(jobs.collect()).await.unwrap();
            }
        }
        "batch-one-delay" => {
            for start in (0..n).step_by(1000) {
                let jobs = (start..(start + 1000).min(n)).map(|i| job(i, 5_400_000));
                p.enqueue_batch(jobs.collect()).await.unwrap();
            }
        }
        "drain" => {
            for start in (0..n).step_by(1000) {
                let jobs = (start..(start + 1000).min(n)).map(|i| job(i, 0));
                p.enqueue_batch(jobs.collect()).await.unwrap();
            }
            let mut done = 0;
            let mut acks = Vec::new();
            while done < n {
                let req = ClaimRequest {
                    max: std::env::var("CLAIM")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(64),
                    lease: Duration::from_secs(60),
                    acks: std::mem::take(&mut acks),
                };
                let got = b.claim(&q, req).await.unwrap();
                done += got.jobs.len();
                acks = got.jobs.iter().map(|j| j.to_ack()).collect();
            }
            b.ack(&q, acks).await.unwrap();
        }
        other => panic!("unknown phase {other}"),
    }
    println!("{phase}: {n} jobs");
}
