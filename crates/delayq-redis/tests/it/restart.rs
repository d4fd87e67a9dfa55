//! Redis restarts in the middle of a run (appendonly yes, appendfsync always): producers and
//! consumers recover by themselves and no acknowledged enqueue or ack is lost; a fence counter
//! rolled back (as by a failover) never repeats a lease token.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use delayq::{Backend, Consumer, ConsumerOptions, Failure, Inspect, Job, Producer};
use delayq_redis::RedisBackend;
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_and_consumers_survive_a_redis_restart() {
    let mut server = RedisServer::start_durable();
    let q = queue();
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    // Both connections' scripts read Redis's clock plus this one's offset.
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    let p = Producer::new(b.clone(), q.clone());

    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let (stop, rx) = watch::channel(false);
    let consumer = {
        let bc = RedisBackend::connect(&server.url()).await.unwrap();
        bc.drive_clock(clock.clone());
        let o = ConsumerOptions {
            concurrency: 4,
            lease: Duration::from_secs(2),
            max_idle: Duration::from_secs(60),
            ..ConsumerOptions::default()
        };
        let c = Consumer::new(bc, q.clone(), o).unwrap();
        let h = handled.clone();
        tokio::spawn(c.run(
            move |j: Job| {
                let h = h.clone();
                async move {
                    h.lock().unwrap().push(j.id.to_string());
                    Ok::<(), Failure>(())
                }
            },
            shutdown_on(rx),
        ))
    };

    // A producer that enqueues 1,500 jobs one by one, each due 0-400 ms later, and retries
    // with the same id until the enqueue is acknowledged.
    let acked_enqueues: Arc<Mutex<HashSet<String>>> = Arc::default();
    let producer = {
        let acked = acked_enqueues.clone();
        tokio::spawn(async move {
            let mut failures = 0;
            for i in 0..1500u64 {
                let name = format!("r{i}");
                loop {
                    match p.enqueue(job(&name, i % 400)).await {
                        Ok(_) => break,
                        Err(e) => {
                            assert!(e.is_retryable(), "{e}");
                            failures += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                acked.lock().unwrap().insert(name);
                if i % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            failures
        })
    };

    // Restart Redis in the middle of the run.
    assert!(eventually(30, || acked_enqueues.lock().unwrap().len() > 400).await);
    tokio::task::block_in_place(|| server.restart());
    let failures = producer.await.unwrap();

    // Every acknowledged enqueue is handled.
    let all: HashSet<String> = (0..1500).map(|i| format!("r{i}")).collect();
    assert_eq!(*acked_enqueues.lock().unwrap(), all);
    let ok = eventually(40, || {
        let h: HashSet<String> = handled.lock().unwrap().iter().cloned().collect();
        h.len() == all.len()
    })
    .await;
    let seen: HashSet<String> = handled.lock().unwrap().iter().cloned().collect();
    assert!(
        ok,
        "missing {:?}",
        all.difference(&seen).take(10).collect::<Vec<_>>()
    );

    // No acked job comes back: once the leases of the restart window have expired (the clock
    // moves past them; the consumer claims what they held again) the queue is empty, and
    // nothing is handled after that.
    clock.advance(Duration::from_millis(2500));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let st = b.stats(&q).await.unwrap();
        if st.waiting() == 0 && st.leased == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not emptied: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = handled.lock().unwrap().len();
    // Real time: whatever is still to come (an ack in flight, a claim just made) comes now.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(handled.lock().unwrap().len(), before);
    stop.send(true).unwrap();
    consumer.await.unwrap().unwrap();
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.leased, st.dead), (0, 0, 0), "{st:?}");
    eprintln!("producer retries during the restart: {failures}");
}

/// The server's Pub/Sub clients (`CLIENT LIST TYPE pubsub`), one line each.
fn server_pubsub_clients(server: &RedisServer) -> String {
    if !delayq_test_support::ping(server.port()) {
        return String::new();
    }
    server.command(&["CLIENT", "LIST", "TYPE", "pubsub"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_consumer_recovers_its_wakeups_after_a_restart() {
    let mut server = RedisServer::start_durable();
    let q = queue();
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let handled: Arc<Mutex<Vec<u64>>> = Arc::default();
    let (stop, rx) = watch::channel(false);
    let o = ConsumerOptions {
        concurrency: 1,
        max_idle: Duration::from_secs(60),
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(b.clone(), q.clone(), o).unwrap();
    let h = handled.clone();
    let task = tokio::spawn(c.run(
        move |_j: Job| {
            let h = h.clone();
            async move {
                h.lock().unwrap().push(now_ms());
                Ok::<(), Failure>(())
            }
        },
        shutdown_on(rx),
    ));
    // The consumer subscribes and falls asleep (a round trip each).
    let subscribed = || !server_pubsub_clients(&server).is_empty();
    assert!(eventually(10, subscribed).await, "never subscribed");
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::task::block_in_place(|| server.restart());
    // The consumer's Pub/Sub connection notices and comes back (after the client's own
    // reconnection backoff) before the job that must wake it is enqueued.
    let subscribed = || !server_pubsub_clients(&server).is_empty();
    assert!(eventually(10, subscribed).await, "never subscribed again");
    let p = Producer::new(b.clone(), q.clone());
    let e = loop {
        match p.enqueue(job("after", 300)).await {
            Ok(e) => break e,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert!(
        eventually(10, || !handled.lock().unwrap().is_empty()).await,
        "the consumer stayed asleep after the restart"
    );
    let t = handled.lock().unwrap()[0];
    assert!(
        t < e.due_at_ms + 3000,
        "{} ms late: woken by the 60 s safety net?",
        t - e.due_at_ms
    );
    stop.send(true).unwrap();
    task.await.unwrap().unwrap();
}

/// A failover can roll the fence counter back (the promoted replica missed the last claims):
/// the job must still never get a token it had before, or the old lease's ack would pass.
#[tokio::test]
async fn a_rolled_back_fence_counter_never_repeats_a_token() {
    let (server, b, q) = setup().await;
    Producer::new(b.clone(), q.clone())
        .enqueue(job("j", 0))
        .await
        .unwrap();
    let first = b.claim(&q, claim_req(1, 60_000)).await.unwrap().jobs;
    let t1 = first[0].lease_token;
    // What a failover to a replica that missed the claim looks like: the counter is behind.
    let fence = format!("dq:{{{q}}}:fence");
    assert_eq!(server.command(&["SET", &fence, "0"]), "OK");
    b.release(&q, vec![first[0].lease_ref()], true)
        .await
        .unwrap();
    let second = b.claim(&q, claim_req(1, 60_000)).await.unwrap().jobs;
    assert!(
        second[0].lease_token > t1,
        "token {} after a rollback, the old lease had {t1}",
        second[0].lease_token
    );
    let stale = b.ack(&q, vec![first[0].to_ack()]).await.unwrap();
    assert_eq!(stale, vec![delayq::AckOutcome::LeaseLost]);
}
