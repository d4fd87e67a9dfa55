//! The one-delay lane's own layout (the conformance suite and the model check run on lane
//! queues too, in conformance.rs): what a job costs there, that the claim's sweep empties the
//! index of claimed jobs, that the lane switches only on an empty queue, and that a settings
//! change keeps a queue's priorities.

use crate::common::*;
use delayq::{Backend, Due, Error, Inspect, Producer, QueueSettings};

async fn lane_on(b: &delayq_redis::RedisBackend, q: &delayq::QueueName) {
    let s = QueueSettings {
        lane: true,
        ..QueueSettings::default()
    };
    b.configure(q, s).await.unwrap();
}

/// A W4-shaped job (20-byte id, 100-byte payload) with one delay.
fn w4_job(i: usize, delay_ms: u64) -> delayq::NewJob {
    let id = format!("1{i:019}");
    let payload = format!(
        r#"{{"orderId":"{id}","action":"cancel","pad":"{}"}}"#,
        "x".repeat(39)
    );
    delayq::NewJob::new(payload.into_bytes())
        .id(delayq::JobId::new(id).unwrap())
        .due(Due::Delay(std::time::Duration::from_millis(delay_ms)))
}

/// A fresh server and a queue with the lane, and a producer for it.
async fn lane_queue() -> (
    RedisServer,
    delayq_redis::RedisBackend,
    delayq::QueueName,
    Producer<delayq_redis::RedisBackend>,
) {
    let (s, b, q) = setup().await;
    lane_on(&b, &q).await;
    let p = Producer::new(b.clone(), q.clone());
    (s, b, q, p)
}

/// The lane's jobs `from..to` (W4-shaped) due in `delay_ms`, enqueued in batches of 1,000.
async fn fill(p: &Producer<delayq_redis::RedisBackend>, from: usize, to: usize, delay_ms: u64) {
    for chunk in (from..to).collect::<Vec<_>>().chunks(1000) {
        let jobs = chunk.iter().map(|&i| w4_job(i, delay_ms)).collect();
        p.enqueue_batch(jobs).await.unwrap();
    }
}

/// Cancels the jobs `w4_id(0..n)`.
async fn cancel_first(b: &delayq_redis::RedisBackend, q: &delayq::QueueName, n: usize) {
    for i in 0..n {
        b.cancel(q, &w4_id(i)).await.unwrap();
    }
}

fn w4_id(i: usize) -> delayq::JobId {
    delayq::JobId::new(format!("1{i:019}")).unwrap()
}

/// Bytes per job of `n` W4-shaped jobs with one delay, on a queue with or without the lane.
async fn bytes_per_job(lane: bool, n: usize) -> f64 {
    let (s, b, q) = setup().await;
    if lane {
        lane_on(&b, &q).await;
    }
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(w4_job(n, 3_600_000)).await.unwrap();
    let base = s.info_field("memory", "used_memory").unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let jobs = chunk.iter().map(|&i| w4_job(i, 3_600_000)).collect();
        let out = p.enqueue_batch(jobs).await.unwrap();
        assert!(out.iter().all(|e| e.created));
    }
    let used = s.info_field("memory", "used_memory").unwrap();
    assert_eq!(b.stats(&q).await.unwrap().waiting(), n as u64 + 1);
    (used - base) / n as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_job_costs_under_200_bytes_where_the_sorted_sets_take_over_300() {
    let n = 20_000;
    let lane = bytes_per_job(true, n).await;
    let sets = bytes_per_job(false, n).await;
    assert!(lane < 200.0, "lane: {lane:.0} B per job");
    assert!(sets > 300.0, "sorted sets: {sets:.0} B per job");
}

/// The sequence numbers in the lane's index buckets `from..to`.
fn index_seqs(s: &RedisServer, q: &delayq::QueueName, from: u32, to: u32) -> Vec<u64> {
    (from..to)
        .flat_map(|b| {
            let key = format!("dq:{{{q}}}:ix:{b}");
            let all = s.command(&["HGETALL", &key]);
            let lines: Vec<String> = all.lines().map(str::to_owned).collect();
            lines
                .chunks(2)
                // A lane entry's index entry: its tag `L`, then the decimal sequence number.
                .filter_map(|c| c.get(1)?.trim().strip_prefix('L')?.parse().ok())
                .collect::<Vec<u64>>()
        })
        .collect()
}

