//! What the HTTP API tests share (`api.rs`, `bad_input.rs`): a server on either backend,
//! reached in process (`router(state).oneshot`) or over a real listener, and a client that sends
//! raw requests. Each test file uses a part of it.
#![allow(dead_code)]

use std::sync::OnceLock;

use axum::Router;
use delayq::Inspect;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tower::ServiceExt;

pub(crate) fn prometheus() -> PrometheusHandle {
    static H: OnceLock<PrometheusHandle> = OnceLock::new();
    H.get_or_init(|| delayq_http::install_prometheus().unwrap())
        .clone()
}

/// The backend a test runs on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Store {
    Redis,
    Embedded,
}

/// What keeps a backend alive (its server, its directory), and how to count what it stores.
pub(crate) enum Guard {
    Redis(RedisServer),
    Embedded(EmbeddedBackend, #[allow(dead_code)] tempfile::TempDir),
}

/// A server under test and a client of it.
pub(crate) struct Api {
    pub(crate) client: Client,
    /// Long polls waiting on the server now (`AppState::waiting_polls`).
    waiting_polls: std::sync::Arc<dyn Fn() -> usize + Send + Sync>,
    guard: Guard,
    pub(crate) stop: Option<oneshot::Sender<()>>,
    pub(crate) task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// How requests reach the server.
#[derive(Clone)]
pub(crate) enum Transport {
    /// A minimal HTTP/1.1 client over TCP (one connection per request).
    Tcp(std::net::SocketAddr),
    /// `router(state).oneshot(request)`, in process.
    Router(Router),
}

#[derive(Clone)]
pub(crate) struct Client {
    transport: Transport,
    pub(crate) token: Option<String>,
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

pub(crate) struct Resp {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl Resp {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    pub(crate) fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }
}

pub(crate) fn config(tokens: &[String]) -> HttpConfig {
    HttpConfig {
        max_payload: 1000,
        max_body: 128 * 1024,
        tokens: tokens
            .iter()
            .map(|t| delayq_http::auth::Token::parse(t).unwrap())
            .collect(),
        ..HttpConfig::default()
    }
}

/// A server on `store`, reached in process.
pub(crate) async fn start_on(store: Store, tokens: Vec<String>) -> Api {
    let (router, guard, waiting_polls): (_, _, std::sync::Arc<dyn Fn() -> usize + Send + Sync>) =
        match store {
            Store::Redis => {
                let redis = RedisServer::start();
                let backend = RedisBackend::connect(&redis.url()).await.unwrap();
                let state = AppState::new(backend, config(&tokens), Some(prometheus()));
                let s = state.clone();
                (
                    delayq_http::router(state),
                    Guard::Redis(redis),
                    std::sync::Arc::new(move || s.waiting_polls()),
                )
            }
            Store::Embedded => {
                let dir = tempfile::tempdir().unwrap();
                let backend = EmbeddedBackend::open(dir.path()).unwrap();
                let state = AppState::new(backend.clone(), config(&tokens), Some(prometheus()));
                let s = state.clone();
                (
                    delayq_http::router(state),
                    Guard::Embedded(backend, dir),
                    std::sync::Arc::new(move || s.waiting_polls()),
                )
            }
        };
    Api {
        client: Client {
            transport: Transport::Router(router),
            token: tokens.first().cloned(),
        },
        waiting_polls,
        guard,
        stop: None,
        task: None,
    }
}

/// A server on Redis behind a real listener (long polls, shutdown).
pub(crate) async fn start_socket() -> Api {
    let redis = RedisServer::start();
    let backend = RedisBackend::connect(&redis.url()).await.unwrap();
    let state = AppState::new(backend, config(&[]), Some(prometheus()));
    let s = state.clone();
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
        waiting_polls: std::sync::Arc::new(move || s.waiting_polls()),
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
                super::$name($crate::api_harness::Store::Redis).await;
            })*
        }
        mod embedded {
            $(#[tokio::test]
            async fn $name() {
                super::$name($crate::api_harness::Store::Embedded).await;
            })*
        }
    };
}

impl Client {
    /// Enqueues jobs `id(0)`, `id(1)` … `id(n - 1)` (payload: the number) into `queue` in
    /// one request, which must succeed.
    pub(crate) async fn enqueue_numbered(
        &self,
        queue: &str,
        n: usize,
        id: impl Fn(usize) -> String,
    ) {
        let jobs: Vec<Value> = (0..n)
            .map(|i| serde_json::json!({"id": id(i), "payload": i}))
            .collect();
        let r = self
            .call(
                "POST",
                &format!("/v1/queues/{queue}/jobs"),
                Some(Value::from(jobs)),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }

    pub(crate) async fn raw(
        &self,
        method: &str,
        path: &str,
        ctype: Option<&str>,
        body: &str,
    ) -> Resp {
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
                crate::schema_check::check(method, path, status, &body);
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
        crate::schema_check::check(method, path, status, &body);
        Resp { status, body }
    }

    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Resp {
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
    /// Waits until `n` long polls wait on the server (a claim just sent has reached its wait).
    pub(crate) async fn until_polls_wait(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while (self.waiting_polls)() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {n} long polls waiting",
                (self.waiting_polls)()
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// What the store holds: Redis's key count, or the embedded store's queues with jobs.
    pub(crate) async fn stored(&self) -> String {
        match &self.guard {
            Guard::Redis(r) => r.command(&["DBSIZE"]),
            Guard::Embedded(b, _) => b.queues().await.unwrap().len().to_string(),
        }
    }

    pub(crate) async fn stop(mut self) {
        if let (Some(stop), Some(task)) = (self.stop.take(), self.task.take()) {
            let _ = stop.send(());
            task.await.unwrap().unwrap();
        }
    }
}

pub(crate) fn dechunk(mut s: &str) -> String {
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
