//! The fast part of the chaos suite: producers and consumers run while consumers are killed
//! (their tasks aborted: leases held, nothing acknowledged or released), writes are paused
//! (`CLIENT PAUSE WRITE`), the server sleeps (`DEBUG SLEEP`), and Redis is SIGKILLed and
//! restarted (`appendfsync always`); every enqueue, lease and ack is recorded in
//! a `History`, and after a final drain the checker must find nothing lost, nothing
//! unexpected, nothing early and no stale ack accepted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::testkit::{Event, History, Recording};
use delayq::{Consumer, ConsumerOptions, Job, JobId, NewJob, Producer, QueueName};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;

fn consumer(b: RedisBackend, h: &History, q: &QueueName) -> tokio::task::JoinHandle<()> {
    let opts = ConsumerOptions {
        concurrency: 8,
        lease: Duration::from_secs(2),
        max_idle: Duration::from_secs(1),
        shutdown_grace: Duration::from_secs(1),
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(Recording::new(b, h.clone()), q.clone(), opts).unwrap();
    tokio::spawn(async move {
        let _ = c
            .run(
                |_job: Job| async {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok::<(), delayq::Failure>(())
                },
                std::future::pending(),
            )
            .await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_pauses_sleeps_and_restarts_lose_nothing_acknowledged() {
    let server = Arc::new(Mutex::new(RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
    ])));
    let url = server.lock().unwrap().url();
    let q = QueueName::new("chaos").unwrap();
    let h = History::default();
    let mut consumers = Vec::new();
    for _ in 0..3 {
        consumers.push(consumer(RedisBackend::connect(&url).await.unwrap(), &h, &q));
    }

    let producer = Producer::new(RedisBackend::connect(&url).await.unwrap(), q.clone());
    let n = 2000;
    for i in 0..n {
        let id = format!("j{i}");
        let job = NewJob::new(id.clone().into_bytes())
            .id(JobId::new(id.clone()).unwrap())
            .delay(Duration::from_millis(rand::random::<u64>() % 1000));
        h.record(Event::Invoke(id.clone()));
        match producer.enqueue(job).await {
            Ok(_) => h.record(Event::Ok(id)),
            Err(e) if e.is_retryable() => h.record(Event::Unknown(id)),
            Err(_) => h.record(Event::Fail(id)),
        }
        // Faults: a consumer killed every 400 jobs, Redis restarted once.
        if i % 400 == 399 {
            h.record(Event::Fault(format!("kill consumer at job {i}")));
            let victim = consumers.remove(0);
            victim.abort();
            let _ = victim.await;
            consumers.push(consumer(RedisBackend::connect(&url).await.unwrap(), &h, &q));
        }
        if i == 600 {
            h.record(Event::Fault("CLIENT PAUSE 1500 WRITE".into()));
            let r = server
                .lock()
                .unwrap()
                .command(&["CLIENT", "PAUSE", "1500", "WRITE"]);
            assert_eq!(r, "OK");
        }
        if i == 1400 {
            h.record(Event::Fault("DEBUG SLEEP 1".into()));
            let s = server.clone();
            // In the background: the server stops answering for a second mid-run.
            tokio::task::spawn_blocking(move || {
                let port = s.lock().unwrap().port();
                delayq_test_support::command_on(port, &["DEBUG", "SLEEP", "1"])
            });
        }
        if i == 1000 {
            h.record(Event::Fault("redis SIGKILL + restart".into()));
            let s = server.clone();
            tokio::task::spawn_blocking(move || s.lock().unwrap().restart())
                .await
                .unwrap();
        }
    }
    h.record(Event::Healed);

    // Final drain: every acknowledged enqueue completes (killed leases expire in 2 s).
    let deadline = Instant::now() + Duration::from_secs(60);
    let report = loop {
        let r = h.check();
        if r.lost.is_empty() || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for c in consumers {
        c.abort();
    }
    assert!(report.lost.is_empty(), "lost: {:?}", report.lost);
    assert!(
        report.unexpected.is_empty(),
        "unexpected: {:?}",
        report.unexpected
    );
    assert_eq!(report.early, 0, "started before due");
    assert_eq!(report.stale_acks_accepted, 0);
    assert!(report.completed >= n - report.unknown_absent, "{report:?}");
    for (fault, first) in &report.recovery {
        assert!(first.is_some(), "nothing completed after {fault}");
    }
    eprintln!(
        "chaos: {} completed, {} duplicated, {} recovered, {} unknown absent; recovery {:?}",
        report.completed,
        report.duplicated,
        report.recovered,
        report.unknown_absent,
        report.recovery
    );
}