/// Claims and acks `n` lane jobs, 64 at a time.
async fn drain(b: &delayq_redis::RedisBackend, q: &delayq::QueueName, n: usize) {
    for _ in 0..n / 64 {
        let got = b.claim(q, claim_req(64, 30_000)).await.unwrap();
        assert_eq!(got.jobs.len(), 64);
        b.ack(q, got.jobs.iter().map(|j| j.to_ack()).collect())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_sweep_the_ids_of_claimed_lane_jobs_out_of_the_index() {
    let (s, b, q, p) = lane_queue().await;
    let first: Vec<_> = (0..4096).map(|i| w4_job(i, 0)).collect();
    p.enqueue_batch(first).await.unwrap();
    assert_eq!(
        index_seqs(&s, &q, 0, 1024).len(),
        4096,
        "one entry per lane job"
    );
    assert_eq!(
        s.command(&["HLEN", &format!("dq:{{{q}}}:jobs")]).trim(),
        "0"
    );
    // Each claim of 64 passes a multiple of 32 claimed jobs and sweeps the next bucket in
    // turn: 0-63 while the first 4,096 are claimed, 64-95 after.
    drain(&b, &q, 4096).await;
    let second: Vec<_> = (4096..6144).map(|i| w4_job(i, 0)).collect();
    p.enqueue_batch(second).await.unwrap();
    drain(&b, &q, 2048).await;
    let swept = index_seqs(&s, &q, 64, 96);
    assert!(
        swept.iter().all(|&seq| seq >= 4096),
        "buckets swept after the first jobs were claimed hold none of their ids: {swept:?}"
    );
    let unswept = index_seqs(&s, &q, 96, 1024);
    assert!(
        unswept.iter().filter(|&&seq| seq < 4096).count() > 3000,
        "the others keep them until the sweep comes round"
    );
    // A claimed id is a new job again once its first one is gone (its index entry, left
    // behind or not, is not trusted).
    let id0 = delayq::JobId::new(format!("1{:019}", 0)).unwrap();
    assert!(b.get(&q, &id0).await.unwrap().is_none());
    assert!(p.enqueue(w4_job(0, 0)).await.unwrap().created);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_entry_left_behind_is_never_trusted() {
    let (_s, b, q, p) = lane_queue().await;
    p.enqueue(job("old", 60_000)).await.unwrap();
    // Cut off with the lane's tail: its index entry stays behind.
    assert_eq!(
        b.cancel_all(&q, delayq::ListState::Scheduled)
            .await
            .unwrap(),
        1
    );
    // Another job takes the same place in the lane.
    p.enqueue(job("new", 60_000)).await.unwrap();
    assert!(b.get(&q, &id("old")).await.unwrap().is_none());
    assert_eq!(
        b.cancel(&q, &id("old")).await.unwrap(),
        delayq::CancelOutcome::NotFound
    );
    assert!(p.enqueue(job("old", 60_000)).await.unwrap().created);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lane_switches_only_while_the_queue_is_empty() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("a", 60_000)).await.unwrap();
    let on = QueueSettings {
        lane: true,
        ..QueueSettings::default()
    };
    assert!(matches!(
        b.configure(&q, on.clone()).await,
        Err(Error::Conflict(m)) if m.contains("lane")
    ));
    assert!(!b.settings(&q).await.unwrap().lane, "nothing changed");
    b.cancel(&q, &id("a")).await.unwrap();
    b.configure(&q, on).await.unwrap();
    assert!(b.settings(&q).await.unwrap().lane);
    p.enqueue(job("b", 60_000)).await.unwrap();
    let off = QueueSettings::default();
    assert!(matches!(
        b.configure(&q, off).await,
        Err(Error::Conflict(_))
    ));
    assert!(b.get(&q, &id("b")).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_change_keeps_a_queues_priorities() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![job("low", 0).priority(1), job("high", 0).priority(9)])
        .await
        .unwrap();
    // A listing of due jobs moves them to the priorities' index.
    let due = b
        .list(
            &q,
            delayq::ListRequest::new(delayq::ListState::Due, 10, None),
        )
        .await
        .unwrap();
    assert_eq!(due.jobs.len(), 2);
    let s = QueueSettings {
        max_in_flight: Some(100),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let got = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    let ids: Vec<&str> = got.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["high", "low"], "still claimed, best first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_cancelled_entry_leaves_no_mark_on_the_place_a_new_job_takes() {
    let (_s, b, q, p) = lane_queue().await;
    p.enqueue_batch(vec![job("a", 60_000), job("b", 60_000)])
        .await
        .unwrap();
    // b's entry is marked cancelled, then both are cut off with the lane's tail.
    b.cancel(&q, &id("b")).await.unwrap();
    assert_eq!(
        b.cancel_all(&q, delayq::ListState::Scheduled)
            .await
            .unwrap(),
        1
    );
    // New jobs take the same places (sequence numbers 0 and 1): none may read as cancelled.
    p.enqueue_batch(vec![job("c", 0), job("d", 0)])
        .await
        .unwrap();
    let got = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    let ids: Vec<&str> = got.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["c", "d"]);
}

/// A job enqueued into the lane with a fire's id (`NAME@<fire ms>`) is that fire: the fire
/// finds it through the lane's index and writes nothing (on one shard, fire.lua; on several,
/// fire_shard.lua). Without the look-up the fire's job lands in the sorted sets beside it —
/// two jobs with one id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_finds_a_lane_job_with_its_id() {
    use delayq::Schedules;
    use delayq::schedule::{self, ScheduleSpec};
    for shards in [1, 4] {
        let (_s, b, q) = setup().await;
        let settings = QueueSettings {
            lane: true,
            shards,
            ..QueueSettings::default()
        };
        b.configure(&q, settings).await.unwrap();
        let spec = ScheduleSpec::every(60_000, "fire");
        let now = delayq::job::system_now_ms();
        let info = schedule::put(&b, &q, "tick", spec.clone(), 1 << 20, now)
            .await
            .unwrap();
        let id = schedule::fire_id("tick", info.next_ms);
        let p = Producer::new(b.clone(), q.clone());
        let mine = delayq::NewJob::new(b"mine".to_vec())
            .id(id.clone())
            .due(Due::Delay(std::time::Duration::from_secs(3600)));
        assert!(p.enqueue(mine).await.unwrap().created);
        let firing = spec.plan(info.next_ms, info.next_ms).unwrap();
        assert_eq!(firing.fires, [info.next_ms]);
        assert!(b.fire(&q, "tick", firing).await.unwrap(), "{shards} shards");
        assert_eq!(b.stats(&q).await.unwrap().waiting(), 1, "{shards} shards");
        let job = b.get(&q, &id).await.unwrap().unwrap();
        assert_eq!(job.payload, b"mine", "{shards} shards");
    }
}

/// Cancelling a lane job gives its record back at once: its entry, which stays in the list
/// until a claim passes it (the lane keeps its due order), shrinks to a tombstone of its due
/// time, found by the counts through one bit. Before the tombstones every cancelled job stayed
/// whole until its due time (39 B more a job after the cancels than before them); with a mark
/// in a SET beside each tombstone a cancelled job still cost ~74 B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_lane_job_gives_its_record_back() {
    let (s, b, q, p) = lane_queue().await;
    let n = 20_000;
    let base = s.info_field("memory", "used_memory").unwrap();
    fill(&p, 0, n, 3_600_000).await;
    let full = s.info_field("memory", "used_memory").unwrap();
    let cancelled = n * 9 / 10;
    for i in 0..cancelled {
        assert_eq!(
            b.cancel(&q, &w4_id(i)).await.unwrap(),
            delayq::CancelOutcome::Cancelled
        );
    }
    let after = s.info_field("memory", "used_memory").unwrap();
    let per_job = (full - base) / n as f64;
    let left = per_job - (full - after) / cancelled as f64;
    assert!(left < 45.0, "a cancelled lane job still costs {left:.0} B");
    // The rest are there, in due order; every reader passes the tombstones.
    assert_eq!(b.stats(&q).await.unwrap().waiting(), (n - cancelled) as u64);
    let page = b
        .list(
            &q,
            delayq::ListRequest::new(delayq::ListState::Scheduled, 5, None),
        )
        .await
        .unwrap();
    assert_eq!(page.jobs[0].id, w4_id(cancelled));
    assert!(b.get(&q, &w4_id(n - 1)).await.unwrap().is_some());
    let gone = w4_id(7);
    assert!(b.get(&q, &gone).await.unwrap().is_none());
    assert_eq!(
        b.cancel(&q, &gone).await.unwrap(),
        delayq::CancelOutcome::NotFound
    );
    // The id of a cancelled job is free again.
    assert!(p.enqueue(w4_job(7, 3_600_000)).await.unwrap().created);
}

