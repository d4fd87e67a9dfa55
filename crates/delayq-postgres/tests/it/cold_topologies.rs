//! The cold tier's conformance on every Redis topology: one server, an 8-shard queue on it, a
//! 3-master Cluster with an 8-shard queue, and Sentinel (each test in a namespace and a
//! database of its own, the topology's servers shared by this binary). One scenario: every
//! by-id operation on a cold job, on a job mid-move (a cancel and a reschedule wait for the
//! move and act on the store), a key's calls, and the move itself — the job keeps its due time
//! and is claimed only once the store's clock reaches it.

use std::time::Duration;

use delayq::{
    Backend, CancelOutcome, ClaimRequest, Due, Inspect, JobKey, KeyJobsRequest, NewJob, OnConflict,
    Producer, QueueName, QueueSettings,
};
use delayq_postgres::Tiered;
use delayq_redis::{ConnectOptions, RedisBackend};
use delayq_test_support::shared;

use crate::common::{database, id};

const HOUR: u64 = 3_600_000;

/// The scenario over a store reached with `o`, its queue made of `shards` shards.
async fn scenario(mut o: ConnectOptions, shards: u32) {
    o.namespace = Some(shared::namespace());
    let store = RedisBackend::connect_with(o).await.unwrap();
    let clock = delayq::TestClock::new();
    store.drive_clock(clock.clone());
    let (_pg, opts, mut c) = database().await;
    let t = Tiered::new(store.clone(), opts.pool(4).unwrap());
    let q = QueueName::new("reminders").unwrap();
    if shards > 1 {
        store
            .configure(&q, QueueSettings::with_shards(shards))
            .await
            .unwrap();
    }
    let cold = t.cold().unwrap();
    cold.set_cold_after(&q, Some(HOUR)).await.unwrap();
    let p = Producer::new(t.clone(), q.clone());
    let now = delayq::job::system_now_ms();
    let far = now + 2 * HOUR;
    let enqueue = |name: &str, at: u64| {
        NewJob::new(name.as_bytes().to_vec())
            .id(id(name))
            .due(Due::At(at))
    };

    // Where a job goes, and by id.
    assert!(p.enqueue(enqueue("c1", far)).await.unwrap().created);
    assert!(
        p.enqueue(enqueue("h1", now + 60_000))
            .await
            .unwrap()
            .created
    );
    assert!(t.get(&q, &id("c1")).await.unwrap().unwrap().cold);
    assert!(!t.get(&q, &id("h1")).await.unwrap().unwrap().cold);
    assert!(store.get(&q, &id("c1")).await.unwrap().is_none());
    assert_eq!(t.stats(&q).await.unwrap().scheduled, 2);
    assert!(!p.enqueue(enqueue("c1", far + 1)).await.unwrap().created);
    let mut replace = enqueue("c1", far + 5);
    replace.payload = b"c1-v2".to_vec();
    replace.on_conflict = OnConflict::Replace;
    assert!(p.enqueue(replace).await.unwrap().replaced);
    let got = t.get(&q, &id("c1")).await.unwrap().unwrap();
    assert_eq!(
        (got.payload.as_slice(), got.due_at_ms),
        (&b"c1-v2"[..], far + 5)
    );
    assert_eq!(
        t.reschedule(&q, &id("c1"), Due::At(far + HOUR))
            .await
            .unwrap(),
        far + HOUR
    );
    assert!(t.get(&q, &id("c1")).await.unwrap().unwrap().cold);
    assert_eq!(
        t.cancel(&q, &id("c1")).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert!(t.get(&q, &id("c1")).await.unwrap().is_none());
    p.enqueue(enqueue("c2", far)).await.unwrap();
    let soon = now + 120_000;
    t.reschedule(&q, &id("c2"), Due::At(soon)).await.unwrap();
    assert_eq!(
        store.get(&q, &id("c2")).await.unwrap().unwrap().due_at_ms,
        soon
    );

    // Mid-move: a mover has taken m1 and m2 and written them to the store, not yet committed.
    // A cancel of one and a reschedule of the other wait for it, then act on the store.
    p.enqueue(enqueue("m1", far)).await.unwrap();
    p.enqueue(enqueue("m2", far)).await.unwrap();
    let tx = c.transaction().await.unwrap();
    tx.execute(
        "DELETE FROM delayq.cold WHERE queue = 'reminders' AND id IN ('m1', 'm2')",
        &[],
    )
    .await
    .unwrap();
    store
        .enqueue(&q, vec![enqueue("m1", far), enqueue("m2", far)])
        .await
        .unwrap();
    let (t1, t2, q1, q2) = (t.clone(), t.clone(), q.clone(), q.clone());
    let cancel = tokio::spawn(async move { t1.cancel(&q1, &id("m1")).await.unwrap() });
    let later = far + 3 * HOUR;
    let moved =
        tokio::spawn(async move { t2.reschedule(&q2, &id("m2"), Due::At(later)).await.unwrap() });
    // Real time: long enough for both to reach the held rows.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !cancel.is_finished() && !moved.is_finished(),
        "they wait for the move"
    );
    tx.commit().await.unwrap();
    assert_eq!(cancel.await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(moved.await.unwrap(), later);
    assert!(
        t.get(&q, &id("m1")).await.unwrap().is_none(),
        "in neither tier"
    );
    let m2 = t.get(&q, &id("m2")).await.unwrap().unwrap();
    assert_eq!(
        (m2.cold, m2.due_at_ms),
        (false, later),
        "rescheduled in the store"
    );

    // A key's jobs in both tiers.
    let k = JobKey::new("u42").unwrap();
    p.enqueue(enqueue("k1", far).key(k.clone())).await.unwrap();
    p.enqueue(enqueue("k2", now + 60_000).key(k.clone()))
        .await
        .unwrap();
    let page = t
        .key_jobs(
            &q,
            &k,
            KeyJobsRequest {
                state: None,
                limit: 10,
                after: None,
            },
        )
        .await
        .unwrap();
    let listed: Vec<(&str, bool)> = page.jobs.iter().map(|j| (j.id.as_str(), j.cold)).collect();
    assert_eq!(listed, [("k1", true), ("k2", false)]);
    assert_eq!(t.cancel_key(&q, &k, false).await.unwrap().cancelled, 2);

    // The move: the window widened over "d1", the mover moves it with its due time, and it is
    // claimed once the store's clock reaches that time — not before.
    p.enqueue(enqueue("d1", far)).await.unwrap();
    cold.set_cold_after(&q, Some(3 * HOUR)).await.unwrap();
    assert!(t.move_due().await.unwrap() >= 1);
    let d1 = store.get(&q, &id("d1")).await.unwrap().unwrap();
    assert_eq!((d1.due_at_ms, d1.cold), (far, false));
    let claim = || ClaimRequest {
        max: 10,
        lease: Duration::from_secs(60),
        acks: vec![],
    };
    let early = t.claim(&q, claim()).await.unwrap();
    assert!(
        early.jobs.iter().all(|j| j.id.as_str() != "d1"),
        "not before it is due"
    );
    clock.advance(Duration::from_millis(far + 1 - now));
    let mut ids = Vec::new();
    for _ in 0..shards.max(1) * 2 {
        ids.extend(
            t.claim(&q, claim())
                .await
                .unwrap()
                .jobs
                .into_iter()
                .map(|j| j.id.to_string()),
        );
    }
    assert!(ids.iter().any(|i| i == "d1"), "claimed once due: {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_server() {
    scenario(ConnectOptions::new(shared::redis().url()), 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_sharded_queue() {
    scenario(ConnectOptions::new(shared::redis().url()), 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_with_a_sharded_queue() {
    scenario(ConnectOptions::new(shared::cluster().url(None)), 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_sentinel() {
    scenario(ConnectOptions::new(shared::sentinel().url()), 1).await;
}
