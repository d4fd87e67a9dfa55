//! The order-timeout story in Rust, over a `delayq serve`: every new order gets a job that
//! cancels it if it is still unpaid after a while; a payment cancels that job; a worker
//! (`delayq::Consumer` over `delayq_client::RemoteBackend`) cancels the unpaid ones when their
//! time comes.
//!
//! `cargo run -p delayq-client --example order_timeout -- http://127.0.0.1:7070 10 3 300`
//! (server, orders, paid, timeout in ms). Prints what happened as JSON and exits once every
//! unpaid order is cancelled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{CancelOutcome, Consumer, ConsumerOptions, Failure, Job, QueueName};
use delayq_client::wire::{EnqueueRequest, RunOptions};
use delayq_client::{Client, RemoteBackend};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).map_or("http://127.0.0.1:7070", String::as_str);
    let orders: usize = args.get(2).map_or(Ok(10), |a| a.parse())?;
    let paid: usize = args.get(3).map_or(Ok(3), |a| a.parse())?;
    let timeout_ms: f64 = args.get(4).map_or(Ok(30.0 * 60_000.0), |a| a.parse())?;
    let queue = format!("order-timeouts-{}", std::process::id());
    let client = Client::new(url);

    // On order creation: schedule its cancellation. The order id is the job id, so a retried
    // request schedules one job.
    for n in 0..orders {
        let id = format!("order-{n}");
        let payload = serde_json::value::to_raw_value(&serde_json::json!({ "order_id": id }))?;
        let job = EnqueueRequest {
            id: Some(id),
            payload: Some(payload),
            delay_ms: Some(timeout_ms),
            run: RunOptions {
                max_attempts: Some(5),
                ..RunOptions::default()
            },
            ..EnqueueRequest::default()
        };
        client.enqueue(&queue, job).await?;
    }
    // On payment: the timeout must not fire any more.
    let mut payments = serde_json::Map::new();
    for n in 0..paid {
        let id = format!("order-{n}");
        let outcome = match client.cancel(&queue, &id).await? {
            CancelOutcome::Cancelled => "cancelled",
            CancelOutcome::Leased | CancelOutcome::Cancelling => "too late: running now",
            CancelOutcome::Dead | CancelOutcome::NotFound => "too late: already ran",
        };
        payments.insert(id, outcome.into());
    }

    // The worker: cancel each unpaid order when its time comes.
    let cancelled = Arc::new(Mutex::new(Vec::new()));
    let all_done = Arc::new(tokio::sync::Notify::new());
    let backend = RemoteBackend::new(client.clone());
    let closer = backend.clone();
    let consumer = Consumer::new(
        backend,
        QueueName::new(queue.clone())?,
        ConsumerOptions::default(),
    )?;
    let (seen, done) = (cancelled.clone(), all_done.clone());
    let handler = move |job: Job| {
        let (seen, done) = (seen.clone(), done.clone());
        async move {
            let order: serde_json::Value = job.json()?;
            let mut seen = seen.lock().expect("lock");
            seen.push(order["order_id"].as_str().unwrap_or_default().to_owned());
            if seen.len() == orders - paid {
                done.notify_one();
            }
            Ok::<(), Failure>(())
        }
    };
    consumer
        .run(handler, async move {
            all_done.notified().await;
            closer.close().await; // cut the waiting claim short
        })
        .await?;
    tokio::time::sleep(Duration::ZERO).await;
    let mut cancelled = cancelled.lock().expect("lock").clone();
    cancelled.sort();
    let left = client.queue(&queue).await?.scheduled;
    let out = serde_json::json!({"created": orders, "payments": payments, "cancelled": cancelled, "left": left});
    println!("{out}");
    Ok(())
}