/// A cancelled job never runs, wherever the lane's head stands: its tombstone replaces the
/// entry at its own place (sequence number less the head), so after claims have moved the head
/// the next claim skips exactly it. A tombstone written one place off would hand a claim an
/// entry with no id and leave the cancelled job to run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_passes_the_tombstone_of_a_cancelled_job_after_the_head_moved() {
    let (s, b, q, p) = lane_queue().await;
    let names = ["a", "b", "c", "d", "e"];
    p.enqueue_batch(names.iter().map(|n| job(n, 0)).collect())
        .await
        .unwrap();
    let first = b.claim(&q, claim_req(2, 30_000)).await.unwrap();
    let ids: Vec<&str> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(
        b.cancel(&q, &id("d")).await.unwrap(),
        delayq::CancelOutcome::Cancelled
    );
    let rest = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    let ids: Vec<&str> = rest.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["c", "e"], "d was cancelled");
    assert_eq!(
        s.command(&["LLEN", &format!("dq:{{{q}}}:lane")]).trim(),
        "0"
    );
    let report = b.lane_report(&q).await.unwrap().unwrap();
    assert_eq!((report[0].entries, report[0].cancelled), (0, 0));
}

/// Thousands of tombstones ahead of the live jobs: the counts see past them exactly (the
/// tombstone bitmap), and a claim reads past at most its bound of them a call and then says to
/// come back at once, so the live jobs are claimed within a few calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_pass_thousands_of_tombstones_and_the_counts_see_past_them() {
    let (_s, b, q, p) = lane_queue().await;
    fill(&p, 0, 3000, 0).await;
    cancel_first(&b, &q, 2990).await;
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.due), (10, 10));
    let mut got = vec![];
    for call in 1..=4 {
        let batch = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
        got.extend(batch.jobs.iter().map(|j| j.id.clone()));
        if got.len() == 10 {
            break;
        }
        assert_eq!(
            batch.next_due_in,
            Some(std::time::Duration::ZERO),
            "call {call} stopped at its bound: come back at once"
        );
    }
    let want: Vec<_> = (2990..3000).map(w4_id).collect();
    assert_eq!(got, want);
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.leased), (0, 10));
}

