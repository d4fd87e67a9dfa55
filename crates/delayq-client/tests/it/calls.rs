//! The client's own calls against a real server: each outcome of the job calls, the consumer
//! calls with their fencing, queues, dead letters and schedules, the error codes a caller
//! meets, tokens, and a retry that stores a job once.

use std::time::Duration;

use delayq::{AckOutcome, CancelOutcome, Due};
use delayq_client::wire::{
    ClaimAck, ClaimPoll, ClaimRequest, EnqueueRequest, ErrorCode, ListQuery, NackRequest,
    OutcomeKind, Page, RateView, RescheduleRequest, ScheduleBody, ScheduleTiming, SettingsPatch,
};
use delayq_client::{Client, Error};
use delayq_http::HttpConfig;
use serde_json::value::to_raw_value;

use crate::Server;

fn job(id: &str, delay_ms: f64) -> EnqueueRequest {
    EnqueueRequest {
        id: Some(id.into()),
        payload: Some(to_raw_value(&serde_json::json!({"order": id})).unwrap()),
        delay_ms: Some(delay_ms),
        ..EnqueueRequest::default()
    }
}

fn claim(max: usize) -> ClaimRequest {
    ClaimRequest {
        poll: ClaimPoll {
            max: Some(max),
            lease_ms: Some(30_000),
            ..ClaimPoll::default()
        },
        ..ClaimRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_enqueue_get_cancel_and_reschedule() {
    let s = Server::start(HttpConfig::default()).await;
    let c = Client::new(&s.url);
    let e = c.enqueue("orders", job("o-1", 60_000.0)).await.unwrap();
    assert!(e.created);
    assert_eq!(e.id, "o-1");
    let again = c.enqueue("orders", job("o-1", 5.0)).await.unwrap();
    assert!(!again.created, "the same id is stored once");
    assert_eq!(again.due_at, e.due_at);

    // An id is given on the client when the job has none.
    let mut anon = job("x", 0.0);
    anon.id = None;
    let a = c.enqueue("orders", anon).await.unwrap();
    assert!(a.created && !a.id.is_empty());

    let got = c.get("orders", "o-1").await.unwrap().expect("stored");
    assert_eq!(got.state, "scheduled");
    assert_eq!(got.payload.unwrap().get(), r#"{"order":"o-1"}"#);
    assert!(c.get("orders", "nope").await.unwrap().is_none());

    let o = c
        .reschedule(
            "orders",
            "o-1",
            &RescheduleRequest::new(Due::Delay(Duration::from_secs(120))),
        )
        .await
        .unwrap();
    assert_eq!(o.outcome, OutcomeKind::Rescheduled);
    assert!(o.due_at.unwrap() > e.due_at);

    assert_eq!(
        c.cancel("orders", "o-1").await.unwrap(),
        CancelOutcome::Cancelled
    );
    assert_eq!(
        c.cancel("orders", "o-1").await.unwrap(),
        CancelOutcome::NotFound
    );
    let leased = c.claim("orders", &claim(1)).await.unwrap();
    assert_eq!(leased.jobs.len(), 1, "the due anonymous job");
    assert_eq!(
        c.cancel("orders", &leased.jobs[0].id).await.unwrap(),
        CancelOutcome::Leased
    );

    let batch = c
        .enqueue_batch("orders", vec![job("b-1", 1000.0), job("b-2", 1000.0)])
        .await
        .unwrap();
    assert_eq!(batch.len(), 2);
    let page = c
        .list_jobs(
            "orders",
            &ListQuery {
                state: Some("scheduled".into()),
                limit: Some(1),
                ..ListQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
    assert!(page.next_cursor.is_some(), "a second page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_claim_ack_nack_extend_and_are_fenced() {
    let s = Server::start(HttpConfig::default()).await;
    let c = Client::new(&s.url);
    for id in ["c-1", "c-2", "c-3"] {
        let mut j = job(id, 0.0);
        j.run.max_attempts = Some(2);
        c.enqueue("work", j).await.unwrap();
    }
    let got = c.claim("work", &claim(3)).await.unwrap();
    assert_eq!(got.jobs.len(), 3);
    let (a, b, d) = (&got.jobs[0], &got.jobs[1], &got.jobs[2]);

    let o = c
        .extend("work", &a.id, a.lease_token, 60_000)
        .await
        .unwrap();
    assert_eq!(o.outcome, OutcomeKind::Extended);
    let stale = c.ack("work", &a.id, a.lease_token + 1).await.unwrap_err();
    assert_eq!(stale.code(), Some(ErrorCode::LeaseLost), "{stale}");
    assert_eq!(stale.status(), Some(409));
    assert!(!stale.retryable());

    let nack = NackRequest {
        lease_token: b.lease_token,
        error: Some("boom".into()),
        retry_in_ms: Some(0),
        dead: false,
    };
    let o = c.nack("work", &b.id, &nack).await.unwrap();
    assert_eq!(o.outcome, OutcomeKind::Retrying);
    let o = c.release("work", &d.id, d.lease_token, true).await.unwrap();
    assert_eq!(o.outcome, OutcomeKind::Released);

    // The ack of `a` rides on the next claim, which leases the retried and released jobs.
    let next = c
        .claim(
            "work",
            &ClaimRequest {
                acks: vec![ClaimAck {
                    id: a.id.clone(),
                    lease_token: a.lease_token,
                    result: None,
                    result_b64: None,
                }],
                ..claim(10)
            },
        )
        .await
        .unwrap();
    assert_eq!(next.acks, vec![AckOutcome::Acked]);
    assert_eq!(next.jobs.len(), 2);
    let retried = next.jobs.iter().find(|j| j.id == b.id).unwrap();
    assert_eq!(
        (retried.facts.attempt, retried.facts.last_error.as_deref()),
        (2, Some("boom"))
    );

    // The last attempt fails: dead; then requeue, purge.
    let nack = NackRequest {
        lease_token: retried.lease_token,
        error: Some("again".into()),
        ..NackRequest::default()
    };
    let o = c.nack("work", &b.id, &nack).await.unwrap();
    assert_eq!(o.outcome, OutcomeKind::Dead);
    let dead = c.list_dead("work", &Page::default()).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].facts.last_error.as_deref(), Some("again"));
    let o = c.requeue_dead("work", &b.id).await.unwrap();
    assert_eq!(o.outcome, OutcomeKind::Requeued);
    let other = next.jobs.iter().find(|j| j.id == d.id).unwrap();
    let acks = c
        .ack_batch(
            "work",
            vec![
                ClaimAck {
                    id: other.id.clone(),
                    lease_token: other.lease_token,
                    result: None,
                    result_b64: None,
                },
                ClaimAck {
                    id: "never".into(),
                    lease_token: 1,
                    result: None,
                    result_b64: None,
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(acks, vec![AckOutcome::Acked, AckOutcome::NotFound]);
    assert_eq!(c.purge_dead("work").await.unwrap().count, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_settings_and_schedules() {
    let s = Server::start(HttpConfig::default()).await;
    let c = Client::new(&s.url);
    c.enqueue("q", job("j", 60_000.0)).await.unwrap();
    let v = c
        .put_queue(
            "q",
            &SettingsPatch {
                rate: Some(Some(RateView {
                    per_s: 5.0,
                    burst: 10,
                })),
                max_in_flight: Some(Some(3)),
                ..SettingsPatch::default()
            },
        )
        .await
        .unwrap();
    let set = v.settings.expect("settings in the answer");
    assert_eq!((set.rate.unwrap().burst, set.max_in_flight), (10, Some(3)));
    assert_eq!(c.pause("q").await.unwrap().outcome, OutcomeKind::Paused);
    assert!(c.queue("q").await.unwrap().paused);
    assert_eq!(c.resume("q").await.unwrap().outcome, OutcomeKind::Resumed);
    let all = c.queues().await.unwrap();
    assert!(all.iter().any(|q| q.queue == "q" && q.scheduled == 1));

    let spec = ScheduleBody {
        timing: ScheduleTiming {
            cron: Some("*/5 * * * *".into()),
            tz: Some("Europe/Paris".into()),
            every_ms: None,
        },
        payload: Some(to_raw_value(&serde_json::json!({"report": true})).unwrap()),
        ..ScheduleBody::default()
    };
    let put = c.put_schedule("q", "report", &spec).await.unwrap();
    assert_eq!(put.timing.tz.as_deref(), Some("Europe/Paris"));
    assert!(put.next_fire > 0);
    assert_eq!(c.list_schedules("q").await.unwrap().len(), 1);
    assert!(c.get_schedule("q", "report").await.unwrap().is_some());
    assert!(c.delete_schedule("q", "report").await.unwrap());
    assert!(!c.delete_schedule("q", "report").await.unwrap());
    assert!(c.get_schedule("q", "report").await.unwrap().is_none());

    let bad = ScheduleBody {
        timing: ScheduleTiming {
            cron: Some("not cron".into()),
            ..ScheduleTiming::default()
        },
        payload: Some(to_raw_value(&1).unwrap()),
        ..ScheduleBody::default()
    };
    let e = c.put_schedule("q", "bad", &bad).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidSchedule), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_their_code_status_and_whether_to_retry() {
    let config = HttpConfig {
        tokens: vec![delayq_http::auth::Token::all("s3cret")],
        ..HttpConfig::default()
    };
    let s = Server::start(config).await;
    let no_token = Client::new(&s.url);
    let e = no_token.queues().await.unwrap_err();
    assert_eq!(
        (e.code(), e.status(), e.retryable()),
        (Some(ErrorCode::Unauthorized), Some(401), false)
    );
    let c = Client::new(&s.url).token("s3cret");
    assert!(c.whoami().await.unwrap().tokens_required);

    let mut bad = job("j", -5.0);
    bad.run.max_attempts = Some(3);
    let e = c.enqueue("q", bad).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidDelay), "{e}");
    let e = c.get("bad queue!", "j").await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(_)),
        "refused before sending: {e}"
    );

    // Nothing listens: no answer, retryable, reported as a transport error.
    let gone = Client::new("http://127.0.0.1:9").retries(0);
    let e = gone.queues().await.unwrap_err();
    assert!(matches!(e, Error::Transport { .. }) && e.retryable(), "{e}");
    let e = Client::new("ftp://x").queues().await.unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enqueue_retried_after_no_answer_stores_the_job_once() {
    // The server comes up only after the first try failed: the retry carries the id the
    // client gave the job before the first try.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let c = Client::new(format!("http://{addr}")).retries(5);
    let mut anon = job("x", 0.0);
    anon.id = None;
    let enqueue = tokio::spawn(async move { c.enqueue("q", anon).await });
    tokio::time::sleep(Duration::from_millis(150)).await; // real time: the first try fails
    let s = Server::start_on(addr, HttpConfig::default()).await;
    let e = enqueue.await.unwrap().unwrap();
    assert!(e.created);
    let c = Client::new(&s.url);
    let v = c.queue("q").await.unwrap();
    assert_eq!(v.scheduled + v.due, 1, "{v:?}");
}

/// A consumer over HTTP whose claim is a long poll stops as soon as its shutdown future
/// completes: the poll is cut (`Backend::stop_polling`), not waited out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_consumer_stops_at_its_shutdown_not_at_the_end_of_its_long_poll() {
    let s = Server::start(HttpConfig::default()).await;
    let remote =
        delayq_client::RemoteBackend::new(Client::new(&s.url)).long_poll(Duration::from_secs(50));
    let q = delayq::QueueName::new("stopping").unwrap();
    let consumer = delayq::Consumer::new(remote, q, delayq::ConsumerOptions::default()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(consumer.run(
        |_job: delayq::Job| async { Ok::<(), delayq::Failure>(()) },
        async {
            let _ = stopped.await;
        },
    ));
    // Let the consumer reach its long poll (nothing is due: it waits there).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    stop.send(()).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the consumer waited out its 50 s long poll")
        .unwrap()
        .unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stopped {:?} after its shutdown",
        asked.elapsed()
    );
    assert_eq!(report.claimed, 0);
}

/// The builder: a Serialize payload, Durations and SystemTimes in, the payload read back as
/// the type it was written from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_built_from_rust_values_and_read_back_as_them() {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Order {
        order: u64,
        items: Vec<String>,
    }
    let s = Server::start(HttpConfig::default()).await;
    let c = Client::new(&s.url);
    let order = Order {
        order: 42,
        items: vec!["book".into()],
    };
    let job = delayq_client::Job::json(&order)
        .unwrap()
        .id("built-1")
        .delay(Duration::from_secs(30 * 60))
        .max_attempts(5)
        .backoff(delayq::Backoff::Fixed { delay_ms: 2_000 })
        .timeout(Duration::from_secs(60))
        .expire_after(Duration::from_secs(3600))
        .priority(7)
        .key("acme");
    let done = c.enqueue("built", job).await.unwrap();
    assert!(done.created);
    let j = c.get("built", "built-1").await.unwrap().unwrap();
    assert_eq!(j.payload_as::<Order>().unwrap(), order);
    assert_eq!(
        (j.facts.max_attempts, j.facts.priority, j.facts.timeout_ms),
        (5, 7, Some(60_000))
    );
    assert_eq!(j.facts.key.as_deref(), Some("acme"));
    assert_eq!(j.facts.due_at, done.due_at);
    assert_eq!(j.facts.expires_at, Some(done.due_at + 3_600_000));
    // A SystemTime and bytes that are not JSON.
    let at = std::time::SystemTime::now() + Duration::from_secs(120);
    let raw = delayq_client::Job::bytes(vec![0u8, 255, 7])
        .id("built-2")
        .run_at(at);
    c.enqueue("built", raw).await.unwrap();
    let j = c.get("built", "built-2").await.unwrap().unwrap();
    assert!(
        j.payload_as::<serde_json::Value>().is_err(),
        "bytes are not JSON"
    );
    assert!(j.payload_b64.is_some());
    let want = at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(j.facts.due_at, want);
}
