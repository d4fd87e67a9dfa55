//! Slow and idle clients cannot lock `serve` out: a half-sent request or an idle socket is
//! closed after the header timeout, connections are capped, and a well-behaved client is
//! served while hundreds of slow ones hold sockets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};

fn get(addr: std::net::SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_others_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        header_timeout: Duration::from_secs(1),
        max_connections: 64,
        ..HttpConfig::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(delayq_http::serve(
        listener,
        AppState::new(backend, config, None),
        async {
            let _ = rx.await;
        },
    ));

    let result = tokio::task::spawn_blocking(move || {
        // 300 slow clients: half a request each, or nothing at all.
        let mut slow = Vec::new();
        for i in 0..300 {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(b"POST /v1/queues/q/jobs HTTP/1.1\r\nHost: local")
                    .unwrap();
            }
            slow.push(s);
        }
        // A well-behaved client gets its answer (once slow ones time out, at the latest).
        let t = Instant::now();
        let answer = get(addr);
        let waited = t.elapsed();
        // The slow sockets were closed by the server.
        // (A sample, so that a server that never closes them fails in seconds, not minutes.)
        let mut closed = 0;
        for s in slow.iter_mut().step_by(15) {
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            let mut buf = [0u8; 512];
            // An error answer (408) then EOF, or EOF at once: either way the server let go.
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {
                        closed += 1;
                        break;
                    }
                    Ok(_) => continue,
                    Err(_) => break,
                }
            }
        }
        (answer, waited, closed)
    })
    .await
    .unwrap();
    let (answer, waited, closed) = result;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(waited < Duration::from_secs(8), "served after {waited:?}");
    assert_eq!(
        closed, 20,
        "every sampled slow socket was closed by the server"
    );
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(delayq_http::serve(
        listener,
        AppState::new(backend, HttpConfig::default(), None),
        async {
            let _ = rx.await;
        },
    ));
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // Headers that keep coming: 100 KiB in pieces, never ending.
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ");
        for _ in 0..100 {
            if s.write_all(&[b'a'; 1024]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .await
    .unwrap();
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "100 KiB of headers: {}",
        answer.lines().next().unwrap_or("")
    );
    assert!(
        get(addr).starts_with("HTTP/1.1 200"),
        "the server keeps serving"
    );
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
