//! The HTTP API end to end, on both backends: most tests call `router(state)` in process
//! (`oneshot`, no socket); long polls and shutdown run over a real listener on Redis.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use delayq::Inspect;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tower::ServiceExt;

fn prometheus() -> PrometheusHandle {
    static H: OnceLock<PrometheusHandle> = OnceLock::new();
    H.get_or_init(|| delayq_http::install_prometheus().unwrap())
        .clone()
}

/// The backend a test runs on.
#[derive(Clone, Copy, Debug)]
enum Store {
    Redis,
    Embedded,
}

/// What keeps a backend alive (its server, its directory), and how to count what it stores.
enum Guard {
    Redis(RedisServer),
    Embedded(EmbeddedBackend, #[allow(dead_code)] tempfile::TempDir),
}

/// A server under test and a client of it.
struct Api {
    client: Client,
    guard: Guard,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// How requests reach the server.
#[derive(Clone)]
enum Transport {
    /// A minimal HTTP/1.1 client over TCP (one connection per request).
    Tcp(std::net::SocketAddr),
    /// `router(state).oneshot(request)`, in process.
    Router(Router),
}

#[derive(Clone)]
struct Client {
    transport: Transport,
    token: Option<String>,
}

impl std::ops::Deref for Api {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::ops::DerefMut for Api {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

struct Resp {
    status: u16,
    body: String,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }
}

fn config(tokens: &[String]) -> HttpConfig {
    HttpConfig {
        max_payload: 1000,
        max_body: 64 * 1024,
        tokens: tokens
            .iter()
            .map(|t| delayq_http::auth::Token::parse(t).unwrap())
            .collect(),
        ..HttpConfig::default()
    }
}

/// A server on `store`, reached in process.
async fn start_on(store: Store, tokens: Vec<String>) -> Api {
    let (router, guard) = match store {
        Store::Redis => {
            let redis = RedisServer::start();
            let backend = RedisBackend::connect(&redis.url()).await.unwrap();
            let state = AppState::new(backend, config(&tokens), Some(prometheus()));
            (delayq_http::router(state), Guard::Redis(redis))
        }
        Store::Embedded => {
            let dir = tempfile::tempdir().unwrap();
            let backend = EmbeddedBackend::open(dir.path()).unwrap();
            let state = AppState::new(backend.clone(), config(&tokens), Some(prometheus()));
            (delayq_http::router(state), Guard::Embedded(backend, dir))
        }
    };
    Api {
        client: Client {
            transport: Transport::Router(router),
            token: tokens.first().cloned(),
        },
        guard,
        stop: None,
        task: None,
    }
}

/// A server on Redis behind a real listener (long polls, shutdown).
async fn start_socket() -> Api {
    let redis = RedisServer::start();
    let backend = RedisBackend::connect(&redis.url()).await.unwrap();
    let state = AppState::new(backend, config(&[]), Some(prometheus()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(delayq_http::serve(listener, state, async {
        let _ = rx.await;
    }));
    Api {
        client: Client {
            transport: Transport::Tcp(addr),
            token: None,
        },
        guard: Guard::Redis(redis),
        stop: Some(stop),
        task: Some(task),
    }
}

/// Runs each named test on both backends: `mod redis` and `mod embedded`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod redis {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Store::Redis).await;
            })*
        }
        mod embedded {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Store::Embedded).await;
            })*
        }
    };
}

on_both_backends!(
    enqueue_get_cancel_reschedule,
    batch_enqueue_claim_ack_nack_extend_and_dead_letters,
    payloads_come_out_byte_for_byte,
    bearer_tokens_guard_the_api,
    health_metrics_openapi_dashboard,
    bad_input_gets_a_4xx_stores_nothing_and_the_server_keeps_serving,
    stale_and_foreign_lease_tokens_are_refused,
);

