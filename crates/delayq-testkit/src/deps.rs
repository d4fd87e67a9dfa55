//! Conformance tests of jobs that wait for other jobs ([`delayq::deps`]): chains and fan-in
//! run in order, a dependent's due time still counts, each failure policy, dependencies that
//! ended before, results riding on the dependent's claim, and a waiting job as the admin side
//! sees it.

use std::time::Duration;

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, DepOutcome, DepRef, Inspect, JobId, JobState,
    ListRequest, ListState, Nack, NewJob, OnDependencyFailure, Producer, QueueName,
};

use super::{Time, id, job, q, req};

fn dep(q: &QueueName, name: &str) -> DepRef {
    DepRef {
        queue: q.clone(),
        id: id(name),
    }
}

/// Job `name` of `q` due now, waiting for `deps` (same queue).
fn after(q: &QueueName, name: &str, deps: &[&str]) -> NewJob {
    job(name, 0).depends_on(deps.iter().map(|d| dep(q, d)))
}

/// The ids a claim of up to 10 leases, sorted, each acked (with `result` as its result).
async fn run_due<B: Backend>(b: &B, q: &QueueName, result: Option<&[u8]>) -> Vec<String> {
    let got = b.claim(q, req(10, 60_000)).await.unwrap().jobs;
    let mut ids: Vec<String> = got.iter().map(|j| j.id.to_string()).collect();
    ids.sort();
    let acks = got
        .iter()
        .map(|j| match result {
            Some(r) => Ack::with_result(j.lease_ref(), r.to_vec()),
            None => j.to_ack(),
        })
        .collect();
    let out = b.ack(q, acks).await.unwrap();
    assert!(out.iter().all(|o| *o == AckOutcome::Acked), "{out:?}");
    ids
}

async fn state_of<B: Inspect>(b: &B, q: &QueueName, name: &str) -> Option<JobState> {
    b.get(q, &id(name)).await.unwrap().map(|j| j.state)
}

/// A chain (resize → thumbnails → email) runs one step at a time: each waits until the one
/// before is acked, and a waiting job is never claimed.
pub async fn a_chain_runs_in_order<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    // In one batch, each before its dependency: the batch is written dependencies first.
    let out = p
        .enqueue_batch(vec![
            after(&q, "email", &["thumbs"]),
            after(&q, "thumbs", &["resize"]),
            job("resize", 0),
        ])
        .await
        .unwrap();
    let ids: Vec<&str> = out.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        ["email", "thumbs", "resize"],
        "answers in the order given"
    );
    assert_eq!(state_of(&b, &q, "thumbs").await, Some(JobState::Waiting));
    assert_eq!(state_of(&b, &q, "email").await, Some(JobState::Waiting));
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["resize"]);
    assert_eq!(state_of(&b, &q, "email").await, Some(JobState::Waiting));
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["thumbs"]);
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["email"]);
    assert!(b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty());
}

/// A job waiting for several (one in another queue) starts only once the last has ended; its
/// `get` lists them and which are pending; while it waits it is counted and listed as
/// waiting.
pub async fn fan_in_waits_for_every_dependency<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let other = QueueName::new("deps-other").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    Producer::new(b.clone(), other.clone())
        .enqueue(job("x3", 0))
        .await
        .unwrap();
    let deps = vec![dep(&q, "x1"), dep(&q, "x2"), dep(&other, "x3")];
    p.enqueue_batch(vec![
        job("x1", 0),
        job("x2", 0),
        job("join", 0).depends_on(deps),
    ])
    .await
    .unwrap();
    let stats = b.stats(&q).await.unwrap();
    assert_eq!((stats.awaiting, stats.due), (1, 2), "{stats:?}");
    let waiting = b
        .list(&q, ListRequest::new(ListState::Waiting, 10, None))
        .await
        .unwrap();
    assert_eq!(waiting.jobs.len(), 1);
    assert_eq!(waiting.jobs[0].id.as_str(), "join");
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["x1", "x2"]);
    let info = b.get(&q, &id("join")).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Waiting);
    let states: Vec<(String, DepOutcome)> = info
        .dependencies
        .iter()
        .map(|d| (d.dep.to_string(), d.state))
        .collect();
    assert_eq!(
        states,
        [
            ("conformance/x1".to_owned(), DepOutcome::Done),
            ("conformance/x2".to_owned(), DepOutcome::Done),
            ("deps-other/x3".to_owned(), DepOutcome::Pending),
        ]
    );
    assert!(b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty());
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &other, None).await, ["x3"]);
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["join"]);
}

