//! Conformance test of results (issue 35): a handler's result is kept with its job while the
//! job is kept as done, answered by `get`, never by another lease's ack, refused over the
//! limit; a job deleted on its ack (no retention) takes its result with it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Time, id, job, req};
use delayq::{
    AckOutcome, Backend, Completion, Consumer, ConsumerOptions, Error, Inspect, InvalidInput, Job,
    JobState, Producer, QueueName, QueueSettings, Retention,
};

/// Makes `q` keep its done jobs for a minute, without a dedupe window.
async fn keeps_done_jobs<B: Backend + Inspect>(b: &B, q: &QueueName) {
    let keep = QueueSettings {
        retention: Retention {
            keep_done_ms: 60_000,
            dedupe_ms: 0,
        },
        ..QueueSettings::default()
    };
    b.configure(q, keep).await.unwrap();
}

/// Results on a queue that keeps done jobs, and on one that does not.
pub async fn results_stay_with_done_jobs<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("results").unwrap();
    keeps_done_jobs(&b, &q).await;
    let p = Producer::new(b.clone(), q.clone());
    for name in ["json", "bytes", "stale", "big", "plain"] {
        p.enqueue(job(name, 0)).await.unwrap();
    }
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 5);
    let lease = |name: &str| {
        got.iter()
            .find(|j| j.id.as_str() == name)
            .unwrap()
            .lease_ref()
    };
    let get = |name: &'static str| {
        let b = b.clone();
        let q = q.clone();
        async move { b.get(&q, &id(name)).await.unwrap() }
    };

    // JSON and arbitrary bytes come back byte for byte.
    let json = br#"{"sent": 3, "to": ["a@example.com"]}"#.to_vec();
    let o = b
        .ack(
            &q,
            vec![delayq::Ack::with_result(lease("json"), json.clone())],
        )
        .await
        .map(|o| o[0])
        .unwrap();
    assert_eq!(o, AckOutcome::Acked);
    let done = get("json").await.expect("kept as done");
    assert_eq!((done.state, done.result), (JobState::Done, Some(json)));
    let bytes = vec![0u8, 255, 1, b'"', 0xC3];
    let o = b
        .ack(
            &q,
            vec![delayq::Ack::with_result(lease("bytes"), bytes.clone())],
        )
        .await
        .map(|o| o[0]);
    assert_eq!(o.unwrap(), AckOutcome::Acked);
    assert_eq!(get("bytes").await.unwrap().result, Some(bytes));

    // Another lease's token: refused, nothing kept; the job is still leased.
    let mut stale = lease("stale");
    stale.token += 1_000_000;
    let o = b
        .ack(&q, vec![delayq::Ack::with_result(stale, b"no".to_vec())])
        .await
        .map(|o| o[0])
        .unwrap();
    assert_eq!(o, AckOutcome::LeaseLost);
    let still = get("stale").await.unwrap();
    assert_eq!((still.state, still.result), (JobState::Leased, None));
    // The same ack again after it went through (a resend after a lost reply): not acked twice.
    let o = b
        .ack(
            &q,
            vec![delayq::Ack::with_result(lease("json"), b"again".to_vec())],
        )
        .await
        .map(|o| o[0]);
    assert_ne!(o.unwrap(), AckOutcome::Acked);
    assert_eq!(
        get("json").await.unwrap().result.as_deref(),
        Some(&br#"{"sent": 3, "to": ["a@example.com"]}"#[..])
    );

    // Over the limit: a typed error, the job untouched.
    let big = vec![b'x'; delayq::limits::MAX_RESULT_BYTES + 1];
    match b
        .ack(&q, vec![delayq::Ack::with_result(lease("big"), big)])
        .await
        .map(|o| o[0])
    {
        Err(Error::Invalid(InvalidInput::ResultTooLarge(n))) => {
            assert_eq!(n, delayq::limits::MAX_RESULT_BYTES + 1)
        }
        other => panic!("an oversized result must be refused: {other:?}"),
    }
    assert_eq!(get("big").await.unwrap().state, JobState::Leased);
    // At the limit exactly: kept.
    let most = vec![b'y'; delayq::limits::MAX_RESULT_BYTES];
    let o = b
        .ack(
            &q,
            vec![delayq::Ack::with_result(lease("big"), most.clone())],
        )
        .await
        .map(|o| o[0])
        .unwrap();
    assert_eq!(o, AckOutcome::Acked);
    assert_eq!(get("big").await.unwrap().result, Some(most));

    // A plain ack keeps the job without a result.
    let o = b
        .ack(&q, vec![delayq::Ack::from(lease("plain"))])
        .await
        .unwrap();
    assert_eq!(o, [AckOutcome::Acked]);
    let plain = get("plain").await.unwrap();
    assert_eq!((plain.state, plain.result), (JobState::Done, None));

    // The id enqueued again (no dedupe window): a new job, without the old result.
    assert!(p.enqueue(job("json", 0)).await.unwrap().created);
    let again = get("json").await.unwrap();
    assert_eq!((again.state, again.result), (JobState::Scheduled, None));

    // Several in one call, on any shard: outcomes in order, each result with its job.
    for name in ["m1", "m2"] {
        p.enqueue(job(name, 0)).await.unwrap();
    }
    t.pass(Duration::from_millis(2)).await;
    let more = b.claim(&q, req(10, 30_000)).await.unwrap().jobs;
    let m = |name: &str| {
        more.iter()
            .find(|j| j.id.as_str() == name)
            .unwrap()
            .lease_ref()
    };
    let mut stale = m("m2");
    stale.token += 1_000_000;
    let acks = vec![
        (m("m1"), b"1".to_vec()),
        (stale, b"x".to_vec()),
        (m("m2"), b"2".to_vec()),
    ];
    let acks = acks
        .into_iter()
        .map(|(l, r)| delayq::Ack::with_result(l, r))
        .collect();
    let out = b.ack(&q, acks).await.unwrap();
    assert_eq!(
        out,
        [AckOutcome::Acked, AckOutcome::LeaseLost, AckOutcome::Acked]
    );
    assert_eq!(get("m1").await.unwrap().result.as_deref(), Some(&b"1"[..]));
    assert_eq!(get("m2").await.unwrap().result.as_deref(), Some(&b"2"[..]));

    // A queue without retention: acked and deleted, result and all.
    let gone = QueueName::new("results-gone").unwrap();
    Producer::new(b.clone(), gone.clone())
        .enqueue(job("g", 0))
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let g = b.claim(&gone, req(1, 30_000)).await.unwrap().jobs;
    let o = b
        .ack(
            &gone,
            vec![delayq::Ack::with_result(g[0].lease_ref(), b"1".to_vec())],
        )
        .await
        .map(|o| o[0]);
    assert_eq!(o.unwrap(), AckOutcome::Acked);
    assert_eq!(b.get(&gone, &id("g")).await.unwrap(), None);
}

