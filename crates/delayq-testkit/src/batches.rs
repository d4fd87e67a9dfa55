//! Conformance tests of batches ([`delayq::Batches`]): a batch's callbacks are enqueued once,
//! only when it is closed and every job of it has ended — acked, dead or cancelled, each
//! counted once however it ended — with the counts (and results) in their payloads.

use std::time::Duration;

use super::{Time, req};
use delayq::batch::{BatchAdded, BatchState};
use delayq::{
    Backend, BatchId, BatchSpec, Batches, Callback, Error, Inspect, JobId, JobState, Nack, NewJob,
    Producer, QueueName,
};

fn qn(s: &str) -> QueueName {
    QueueName::new(s).unwrap()
}

fn member(name: &str) -> NewJob {
    NewJob::new(name.as_bytes().to_vec()).id(JobId::new(name).unwrap())
}

fn spec(cb: &QueueName, results: bool) -> BatchSpec {
    let mut done = Callback::new(cb.clone());
    done.payload = serde_json::json!({"report": "orders"});
    BatchSpec {
        on_complete: Some(done),
        on_success: Some(Callback::new(cb.clone())),
        include_results: results,
    }
}

async fn create<B: Backend + Batches>(
    b: &B,
    q: &QueueName,
    id: &str,
    spec: BatchSpec,
    jobs: Vec<NewJob>,
    open: bool,
) -> BatchAdded {
    Producer::new(b.clone(), q.clone())
        .create_batch(Some(BatchId::new(id).unwrap()), spec, jobs, open)
        .await
        .unwrap()
}

/// The `batch` object of callback `job` of `cb`, `None` while it does not exist.
async fn callback<B: Inspect>(b: &B, cb: &QueueName, job: JobId) -> Option<serde_json::Value> {
    let info = b.get(cb, &job).await.unwrap()?;
    let v: serde_json::Value = serde_json::from_slice(&info.payload).unwrap();
    Some(v)
}

async fn state<B: Batches>(b: &B, q: &QueueName, id: &BatchId) -> (BatchState, [u64; 4]) {
    let i = b.batch(q, id).await.unwrap().expect("the batch exists");
    let c = i.counts;
    (i.state, [c.pending, c.succeeded, c.dead, c.cancelled])
}

/// Claims every due job of `q`, returning them by id.
async fn claim_all<B: Backend>(b: &B, q: &QueueName) -> Vec<delayq::Job> {
    b.claim(q, req(100, 60_000)).await.unwrap().jobs
}

