//! The client drain benchmark (docs/BENCHMARKS.md, "Clients"), Rust side: enqueue N no-op jobs
//! (not timed), then one `delayq::Consumer` at concurrency C drains them, over HTTP through
//! `RemoteBackend` or directly on Redis (the library without a server); prints jobs/s as JSON.
//!
//! `cargo run --release -p delayq-client --example drain -- remote http://127.0.0.1:7070 [jobs] [concurrency]`
//! `cargo run --release -p delayq-client --example drain -- direct redis://127.0.0.1:6379 [jobs] [concurrency]`
//!
//! And the client enqueue benchmark: N enqueues awaited one by one, due in an hour.
//! `cargo run --release -p delayq-client --example drain -- enqueue http://127.0.0.1:7070 [jobs]`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use delayq::{
    Backend, Consumer, ConsumerOptions, Failure, Job, JobId, NewJob, Producer, QueueName,
};
use delayq_client::{Client, RemoteBackend};

/// Drains the queue; `close` is called once the last job is handled (a remote backend cuts its
/// long poll short there). Timed from the first claim to the last job handled.
async fn drain<B: Backend>(
    backend: B,
    label: &str,
    jobs: usize,
    concurrency: usize,
    close: impl Future<Output = ()> + Send,
) {
    let queue = QueueName::new(format!("drain-rs-{}", std::process::id())).unwrap();
    let producer = Producer::new(backend.clone(), queue.clone());
    let pad = "x".repeat(39);
    for start in (0..jobs).step_by(1000) {
        let batch = (start..(start + 1000).min(jobs))
            .map(|k| {
                let id = format!("1{k:019}");
                let body = format!(r#"{{"orderId":"{id}","action":"cancel","pad":"{pad}"}}"#);
                NewJob::new(body.into_bytes()).id(JobId::new(id).unwrap())
            })
            .collect();
        producer.enqueue_batch(batch).await.unwrap();
    }
    let done = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(tokio::sync::Notify::new());
    let opts = ConsumerOptions {
        concurrency,
        ..ConsumerOptions::default()
    };
    let consumer = Consumer::new(backend, queue, opts).unwrap();
    let start = Instant::now();
    let end = Arc::new(std::sync::Mutex::new(None));
    let (d, f, e) = (done.clone(), finished.clone(), end.clone());
    consumer
        .run(
            move |_job: Job| {
                let (d, f, e) = (d.clone(), f.clone(), e.clone());
                async move {
                    if d.fetch_add(1, Ordering::Relaxed) + 1 == jobs {
                        *e.lock().unwrap() = Some(Instant::now());
                        f.notify_one();
                    }
                    Ok::<(), Failure>(())
                }
            },
            async move {
                finished.notified().await;
                close.await;
            },
        )
        .await
        .unwrap();
    let s = (end.lock().unwrap().expect("every job handled") - start).as_secs_f64();
    println!(
        r#"{{"client":"{label}","jobs":{jobs},"concurrency":{concurrency},"seconds":{s:.3},"jobs_per_s":{}}}"#,
        (jobs as f64 / s).round()
    );
}

/// `jobs` enqueues through `url`, each awaited before the next.
async fn enqueue(url: &str, jobs: usize) {
    let client = Client::new(url);
    let queue = format!("enqueue-rs-{}", std::process::id());
    let hour = std::time::Duration::from_secs(3600);
    let job = |n: usize| {
        delayq_client::Job::json(
            &serde_json::json!({"orderId": n, "action": "cancel", "pad": "x".repeat(39)}),
        )
        .unwrap()
        .delay(hour)
    };
    client.enqueue(&queue, job(0)).await.unwrap();
    let start = Instant::now();
    for n in 0..jobs {
        client.enqueue(&queue, job(n)).await.unwrap();
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        r#"{{"client":"rust","jobs":{jobs},"seconds":{s:.3},"jobs_per_s":{}}}"#,
        (jobs as f64 / s).round()
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let jobs = args.get(3).map_or(20_000, |a| a.parse().unwrap());
    let concurrency = args.get(4).map_or(16, |a| a.parse().unwrap());
    match args.get(1).map(String::as_str) {
        Some("remote") => {
            let backend = RemoteBackend::new(Client::new(&args[2]));
            let closer = backend.clone();
            let close = async move { closer.close().await };
            drain(backend, "rust (HTTP)", jobs, concurrency, close).await;
        }
        Some("direct") => {
            let backend = delayq_redis::RedisBackend::connect(&args[2]).await.unwrap();
            drain(backend, "rust library (Redis)", jobs, concurrency, async {}).await;
        }
        Some("enqueue") => {
            enqueue(&args[2], args.get(3).map_or(5_000, |a| a.parse().unwrap())).await
        }
        _ => eprintln!(
            "usage: drain remote URL | direct REDIS_URL [jobs] [concurrency] | enqueue URL [jobs]"
        ),
    }
}
