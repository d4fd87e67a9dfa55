//! A full Redis (`maxmemory` with `noeviction`): an enqueue gets a clear `store_full` (507),
//! nothing partial is written, and the queue works again once memory is freed.

use delayq::{Error, NewJob, Producer, QueueName};
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use tower::ServiceExt;

#[tokio::test]
async fn a_full_store_says_so_writes_nothing_and_recovers() {
    let server = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "noeviction"]);
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let p = Producer::new(backend.clone(), QueueName::new("orders").unwrap());
    p.enqueue(NewJob::new("before").id(delayq::JobId::new("before").unwrap()))
        .await
        .unwrap();
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
    assert_eq!(
        server.command(&["DBSIZE"]),
        keys_before,
        "nothing partial written"
    );

    let r = delayq_http::router(AppState::new(backend.clone(), HttpConfig::default(), None));
    let req = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/queues/orders/jobs")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(r#"{"id":"h1","payload":1}"#))
        .unwrap();
    let resp = r.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 507);
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["code"], "store_full", "{v}");

    assert_eq!(server.command(&["DEL", "ballast"]), "1");
    let again = p.enqueue(NewJob::new("after")).await.unwrap();
    assert!(again.created, "the queue works once memory is freed");
}