/// A batch's callback waits for its last job, counts each way a job ends once, and is
/// enqueued once: `on_complete` whatever happened, `on_success` only when none is dead.
pub async fn batches_call_back_once_when_done<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, cb) = (qn("batch-work"), qn("batch-cb"));
    let mut dying = member("b1-dies");
    dying.max_attempts = Some(1);
    let jobs = vec![
        member("b1-ok"),
        dying,
        member("b1-later").delay(Duration::from_secs(3600)),
    ];
    let added = create(&b, &q, "b1", spec(&cb, false), jobs, false).await;
    let id = added.id.clone();
    assert_eq!(id.as_str(), "b1");
    assert!(added.jobs.iter().all(|e| e.created));
    assert_eq!(state(&b, &q, &id).await, (BatchState::Closed, [3, 0, 0, 0]));
    t.pass(Duration::from_millis(2)).await;
    let leased = claim_all(&b, &q).await;
    assert_eq!(leased.len(), 2);
    for j in &leased {
        if j.id.as_str() == "b1-ok" {
            b.ack(&q, vec![j.to_ack()]).await.unwrap();
        } else {
            b.nack(&q, j.lease_ref(), Nack::error("boom"))
                .await
                .unwrap();
        }
    }
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Closed, [1, 1, 1, 0]));
    assert_eq!(
        callback(&b, &cb, id.complete_job()).await,
        None,
        "one job is left"
    );
    // The last one is cancelled: a cancelled job counts as ended.
    let out = b
        .cancel(&q, &JobId::new("b1-later").unwrap())
        .await
        .unwrap();
    assert_eq!(out, delayq::CancelOutcome::Cancelled);
    for _ in 0..2 {
        b.finish_batches(false).await.unwrap();
    }
    let (st, counts) = state(&b, &q, &id).await;
    assert_eq!((st, counts), (BatchState::Done, [0, 1, 1, 1]));
    let done = callback(&b, &cb, id.complete_job())
        .await
        .expect("on_complete enqueued");
    assert_eq!(done["report"], "orders");
    assert_eq!(
        done["batch"],
        serde_json::json!({"id": "b1", "total": 3, "succeeded": 1, "dead": 1, "cancelled": 1})
    );
    assert_eq!(
        callback(&b, &cb, id.success_job()).await,
        None,
        "a job is dead"
    );
    // Once: the callback queue holds one job, and a second sweep adds none.
    b.finish_batches(false).await.unwrap();
    let stats = b.stats(&cb).await.unwrap();
    assert_eq!(stats.scheduled + stats.due + stats.leased, 1);
    // Its job runs like any other and, done, is not enqueued again.
    t.pass(Duration::from_millis(2)).await;
    let run = claim_all(&b, &cb).await;
    assert_eq!(run.len(), 1);
    b.ack(&cb, vec![run[0].to_ack()]).await.unwrap();
    b.finish_batches(false).await.unwrap();
    let stats = b.stats(&cb).await.unwrap();
    assert_eq!(stats.scheduled + stats.due + stats.leased, 0);
    assert!(
        b.batch(&q, &BatchId::new("none").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}

/// An open batch takes jobs until it is closed; it is not done while open, even with every
/// job ended; closing it then finishes it; a closed batch takes no more.
pub async fn open_batches_take_jobs_until_closed<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, cb) = (qn("batch-open"), qn("batch-open-cb"));
    let p = Producer::new(b.clone(), q.clone());
    let id = create(&b, &q, "b2", spec(&cb, false), vec![member("b2-a")], true)
        .await
        .id;
    t.pass(Duration::from_millis(2)).await;
    let j = claim_all(&b, &q).await;
    b.ack(&q, vec![j[0].to_ack()]).await.unwrap();
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Open, [0, 1, 0, 0]));
    assert_eq!(
        callback(&b, &cb, id.complete_job()).await,
        None,
        "open: not done"
    );
    // More jobs join; one that exists already does not join again.
    let added = p
        .add_to_batch(&id, vec![member("b2-b"), member("b2-a-again")], false)
        .await
        .unwrap()
        .expect("the batch exists");
    assert_eq!(added.jobs.len(), 2);
    let again = p
        .add_to_batch(&id, vec![member("b2-b")], false)
        .await
        .unwrap()
        .unwrap();
    assert!(!again.jobs[0].created);
    assert_eq!(state(&b, &q, &id).await, (BatchState::Open, [2, 1, 0, 0]));
    let closed = b.close_batch(&q, &id).await.unwrap().unwrap();
    assert_eq!(closed.state, BatchState::Closed);
    let refused = p.add_to_batch(&id, vec![member("b2-c")], false).await;
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
    assert!(
        b.get(&q, &JobId::new("b2-c").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    let missing = p
        .add_to_batch(&BatchId::new("nope").unwrap(), vec![member("b2-d")], true)
        .await
        .unwrap();
    assert!(missing.is_none());
    t.pass(Duration::from_millis(2)).await;
    let rest = claim_all(&b, &q).await;
    assert_eq!(rest.len(), 2);
    b.ack(&q, rest.iter().map(delayq::Job::to_ack).collect())
        .await
        .unwrap();
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Done, [0, 3, 0, 0]));
    let done = callback(&b, &cb, id.complete_job()).await.unwrap();
    assert_eq!(done["batch"]["total"], 3);
    let ok = callback(&b, &cb, id.success_job())
        .await
        .expect("none dead: on_success");
    assert_eq!(ok["batch"]["succeeded"], 3);
    // An empty batch closed at once is done at once.
    let empty = create(&b, &q, "b2-empty", spec(&cb, false), Vec::new(), false)
        .await
        .id;
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &empty).await.0, BatchState::Done);
    let v = callback(&b, &cb, empty.complete_job()).await.unwrap();
    assert_eq!(v["batch"]["total"], 0);
    // The open ones are listed until done.
    let open = create(&b, &q, "b2-listed", spec(&cb, false), Vec::new(), true).await;
    let listed = b.open_batches(&q, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        [open.id.as_str()]
    );
}

