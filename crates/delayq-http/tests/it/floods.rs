//! No flood starves the probes: with the connection cap full of half-sent requests and
//! unfinished bodies from many addresses — each reopened as soon as the server closes it —
//! `/healthz`, `/readyz`, a claim and an admin call are still answered within 1 s (the oldest
//! connection not serving a request is closed for a new one), and a body that never finishes
//! is answered 408 within the header timeout, not the 90-s request timeout.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use delayq_embedded::EmbeddedBackend;
use delayq_http::auth::Token;
use delayq_http::{AppState, HttpConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::raw::{connect_from, get, head, post, timed};

/// A server on a store in a temporary directory: its address, its stop and the directory.
async fn start(
    config: HttpConfig,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(backend, config, None);
    tokio::spawn(delayq_http::serve(listener, state, async {
        let _ = rx.await;
    }));
    (addr, stop, dir)
}

fn tokens() -> Vec<Token> {
    ["admin:boss", "consume:worker", "produce:maker"]
        .iter()
        .map(|t| Token::parse_scoped(t).unwrap())
        .collect()
}

/// Holds a connection from `src` that sent `partial` and never the rest, reopening it
/// whenever the server closes it, while `on`.
fn flood(src: String, addr: SocketAddr, partial: &'static str, on: Arc<AtomicBool>) {
    tokio::spawn(async move {
        while on.load(Ordering::Relaxed) {
            let Ok(mut s) = connect_from(&src, addr).await else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            let _ = s.write_all(partial.as_bytes()).await;
            let mut buf = [0u8; 256];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cap_full_of_unfinished_requests_from_many_addresses_still_answers_probes() {
    let config = HttpConfig {
        max_connections: 256,
        tokens: tokens(),
        ..HttpConfig::default()
    };
    let (addr, _stop, _dir) = start(config).await;
    let on = Arc::new(AtomicBool::new(true));
    // 24 addresses: 16 hold 16 half-sent requests each, 8 hold 16 unfinished bodies of a
    // produce token each: 384 connections for 256 places.
    let body = "POST /v1/queues/q/jobs HTTP/1.1\r\nHost: localhost\r\n\
                Authorization: Bearer maker\r\nContent-Type: application/json\r\n\
                Content-Length: 4096\r\n\r\n{\"payload\": ";
    for a in 0..24 {
        let partial = if a < 16 {
            "POST /v1/queues/q/jobs HTTP/1.1\r\nHost: loc"
        } else {
            body
        };
        for _ in 0..16 {
            flood(format!("127.0.1.{}", a + 10), addr, partial, on.clone());
        }
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let probes = [
        ("healthz", get("/healthz", "")),
        ("readyz", get("/readyz", "")),
        (
            "claim",
            post("/v1/queues/q/claim", "worker", r#"{"max": 1}"#),
        ),
        ("admin", get("/v1/queues", "boss")),
    ];
    let (mut tries, mut answered, mut slow) = (0, 0, Vec::new());
    for _ in 0..10 {
        for (name, req) in &probes {
            tries += 1;
            let (status, took) = timed(addr, req.clone()).await;
            if status == 200 && took < Duration::from_secs(1) {
                answered += 1;
            } else {
                slow.push((*name, status, took));
            }
        }
    }
    on.store(false, Ordering::Relaxed);
    eprintln!("{answered} of {tries} answered within 1 s; the others: {slow:?}");
    assert!(
        answered * 100 >= tries * 95,
        "{answered} of {tries} answered within 1 s; the others: {slow:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_is_cut_at_the_header_timeout() {
    let config = HttpConfig {
        header_timeout: Duration::from_millis(500),
        tokens: tokens(),
        ..HttpConfig::default()
    };
    let (addr, _stop, _dir) = start(config).await;
    let mut s = connect_from("127.0.0.1", addr).await.unwrap();
    let started = Instant::now();
    let partial = "POST /v1/queues/q/jobs HTTP/1.1\r\nHost: localhost\r\n\
                   Authorization: Bearer maker\r\nContent-Type: application/json\r\n\
                   Content-Length: 100\r\n\r\n{\"payload\": 1";
    let (status, headers) = tokio::time::timeout(Duration::from_secs(10), head(&mut s, partial))
        .await
        .expect("answered before the request timeout")
        .unwrap();
    assert_eq!(status, 408, "{headers}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        headers.to_ascii_lowercase().contains("connection: close"),
        "{headers}"
    );
    // The server let the connection go.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(_))), "closed: {read:?}");
    let answer = format!("{headers}{}", String::from_utf8_lossy(&rest));
    assert!(answer.contains("request_timeout"), "{answer}");
    // A whole body is taken as before.
    let (status, _) = timed(
        addr,
        post("/v1/queues/q/jobs", "maker", r#"{"payload": 1}"#),
    )
    .await;
    assert_eq!(status, 201);
}
