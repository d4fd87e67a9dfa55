//! A full Redis (`maxmemory` with `noeviction`): an enqueue gets a clear `store_full` (507),
//! nothing partial is written, a re-enqueue of an existing id still answers `created: false`,
//! a held lease can still be extended, and the queue works again once memory is freed.

use std::time::Duration;

use delayq::{Backend, ClaimRequest, Error, NewJob, Producer, QueueName};
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use tower::ServiceExt;

/// POSTs a job to `orders`; returns the status and the JSON answer.
async fn post_job(r: &axum::Router, body: &'static str) -> (u16, serde_json::Value) {
    let req = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/queues/orders/jobs")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body))
        .unwrap();
    let resp = r.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap())
}

#[tokio::test]
async fn a_full_store_says_so_writes_nothing_and_recovers() {
    let server = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "noeviction"]);
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let p = Producer::new(backend.clone(), QueueName::new("orders").unwrap());
    p.enqueue(NewJob::new("before").id(delayq::JobId::new("before").unwrap()))
        .await
        .unwrap();
    p.enqueue(NewJob::new("held").id(delayq::JobId::new("held").unwrap()))
        .await
        .unwrap();
    let q = QueueName::new("orders").unwrap();
    let lease = Duration::from_secs(30);
    let claimed = backend
        .claim(
            &q,
            ClaimRequest {
                max: 1,
                lease,
                acks: vec![],
            },
        )
        .await
        .unwrap();
    let held = claimed.jobs[0].lease_ref();
    let held2 = held.clone();
    let big = "x".repeat(4 << 20);
    assert_eq!(server.command(&["SET", "ballast", &big]), "OK");
    assert_eq!(server.command(&["CONFIG", "SET", "maxmemory", "2mb"]), "OK");
    let keys_before = server.command(&["DBSIZE"]);

    let e = p.enqueue(NewJob::new("x")).await.unwrap_err();
    assert!(matches!(e, Error::StoreFull(_)), "{e:?}");
    assert!(e.to_string().contains("maxmemory"), "{e}");
    let batch = (0..50).map(|i| NewJob::new(format!("{i}"))).collect();
    assert!(matches!(
        p.enqueue_batch(batch).await,
        Err(Error::StoreFull(_))
    ));
    // A batch mixing an existing id and new ones: refused as a whole.
    let mixed = vec![
        NewJob::new("b").id(delayq::JobId::new("before").unwrap()),
        NewJob::new("new"),
    ];
    assert!(matches!(
        p.enqueue_batch(mixed).await,
        Err(Error::StoreFull(_))
    ));
    assert_eq!(
        server.command(&["DBSIZE"]),
        keys_before,
        "nothing partial written"
    );
    let sched_before = server.command(&["ZCARD", "dq:{orders}:sched"]);

    // Re-enqueue of an existing id needs no memory: answered, nothing written.
    let again = p
        .enqueue(NewJob::new("other").id(delayq::JobId::new("before").unwrap()))
        .await
        .unwrap();
    assert!(!again.created);
    // A held lease can be extended (a long handler keeps its job).
    let deadline = backend.extend(&q, held2, lease).await.unwrap();
    assert!(deadline > 0);
    assert_eq!(
        server.command(&["ZCARD", "dq:{orders}:sched"]),
        sched_before
    );

    let r = delayq_http::router(AppState::new(backend.clone(), HttpConfig::default(), None));
    let (status, v) = post_job(&r, r#"{"id":"h1","payload":1}"#).await;
    assert_eq!(status, 507);
    assert_eq!(v["code"], "store_full", "{v}");
    let (status, v) = post_job(&r, r#"{"id":"before","payload":1}"#).await;
    assert_eq!(status, 200, "an existing id is answered while full");
    assert_eq!(v["created"], false, "{v}");

    // Acks free memory: they go through.
    assert_eq!(
        backend.ack(&q, vec![held.into()]).await.unwrap(),
        vec![delayq::AckOutcome::Acked]
    );

    assert_eq!(server.command(&["DEL", "ballast"]), "1");
    let again = p.enqueue(NewJob::new("after")).await.unwrap();
    assert!(again.created, "the queue works once memory is freed");
}