/// However a job ends, it counts once: a retried job when it finally ends, a job whose lease
/// expires past its attempts as dead, and a dead job requeued and then acked not again. With
/// `include_results`, the callback carries each acked job's result.
pub async fn batch_jobs_count_once_however_they_end<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, cb) = (qn("batch-ends"), qn("batch-ends-cb"));
    let mut lapses = member("b3-lapses");
    lapses.max_attempts = Some(1);
    let mut retried = member("b3-retried");
    retried.max_attempts = Some(3);
    let id = create(&b, &q, "b3", spec(&cb, true), vec![lapses, retried], false)
        .await
        .id;
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&q, req(10, 1_000)).await.unwrap().jobs;
    assert_eq!(first.len(), 2);
    let r = first
        .iter()
        .find(|j| j.id.as_str() == "b3-retried")
        .unwrap();
    let mut again = Nack::error("again");
    again.retry_in = Some(Duration::ZERO);
    b.nack(&q, r.lease_ref(), again).await.unwrap();
    // The other's lease runs out: its only attempt is used, it is dead.
    t.pass(Duration::from_millis(1_100)).await;
    let second = claim_all(&b, &q).await;
    assert_eq!(
        second.len(),
        1,
        "the retried job again; the lapsed one is dead"
    );
    let dead = b.get(&q, &JobId::new("b3-lapses").unwrap()).await.unwrap();
    assert_eq!(dead.map(|i| i.state), Some(JobState::Dead));
    assert_eq!(state(&b, &q, &id).await.1, [1, 0, 1, 0]);
    // Its result rides on the next claim (claim.lua notes it for the batch as ack.lua does;
    // batch_results_are_bounded covers the ack call).
    let result = br#"{"sent":2}"#.to_vec();
    let mut carrying = req(1, 1_000);
    carrying.acks = vec![delayq::Ack::with_result(second[0].lease_ref(), result)];
    let claimed = b.claim(&q, carrying).await.unwrap();
    assert_eq!(claimed.acks, [delayq::AckOutcome::Acked]);
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Done, [0, 1, 1, 0]));
    let done = callback(&b, &cb, id.complete_job()).await.unwrap();
    assert_eq!(
        done["batch"]["results"],
        serde_json::json!({"b3-retried": {"sent": 2}})
    );
    // The dead job requeued and run again is not counted again.
    b.dead_requeue(&q, &JobId::new("b3-lapses").unwrap())
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let again = claim_all(&b, &q).await;
    assert_eq!(again.len(), 1);
    b.ack(&q, vec![again[0].to_ack()]).await.unwrap();
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Done, [0, 1, 1, 0]));
    let stats = b.stats(&cb).await.unwrap();
    assert_eq!(
        stats.scheduled + stats.due,
        1,
        "on_complete only: a job is dead"
    );
}

