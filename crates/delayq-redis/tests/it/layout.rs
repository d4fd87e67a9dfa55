//! The storage layout and the scripts' arithmetic: backoff computed in Lua agrees with
//! `delayq::Backoff`, the number of keys does not grow with the number of jobs, and scripts
//! come back after the server forgets them.

use crate::common::*;
use delayq::{Backend, Backoff, Inspect, Nack, NackOutcome, Producer};

async fn nack_delay(b: &delayq_redis::RedisBackend, q: &delayq::QueueName) -> (u32, u64) {
    let got = b.claim(q, claim_req(1, 30_000)).await.unwrap();
    let j = &got.jobs[0];
    let before = now_ms();
    match b.nack(q, j.lease_ref(), Nack::error("x")).await.unwrap() {
        NackOutcome::Retrying { due_at_ms } => (j.attempt, due_at_ms - before),
        o => panic!("{o:?}"),
    }
}

#[tokio::test]
async fn lua_backoff_matches_the_rust_policy() {
    let (s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let policy = Backoff::Exponential {
        base_ms: 1000,
        cap_ms: 5000,
    };
    p.enqueue(job("e", 0).max_attempts(10).backoff(policy))
        .await
        .unwrap();
    for _ in 0..5 {
        let (attempt, delay) = nack_delay(&b, &q).await;
        let want = policy.delay(attempt, 0.0).as_millis() as u64;
        assert!(
            delay.abs_diff(want) < 100,
            "attempt {attempt}: lua {delay} rust {want}"
        );
        // Make it due again now.
        b.dead_requeue(&q, &id("e")).await.ok();
        p.reschedule(&id("e"), delayq::Due::Now).await.unwrap();
    }
    // The default policy (exponential with jitter) stays within [raw/2, raw].
    let p2 = Producer::new(b.clone(), q.clone());
    s.command(&["FLUSHALL"]);
    p2.enqueue(job("j", 0)).await.unwrap();
    let (attempt, delay) = nack_delay(&b, &q).await;
    let raw = Backoff::default().delay(attempt, 1.0).as_millis() as u64;
    assert!(
        delay + 50 >= raw / 2 && delay <= raw + 50,
        "{delay} vs raw {raw}"
    );
}

#[tokio::test]
async fn keys_do_not_grow_with_jobs() {
    let (s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let jobs: Vec<_> = (0..2000)
        .map(|i| job(&format!("k{i}"), 60_000 + i))
        .collect();
    p.enqueue_batch(jobs).await.unwrap();
    assert_eq!(
        s.command(&["DBSIZE"]),
        "3",
        "sched + jobs + stat: no key per job"
    );
    b.claim(&q, claim_req(0, 5_000)).await.unwrap();
    p.enqueue(job("now", 0)).await.unwrap();
    b.claim(&q, claim_req(1, 5_000)).await.unwrap();
    assert_eq!(s.command(&["DBSIZE"]), "5", "+ lease + fence");
    // The series is one fixed-size string per shard, whatever the number of jobs.
    let stat = s.command(&["STRLEN", &format!("dq:{{{q}}}:stat")]);
    assert!(stat.parse::<usize>().unwrap() <= delayq::series::layout::LEN);
    // The record is compact: header (24 bytes) + payload, the id only as hash field.
    let len = s.command(&["HSTRLEN", &format!("dq:{{{q}}}:jobs"), "k5"]);
    assert_eq!(len, (24 + "k5".len()).to_string());
}

#[tokio::test]
async fn scripts_are_reloaded_after_script_flush() {
    let (s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("a", 0)).await.unwrap();
    assert_eq!(s.command(&["SCRIPT", "FLUSH"]), "OK");
    p.enqueue(job("b", 0)).await.unwrap();
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 2);
}

#[tokio::test]
async fn the_series_ring_recycles_slots_and_folds_intervals_into_totals() {
    use delayq::series::{INTERVAL_MS, SLOTS, layout};
    let (s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let key = format!("dq:{{{q}}}:stat");
    let n = now_ms() / INTERVAL_MS;
    let slot = |i: u64| (layout::RING + (i % SLOTS) as usize * layout::SLOT) * 8;
    let set = |off: usize, v: u64| {
        s.command(&[
            "BITFIELD",
            &key,
            "SET",
            "u32",
            &off.to_string(),
            &v.to_string(),
        ]);
    };
    // The previous interval counted 5 enqueues and is the last one; the slot of the current
    // interval holds 99 from an hour ago.
    set(layout::LAST * 8, n - 1);
    set(slot(n - 1), n - 1);
    set(slot(n - 1) + 32, 5);
    set(slot(n), n - SLOTS);
    set(slot(n) + 32, 99);
    p.enqueue(job("b", 0)).await.unwrap();
    let series = b.series(&q).await.unwrap();
    assert!(
        series.intervals.iter().all(|i| i.counts.enqueued < 99),
        "the stale counts are gone: {series:?}"
    );
    let counted: u64 = series.intervals.iter().map(|i| i.counts.enqueued).sum();
    assert_eq!(counted, 6, "{series:?}");
    assert_eq!(
        series.totals.enqueued, 6,
        "the last interval folded in once"
    );
    p.enqueue(job("c", 0)).await.unwrap();
    assert_eq!(b.series(&q).await.unwrap().totals.enqueued, 7);
}

/// A batch keeps no more of its jobs' results than its callback carries (16 of 40 results of
/// ~64 KiB: 1 MiB), and none once its callback is enqueued.
#[tokio::test]
async fn a_batch_keeps_only_the_results_its_callback_carries() {
    use delayq::{BatchId, BatchSpec, Batches, Callback};
    let (s, b, q) = setup().await;
    let cb = delayq::QueueName::new(format!("{q}-cb")).unwrap();
    let spec = BatchSpec {
        on_complete: Some(Callback::new(cb.clone())),
        on_success: None,
        include_results: true,
    };
    let jobs = (0..40).map(|i| job(&format!("r{i}"), 0)).collect();
    Producer::new(b.clone(), q.clone())
        .create_batch(Some(BatchId::new("big").unwrap()), spec, jobs, false)
        .await
        .unwrap();
    let got = b.claim(&q, claim_req(40, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 40);
    let result = vec![b'7'; delayq::limits::MAX_RESULT_BYTES];
    let acks = got
        .iter()
        .map(|j| delayq::Ack::with_result(j.lease_ref(), result.clone()))
        .collect();
    b.ack(&q, acks).await.unwrap();
    let kept = format!("dq:{{{q}}}:bmr:big");
    assert_eq!(s.command(&["HLEN", &kept]), "16", "1 MiB of results");
    let bytes: usize = s.command(&["MEMORY", "USAGE", &kept]).parse().unwrap();
    // 1 MiB, and the allocator's size classes (a 64 KiB value takes 80 KiB).
    assert!(bytes < 1_500_000, "{bytes} bytes kept");
    b.finish_batches(true).await.unwrap();
    assert_eq!(s.command(&["EXISTS", &kept]), "0", "gone with the callback");
    let callback = BatchId::new("big").unwrap().complete_job();
    let info = b.get(&cb, &callback).await.unwrap().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&info.payload).unwrap();
    assert_eq!(v["batch"]["results"].as_object().unwrap().len(), 16);
    assert_eq!(v["batch"]["results_left_out"], 24);
}
