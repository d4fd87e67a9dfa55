//! Producer operations against a real Redis: enqueue (single, batch, idempotent), get,
//! cancel, reschedule, and bad input refused with nothing written.

use std::time::Duration;

use crate::common::*;
use delayq::{
    Backend, Backoff, CancelOutcome, Due, Error, Inspect, InvalidInput, JobState, NewJob, Producer,
};

#[tokio::test]
async fn enqueue_then_get() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let before = now_ms();
    let e = p
        .enqueue(
            NewJob::json(&serde_json::json!({"order": 42}))
                .unwrap()
                .id(id("order-42"))
                .delay(Duration::from_secs(60))
                .max_attempts(3),
        )
        .await
        .unwrap();
    assert!(e.created);
    assert_eq!(e.id.as_str(), "order-42");
    assert!(e.due_at_ms >= before + 60_000 - 50 && e.due_at_ms <= now_ms() + 60_000 + 50);
    let info = p.get(&id("order-42")).await.unwrap().unwrap();
    assert_eq!(info.state, JobState::Scheduled);
    assert_eq!(info.due_at_ms, e.due_at_ms);
    assert_eq!(info.attempt, 0);
    assert_eq!(info.max_attempts, 3);
    assert_eq!(info.payload, br#"{"order":42}"#);
    assert_eq!(info.last_error, None);
    assert!(p.get(&id("nope")).await.unwrap().is_none());
}

#[tokio::test]
async fn enqueue_with_existing_id_creates_nothing() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let first = p.enqueue(job("a", 10_000)).await.unwrap();
    let again = p
        .enqueue(
            NewJob::new(b"other".to_vec())
                .id(id("a"))
                .delay(Duration::from_secs(99)),
        )
        .await
        .unwrap();
    assert!(first.created);
    assert!(!again.created);
    assert_eq!(
        again.due_at_ms, first.due_at_ms,
        "the existing job is untouched"
    );
    let info = p.get(&id("a")).await.unwrap().unwrap();
    assert_eq!(info.payload, b"a");
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 1);
}

#[tokio::test]
async fn batch_enqueue_reports_each_job() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("x1", 5000)).await.unwrap();
    let jobs = vec![job("x0", 5000), job("x1", 5000), job("x2", 0), job("x0", 1)];
    let out = p.enqueue_batch(jobs).await.unwrap();
    let created: Vec<bool> = out.iter().map(|e| e.created).collect();
    assert_eq!(
        created,
        [true, false, true, false],
        "duplicates inside a batch too"
    );
    assert_eq!(out[3].due_at_ms, out[0].due_at_ms);
    let st = b.stats(&q).await.unwrap();
    assert_eq!(st.waiting(), 3);
    assert_eq!(st.due, 1);
    // Generated ids are distinct and reported.
    let gen_ = p
        .enqueue_batch(vec![NewJob::new(b"g".to_vec()), NewJob::new(b"g".to_vec())])
        .await
        .unwrap();
    assert_ne!(gen_[0].id, gen_[1].id);
    assert!(gen_.iter().all(|e| e.created));
}

#[tokio::test]
async fn large_batch_in_one_call() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let jobs: Vec<_> = (0..5000).map(|i| job(&format!("j{i}"), 60_000)).collect();
    let out = p.enqueue_batch(jobs).await.unwrap();
    assert_eq!(out.iter().filter(|e| e.created).count(), 5000);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 5000);
}

#[tokio::test]
async fn cancel_reports_who_won() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(job("sched", 60_000)).await.unwrap();
    p.enqueue(job("run", 0)).await.unwrap();
    assert_eq!(
        p.cancel(&id("sched")).await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert_eq!(
        p.cancel(&id("sched")).await.unwrap(),
        CancelOutcome::NotFound
    );
    assert!(p.get(&id("sched")).await.unwrap().is_none());
    let claimed = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    assert_eq!(claimed.jobs.len(), 1);
    assert_eq!(p.cancel(&id("run")).await.unwrap(), CancelOutcome::Leased);
    assert_eq!(
        p.get(&id("run")).await.unwrap().unwrap().state,
        JobState::Leased
    );
    assert_eq!(
        p.cancel(&id("never")).await.unwrap(),
        CancelOutcome::NotFound
    );
}