/// Bad batches change nothing: a callback payload that is not an object, an id too long, a
/// job that names its batch itself.
pub async fn bad_batches_are_refused<B: Backend + Inspect + Batches>(b: B, _t: Time) {
    let q = qn("batch-bad");
    let p = Producer::new(b.clone(), q.clone());
    let mut bad = spec(&qn("batch-bad-cb"), false);
    bad.on_complete.as_mut().unwrap().payload = serde_json::json!([1, 2]);
    let r = p
        .create_batch(
            Some(BatchId::new("x").unwrap()),
            bad,
            vec![member("bad-1")],
            false,
        )
        .await;
    assert!(matches!(r, Err(Error::Invalid(_))), "{r:?}");
    // A callback its queue would not take (a push queue without a default target takes only
    // jobs with one): refused at once, not when the batch is done.
    let push = qn("batch-bad-push");
    let s = delayq::QueueSettings {
        delivery: delayq::DeliveryMode::Push,
        ..delayq::QueueSettings::default()
    };
    b.configure(&push, s).await.unwrap();
    let r = p
        .create_batch(
            Some(BatchId::new("x").unwrap()),
            spec(&push, false),
            vec![member("bad-1")],
            false,
        )
        .await;
    assert!(
        matches!(r, Err(Error::Invalid(delayq::InvalidInput::Delivery(_)))),
        "{r:?}"
    );
    // A job its queue would not take (a push queue without a default target): refused with
    // nothing written — no empty batch left behind.
    let r = Producer::new(b.clone(), push.clone())
        .create_batch(
            Some(BatchId::new("y").unwrap()),
            spec(&q, false),
            vec![member("bad-3")],
            false,
        )
        .await;
    assert!(
        matches!(r, Err(Error::Invalid(delayq::InvalidInput::Delivery(_)))),
        "{r:?}"
    );
    let y = BatchId::new("y").unwrap();
    assert!(b.batch(&push, &y).await.unwrap().is_none(), "no batch y");
    assert!(b.open_batches(&push, 10).await.unwrap().is_empty());
    assert!(BatchId::new("x".repeat(300)).is_err());
    assert!(BatchId::new("a\nb").is_err());
    let mut sneaky = member("bad-2");
    sneaky.batch = Some(BatchId::new("x").unwrap());
    assert!(p.enqueue(sneaky).await.is_err());
    assert!(
        b.batch(&q, &BatchId::new("x").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        b.get(&q, &JobId::new("bad-1").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        b.get(&q, &JobId::new("bad-2").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}

/// A batch's callback cannot be pre-empted: a producer that guesses a batch id and enqueues
/// its callback's id first is refused (alone, in a batch of jobs, or as a batch member), and
/// the batch's own callback then arrives with the batch's payload.
pub async fn batch_callbacks_cannot_be_squatted<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, cb) = (qn("batch-squat"), qn("batch-squat-cb"));
    let p = Producer::new(b.clone(), cb.clone());
    let squat = JobId::new("batch-sq-complete").unwrap();
    for forged in ["batch-sq-complete", "batch-sq-success"] {
        let r = p
            .enqueue(NewJob::new(b"forged".to_vec()).id(JobId::new(forged).unwrap()))
            .await;
        assert!(
            matches!(r, Err(Error::Invalid(delayq::InvalidInput::JobId(ref m))) if m.contains("reserved")),
            "{r:?}"
        );
    }
    let r = p
        .enqueue_batch(vec![
            member("fine"),
            NewJob::new(b"forged".to_vec()).id(squat.clone()),
        ])
        .await;
    assert!(matches!(r, Err(Error::Invalid(_))), "{r:?}");
    assert!(b.get(&cb, &squat).await.unwrap().is_none());
    assert!(
        b.get(&cb, &JobId::new("fine").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    // Ids that only look alike stay free.
    for free in [
        "batch-",
        "batch--complete",
        "my-batch-1-complete",
        "batch-1-completed",
    ] {
        p.enqueue(NewJob::new(b"ok".to_vec()).id(JobId::new(free).unwrap()))
            .await
            .unwrap_or_else(|e| panic!("{free}: {e}"));
    }
    let added = create(&b, &q, "sq", spec(&cb, false), vec![member("sq-1")], false).await;
    assert_eq!(added.jobs.len(), 1);
    t.pass(Duration::from_millis(2)).await;
    let jobs = claim_all(&b, &q).await;
    b.ack(&q, vec![jobs[0].to_ack()]).await.unwrap();
    for _ in 0..2 {
        b.finish_batches(false).await.unwrap();
    }
    let fired = callback(&b, &cb, squat.clone())
        .await
        .expect("the batch's own callback");
    assert_eq!(fired["report"], "orders", "{fired}");
    assert_eq!(fired["batch"]["id"], "sq", "{fired}");
}

/// One batch whose callback its queue no longer takes (switched to push without a default
/// target after the batch was made) touches only itself: another batch's callbacks arrive.
pub async fn one_bad_batch_touches_only_itself<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, bad_cb, good_cb) = (qn("batch-iso"), qn("batch-iso-bad"), qn("batch-iso-good"));
    for (id, cb, job) in [
        ("iso-bad", &bad_cb, "iso-1"),
        ("iso-good", &good_cb, "iso-2"),
    ] {
        create(&b, &q, id, spec(cb, false), vec![member(job)], false).await;
    }
    let s = delayq::QueueSettings {
        delivery: delayq::DeliveryMode::Push,
        ..delayq::QueueSettings::default()
    };
    b.configure(&bad_cb, s).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let jobs = claim_all(&b, &q).await;
    assert_eq!(jobs.len(), 2);
    // Either order of the two batches: the bad one must not stop the good one.
    for j in &jobs {
        b.ack(&q, vec![j.to_ack()]).await.unwrap();
    }
    for _ in 0..2 {
        let _ = b.finish_batches(true).await;
    }
    let good = BatchId::new("iso-good").unwrap();
    let fired = callback(&b, &good_cb, good.complete_job())
        .await
        .expect("the good batch's callback");
    assert_eq!(fired["batch"]["id"], "iso-good");
    assert_eq!(state(&b, &q, &good).await.0, BatchState::Done);
    // The bad one: the embedded store enqueues its callback in the step that ends its last
    // job (its queue's pusher then dead-letters it, saying it has no target); Redis keeps it
    // visible as failed, with the reason, and tries it again with a backoff.
    let bad = BatchId::new("iso-bad").unwrap();
    let info = b.batch(&q, &bad).await.unwrap().unwrap();
    if info.state == BatchState::Done {
        assert!(callback(&b, &bad_cb, bad.complete_job()).await.is_some());
        return;
    }
    assert_eq!(info.state, BatchState::CallbackFailed, "{info:?}");
    let failure = info.callback_failure.expect("the reason is kept");
    assert!(failure.reason.contains("batch-iso-bad"), "{failure:?}");
    assert_eq!(failure.attempts, 1, "later sweeps wait for the backoff");
    assert_eq!(info.counts.succeeded, 1);
    // Still failing after the backoff: tried once more, the next try further away.
    t.pass(delayq::batch::callback_retry_in(1) + Duration::from_millis(10))
        .await;
    b.finish_batches(true).await.unwrap();
    let again = b.batch(&q, &bad).await.unwrap().unwrap();
    let f2 = again.callback_failure.expect("failed again");
    assert_eq!(f2.attempts, 2);
    assert!(f2.next_try_ms > failure.next_try_ms);
    // Mended: its next try enqueues the callback, and the batch is done.
    b.configure(&bad_cb, delayq::QueueSettings::default())
        .await
        .unwrap();
    b.finish_batches(true).await.unwrap();
    assert_eq!(state(&b, &q, &bad).await.0, BatchState::CallbackFailed);
    t.pass(delayq::batch::callback_retry_in(2) + Duration::from_millis(10))
        .await;
    b.finish_batches(true).await.unwrap();
    let done = b.batch(&q, &bad).await.unwrap().unwrap();
    assert_eq!(done.state, BatchState::Done);
    assert_eq!(done.callback_failure, None);
    assert!(callback(&b, &bad_cb, bad.complete_job()).await.is_some());
}

/// A batch costs what its callback carries: of 40 results of ~64 KiB, the callback carries
/// the 16 that fit its 1 MiB and says how many it left out; the results do not outlive it.
pub async fn batch_results_are_bounded<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, cb) = (qn("batch-big"), qn("batch-big-cb"));
    let jobs: Vec<NewJob> = (0..40).map(|i| member(&format!("big-{i:02}"))).collect();
    let id = create(&b, &q, "big", spec(&cb, true), jobs, false).await.id;
    t.pass(Duration::from_millis(2)).await;
    let leased = claim_all(&b, &q).await;
    assert_eq!(leased.len(), 40);
    // The largest result each (64 KiB less a byte): a string and its quotes.
    let big = |j: &delayq::Job| {
        let text = format!(
            "{}{}",
            j.id,
            "x".repeat(delayq::limits::MAX_RESULT_BYTES - 8)
        );
        serde_json::to_vec(&serde_json::Value::String(text)).unwrap()
    };
    assert_eq!(big(&leased[0]).len(), delayq::limits::MAX_RESULT_BYTES);
    for chunk in leased.chunks(7) {
        let acks = chunk
            .iter()
            .map(|j| delayq::Ack::with_result(j.lease_ref(), big(j)));
        b.ack(&q, acks.collect()).await.unwrap();
    }
    b.finish_batches(true).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Done, [0, 40, 0, 0]));
    let done = callback(&b, &cb, id.complete_job()).await.unwrap();
    let results = done["batch"]["results"].as_object().unwrap();
    assert_eq!(results.len(), 16, "1 MiB of 64 KiB results");
    assert_eq!(done["batch"]["results_left_out"], 24);
    for (job, r) in results {
        assert!(r.as_str().unwrap().starts_with(job.as_str()), "{job}");
    }
}