impl Client {
    async fn raw(&self, method: &str, path: &str, ctype: Option<&str>, body: &str) -> Resp {
        let addr = match &self.transport {
            Transport::Tcp(addr) => *addr,
            Transport::Router(router) => {
                let mut req = axum::http::Request::builder()
                    .method(method)
                    .uri(path)
                    .header("host", "test");
                if let Some(c) = ctype {
                    req = req.header("content-type", c);
                }
                if let Some(t) = &self.token {
                    req = req.header("authorization", format!("Bearer {t}"));
                }
                let req = req.body(axum::body::Body::from(body.to_owned())).unwrap();
                let resp = router.clone().oneshot(req).await.unwrap();
                let status = resp.status().as_u16();
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .unwrap();
                let body = String::from_utf8_lossy(&bytes).into_owned();
                return Resp { status, body };
            }
        };
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
        if let Some(c) = ctype {
            req += &format!("Content-Type: {c}\r\n");
        }
        if let Some(t) = &self.token {
            req += &format!("Authorization: Bearer {t}\r\n");
        }
        req += &format!("Content-Length: {}\r\n\r\n", body.len());
        s.write_all(req.as_bytes()).await.unwrap();
        s.write_all(body.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        Resp { status, body }
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
        match body {
            Some(b) => {
                self.raw(method, path, Some("application/json"), &b.to_string())
                    .await
            }
            None => self.raw(method, path, None, "").await,
        }
    }
}

impl Api {
    /// What the store holds: Redis's key count, or the embedded store's queues with jobs.
    async fn stored(&self) -> String {
        match &self.guard {
            Guard::Redis(r) => r.command(&["DBSIZE"]),
            Guard::Embedded(b, _) => b.queues().await.unwrap().len().to_string(),
        }
    }

