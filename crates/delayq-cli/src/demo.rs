//! `delayq demo`: the order-timeout story, runnable by a newcomer. Orders get a payment window;
//! most are paid (their timeout job is cancelled, and the cancel says whether it won the race);
//! a consumer cancels the unpaid ones when their window closes; one order's handler keeps
//! failing, is retried, then dead-lettered.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::postgres::Served as AnyBackend;
use delayq::{
    Backoff, CancelOutcome, Consumer, ConsumerOptions, Failure, Inspect, Job, JobId, NewJob,
    Producer, QueueName,
};
use indicatif::{ProgressBar, ProgressStyle};
use rand::Rng;
use tokio::sync::watch;

#[derive(Default)]
struct Tally {
    paid: usize,
    paid_too_late: usize,
    timed_out: usize,
    failures: usize,
    lateness_ms: Vec<f64>,
}

/// Runs the demo with `orders` orders.
pub(crate) async fn run(backend: AnyBackend, orders: usize) -> anyhow::Result<u8> {
    let queue = QueueName::new(format!("demo-orders-{}", std::process::id()))?;
    let producer = Producer::new(backend.clone(), queue.clone());
    let tally = Arc::new(Mutex::new(Tally::default()));
    println!("delayq demo: {orders} orders, each with a payment window of 1-6 s, on queue {queue}");
    println!("  most customers pay (cancelling the order's timeout job); the rest time out and a");
    println!("  consumer cancels those orders; order 'cursed' has a handler that always fails.\n");

    // The consumer that cancels unpaid orders when their window closes.
    let (stop, stop_rx) = watch::channel(false);
    let consumer = {
        let opts = ConsumerOptions {
            concurrency: 8,
            lease: Duration::from_secs(10),
            trace_mode: crate::otlp::trace_mode(),
            ..ConsumerOptions::default()
        };
        let c = Consumer::new(backend.clone(), queue.clone(), opts)?;
        let t = tally.clone();
        tokio::spawn(c.run(
            move |job: Job| {
                let t = t.clone();
                async move {
                    let late = delayq::job::system_now_ms().saturating_sub(job.due_at_ms) as f64;
                    if job.id.as_str() == "cursed" {
                        t.lock().expect("tally").failures += 1;
                        return Err(Failure::retry(format!(
                            "payment provider returned 500 (attempt {})",
                            job.attempt
                        )));
                    }
                    let mut t = t.lock().expect("tally");
                    t.timed_out += 1;
                    t.lateness_ms.push(late);
                    Ok(())
                }
            },
            async move {
                let mut rx = stop_rx;
                let _ = rx.wait_for(|v| *v).await;
            },
        ))
    };

    // Place the orders.
    let mut windows = Vec::with_capacity(orders);
    let mut jobs = Vec::with_capacity(orders + 1);
    {
        let mut rng = rand::rng();
        for i in 0..orders {
            let window = Duration::from_millis(rng.random_range(1000..6000));
            windows.push(window);
            let payload =
                serde_json::json!({"order": i, "amount_cents": rng.random_range(500..50_000)});
            jobs.push(
                NewJob::json(&payload)?
                    .id(JobId::new(format!("order-{i}"))?)
                    .delay(window),
            );
        }
    }
    jobs.push(
        NewJob::new(b"{\"order\":\"cursed\"}".to_vec())
            .id(JobId::new("cursed")?)
            .delay(Duration::from_millis(500))
            .max_attempts(3)
            .backoff(Backoff::Fixed { delay_ms: 300 }),
    );
    producer.enqueue_batch(jobs).await?;

    // Customers: 80% pay, at a random moment; some of them after their window closed.
    let mut payers = Vec::new();
    {
        let mut rng = rand::rng();
        for (i, window) in windows.iter().enumerate() {
            if rng.random_bool(0.8) {
                let at =
                    Duration::from_millis(rng.random_range(200..window.as_millis() as u64 + 800));
                let p = producer.clone();
                let t = tally.clone();
                payers.push(tokio::spawn(async move {
                    tokio::time::sleep(at).await;
                    let id = JobId::new(format!("order-{i}")).expect("valid id");
                    match p.cancel(&id).await {
                        Ok(CancelOutcome::Cancelled) => t.lock().expect("tally").paid += 1,
                        Ok(_) => t.lock().expect("tally").paid_too_late += 1,
                        Err(e) => eprintln!("payment of order {i} failed: {e}"),
                    }
                }));
            }
        }
    }

    let pb = ProgressBar::new(orders as u64);
    pb.set_style(ProgressStyle::with_template(
        "{bar:40} {pos}/{len} orders settled  {msg}",
    )?);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    // Off a terminal the bar is hidden: a line every 5 s says how it goes instead.
    let plain = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut said = tokio::time::Instant::now();
    loop {
        let (settled, msg) = {
            let t = tally.lock().expect("tally");
            (
                t.paid + t.timed_out,
                format!(
                    "paid {} | timed out {} | paid too late {} | failed attempts {}",
                    t.paid, t.timed_out, t.paid_too_late, t.failures
                ),
            )
        };
        pb.set_position(settled.min(orders) as u64);
        if plain && said.elapsed() >= Duration::from_secs(5) {
            said = tokio::time::Instant::now();
            println!("  {settled}/{orders} orders settled: {msg}");
        }
        pb.set_message(msg);
        let dead = backend.stats(&queue).await?.dead;
        if (settled >= orders && dead >= 1) || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pb.finish();
    for p in payers {
        let _ = p.await;
    }
    let _ = stop.send(true);
    consumer.await??;

    let dead = backend
        .list(
            &queue,
            delayq::ListRequest::new(delayq::ListState::Dead, 10, None),
        )
        .await?
        .jobs;
    let t = std::mem::take(&mut *tally.lock().expect("tally"));
    let late = crate::percentiles::percentiles(t.lateness_ms.clone());
    println!("\nsummary");
    println!("  orders placed                 {orders}");
    println!("  paid in time (cancel won)     {}", t.paid);
    println!("  cancelled by the timeout job  {}", t.timed_out);
    println!(
        "    of which paid too late      {} (the payment came after the timeout ran)",
        t.paid_too_late
    );
    println!(
        "  timeout lateness              p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        late.p50, late.p90, late.p99, late.max
    );
    for d in &dead {
        println!(
            "  dead letter                   {} after {} attempts: {}",
            d.id,
            d.attempt,
            d.last_error.as_deref().unwrap_or("")
        );
    }
    backend.dead_purge(&queue).await?;
    let ok = t.paid + t.timed_out == orders && dead.len() == 1;
    println!(
        "\n{}",
        if ok {
            "every order was settled exactly once; the dead letter was purged."
        } else {
            "some orders were not settled within 60 s"
        }
    );
    Ok(if ok { 0 } else { 1 })
}
