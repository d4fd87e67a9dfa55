//! Server time of a look-up and a cancel by id on a queue with the one-delay lane and on one
//! without (docs/BENCHMARKS-LANE.md): fills N (default 100,000) W4-shaped jobs of one delay,
//! then times 10,000 `get`s and 10,000 `cancel`s of ids spread over the queue by the server's
//! `INFO commandstats` (EVALSHA µs per call).
//!
//! `cargo run --release -p delayq-redis --example lane_ops -- redis://127.0.0.1:PORT lane|sets [N]`
//! (it runs FLUSHALL on that server).
use delayq::{Backend, Inspect, JobId, NewJob, Producer, QueueName, QueueSettings, Schedule};
use std::time::Duration;

fn job(i: usize) -> NewJob {
    let id = format!("1{i:019}");
    let payload = format!(
        r#"{{"orderId":"{id}","action":"cancel","pad":"{}"}}"#,
        "x".repeat(39)
    );
    NewJob::new(payload.into_bytes())
        .id(JobId::new(id).unwrap())
        .schedule(Schedule::Delay(Duration::from_secs(5400)))
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