    async fn stop(mut self) {
        if let (Some(stop), Some(task)) = (self.stop.take(), self.task.take()) {
            let _ = stop.send(());
            task.await.unwrap().unwrap();
        }
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out += &rest[..n];
        s = &rest[n + 2..];
    }
    out
}

async fn enqueue_get_cancel_reschedule(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let r = api
        .call(
            "POST",
            "/v1/queues/orders/jobs",
            Some(json!({"id":"o1","payload":{"order":1},"delay_ms":60000,"max_attempts":3})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let due = r.json()["due_at"].as_u64().unwrap();
    assert_eq!(r.json()["created"], true);
    let again = api
        .call(
            "POST",
            "/v1/queues/orders/jobs",
            Some(json!({"id":"o1","payload":2})),
        )
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["created"], false);
    assert_eq!(again.json()["due_at"].as_u64(), Some(due));

    let g = api.call("GET", "/v1/queues/orders/jobs/o1", None).await;
    assert_eq!(g.status, 200);
    let j = g.json();
    assert_eq!(
        (
            j["state"].as_str(),
            j["attempt"].as_u64(),
            j["max_attempts"].as_u64()
        ),
        (Some("scheduled"), Some(0), Some(3))
    );
    assert_eq!(j["payload"], json!({"order":1}));

    let p = api
        .call(
            "PATCH",
            "/v1/queues/orders/jobs/o1",
            Some(json!({"run_at":"2030-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(p.status, 200, "{}", p.body);
    assert_eq!(p.json()["due_at"].as_u64(), Some(1_893_456_000_000));

    let c = api.call("DELETE", "/v1/queues/orders/jobs/o1", None).await;
    assert_eq!(
        (c.status, c.json()["outcome"].as_str()),
        (200, Some("cancelled"))
    );
    let c = api.call("DELETE", "/v1/queues/orders/jobs/o1", None).await;
    assert_eq!((c.status, c.code()), (404, "not_found".into()));
    assert_eq!(
        api.call("GET", "/v1/queues/orders/jobs/o1", None)
            .await
            .status,
        404
    );
    api.stop().await;
}

async fn batch_enqueue_claim_ack_nack_extend_and_dead_letters(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let batch = json!([
        {"id":"a","payload":"A"},
        {"id":"b","payload":"B","max_attempts":1},
        {"id":"c","payload":"C","backoff":{"kind":"fixed","delay_ms":50}},
        {"id":"a","payload":"dup"}
    ]);
    let r = api.call("POST", "/v1/queues/w/jobs", Some(batch)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let created: Vec<bool> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["created"].as_bool().unwrap())
        .collect();
    assert_eq!(created, [true, true, true, false]);

    let c = api
        .call(
            "POST",
            "/v1/queues/w/claim",
            Some(json!({"max":10,"lease_ms":30000})),
        )
        .await;
    assert_eq!(c.status, 200, "{}", c.body);
    let jobs = c.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 3);
    let token = |id: &str| {
        jobs.iter().find(|j| j["id"] == id).unwrap()["lease_token"]
            .as_u64()
            .unwrap()
    };
    assert!(
        jobs.iter()
            .all(|j| j["attempt"] == 1 && j["lease_deadline"].as_u64().is_some())
    );

    let a = api
        .call(
            "POST",
            "/v1/queues/w/jobs/a/ack",
            Some(json!({"lease_token": token("a")})),
        )
        .await;
    assert_eq!(
        (a.status, a.json()["outcome"].as_str()),
        (200, Some("acked"))
    );
    let n = api
        .call(
            "POST",
            "/v1/queues/w/jobs/b/nack",
            Some(json!({"lease_token": token("b"), "error":"boom"})),
        )
        .await;
    assert_eq!(n.json()["outcome"], "dead", "max_attempts 1: dead at once");
    let e = api
        .call(
            "POST",
            "/v1/queues/w/jobs/c/extend",
            Some(json!({"lease_token": token("c"), "lease_ms": 60000})),
        )
        .await;
    assert_eq!(e.status, 200);
    assert!(e.json()["lease_deadline"].as_u64().is_some());
    let n = api
        .call(
            "POST",
            "/v1/queues/w/jobs/c/nack",
            Some(json!({"lease_token": token("c"), "error":"later", "retry_in_ms": 100})),
        )
        .await;
    assert_eq!(n.json()["outcome"], "retrying");
    let again = api
        .call(
            "POST",
            "/v1/queues/w/claim",
            Some(json!({"max":1,"wait_ms":3000})),
        )
        .await;
    let j = &again.json()["jobs"][0];
    assert_eq!(
        (
            j["id"].as_str(),
            j["attempt"].as_u64(),
            j["last_error"].as_str()
        ),
        (Some("c"), Some(2), Some("later"))
    );
    let n = api
        .call(
            "POST",
            "/v1/queues/w/jobs/c/nack",
            Some(json!({"lease_token": j["lease_token"], "dead": true, "error":"give up"})),
        )
        .await;
    assert_eq!(n.json()["outcome"], "dead");

    let s = api.call("GET", "/v1/queues/w", None).await.json();
    assert_eq!(
        (
            s["dead"].as_u64(),
            s["scheduled"].as_u64(),
            s["leased"].as_u64()
        ),
        (Some(2), Some(0), Some(0))
    );
    let l = api.call("GET", "/v1/queues", None).await.json();
    assert!(l.as_array().unwrap().iter().any(|q| q["queue"] == "w"));

    let d = api
        .call("GET", "/v1/queues/w/dead?offset=0&limit=10", None)
        .await
        .json();
    let d = d.as_array().unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!(d[0]["id"], "b");
    assert_eq!(d[0]["last_error"], "boom");
    assert_eq!(d[0]["payload"], "B");
    assert_eq!(
        api.call("GET", "/v1/queues/w/dead?offset=1&limit=10", None)
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let r1 = api.call("POST", "/v1/queues/w/dead/b/requeue", None).await;
    assert_eq!(r1.status, 200, "{}", r1.body);
    let all = api
        .call("POST", "/v1/queues/w/dead/requeue", None)
        .await
        .json();
    assert_eq!(all["count"], 1);
    assert_eq!(api.call("GET", "/v1/queues/w", None).await.json()["due"], 2);
    let c = api
        .call("POST", "/v1/queues/w/claim", Some(json!({"max":10})))
        .await
        .json();
    for j in c["jobs"].as_array().unwrap() {
        api.call(
            "POST",
            &format!("/v1/queues/w/jobs/{}/nack", j["id"].as_str().unwrap()),
            Some(json!({"lease_token": j["lease_token"], "dead": true})),
        )
        .await;
    }
    let p = api.call("DELETE", "/v1/queues/w/dead", None).await.json();
    assert_eq!(p["count"], 2);
    assert_eq!(
        api.call("GET", "/v1/queues/w", None).await.json()["dead"],
        0
    );
    api.stop().await;
}

async fn payloads_come_out_byte_for_byte(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let odd = r#"{"id":"j","payload": {"n": 1.50, "big": 123456789012345678901234567890, "s":"é\u00e9"} }"#;
    let r = api
        .raw("POST", "/v1/queues/p/jobs", Some("application/json"), odd)
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let g = api.call("GET", "/v1/queues/p/jobs/j", None).await;
    assert!(
        g.body.contains(
            r#""payload":{"n": 1.50, "big": 123456789012345678901234567890, "s":"é\u00e9"}"#
        ),
        "{}",
        g.body
    );
    // Bytes that are not JSON go in and out as base64.
    let b = api
        .call(
            "POST",
            "/v1/queues/p/jobs",
            Some(json!({"id":"bin","payload_b64":"/wABAg=="})),
        )
        .await;
    assert_eq!(b.status, 201);
    let c = api
        .call("POST", "/v1/queues/p/claim", Some(json!({"max":10})))
        .await
        .json();
    let bin = c["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == "bin")
        .unwrap()
        .clone();
    assert_eq!(bin["payload_b64"], "/wABAg==");
    assert!(bin.get("payload").is_none());
    api.stop().await;
}

#[tokio::test]
async fn claim_is_a_long_poll_that_returns_when_a_job_is_due() {
    let api = start_socket().await;
    // Nothing there: waits the whole wait_ms, returns empty.
    let t = Instant::now();
    let r = api
        .call("POST", "/v1/queues/lp/claim", Some(json!({"wait_ms":300})))
        .await;
    assert_eq!(r.json()["jobs"].as_array().unwrap().len(), 0);
    assert!(t.elapsed() >= Duration::from_millis(290));
    // A job due in 400 ms ends a 10 s poll when it is due, not at the end.
    api.call(
        "POST",
        "/v1/queues/lp/jobs",
        Some(json!({"id":"soon","payload":1,"delay_ms":400})),
    )
    .await;
    let t = Instant::now();
    let r = api
        .call(
            "POST",
            "/v1/queues/lp/claim",
            Some(json!({"wait_ms":10000})),
        )
        .await;
    assert_eq!(r.json()["jobs"][0]["id"], "soon");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    api.stop().await;
}

#[tokio::test]
async fn a_waiting_claim_is_woken_by_an_enqueue() {
    let api = start_socket().await;
    let waiter = {
        let a = api.client.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let r = a
                .call(
                    "POST",
                    "/v1/queues/wake/claim",
                    Some(json!({"wait_ms":20000})),
                )
                .await;
            (r.json(), t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    api.call(
        "POST",
        "/v1/queues/wake/jobs",
        Some(json!({"id":"now","payload":1})),
    )
    .await;
    let (r, waited) = waiter.await.unwrap();
    assert_eq!(r["jobs"][0]["id"], "now");
    assert!(
        waited < Duration::from_secs(5),
        "woken by the enqueue, not the 20 s deadline: {waited:?}"
    );
    api.stop().await;
}

#[tokio::test]
async fn shutdown_ends_pending_long_polls() {
    let mut api = start_socket().await;
    let a = api.client.clone();
    let waiter = tokio::spawn(async move {
        let t = Instant::now();
        let r = a
            .call(
                "POST",
                "/v1/queues/sd/claim",
                Some(json!({"wait_ms":30000})),
            )
            .await;
        (r.status, t.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = api.stop.take().unwrap().send(());
    let (status, waited) = waiter.await.unwrap();
    assert_eq!(status, 200);
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    api.task.take().unwrap().await.unwrap().unwrap();
}

async fn bearer_tokens_guard_the_api(store: Store) {
    let mut api = start_on(store, vec!["s3cret".into(), "other".into()]).await;
    assert_eq!(api.call("GET", "/v1/queues", None).await.status, 200);
    api.token = Some("other".into());
    assert_eq!(api.call("GET", "/v1/queues", None).await.status, 200);
    api.token = Some("wrong".into());
    let r = api
        .call("POST", "/v1/queues/a/jobs", Some(json!({"payload":1})))
        .await;
    assert_eq!((r.status, r.code()), (401, "unauthorized".into()));
    api.token = None;
    assert_eq!(api.call("GET", "/v1/queues", None).await.status, 401);
    assert_eq!(api.stored().await, "0");
    // Health stays open for probes.
    assert_eq!(api.call("GET", "/healthz", None).await.status, 200);
    api.stop().await;
}

async fn health_metrics_openapi_dashboard(store: Store) {
    let api = start_on(store, Vec::new()).await;
    assert_eq!(api.call("GET", "/healthz", None).await.status, 200);
    assert_eq!(api.call("GET", "/readyz", None).await.status, 200);
    // One queue per backend: both tests share the process's metrics recorder.
    let q = format!("m{store:?}");
    let jobs = format!("/v1/queues/{q}/jobs");
    for _ in 0..2 {
        let body = json!({"id":"x","payload":1});
        api.call("POST", &jobs, Some(body)).await;
    }
    let c = api
        .call("POST", &format!("/v1/queues/{q}/claim"), Some(json!({})))
        .await
        .json();
    let token = c["jobs"][0]["lease_token"].as_u64().unwrap();
    let ack = format!("/v1/queues/{q}/jobs/x/ack");
    let stale = api
        .call("POST", &ack, Some(json!({"lease_token": token + 1000})))
        .await;
    assert_eq!(stale.code(), "lease_lost");
    api.call("POST", &ack, Some(json!({"lease_token": token})))
        .await;
    let m = api.call("GET", "/metrics", None).await;
    assert_eq!(m.status, 200);
    // Each event is counted once, whichever layer handled it (Instrumented meters them all).
    for (counter, n) in [
        ("delayq_enqueued_total", 1),
        ("delayq_enqueue_existing_total", 1),
        ("delayq_claimed_total", 1),
        ("delayq_acked_total", 1),
        ("delayq_lease_lost_total", 1),
    ] {
        let line = format!("{counter}{{queue=\"{q}\"}} {n}");
        assert!(m.body.lines().any(|l| l == line), "{line} not in /metrics");
    }
    for name in [
        "delayq_scheduled{queue=\"Q\"}",
        "delayq_leased{queue=\"Q\"}",
        "delayq_dead{queue=\"Q\"}",
        "delayq_oldest_overdue_seconds{queue=\"Q\"}",
        "delayq_paused{queue=\"Q\"}",
        "delayq_queue_jobs_total{queue=\"Q\",event=\"enqueued\"}",
        "delayq_queue_lateness_p99_seconds{queue=\"Q\"}",
        "delayq_lateness_seconds_bucket{queue=\"Q\",le=\"0.001\"}",
        "delayq_lateness_seconds_bucket{queue=\"Q\",le=\"60\"}",
        "delayq_http_request_duration_seconds_bucket",
    ] {
        let name = name.replace('Q', &q);
        assert!(m.body.contains(&name), "{name} missing from /metrics");
    }
    let doc = api.call("GET", "/openapi.json", None).await.json();
    assert_eq!(doc["openapi"], "3.1.0");
    for p in [
        "/v1/queues/{q}/jobs",
        "/v1/queues/{q}/claim",
        "/v1/queues/{q}/jobs/{id}/nack",
        "/v1/queues/{q}/dead/requeue",
    ] {
        assert!(
            doc["paths"].get(p).is_some(),
            "{p} not in the OpenAPI document"
        );
    }
    let d = api.call("GET", "/", None).await;
    assert!(d.status == 200 && d.body.contains("/assets/console.js"));
    let js = api.call("GET", "/assets/console.js", None).await;
    assert!(js.status == 200 && js.body.contains("/v1/queues"));
    assert_eq!(api.call("GET", "/assets/nope.js", None).await.status, 404);
    api.stop().await;
}

/// (method, path, content type, body, status, code)
type Case = (
    &'static str,
    String,
    Option<&'static str>,
    String,
    u16,
    &'static str,
);

async fn bad_input_gets_a_4xx_stores_nothing_and_the_server_keeps_serving(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let j = "application/json";
    let big = "x".repeat(1001);
    let huge = "y".repeat(70 * 1024);
    let p = "/v1/queues/bad/jobs".to_owned();
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/v1/queues/a%20b/jobs".into(),
            Some(j),
            r#"{"payload":1}"#.into(),
            400,
            "invalid_queue_name",
        ),
        (
            "POST",
            "/v1/queues/%7Bq%7D/jobs".into(),
            Some(j),
            r#"{"payload":1}"#.into(),
            400,
            "invalid_queue_name",
        ),
        (
            "POST",
            "/v1/queues/a:b/jobs".into(),
            Some(j),
            r#"{"payload":1}"#.into(),
            400,
            "invalid_queue_name",
        ),
        (
            "POST",
            format!("/v1/queues/{}/jobs", "q".repeat(129)),
            Some(j),
            r#"{"payload":1}"#.into(),
            400,
            "invalid_queue_name",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"id":"a\u0001b","payload":1}"#.into(),
            400,
            "invalid_job_id",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            format!(r#"{{"id":"{}","payload":1}}"#, "i".repeat(257)),
            400,
            "invalid_job_id",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"id":"","payload":1}"#.into(),
            400,
            "invalid_job_id",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            format!(r#"{{"payload":"{big}"}}"#),
            413,
            "payload_too_large",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            format!(r#"{{"payload":"{huge}"}}"#),
            413,
            "body_too_large",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"delay_ms":-5}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"delay_ms":400000000000}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"delay_ms":"NaN"}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"run_at":"tomorrow"}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"run_at":"2050-01-01T00:00:00Z"}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"run_at":-3}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"delay_ms":5,"run_at":5}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":"#.into(),
            400,
            "invalid_json",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            "hello".into(),
            400,
            "invalid_json",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"colour":"red"}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload_b64":5}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"payload_b64":"AA=="}"#.into(),
            400,
            "invalid_payload",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"id":"x"}"#.into(),
            400,
            "invalid_payload",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload_b64":"!!!"}"#.into(),
            400,
            "invalid_payload",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"max_attempts":0}"#.into(),
            400,
            "invalid_max_attempts",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"backoff":{"kind":"exponential","base_ms":10,"cap_ms":1}}"#.into(),
            400,
            "invalid_backoff",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"backoff":{"kind":"random"}}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"{"payload":1,"lease_ms":1}"#.into(),
            400,
            "invalid_lease",
        ),
        (
            "POST",
            p.clone(),
            None,
            r#"{"payload":1}"#.into(),
            415,
            "unsupported_media_type",
        ),
        (
            "POST",
            p.clone(),
            Some("text/plain"),
            r#"{"payload":1}"#.into(),
            415,
            "unsupported_media_type",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            "[]".into(),
            400,
            "invalid_batch",
        ),
        (
            "POST",
            p.clone(),
            Some(j),
            r#"[{"id":"ok","payload":1},{"id":"bad","payload":1,"max_attempts":0}]"#.into(),
            400,
            "invalid_max_attempts",
        ),
        (
            "POST",
            "/v1/queues/bad/claim".into(),
            Some(j),
            r#"{"max":0}"#.into(),
            400,
            "invalid_batch",
        ),
        (
            "POST",
            "/v1/queues/bad/claim".into(),
            Some(j),
            r#"{"max":5000}"#.into(),
            400,
            "invalid_batch",
        ),
        (
            "POST",
            "/v1/queues/bad/claim".into(),
            Some(j),
            r#"{"wait_ms":120000}"#.into(),
            400,
            "invalid_batch",
        ),
        (
            "POST",
            "/v1/queues/bad/claim".into(),
            Some(j),
            r#"{"lease_ms":0}"#.into(),
            400,
            "invalid_lease",
        ),
        (
            "POST",
            "/v1/queues/bad/claim".into(),
            Some(j),
            r#"{"max":1,"extra":1}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "POST",
            "/v1/queues/bad/jobs/nope/ack".into(),
            Some(j),
            r#"{"lease_token":1}"#.into(),
            404,
            "not_found",
        ),
        (
            "POST",
            "/v1/queues/bad/jobs/nope/ack".into(),
            Some(j),
            r#"{}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "POST",
            "/v1/queues/bad/jobs/nope/nack".into(),
            Some(j),
            r#"{"lease_token":"x"}"#.into(),
            400,
            "invalid_body",
        ),
        (
            "GET",
            "/v1/queues/bad/dead?limit=0".into(),
            None,
            String::new(),
            400,
            "invalid_query",
        ),
        (
            "GET",
            "/v1/queues/bad/dead?limit=abc".into(),
            None,
            String::new(),
            400,
            "invalid_query",
        ),
        (
            "GET",
            "/v1/queues/bad/dead?sort=asc".into(),
            None,
            String::new(),
            400,
            "invalid_query",
        ),
        (
            "PATCH",
            "/v1/queues/bad/jobs/nope".into(),
            Some(j),
            r#"{}"#.into(),
            400,
            "invalid_delay",
        ),
        (
            "PATCH",
            "/v1/queues/bad/jobs/nope".into(),
            Some(j),
            r#"{"delay_ms":5}"#.into(),
            404,
            "not_found",
        ),
        (
            "GET",
            "/v2/nothing".into(),
            None,
            String::new(),
            404,
            "no_route",
        ),
        (
            "PUT",
            "/v1/queues/bad/jobs".into(),
            Some(j),
            "{}".into(),
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            "/v1/queues/bad/dead/nope/requeue".into(),
            None,
            String::new(),
            404,
            "not_found",
        ),
    ];
    assert!(cases.len() >= 30);
    for (method, path, ctype, body, status, code) in &cases {
        let r = api.raw(method, path, *ctype, body).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (*status, *code),
            "{method} {path} {body:.80}: {}",
            r.body
        );
        assert!(!r.json()["message"].as_str().unwrap_or_default().is_empty());
        assert_eq!(
            api.stored().await,
            "0",
            "{method} {path} {body:.80} wrote something"
        );
    }
    assert_eq!(api.call("GET", "/healthz", None).await.status, 200);
    api.stop().await;
}

