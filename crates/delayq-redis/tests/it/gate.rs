//! Concurrent enqueues share script calls (gate.rs): many producers at once on one shard,
//! with ids repeated across them, get exactly the answers one call each would give, in fewer
//! calls; callers that give up midway leave nothing stuck.

use std::time::Duration;

use crate::common::*;
use delayq::{Backend, Inspect, NewJob, Producer, QueueSettings};

/// 200 producers at once, 20 single enqueues each, every id enqueued by two of them (the
/// second must hear that it exists): every job is created once, each id's pair answers
/// created once and exists once, and the server ran far fewer script calls than enqueues.
async fn many_producers(shards: u32) {
    let (s, b, q) = setup().await;
    if shards > 1 {
        let settings = QueueSettings {
            shards,
            ..QueueSettings::default()
        };
        b.configure(&q, settings).await.unwrap();
    }
    let p = Producer::new(b.clone(), q.clone());
    let before = s.scripts_run();
    let tasks: Vec<_> = (0..200)
        .map(|t: usize| {
            let p = p.clone();
            tokio::spawn(async move {
                let mut created = vec![];
                for k in 0..20 {
                    // Producers t and t + 100 enqueue the same 20 ids.
                    let job = NewJob::new(vec![1])
                        .id(id(&format!("j{}-{k}", t % 100)))
                        .delay(Duration::from_secs(3600));
                    let e = p.enqueue(job).await.unwrap();
                    created.push((e.id.as_str().to_owned(), e.created));
                }
                created
            })
        })
        .collect();
    let mut answers = std::collections::BTreeMap::<String, Vec<bool>>::new();
    for t in tasks {
        for (id, created) in t.await.unwrap() {
            answers.entry(id).or_default().push(created);
        }
    }
    let calls = s.scripts_run() - before;
    assert_eq!(answers.len(), 2000, "{shards} shards");
    for (id, mut a) in answers {
        a.sort();
        assert_eq!(
            a,
            [false, true],
            "{shards} shards: {id} created once, then exists"
        );
    }
    assert_eq!(
        b.stats(&q).await.unwrap().waiting(),
        2000,
        "{shards} shards"
    );
    assert!(
        calls < 4000 / 2,
        "{shards} shards: {calls} script calls for 4,000 enqueues"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_producers_at_once_share_calls_and_get_their_own_answers() {
    many_producers(1).await;
    many_producers(3).await;
}

/// Callers that give up while their enqueue waits or is out (a 0–2 ms timeout around half of
/// 400 concurrent enqueues) take no place at the gate with them: the others are answered, and
/// afterwards one enqueue after another still goes through at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_give_up_leave_nothing_stuck() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let tasks: Vec<_> = (0..400)
        .map(|i: u64| {
            let p = p.clone();
            tokio::spawn(async move {
                let job = NewJob::new(vec![1]).id(id(&format!("g{i}")));
                let call = p.enqueue(job);
                if i.is_multiple_of(2) {
                    let _ = tokio::time::timeout(Duration::from_millis(i % 3), call).await;
                    None
                } else {
                    Some(call.await.unwrap().created)
                }
            })
        })
        .collect();
    for t in tasks {
        if let Some(created) = t.await.unwrap() {
            assert!(created);
        }
    }
    for i in 0..10 {
        let job = NewJob::new(vec![2]).id(id(&format!("after{i}")));
        let e = tokio::time::timeout(Duration::from_secs(5), p.enqueue(job))
            .await
            .expect("the gate let it through")
            .unwrap();
        assert!(e.created);
    }
}

/// Fifty producers replacing the same job at once (a debounce: "remind me 10 minutes after the
/// last change"): each replace is answered as it would be alone — one creates the job, every
/// other replaces it, none is dropped as a repeat of the first. A shared call holds an id once:
/// a call repeating an id waits for the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_replaces_of_one_job_are_each_applied() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    // Other enqueues take the gate's places first, so the replaces wait and may share a call.
    for i in 0..8 {
        let p = p.clone();
        tokio::spawn(async move {
            p.enqueue(NewJob::new(vec![]).id(id(&format!("o{i}"))))
                .await
        });
    }
    let tasks: Vec<_> = (0..50u8)
        .map(|i| {
            let p = p.clone();
            tokio::spawn(async move {
                let job = NewJob::new(vec![i])
                    .id(id("debounced"))
                    .delay(Duration::from_secs(600))
                    .replace();
                p.enqueue(job).await.unwrap()
            })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        let e = t.await.unwrap();
        assert!(e.created || e.replaced, "{e:?}");
        created += usize::from(e.created);
    }
    assert_eq!(created, 1);
}

/// Guarantees 2, 6 and 7 through shared calls: 50 jobs due in 2 s enqueued at once behind 8
/// others (so most share calls) get their due times from the server's clock, wake a consumer
/// that sleeps towards a job an hour away, and none can be claimed before it is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_calls_keep_server_due_times_and_wake_consumers() {
    let (s, b, q) = setup().await;
    // The scripts' clock moves with this test clock (feature test-clock): no waiting.
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("far", 3_600_000)).await.unwrap();
    let mut w = b.wakeups(&q).await.unwrap();
    w.borrow_and_update();
    let t0 = now_ms();
    let before = s.scripts_run();
    for i in 0..8 {
        let p = p.clone();
        tokio::spawn(async move { p.enqueue(job(&format!("o{i}"), 3_600_000)).await });
    }
    let near: Vec<_> = (0..50)
        .map(|i| {
            let p = p.clone();
            tokio::spawn(async move { p.enqueue(job(&format!("n{i}"), 2000)).await })
        })
        .collect();
    let mut due = vec![];
    for t in near {
        let e = t.await.unwrap().unwrap();
        assert!(e.created);
        assert!(
            e.due_at_ms >= t0 + 2000,
            "due {} < {}",
            e.due_at_ms,
            t0 + 2000
        );
        due.push(e.due_at_ms);
    }
    assert!(s.scripts_run() - before < 58, "the near jobs shared calls");
    tokio::time::timeout(Duration::from_secs(2), w.changed())
        .await
        .expect("woken by the earlier jobs")
        .unwrap();
    let early = b.claim(&q, claim_req(100, 30_000)).await.unwrap();
    assert!(
        early.jobs.is_empty(),
        "claimed before due: {:?}",
        early.jobs
    );
    clock.advance(Duration::from_millis(2100));
    let mut got = 0;
    for _ in 0..100 {
        let batch = b.claim(&q, claim_req(100, 30_000)).await.unwrap();
        for j in &batch.jobs {
            // Early is measured on the store's clock: this host's plus the test clock's offset.
            let now = delayq::Clock::now_ms(&clock);
            assert!(now >= j.due_at_ms, "{} started early", j.id);
        }
        got += batch.jobs.len();
        if got == 50 {
            break;
        }
    }
    assert_eq!(got, 50);
}
