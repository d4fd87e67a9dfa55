//! F6 of docs/RELIABILITY.md: clients retrying enqueues whose answers were lost (a proxy cuts
//! nine connections in ten as the answer comes back) store each job once when they give it an
//! id — and the same retries without an id store duplicates, which is why every client we ship
//! gives each job an id before its first try. `DELAYQ_F6_IDS` sets the number of jobs (the
//! published run: 1,000, about 10,000 attempts). A client that has no id to give sends an
//! `Idempotency-Key` instead.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use delayq::{Inspect, QueueName};
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use delayq_test_support::proxy::Proxy;
use serde_json::{Value, json};

/// One enqueue over a fresh connection; `None` when the answer never came.
fn enqueue(port: u16, body: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let req = format!(
        "POST /v1/queues/f6/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    answer.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Sends `body` until an answer comes back; returns (status, attempts).
fn until_answered(port: u16, body: &str) -> (u16, usize) {
    for attempt in 1..=1000 {
        if let Some(status) = enqueue(port, body) {
            return (status, attempt);
        }
    }
    panic!("no answer in 1000 attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_with_an_id_store_each_job_once() {
    let ids: usize = std::env::var("DELAYQ_F6_IDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(delayq_http::serve(
        listener,
        AppState::new(backend.clone(), HttpConfig::default(), None),
        async {
            let _ = stopped.await;
        },
    ));
    let proxy = Proxy::start(http_port);
    proxy.cut_answers(10);
    let port = proxy.port();

    let (attempts, statuses) = tokio::task::spawn_blocking(move || {
        let mut attempts = 0;
        let mut statuses = Vec::new();
        for i in 0..ids {
            let (status, n) = until_answered(port, &format!(r#"{{"id":"job-{i}","payload":{i}}}"#));
            attempts += n;
            statuses.push(status);
        }
        // The same retries without an id: every attempt that reached the server stored a job.
        for i in 0..20 {
            until_answered(port, &format!(r#"{{"payload":{i}}}"#));
        }
        (attempts, statuses)
    })
    .await
    .unwrap();
    eprintln!("F6: {ids} jobs, {attempts} attempts, 9 in 10 answers cut");
    assert!(
        attempts >= ids * 5,
        "the proxy cut answers: {attempts} attempts"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 201),
        "{statuses:?}"
    );

    let stored_with_ids = (0..ids)
        .filter(|i| server.command(&["HEXISTS", "dq:{f6}:jobs", &format!("job-{i}")]) == "1")
        .count();
    assert_eq!(
        stored_with_ids, ids,
        "every job with an id stored, once (its id is its key)"
    );
    let stored: usize = server.command(&["HLEN", "dq:{f6}:jobs"]).parse().unwrap();
    let stats = backend.stats(&QueueName::new("f6").unwrap()).await.unwrap();
    assert_eq!(
        stats.waiting() as usize,
        stored,
        "each stored job scheduled once"
    );
    let anonymous = stored - ids;
    eprintln!("F6: 20 enqueues without an id, retried the same way, stored {anonymous} jobs");
    assert!(
        anonymous > 20,
        "without ids, retries after a lost answer store duplicates ({anonymous})"
    );
    let _ = stop.send(());
    let _ = task.await;
}

/// A retried id-less enqueue with the same `Idempotency-Key` stores one job (a batch: one per
/// position); the key reused with another payload is refused (409 `conflict`); a bad key is
/// refused.
#[tokio::test]
async fn idempotency_keys_make_id_less_enqueues_safe_to_retry() {
    use tower::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let backend = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
    let state = AppState::new(backend, HttpConfig::default(), None);
    let router = delayq_http::router(state);
    let post = |key: &str, body: Value| {
        let router = router.clone();
        let key = key.to_owned();
        async move {
            let req = axum::http::Request::post("/v1/queues/idem/jobs")
                .header("host", "localhost")
                .header("content-type", "application/json")
                .header("idempotency-key", key)
                .body(axum::body::Body::from(body.to_string()))
                .unwrap();
            let resp = router.oneshot(req).await.unwrap();
            let status = resp.status().as_u16();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    let (s, first) = post("k-1", json!({"payload": 1})).await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["id"], "idem:k-1");
    let (s, again) = post("k-1", json!({"payload": 1})).await;
    assert_eq!(
        (s, again["created"].as_bool()),
        (200, Some(false)),
        "{again}"
    );
    // A job's own id wins; in a batch the others get one per position.
    let (s, batch) = post("k-2", json!([{"payload": 1}, {"id": "own", "payload": 2}])).await;
    assert_eq!(s, 201, "{batch}");
    assert_eq!(
        (batch[0]["id"].as_str(), batch[1]["id"].as_str()),
        (Some("idem:k-2:0"), Some("own"))
    );
    let (s, again) = post("k-2", json!([{"payload": 1}, {"id": "own", "payload": 2}])).await;
    assert_eq!(s, 200, "{again}");
    // The same key with another payload is another request: refused, nothing changed.
    let (s, clash) = post("k-1", json!({"payload": 2})).await;
    assert_eq!(
        (s, clash["code"].as_str()),
        (409, Some("conflict")),
        "{clash}"
    );
    let (s, clash) = post("k-2", json!([{"payload": 9}, {"id": "own", "payload": 2}])).await;
    assert_eq!(
        (s, clash["code"].as_str()),
        (409, Some("conflict")),
        "{clash}"
    );
    let (_, again) = post("k-1", json!({"payload": 1})).await;
    assert_eq!(again["created"], false, "{again}");
    // A job's own id is the idempotent enqueue's, whatever the key: an existing one answers
    // `created: false`, even when it reads like a key's id.
    let (s, own) = post("k-1", json!({"id": "idem:k-1", "payload": 3})).await;
    assert_eq!((s, own["created"].as_bool()), (200, Some(false)), "{own}");
    let (s, bad) = post(&"x".repeat(201), json!({"payload": 1})).await;
    assert_eq!(
        (s, bad["code"].as_str()),
        (400, Some("invalid_job_id")),
        "{bad}"
    );
}