#[tokio::test]
async fn reschedule_moves_a_scheduled_job() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let e = p.enqueue(job("r", 60_000)).await.unwrap();
    let due = p
        .reschedule(&id("r"), Due::Delay(Duration::from_secs(600)))
        .await
        .unwrap();
    assert!(due >= e.due_at_ms + 539_000);
    assert_eq!(p.get(&id("r")).await.unwrap().unwrap().due_at_ms, due);
    let past = p.reschedule(&id("r"), Due::At(1)).await.unwrap();
    assert!(past >= now_ms() - 1000, "run_at in the past means due now");
    assert_eq!(b.stats(&q).await.unwrap().due, 1);
    assert!(matches!(
        p.reschedule(&id("missing"), Due::Now).await,
        Err(Error::NotFound { .. })
    ));
    b.claim(&q, claim_req(1, 30_000)).await.unwrap();
    assert!(matches!(
        p.reschedule(&id("r"), Due::Now).await,
        Err(Error::WrongState {
            state: JobState::Leased,
            ..
        })
    ));
}

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_written() {
    let (s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone()).with_max_payload(1000);
    type Check = fn(&InvalidInput) -> bool;
    let bad: Vec<(NewJob, Check)> = vec![
        (NewJob::new(vec![0; 1001]), |e| {
            matches!(e, InvalidInput::PayloadTooLarge { .. })
        }),
        (
            NewJob::new("x").delay(Duration::from_secs(11 * 365 * 86400)),
            |e| matches!(e, InvalidInput::Delay(_)),
        ),
        (NewJob::new("x").due(Due::At(u64::MAX / 2)), |e| {
            matches!(e, InvalidInput::Delay(_))
        }),
        (NewJob::new("x").max_attempts(0), |e| {
            matches!(e, InvalidInput::MaxAttempts(_))
        }),
        (
            NewJob::new("x").backoff(Backoff::Exponential {
                base_ms: 10,
                cap_ms: 1,
            }),
            |e| matches!(e, InvalidInput::Backoff(_)),
        ),
        (NewJob::new("x").lease(Duration::ZERO), |e| {
            matches!(e, InvalidInput::Lease(_))
        }),
    ];
    for (job, is_expected) in bad {
        match p.enqueue(job).await {
            Err(Error::Invalid(e)) => assert!(is_expected(&e), "{e}"),
            other => panic!("expected invalid input, got {other:?}"),
        }
    }
    // One bad job refuses the whole batch.
    let batch = vec![job("good", 0), NewJob::new(vec![0; 5000])];
    assert!(matches!(
        p.enqueue_batch(batch).await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        p.enqueue_batch(vec![]).await,
        Err(Error::Invalid(_))
    ));
    // Bad names never become values.
    assert!(delayq::QueueName::new("a{b}").is_err());
    assert!(delayq::JobId::new("a\u{7}").is_err());
    assert_eq!(s.command(&["DBSIZE"]), "0", "nothing was written");
    // And the backend keeps serving.
    assert!(p.enqueue(job("ok", 0)).await.unwrap().created);
}

#[tokio::test]
async fn binary_payloads_round_trip() {
    let (_s, b, q) = setup().await;
    let p = Producer::new(b.clone(), q.clone());
    let payload: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    p.enqueue(NewJob::new(payload.clone()).id(id("bin")))
        .await
        .unwrap();
    let got = b.claim(&q, claim_req(1, 5_000)).await.unwrap();
    assert_eq!(got.jobs[0].payload, payload);
    let empty = p
        .enqueue(NewJob::new(Vec::<u8>::new()).id(id("empty")))
        .await
        .unwrap();
    assert!(empty.created);
    assert_eq!(
        p.get(&id("empty")).await.unwrap().unwrap().payload,
        Vec::<u8>::new()
    );
}

/// Two namespaces on one server are two stores: the same queue and job id in each, listed,
/// counted and claimed apart; every key of a namespace is under `dq:<namespace>:`; a bad
/// namespace is refused before anything connects.
#[tokio::test]
async fn namespaces_on_one_server_never_see_each_other() {
    let server = RedisServer::start();
    let connect = |ns: &str| {
        let mut o = delayq_redis::ConnectOptions::new(server.url());
        o.namespace = Some(ns.to_owned());
        delayq_redis::RedisBackend::connect_with(o)
    };
    let (a, b) = (
        connect("shop-a").await.unwrap(),
        connect("shop_b").await.unwrap(),
    );
    let q = delayq::QueueName::new("orders").unwrap();
    Producer::new(a.clone(), q.clone())
        .enqueue(job("order-1", 0))
        .await
        .unwrap();
    Producer::new(b.clone(), q.clone())
        .enqueue(job("order-1", 60_000))
        .await
        .unwrap();
    assert_eq!(a.stats(&q).await.unwrap().due, 1);
    assert_eq!(b.stats(&q).await.unwrap().due, 0);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 1);
    let got = a.claim(&q, claim_req(10, 30_000)).await.unwrap();
    assert_eq!(got.jobs.len(), 1);
    assert!(
        b.claim(&q, claim_req(10, 30_000))
            .await
            .unwrap()
            .jobs
            .is_empty()
    );
    assert_eq!(
        b.get(&q, &id("order-1")).await.unwrap().unwrap().state,
        JobState::Scheduled
    );
    // The default space sees neither.
    let plain = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    assert!(plain.queues().await.unwrap().is_empty());
    assert_eq!(a.queues().await.unwrap(), vec![q.clone()]);
    let keys = server.command(&["KEYS", "*"]);
    let names: Vec<&str> = keys.lines().filter(|l| l.starts_with("dq:")).collect();
    assert!(!names.is_empty());
    assert!(
        names
            .iter()
            .all(|k| k.starts_with("dq:shop-a:{") || k.starts_with("dq:shop_b:{")),
        "{names:?}"
    );
    for bad in ["", "has space", "a:b", "{x}", &"n".repeat(65)] {
        let err = connect(bad).await.err().expect("refused").to_string();
        assert!(err.contains("invalid namespace"), "{bad:?}: {err}");
    }
}