/// A dependent is due at the later of its own due time and its last dependency's end: a job
/// due in a minute whose dependency ends at once still waits the minute, and a job due now
/// whose dependency ends later starts then.
pub async fn a_dependents_own_due_time_still_counts<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![
        job("first", 0),
        job("later", 60_000).depends_on([dep(&q, "first")]),
    ])
    .await
    .unwrap();
    let due_at = b.get(&q, &id("later")).await.unwrap().unwrap().due_at_ms;
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["first"]);
    assert_eq!(state_of(&b, &q, "later").await, Some(JobState::Scheduled));
    assert_eq!(
        b.get(&q, &id("later")).await.unwrap().unwrap().due_at_ms,
        due_at
    );
    t.pass(Duration::from_millis(30_000)).await;
    assert!(b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty());
    t.pass(Duration::from_millis(30_100)).await;
    assert_eq!(run_due(&b, &q, None).await, ["later"]);
}

/// A dead or cancelled dependency: the default policy dead-letters the dependent (naming the
/// dependency), `cancel` cancels it, `run` runs it once every dependency has ended; a
/// dead-lettered dependent's own dependents hear of it in turn.
pub async fn each_failure_policy<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    let on = |name: &str, policy| {
        job(name, 0)
            .depends_on([dep(&q, "broken")])
            .on_dependency_failure(policy)
    };
    p.enqueue_batch(vec![
        job("broken", 0),
        on("d-dead", OnDependencyFailure::Dead),
        on("d-cancel", OnDependencyFailure::Cancel),
        on("d-run", OnDependencyFailure::Run),
        after(&q, "d-next", &["d-dead"]),
        job("gone", 60_000),
        job("c-dead", 0).depends_on([dep(&q, "gone")]),
    ])
    .await
    .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 1, "only the dependency runs");
    let nack = Nack {
        dead: true,
        ..Nack::error("boom")
    };
    b.nack(&q, got[0].lease_ref(), nack).await.unwrap();
    let dead = b.get(&q, &id("d-dead")).await.unwrap().unwrap();
    assert_eq!(dead.state, JobState::Dead);
    assert_eq!(
        dead.last_error.as_deref(),
        Some("dependency conformance/broken dead")
    );
    assert_eq!(state_of(&b, &q, "d-cancel").await, None, "cancelled");
    let next = b.get(&q, &id("d-next")).await.unwrap().unwrap();
    assert_eq!(
        (next.state, next.last_error.as_deref()),
        (JobState::Dead, Some("dependency conformance/d-dead dead")),
        "a dead dependent's dependents hear of it"
    );
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["d-run"]);
    // A cancelled dependency.
    assert_eq!(
        b.cancel(&q, &id("gone")).await.unwrap(),
        CancelOutcome::Cancelled
    );
    let c = b.get(&q, &id("c-dead")).await.unwrap().unwrap();
    assert_eq!(
        (c.state, c.last_error.as_deref()),
        (
            JobState::Dead,
            Some("dependency conformance/gone cancelled")
        )
    );
}

/// A dependency that ended before the dependent was enqueued counts as ended: one unknown
/// (gone) or done lets it start at once; one dead applies the failure policy at once.
pub async fn dependencies_that_ended_before_count_as_ended<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("was-dead", 0)).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    let nack = Nack {
        dead: true,
        ..Nack::error("boom")
    };
    b.nack(&q, got[0].lease_ref(), nack).await.unwrap();
    p.enqueue_batch(vec![
        after(&q, "on-unknown", &["never-was"]),
        after(&q, "on-dead", &["was-dead"]),
    ])
    .await
    .unwrap();
    assert_eq!(
        state_of(&b, &q, "on-unknown").await,
        Some(JobState::Scheduled)
    );
    assert_eq!(state_of(&b, &q, "on-dead").await, Some(JobState::Dead));
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, None).await, ["on-unknown"]);
}

/// A dependent enqueued with `include_dependency_results` gets, in its claim, each
/// dependency with how it ended and its result.
pub async fn results_ride_on_the_dependents_claim<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![
        job("size", 0),
        job("report", 0)
            .depends_on([dep(&q, "size")])
            .include_dependency_results(true),
        after(&q, "plain", &["size"]),
    ])
    .await
    .unwrap();
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(run_due(&b, &q, Some(b"{\"bytes\":42}")).await, ["size"]);
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    let report = got.iter().find(|j| j.id.as_str() == "report").unwrap();
    assert_eq!(report.dependencies.len(), 1);
    let d = &report.dependencies[0];
    assert_eq!(
        (d.dep.to_string(), d.state, d.result.as_deref()),
        (
            "conformance/size".to_owned(),
            DepOutcome::Done,
            Some(&b"{\"bytes\":42}"[..])
        )
    );
    let plain = got.iter().find(|j| j.id.as_str() == "plain").unwrap();
    assert!(plain.dependencies.is_empty(), "not asked for");
}