async fn stale_and_foreign_lease_tokens_are_refused(store: Store) {
    let api = start_on(store, Vec::new()).await;
    api.call(
        "POST",
        "/v1/queues/f/jobs",
        Some(json!([{"id":"a","payload":1},{"id":"b","payload":2}])),
    )
    .await;
    let c = api
        .call(
            "POST",
            "/v1/queues/f/claim",
            Some(json!({"max":2,"lease_ms":200})),
        )
        .await
        .json();
    let tok = |i: usize| c["jobs"][i]["lease_token"].as_u64().unwrap();
    let (a_tok, b_tok) = if c["jobs"][0]["id"] == "a" {
        (tok(0), tok(1))
    } else {
        (tok(1), tok(0))
    };
    // The token of another job.
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/a/ack",
            Some(json!({"lease_token": b_tok})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "lease_lost".into()));
    // Double ack.
    assert_eq!(
        api.call(
            "POST",
            "/v1/queues/f/jobs/b/ack",
            Some(json!({"lease_token": b_tok}))
        )
        .await
        .status,
        200
    );
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/b/ack",
            Some(json!({"lease_token": b_tok})),
        )
        .await;
    assert_eq!(r.status, 404, "acked jobs are gone: {}", r.body);
    // Nack after the lease expired and the job was claimed again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = api
        .call("POST", "/v1/queues/f/claim", Some(json!({"max":1})))
        .await
        .json();
    assert_eq!(again["jobs"][0]["attempt"], 2);
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/a/nack",
            Some(json!({"lease_token": a_tok, "error":"late"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "lease_lost".into()));
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/a/extend",
            Some(json!({"lease_token": a_tok})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "lease_lost".into()));
    // Nothing changed: the new owner still holds it.
    let g = api.call("GET", "/v1/queues/f/jobs/a", None).await.json();
    assert_eq!(
        (
            g["state"].as_str(),
            g["attempt"].as_u64(),
            g.get("last_error").and_then(Value::as_str)
        ),
        (Some("leased"), Some(2), Some("lease expired (attempt 1)"))
    );
    // Cancel and reschedule of a leased job, requeue of a job that is not dead: 409.
    assert_eq!(
        api.call("DELETE", "/v1/queues/f/jobs/a", None).await.code(),
        "job_leased"
    );
    assert_eq!(
        api.call("PATCH", "/v1/queues/f/jobs/a", Some(json!({"delay_ms":5})))
            .await
            .code(),
        "job_leased"
    );
    assert_eq!(
        api.call("POST", "/v1/queues/f/dead/a/requeue", None)
            .await
            .code(),
        "job_not_dead"
    );
    api.stop().await;
}

#[test]
fn docs_api_md_lists_every_error_code_with_its_status() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/API.md")).unwrap();
    // The error table: exactly one row per code, in order, with its status and meaning.
    let rows: Vec<String> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| code | status | meaning |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(str::to_owned)
        .collect();
    let want: Vec<String> = delayq_http::ErrorCode::ALL
        .iter()
        .map(|c| format!("| `{c}` | {} | {} |", c.status().as_u16(), c.meaning()))
        .collect();
    assert_eq!(rows, want, "docs/API.md's error table is ErrorCode::ALL");
}