/// A batch's jobs spread over the shards of a sharded queue (each counted in its own shard):
/// the batch is done only when the last of them, on whichever shard, has ended (Redis runs
/// this on a Cluster and on one server).
pub async fn batches_on_a_sharded_queue<B: Backend + Inspect + Batches>(b: B, t: Time) {
    let (q, cb) = (qn("batch-sharded"), qn("batch-sharded-cb"));
    b.configure(&q, delayq::QueueSettings::with_shards(8))
        .await
        .unwrap();
    let jobs: Vec<NewJob> = (0..24).map(|i| member(&format!("b5-{i:02}"))).collect();
    let shards: std::collections::HashSet<u64> = jobs
        .iter()
        .map(|j| delayq::placement_hash(j.id.as_ref().unwrap().as_str()) % 8)
        .collect();
    assert!(shards.len() > 3, "spread: {shards:?}");
    let id = create(&b, &q, "b5", spec(&cb, true), jobs, false).await.id;
    t.pass(Duration::from_millis(2)).await;
    let mut leased = Vec::new();
    while leased.len() < 24 {
        let got = claim_all(&b, &q).await;
        assert!(!got.is_empty(), "every job is claimed");
        leased.extend(got);
    }
    let last = leased.pop().unwrap();
    let acks = leased
        .iter()
        .map(|j| delayq::Ack::with_result(j.lease_ref(), j.payload.clone()));
    b.ack(&q, acks.collect()).await.unwrap();
    b.finish_batches(false).await.unwrap();
    assert_eq!(
        state(&b, &q, &id).await,
        (BatchState::Closed, [1, 23, 0, 0])
    );
    assert_eq!(callback(&b, &cb, id.complete_job()).await, None);
    let refused = Producer::new(b.clone(), q.clone())
        .add_to_batch(&id, vec![member("b5-late")], false)
        .await;
    assert!(matches!(refused, Err(Error::Conflict(_))), "{refused:?}");
    b.ack(
        &q,
        vec![delayq::Ack::with_result(
            last.lease_ref(),
            last.payload.clone(),
        )],
    )
    .await
    .unwrap();
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Done, [0, 24, 0, 0]));
    let done = callback(&b, &cb, id.complete_job()).await.unwrap();
    assert_eq!(done["batch"]["total"], 24);
    let results = done["batch"]["results"].as_object().unwrap();
    assert_eq!(results.len(), 24);
    assert_eq!(results["b5-07"], "b5-07");
}