/// The bitmap spans the lane, not its history: once the entries claims have passed since its
/// first bit fill 4 KiB of bits, a cancel cuts them off its front and moves its base, and the
/// counts and claims still find every tombstone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bits_of_passed_entries_are_cut_off_the_tombstone_bitmap() {
    let (s, b, q, p) = lane_queue().await;
    let n = 40_000;
    fill(&p, 0, n, 0).await;
    b.cancel(&q, &w4_id(0)).await.unwrap();
    let mut claimed = 0;
    while claimed < n - 1 {
        claimed += b
            .claim(&q, claim_req(1000, 60_000))
            .await
            .unwrap()
            .jobs
            .len();
    }
    fill(&p, n, n + 4, 3_600_000).await;
    let gone = format!("dq:{{{q}}}:lanegone");
    let base = || s.command(&["HGET", &format!("dq:{{{q}}}:lanemeta"), "b"]);
    assert_eq!(base().trim(), "", "no cut before this cancel");
    b.cancel(&q, &w4_id(n + 1)).await.unwrap();
    let moved: u64 = base().trim().parse().unwrap();
    assert!(moved > 32_000 && moved <= n as u64, "base {moved}");
    let len: u64 = s.command(&["STRLEN", &gone]).trim().parse().unwrap();
    assert!(len <= 2, "{len} bytes left of the bitmap");
    b.cancel(&q, &w4_id(n + 3)).await.unwrap();
    let st = b.stats(&q).await.unwrap();
    assert_eq!(st.waiting(), 2);
    let page = b
        .list(
            &q,
            delayq::ListRequest::new(delayq::ListState::Scheduled, 10, None),
        )
        .await
        .unwrap();
    let ids: Vec<_> = page.jobs.iter().map(|j| j.id.clone()).collect();
    assert_eq!(ids, [w4_id(n), w4_id(n + 2)]);
    let report = b.lane_report(&q).await.unwrap().unwrap();
    assert_eq!((report[0].entries, report[0].cancelled), (4, 2));
}

