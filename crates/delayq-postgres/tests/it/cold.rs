//! The cold tier (`Tiered`): far-future jobs of a queue with a `cold_after_ms` kept in
//! PostgreSQL, moved into Redis once due within the window — never early; by-id operations on
//! a cold job; a cancel racing a move decided once; a sharded queue; a move over many batches
//! and partitions.

use std::time::Duration;

use delayq::{Backend, CancelOutcome, Due, Inspect, JobState, NewJob, Producer};
use delayq_postgres::Tiered;
use delayq_redis::RedisBackend;

use crate::common::{claim_one, database, eventually, id, q, redis, tiered};

async fn far_jobs_go_cold_then_move_and_run_on_time(shards: Option<u32>) {
    let orders = q("orders");
    let (t, _c) = tiered(1500, &orders).await;
    if let Some(n) = shards {
        t.inner()
            .configure(&orders, delayq::QueueSettings::with_shards(n))
            .await
            .unwrap();
    }
    let p = Producer::new(t.clone(), orders.clone());
    let now = delayq::job::system_now_ms();
    let due = now + 2500;
    p.enqueue(NewJob::new("far").id(id("far")).due(Due::At(due)))
        .await
        .unwrap();
    p.enqueue(NewJob::new("near").id(id("near")).due(Due::At(now + 500)))
        .await
        .unwrap();
    let far = t.get(&orders, &id("far")).await.unwrap().unwrap();
    assert!(far.cold, "kept cold");
    assert_eq!(
        (far.state, far.due_at_ms, far.payload.as_slice()),
        (JobState::Scheduled, due, &b"far"[..])
    );
    assert!(
        t.inner().get(&orders, &id("far")).await.unwrap().is_none(),
        "not in Redis"
    );
    assert!(!t.get(&orders, &id("near")).await.unwrap().unwrap().cold);
    assert_eq!(t.stats(&orders).await.unwrap().scheduled, 2);
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 1);
    let mover = tokio::spawn(
        t.clone()
            .run_mover(Duration::from_millis(50), std::future::pending()),
    );
    let moved = eventually("the move into Redis", || async {
        t.inner().get(&orders, &id("far")).await.unwrap()
    })
    .await;
    assert_eq!(moved.due_at_ms, due, "moved with its due time");
    // The move's delete commits just after the store's write.
    eventually("the move committed", || async {
        (!t.get(&orders, &id("far")).await.unwrap().unwrap().cold).then_some(())
    })
    .await;
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 0);
    assert_eq!(
        t.stats(&orders).await.unwrap().scheduled + t.stats(&orders).await.unwrap().due,
        2
    );
    // Never before its due time: the claims that run it start after it.
    let mut ran_at = None;
    while ran_at.is_none() {
        let b = t.claim(&orders, claim_one()).await.unwrap();
        for j in b.jobs {
            let at = delayq::job::system_now_ms();
            if j.id.as_str() == "far" {
                assert!(at >= due, "started {} ms early", due - at);
                ran_at = Some(at);
            }
            t.ack(&orders, vec![j.lease_ref().into()]).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(delayq::job::system_now_ms() < due + 10_000, "never ran");
    }
    mover.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn far_jobs_go_cold_then_move_into_redis_and_run_on_time() {
    far_jobs_go_cold_then_move_and_run_on_time(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cold_tier_feeds_a_sharded_queue() {
    far_jobs_go_cold_then_move_and_run_on_time(Some(4)).await;
}

#[tokio::test]
async fn every_by_id_operation_sees_a_cold_job() {
    let orders = q("orders");
    let (t, _c) = tiered(600_000, &orders).await;
    let p = Producer::new(t.clone(), orders.clone());
    let hour = delayq::job::system_now_ms() + 3_600_000;
    let e = p
        .enqueue(NewJob::new("v1").id(id("r-1")).due(Due::At(hour)))
        .await
        .unwrap();
    assert!(e.created);
    // The same id again: nothing written; replaced: the new payload and due time.
    let again = p
        .enqueue(NewJob::new("v2").id(id("r-1")).due(Due::At(hour + 5)))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(
        t.get(&orders, &id("r-1")).await.unwrap().unwrap().payload,
        b"v1"
    );
    let mut replace = NewJob::new("v3").id(id("r-1")).due(Due::At(hour + 60_000));
    replace.on_conflict = delayq::OnConflict::Replace;
    assert!(p.enqueue(replace).await.unwrap().replaced);
    let got = t.get(&orders, &id("r-1")).await.unwrap().unwrap();
    assert_eq!(
        (got.payload.as_slice(), got.due_at_ms),
        (&b"v3"[..], hour + 60_000)
    );
    // A near enqueue of an id the cold tier holds is that job.
    let near = p
        .enqueue(NewJob::new("x").id(id("r-1")).due(Due::Now))
        .await
        .unwrap();
    assert!(!near.created);
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 1);
    // Rescheduled further: still cold.
    assert_eq!(
        t.reschedule(&orders, &id("r-1"), Due::At(hour * 2))
            .await
            .unwrap(),
        hour * 2
    );
    assert!(t.get(&orders, &id("r-1")).await.unwrap().unwrap().cold);
    // Into the window: into Redis at once, with the new due time.
    let soon = delayq::job::system_now_ms() + 60_000;
    t.reschedule(&orders, &id("r-1"), Due::At(soon))
        .await
        .unwrap();
    let hot = t.inner().get(&orders, &id("r-1")).await.unwrap().unwrap();
    assert_eq!((hot.due_at_ms, hot.payload.as_slice()), (soon, &b"v3"[..]));
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 0);
    // A cold job cancelled is gone from both tiers.
    p.enqueue(NewJob::new("c").id(id("c-1")).due(Due::At(hour)))
        .await
        .unwrap();
    assert_eq!(
        t.cancel(&orders, &id("c-1")).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert!(t.get(&orders, &id("c-1")).await.unwrap().is_none());
    assert_eq!(
        t.cancel(&orders, &id("c-1")).await.unwrap(),
        CancelOutcome::NotFound
    );
    // A queue without the setting is the store's alone.
    let plain = q("plain");
    Producer::new(t.clone(), plain.clone())
        .enqueue(NewJob::new("p").id(id("p-1")).due(Due::At(hour)))
        .await
        .unwrap();
    assert!(t.inner().get(&plain, &id("p-1")).await.unwrap().is_some());
}

/// A cancel of a job the mover holds waits for the move and then cancels it in the store:
/// decided once, never both kept and cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_a_move_is_decided_once() {
    let orders = q("orders");
    let (t, mut c) = tiered(600_000, &orders).await;
    let hour = delayq::job::system_now_ms() + 3_600_000;
    Producer::new(t.clone(), orders.clone())
        .enqueue(NewJob::new("m").id(id("m-1")).due(Due::At(hour)))
        .await
        .unwrap();
    // A mover mid-move: the row taken, the store written, the commit not yet sent.
    let tx = c.transaction().await.unwrap();
    tx.execute(
        "DELETE FROM delayq.cold WHERE queue = 'orders' AND id = 'm-1'",
        &[],
    )
    .await
    .unwrap();
    t.inner()
        .enqueue(
            &orders,
            vec![NewJob::new("m").id(id("m-1")).due(Due::At(hour))],
        )
        .await
        .unwrap();
    let canceller = {
        let t = t.clone();
        tokio::spawn(async move { t.cancel(&q("orders"), &id("m-1")).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!canceller.is_finished(), "the cancel waits for the move");
    tx.commit().await.unwrap();
    assert_eq!(canceller.await.unwrap(), CancelOutcome::Cancelled);
    assert!(
        t.get(&orders, &id("m-1")).await.unwrap().is_none(),
        "gone from both tiers"
    );
}

/// `cold_after_ms` is a queue setting like the others: kept in PostgreSQL, read back with the
/// store's settings, checked (at least a minute), cleared with `None`; a store without the
/// tier refuses it.
#[tokio::test]
async fn the_window_is_a_queue_setting_and_a_plain_store_refuses_it() {
    let orders = q("orders");
    let (_pg, opts, _c) = database().await;
    let t = Tiered::new(redis().await, opts.pool(2).unwrap());
    let mut s = t.settings(&orders).await.unwrap();
    assert_eq!(s.cold_after_ms, None);
    s.cold_after_ms = Some(3_600_000);
    s.max_in_flight = Some(7);
    let out = t.configure(&orders, s.clone()).await.unwrap();
    assert_eq!(
        (out.cold_after_ms, out.max_in_flight),
        (Some(3_600_000), Some(7))
    );
    let back = t.settings(&orders).await.unwrap();
    assert_eq!(
        (back.cold_after_ms, back.max_in_flight),
        (Some(3_600_000), Some(7))
    );
    s.cold_after_ms = Some(1_000);
    let e = t.configure(&orders, s.clone()).await.unwrap_err();
    assert!(e.to_string().contains("cold_after_ms"), "{e}");
    s.cold_after_ms = None;
    t.configure(&orders, s.clone()).await.unwrap();
    assert_eq!(t.settings(&orders).await.unwrap().cold_after_ms, None);
    let plain = Tiered::plain(redis().await);
    s.cold_after_ms = Some(3_600_000);
    let e = plain.configure(&orders, s).await.unwrap_err();
    assert!(e.to_string().contains("--postgres"), "{e}");
}

/// A scheduled listing pages through the store's jobs, then the tier's, each in due order,
/// none twice, the cold ones marked.
#[tokio::test]
async fn scheduled_listings_page_through_the_store_then_the_tier() {
    let orders = q("orders");
    let (t, _c) = tiered(600_000, &orders).await;
    let p = Producer::new(t.clone(), orders.clone());
    let now = delayq::job::system_now_ms();
    for (i, mins) in [3u64, 1, 2].iter().enumerate() {
        p.enqueue(
            NewJob::new("h")
                .id(id(&format!("hot-{i}")))
                .due(Due::At(now + mins * 60_000)),
        )
        .await
        .unwrap();
    }
    for (i, hours) in [5u64, 1, 4, 2, 3].iter().enumerate() {
        p.enqueue(
            NewJob::new("c")
                .id(id(&format!("cold-{i}")))
                .due(Due::At(now + hours * 3_600_000)),
        )
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = t
            .list(
                &orders,
                delayq::ListRequest::new(delayq::ListState::Scheduled, 2, after),
            )
            .await
            .unwrap();
        seen.extend(page.jobs.iter().map(|j| (j.id.to_string(), j.cold)));
        match page.next {
            Some(c) => after = Some(c),
            None => break,
        }
    }
    let want: Vec<(String, bool)> = [
        ("hot-1", false),
        ("hot-2", false),
        ("hot-0", false),
        ("cold-1", true),
        ("cold-3", true),
        ("cold-4", true),
        ("cold-2", true),
        ("cold-0", true),
    ]
    .iter()
    .map(|(i, c)| (i.to_string(), *c))
    .collect();
    assert_eq!(seen, want);
}

/// A job whose mover was down past its due time is moved late: the store takes a due time
/// already past as "now" (as for any enqueue), so it is due at its move — never earlier than
/// the time it was given — and claimed at once.
#[tokio::test]
async fn a_job_moved_late_runs_at_once_and_never_before_its_time() {
    let orders = q("orders");
    let (t, c) = tiered(3_600_000, &orders).await;
    let p = Producer::new(t.clone(), orders.clone());
    let far = delayq::job::system_now_ms() + 2 * 3_600_000;
    for name in ["late-1", "late-2"] {
        p.enqueue(NewJob::new(name).id(id(name)).due(Due::At(far)))
            .await
            .unwrap();
    }
    // No mover ran while the time passed: both are now overdue, late-2 the older.
    c.batch_execute(
        "UPDATE delayq.cold SET due_at = now() - interval '5 seconds' WHERE id = 'late-1';
         UPDATE delayq.cold SET due_at = now() - interval '9 seconds' WHERE id = 'late-2';",
    )
    .await
    .unwrap();
    let due: Vec<u64> = cold_due(&t, &orders, &["late-1", "late-2"]).await;
    let now = delayq::job::system_now_ms();
    assert!(due.iter().all(|d| *d < now), "overdue: {due:?}");
    assert_eq!(t.move_due().await.unwrap(), 2);
    for (name, at) in ["late-1", "late-2"].iter().zip(&due) {
        let j = t.inner().get(&orders, &id(name)).await.unwrap().unwrap();
        assert!(
            !j.cold && j.due_at_ms >= *at,
            "{name}: {} < {at}",
            j.due_at_ms
        );
    }
    let mut batch = t
        .claim(
            &orders,
            delayq::ClaimRequest {
                max: 2,
                lease: Duration::from_secs(30),
                acks: vec![],
            },
        )
        .await
        .unwrap();
    let mut ids: Vec<String> = batch.jobs.drain(..).map(|j| j.id.to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["late-1", "late-2"], "both at once");
}

/// The due times the tier holds for `names` (read through `get`).
async fn cold_due(t: &Tiered<RedisBackend>, q: &delayq::QueueName, names: &[&str]) -> Vec<u64> {
    let mut out = Vec::new();
    for n in names {
        let j = t.get(q, &id(n)).await.unwrap().unwrap();
        assert!(j.cold);
        out.push(j.due_at_ms);
    }
    out
}

/// One move takes every due row, batch after batch and partition after partition, each batch
/// starting where the last stopped (due times shared across a batch's edge included); a row
/// another transaction holds is skipped by that move and taken by the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_takes_every_due_row_across_batches_and_partitions() {
    let orders = q("orders");
    let (t, mut c) = tiered(3_600_000, &orders).await;
    let p = Producer::new(t.clone(), orders.clone());
    let n = 5000;
    let first = delayq::job::system_now_ms() + 2 * 3_600_000;
    // Seven jobs a due time (so a batch of 2,000 ends inside a group), 70 days in all: over
    // three monthly partitions at least.
    let step = 70 * 86_400_000 / (n / 7);
    for lo in (0..n).step_by(1000) {
        let jobs = (lo..lo + 1000)
            .map(|i| {
                NewJob::new("x")
                    .id(id(&format!("j-{i:05}")))
                    .due(Due::At(first + (i / 7) * step))
            })
            .collect();
        p.enqueue_batch(jobs).await.unwrap();
    }
    let parts: i64 = c
        .query_one(
            "SELECT count(DISTINCT tableoid) FROM delayq.cold WHERE queue = 'orders'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(parts >= 3, "over {parts} partitions");
    // Another take holds the earliest job and one in the middle.
    let hold = c.transaction().await.unwrap();
    hold.execute(
        "SELECT 1 FROM delayq.cold WHERE queue = 'orders' AND id IN ('j-00000', 'j-02500') \
         FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let cold = t.cold().unwrap();
    cold.set_cold_after(&orders, Some(100 * 86_400_000))
        .await
        .unwrap();
    assert_eq!(t.move_due().await.unwrap(), n as usize - 2);
    assert_eq!(cold.count(&orders).await.unwrap(), 2);
    hold.rollback().await.unwrap();
    assert_eq!(t.move_due().await.unwrap(), 2, "the next move takes them");
    assert_eq!(cold.count(&orders).await.unwrap(), 0);
    let stats = t.inner().stats(&orders).await.unwrap();
    assert_eq!(stats.scheduled, n, "every job in the store once");
}