/// A job cancelled while it runs counts once as cancelled in its batch (its worker's late ack
/// changes nothing), and the batch finishes with its callback.
pub async fn batches_count_a_job_cancelled_while_it_runs<B: Backend + Inspect + Batches>(
    b: B,
    t: Time,
) {
    let (q, cb) = (qn("batch-cxl"), qn("batch-cxl-cb"));
    let jobs = vec![member("b9-run"), member("b9-ok")];
    let id = create(&b, &q, "b9", spec(&cb, false), jobs, false).await.id;
    t.pass(Duration::from_millis(2)).await;
    let claimed = claim_all(&b, &q).await;
    assert_eq!(claimed.len(), 2);
    let run = claimed.iter().find(|j| j.id.as_str() == "b9-run").unwrap();
    let ok = claimed.iter().find(|j| j.id.as_str() == "b9-ok").unwrap();
    assert_eq!(
        b.cancel_running(&q, &run.id).await.unwrap(),
        delayq::CancelOutcome::Cancelling
    );
    assert_eq!(state(&b, &q, &id).await.1, [1, 0, 0, 1]);
    assert_eq!(
        b.cancel_running(&q, &run.id).await.unwrap(),
        delayq::CancelOutcome::NotFound,
        "not counted twice"
    );
    assert_eq!(
        b.ack(&q, vec![ok.to_ack(), run.to_ack()]).await.unwrap(),
        [delayq::AckOutcome::Acked, delayq::AckOutcome::Cancelled]
    );
    b.finish_batches(false).await.unwrap();
    assert_eq!(state(&b, &q, &id).await, (BatchState::Done, [0, 1, 0, 1]));
    let done = callback(&b, &cb, id.complete_job()).await;
    assert_eq!(
        done.map(|v| v["batch"]["cancelled"].clone()),
        Some(serde_json::json!(1)),
        "on_complete with the cancelled job counted"
    );
}