/// A waiting job is cancelled and rescheduled like a scheduled one (it keeps waiting), and
/// bad dependency lists are refused with nothing written.
pub async fn waiting_jobs_are_cancelled_rescheduled_and_checked<B: Backend + Inspect>(
    b: B,
    t: Time,
) {
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![
        job("base", 60_000),
        after(&q, "w1", &["base"]),
        after(&q, "w2", &["base"]),
    ])
    .await
    .unwrap();
    assert_eq!(
        b.cancel(&q, &id("w1")).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert_eq!(state_of(&b, &q, "w1").await, None);
    let at = t.now_ms() + 3_600_000;
    b.reschedule(&q, &id("w2"), delayq::Due::At(at))
        .await
        .unwrap();
    let w2 = b.get(&q, &id("w2")).await.unwrap().unwrap();
    assert_eq!((w2.state, w2.due_at_ms), (JobState::Waiting, at));
    // Bad lists.
    let me = JobId::new("self").unwrap();
    for bad in [
        job("self", 0).depends_on([dep(&q, "self")]),
        job("twice", 0).depends_on([dep(&q, "base"), dep(&q, "base")]),
        job("none", 0).depends_on([]),
        job("many", 0)
            .depends_on((0..=delayq::deps::MAX_DEPENDENCIES).map(|i| dep(&q, &format!("d{i}")))),
    ] {
        let e = p.enqueue(bad).await.unwrap_err();
        assert!(matches!(e, delayq::Error::Invalid(_)), "{e:?}");
    }
    assert!(b.get(&q, &me).await.unwrap().is_none());
    // A cycle inside one batch.
    let e = p
        .enqueue_batch(vec![
            job("loop-a", 0).depends_on([dep(&q, "loop-b")]),
            job("loop-b", 0).depends_on([dep(&q, "loop-a")]),
        ])
        .await
        .unwrap_err();
    assert!(matches!(e, delayq::Error::Invalid(_)), "{e:?}");
    assert!(b.get(&q, &id("loop-a")).await.unwrap().is_none());
    assert_eq!(b.stats(&q).await.unwrap().awaiting, 1);
}

/// A consumer runs a chain step after step without waiting out its idle sleep: the ack that
/// ends a step makes the next one due, and the consumer hears of it (the wake-up is not
/// swallowed by the ack's own flush).
pub async fn a_consumer_runs_a_chain_step_after_step<B: Backend + Inspect>(b: B, t: Time) {
    use std::sync::{Arc, Mutex};
    let q = q();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue_batch(vec![
        job("s1", 0),
        after(&q, "s2", &["s1"]),
        after(&q, "s3", &["s2"]),
    ])
    .await
    .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let opts = delayq::ConsumerOptions {
        concurrency: 1,
        max_idle: Duration::from_secs(600),
        ..delayq::ConsumerOptions::default()
    };
    let c = delayq::Consumer::new(b.clone(), q.clone(), opts).unwrap();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let r = ran.clone();
    let run = tokio::spawn(c.run(
        move |j: delayq::Job| {
            let r = r.clone();
            async move {
                r.lock().unwrap().push(j.id.to_string());
                Ok::<(), String>(())
            }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    // (Real time: a bound on liveness, far below the idle sleep a swallowed wake-up costs.)
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ran.lock().unwrap().len() < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(true).unwrap();
    run.await.unwrap().unwrap();
    assert_eq!(*ran.lock().unwrap(), ["s1", "s2", "s3"]);
}

/// A dependency kept as done (the queue's retention) counts as ended, its result riding on
/// the dependent's claim; results are kept while they fit `deps::MAX_RESULT_BYTES` together.
pub async fn done_dependencies_count_and_results_are_bounded<B: Backend + Inspect>(b: B, t: Time) {
    let q = q();
    let s = delayq::QueueSettings {
        retention: delayq::Retention {
            keep_done_ms: 600_000,
            dedupe_ms: 0,
        },
        ..delayq::QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let big = vec![b'x'; 60_000];
    let parts: Vec<String> = (0..20).map(|i| format!("part-{i:02}")).collect();
    p.enqueue_batch(parts.iter().map(|n| job(n, 0)).collect())
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    // Acked with 60 kB results each: 20 of them are 1.2 MB, over the room.
    for _ in 0..5 {
        let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
        let acks = got
            .iter()
            .map(|j| Ack::with_result(j.lease_ref(), big.clone()))
            .collect();
        b.ack(&q, acks).await.unwrap();
    }
    assert_eq!(b.stats(&q).await.unwrap().done, 20);
    p.enqueue(
        job("report", 0)
            .depends_on(parts.iter().map(|n| dep(&q, n)))
            .include_dependency_results(true),
    )
    .await
    .unwrap();
    assert_eq!(state_of(&b, &q, "report").await, Some(JobState::Scheduled));
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    let report = got.iter().find(|j| j.id.as_str() == "report").unwrap();
    assert_eq!(report.dependencies.len(), 20);
    assert!(
        report
            .dependencies
            .iter()
            .all(|d| d.state == DepOutcome::Done)
    );
    let kept: usize = report
        .dependencies
        .iter()
        .filter_map(|d| d.result.as_ref())
        .map(Vec::len)
        .sum();
    assert!(kept <= delayq::deps::MAX_RESULT_BYTES, "{kept}");
    assert_eq!(kept, 17 * 60_000, "as many as fit");
}