/// Cancelling all due or all later jobs of a lane with tombstones among them, 1,000 a call:
/// each call cuts off exactly as many entries as hold its 1,000 live jobs (found through the
/// tombstone bitmap), so the total is the live jobs, and the places a cut-off tail leaves carry
/// no tombstone bit for the jobs that take them next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_all_counts_live_jobs_among_tombstones() {
    for (state, delay) in [
        (delayq::ListState::Due, 0),
        (delayq::ListState::Scheduled, 3_600_000),
    ] {
        let (_s, b, q) = setup().await;
        lane_on(&b, &q).await;
        let p = Producer::new(b.clone(), q.clone());
        fill(&p, 0, 3000, delay).await;
        for i in (0..3000).step_by(3) {
            b.cancel(&q, &w4_id(i)).await.unwrap();
        }
        assert_eq!(b.cancel_all(&q, state).await.unwrap(), 2000, "{state:?}");
        let st = b.stats(&q).await.unwrap();
        assert_eq!(st.waiting(), 0, "{state:?}");
        fill(&p, 5000, 5006, 0).await;
        let st = b.stats(&q).await.unwrap();
        assert_eq!(
            (st.waiting(), st.due),
            (6, 6),
            "{state:?}: no new job counts as cancelled"
        );
        let got = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
        assert_eq!(got.jobs.len(), 6, "{state:?}");
    }
}

/// The oldest due job's wait is read past the tombstones ahead of it, also when they fill the
/// tombstone bitmap to its last byte (its first clear bit then lies past the string's end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_find_the_oldest_due_job_past_a_whole_byte_of_tombstones() {
    let (_s, b, q, p) = lane_queue().await;
    fill(&p, 0, 16, 0).await;
    cancel_first(&b, &q, 8).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.due), (8, 8));
    assert!(st.oldest_overdue_ms >= 50, "{st:?}");
}

/// Many cancels in every pattern (a seeded sequence of 3,000 random steps over 200 ids:
/// enqueue due now or in an hour, cancel one, cancel a run of the oldest, claim a few, ack,
/// cancel all due or all later jobs):
/// after every step `stats` counts what a plain model holds, so the tombstone bitmap is right
/// wherever the tombstones fall — runs that fill whole bytes, ends of the string, a cut tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counts_follow_a_model_through_random_cancels() {
    use std::collections::HashMap;
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum St {
        Due,
        Later,
        Leased(u64),
    }
    let (_s, b, q, p) = lane_queue().await;
    let mut m: HashMap<usize, St> = HashMap::new();
    // Ids in the order they were enqueued (the lane's order for those in it).
    let mut order: Vec<usize> = vec![];
    let mut seed: u64 = 0x5eed;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    for step in 0..3000 {
        let i = next(200) as usize;
        match next(20) {
            0..=7 => {
                let later = next(4) == 0;
                let created = p
                    .enqueue(w4_job(i, if later { 3_600_000 } else { 0 }))
                    .await;
                let want = !m.contains_key(&i);
                assert_eq!(created.unwrap().created, want, "step {step}");
                if want {
                    order.push(i);
                }
                m.entry(i)
                    .or_insert(if later { St::Later } else { St::Due });
            }
            8..=14 => {
                // One id, or a run of the oldest waiting ones (tombstones side by side).
                order.retain(|i| matches!(m.get(i), Some(St::Due | St::Later)));
                let run = if next(3) == 0 {
                    order.iter().copied().take(1 + next(12) as usize).collect()
                } else {
                    vec![i]
                };
                for i in run {
                    let want = match m.get(&i) {
                        Some(St::Due | St::Later) => delayq::CancelOutcome::Cancelled,
                        Some(St::Leased(_)) => delayq::CancelOutcome::Leased,
                        None => delayq::CancelOutcome::NotFound,
                    };
                    assert_eq!(b.cancel(&q, &w4_id(i)).await.unwrap(), want, "step {step}");
                    if want == delayq::CancelOutcome::Cancelled {
                        m.remove(&i);
                    }
                }
            }
            15..=17 => {
                let k = 1 + next(8) as usize;
                let due = m.values().filter(|s| **s == St::Due).count();
                let got = b.claim(&q, claim_req(k, 600_000)).await.unwrap();
                assert_eq!(got.jobs.len(), k.min(due), "step {step}");
                for j in got.jobs {
                    let i: usize = j.id.as_str()[1..].parse().unwrap();
                    assert_eq!(m.get(&i), Some(&St::Due), "step {step}: claimed {i}");
                    m.insert(i, St::Leased(j.lease_token));
                }
            }
            18 => {
                let leases: Vec<_> = m
                    .iter()
                    .filter_map(|(i, s)| match s {
                        St::Leased(t) => Some(delayq::Ack::from(delayq::LeaseRef {
                            id: w4_id(*i),
                            token: *t,
                        })),
                        _ => None,
                    })
                    .collect();
                b.ack(&q, leases).await.unwrap();
                m.retain(|_, s| !matches!(s, St::Leased(_)));
            }
            _ => {
                let (state, which) = if next(2) == 0 {
                    (delayq::ListState::Due, St::Due)
                } else {
                    (delayq::ListState::Scheduled, St::Later)
                };
                let want = m.values().filter(|s| **s == which).count() as u64;
                assert_eq!(b.cancel_all(&q, state).await.unwrap(), want, "step {step}");
                m.retain(|_, s| *s != which);
            }
        }
        let st = b.stats(&q).await.unwrap();
        let count = |f: fn(&St) -> bool| m.values().filter(|s| f(s)).count() as u64;
        let want = (
            count(|s| !matches!(s, St::Leased(_))),
            count(|s| *s == St::Due),
            count(|s| matches!(s, St::Leased(_))),
        );
        assert_eq!((st.waiting(), st.due, st.leased), want, "step {step}");
    }
}