/// Acks with results ride on a claim like plain ones: each result kept with its job, the
/// outcomes in order; a result over the limit refuses the whole claim, nothing changed.
pub async fn results_ride_on_claims<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("results-claim").unwrap();
    keeps_done_jobs(&b, &q).await;
    let p = Producer::new(b.clone(), q.clone());
    for name in ["c1", "c2", "c3", "c4"] {
        p.enqueue(job(name, 0)).await.unwrap();
    }
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(2, 30_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 2);
    let mut stale = got[1].lease_ref();
    stale.token += 1_000_000;
    let acks = vec![
        delayq::Ack::with_result(got[0].lease_ref(), br#"{"n":1}"#.to_vec()),
        delayq::Ack::with_result(stale, b"x".to_vec()),
        got[1].to_ack(),
    ];
    let refused = vec![delayq::Ack::with_result(
        got[0].lease_ref(),
        vec![b'x'; delayq::limits::MAX_RESULT_BYTES + 1],
    )];
    let mut too_big = req(2, 30_000);
    too_big.acks = refused;
    match b.claim(&q, too_big).await {
        Err(Error::Invalid(InvalidInput::ResultTooLarge(_))) => {}
        other => panic!("a claim with a result over the limit: {other:?}"),
    }
    assert_eq!(
        b.get(&q, &got[0].id).await.unwrap().unwrap().state,
        JobState::Leased
    );
    let mut with_acks = req(2, 30_000);
    with_acks.acks = acks;
    let next = b.claim(&q, with_acks).await.unwrap();
    assert_eq!(
        next.acks,
        [AckOutcome::Acked, AckOutcome::LeaseLost, AckOutcome::Acked]
    );
    assert_eq!(next.jobs.len(), 2, "the claim still leased");
    let first = b.get(&q, &got[0].id).await.unwrap().unwrap();
    assert_eq!(first.state, JobState::Done);
    assert_eq!(first.result.as_deref(), Some(&br#"{"n":1}"#[..]));
    let second = b.get(&q, &got[1].id).await.unwrap().unwrap();
    assert_eq!((second.state, second.result), (JobState::Done, None));
}

/// A consumer's handler returns results: kept with each job; one over the limit fails the job
/// as dead with an error that says why (the work was done: running it again is the operator's
/// call).
pub async fn handlers_return_results<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("results-consumer").unwrap();
    keeps_done_jobs(&b, &q).await;
    let p = Producer::new(b.clone(), q.clone());
    for name in ["r1", "r2", "none", "huge"] {
        p.enqueue(job(name, 0)).await.unwrap();
    }
    t.pass(Duration::from_millis(2)).await;
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = handled.clone();
    let c = Consumer::new(b.clone(), q.clone(), ConsumerOptions::default()).unwrap();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(c.run(
        move |j: Job| {
            seen.lock().unwrap().push(j.id.to_string());
            async move {
                match j.id.as_str() {
                    "none" => Ok(Completion::default()),
                    "huge" => Ok(Completion::result(vec![
                        0u8;
                        delayq::limits::MAX_RESULT_BYTES + 1
                    ])),
                    other => Completion::json(&serde_json::json!({ "job": other })),
                }
            }
        },
        async move {
            let _ = stopped.wait_for(|v| *v).await;
        },
    ));
    let started = Instant::now();
    loop {
        let settled = b.stats(&q).await.unwrap();
        if settled.done + settled.dead == 4 || started.elapsed() > Duration::from_secs(20) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!((report.acked, report.dead), (3, 1), "{report:?}");
    let info = |name: &'static str| {
        let b = b.clone();
        let q = q.clone();
        async move { b.get(&q, &id(name)).await.unwrap().unwrap() }
    };
    assert_eq!(
        info("r1").await.result.as_deref(),
        Some(&br#"{"job":"r1"}"#[..])
    );
    assert_eq!(
        info("r2").await.result.as_deref(),
        Some(&br#"{"job":"r2"}"#[..])
    );
    let none = info("none").await;
    assert_eq!((none.state, none.result), (JobState::Done, None));
    let huge = info("huge").await;
    assert_eq!(huge.state, JobState::Dead);
    let err = huge.last_error.unwrap_or_default();
    assert!(err.contains("65535"), "the error names the limit: {err}");
}