/// Listing a lane with tens of thousands of tombstones ahead of its jobs: no script call reads
/// more than its share of the lane (8,192 entries, then it says where it stopped and the
/// backend asks again), so a console page never holds Redis for the whole lane — and the
/// pages are still whole, in due order, each job once, merged with the sorted-set jobs before
/// and after the lane's (read in full, 20,000 entries took one call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_reads_a_lane_of_tombstones_in_bounded_calls() {
    let (s, b, q, p) = lane_queue().await;
    fill(&p, 0, 20_000, 3_600_000).await;
    cancel_first(&b, &q, 19_990).await;
    // Before the lane's jobs: due earlier than its last; after them: a priority keeps it out.
    let early = delayq::NewJob::new("e")
        .id(delayq::JobId::new("early").unwrap())
        .due(Due::Delay(std::time::Duration::from_secs(10)));
    let late = delayq::NewJob::new("l")
        .id(delayq::JobId::new("late").unwrap())
        .priority(3)
        .due(Due::Delay(std::time::Duration::from_secs(7200)));
    p.enqueue_batch(vec![early, late]).await.unwrap();
    let mut want = vec!["early".to_owned()];
    want.extend((19_990..20_000).map(|i| w4_id(i).to_string()));
    want.push("late".to_owned());

    let before = s.scripts_run();
    let first = b
        .list(
            &q,
            delayq::ListRequest::new(delayq::ListState::Scheduled, 5, None),
        )
        .await
        .unwrap();
    let calls = s.scripts_run() - before;
    assert!(calls >= 3, "20,000 entries read in {calls} call(s)");
    let mut got: Vec<String> = first.jobs.iter().map(|j| j.id.to_string()).collect();
    let mut next = first.next;
    let mut pages = 1;
    while let Some(cursor) = next {
        let page = b
            .list(
                &q,
                delayq::ListRequest::new(delayq::ListState::Scheduled, 5, Some(cursor)),
            )
            .await
            .unwrap();
        assert!(
            page.jobs.len() == 5 || page.next.is_none(),
            "a short page before the end"
        );
        got.extend(page.jobs.iter().map(|j| j.id.to_string()));
        next = page.next;
        pages += 1;
        assert!(pages <= 4, "{got:?}");
    }
    assert_eq!(got, want);
}
