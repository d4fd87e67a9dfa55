//! No caller can starve the others: event streams and long polls have budgets per caller and
//! in total (429 `too_many_streams` / `too_many_long_polls` with `Retry-After`) and never take
//! the connections short requests need; one address churning half-sent requests cannot crowd
//! out another; all event streams of a queue share one reader of the store.
//!
//! Attackers connect from 127.0.0.2 (all of 127/8 is loopback on Linux), well-behaved
//! clients from 127.0.0.1.

use std::net::SocketAddr;
use std::time::Duration;

use delayq::{Backend, Inspect, Schedules};
use delayq_embedded::EmbeddedBackend;
use delayq_http::auth::Token;
use delayq_http::{AppState, HttpConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::raw::{connect_from, get, head, post, timed};

const ATTACKER: &str = "127.0.0.2";

async fn start<B: Backend + Inspect + Schedules + delayq::Batches>(
    backend: B,
    config: HttpConfig,
) -> (SocketAddr, AppState<B>, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(backend, config, None);
    tokio::spawn(delayq_http::serve(listener, state.clone(), async {
        let _ = rx.await;
    }));
    (addr, state, stop)
}

/// Opens `n` long-lived requests from the attacker's address; keeps those answered 200,
/// returns them and the other answers' heads.
async fn open_many(addr: SocketAddr, n: usize, req: String) -> (Vec<TcpStream>, Vec<String>) {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let req = req.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = connect_from(ATTACKER, addr).await?;
            let r = tokio::time::timeout(Duration::from_millis(1500), head(&mut s, &req)).await;
            match r {
                // A long poll that waits sends nothing yet: it holds its place.
                Err(_) => Ok((None, s)),
                Ok(Ok((200, _))) => Ok((None, s)),
                Ok(Ok((_, text))) => Ok((Some(text), s)),
                Ok(Err(e)) => Err(e),
            }
        }));
    }
    let (mut held, mut refused) = (Vec::new(), Vec::new());
    for t in tasks {
        match t.await.unwrap() {
            Ok((None, s)) => held.push(s),
            Ok((Some(text), _)) => refused.push(text),
            Err(e) => refused.push(format!("connection error: {e}")),
        }
    }
    (held, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn full_budgets_leave_room_for_health_checks_claims_and_admins() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        tokens: ["attacker", "admin:boss", "consume:worker", "read:viewer"]
            .iter()
            .map(|t| Token::parse(t).unwrap())
            .collect(),
        // The connections per address must not be what stops the attacker here.
        max_short_per_address: 1024,
        max_streams_total: 40,
        ..HttpConfig::default()
    };
    let (addr, state, _stop) = start(backend, config).await;

    // 520 streams with one token: 32 (its share) are served, the rest answered 429.
    let (streams, refused) = open_many(addr, 520, get("/v1/queues/q/events", "attacker")).await;
    assert_eq!(streams.len(), 32, "streams held: {}", streams.len());
    assert_eq!(refused.len(), 488);
    assert!(
        refused
            .iter()
            .all(|r| r.starts_with("HTTP/1.1 429")
                && r.to_ascii_lowercase().contains("retry-after: 1")),
        "{}",
        refused[0]
    );
    assert_eq!(state.open_streams(), 32);
    // The same token spelled otherwise (the scheme is case-insensitive) is the same caller.
    for spelled in ["bearer attacker", "BEARER  attacker"] {
        let req = format!(
            "GET /v1/queues/q/events HTTP/1.1\r\nHost: localhost\r\nAuthorization: {spelled}\r\n\r\n"
        );
        let (more, refused) = open_many(addr, 2, req).await;
        assert_eq!((more.len(), refused.len()), (0, 2), "{spelled}");
    }
    // The whole server's budget: another caller gets the 8 places left, then 429.
    let (others, refused2) = open_many(addr, 10, get("/v1/queues/q/events", "viewer")).await;
    assert_eq!((others.len(), refused2.len()), (8, 2));
    // Every stream of the queue shares one reader of the store.
    assert_eq!(state.stats_readers(), 1);

    // 300 long polls with the same token: 256 wait, the rest answered 429.
    let poll = post("/v1/queues/q/claim", "attacker", r#"{"wait_ms":60000}"#);
    let (polls, refused) = open_many(addr, 300, poll).await;
    assert_eq!(polls.len(), 256);
    assert_eq!(refused.len(), 44);
    assert!(
        refused.iter().all(|r| r.contains("too_many_long_polls")),
        "{}",
        refused[0]
    );
    assert_eq!(state.waiting_polls(), 256);

    // Meanwhile everyone else is served at once.
    for (name, req) in [
        ("healthz", get("/healthz", "")),
        ("readyz", get("/readyz", "")),
        ("admin", get("/v1/queues", "boss")),
        (
            "claim",
            post("/v1/queues/q/claim", "worker", r#"{"max":1}"#),
        ),
    ] {
        let (status, took) = timed(addr, req).await;
        eprintln!("{name}: {status} in {took:?} with every budget full");
        assert_eq!(status, 200, "{name}");
        assert!(took < Duration::from_millis(500), "{name} took {took:?}");
    }
    drop((streams, others, polls));
}

/// Refused means gone: behind one address (a proxy, a NAT, the node of the health checker),
/// 520 event streams of one read token — every socket kept by the client — leave that
/// address's health checks and admin calls served, because each refused stream's connection
/// is closed by the server (`Connection: close`) instead of counting against the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_streams_give_their_connections_back() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        tokens: ["read:viewer", "admin:boss"]
            .iter()
            .map(|t| Token::parse(t).unwrap())
            .collect(),
        ..HttpConfig::default()
    };
    let (addr, state, _stop) = start(backend, config).await;
    let mut kept = Vec::new();
    let (mut streams, mut refused) = (0, 0);
    for _ in 0..520 {
        let Ok(mut s) = connect_from("127.0.0.1", addr).await else {
            continue;
        };
        match head(&mut s, &get("/v1/queues/q/events", "viewer")).await {
            Ok((200, _)) => streams += 1,
            Ok((429, h)) => {
                assert!(h.to_ascii_lowercase().contains("connection: close"), "{h}");
                refused += 1;
            }
            other => panic!("{other:?}"),
        }
        kept.push(s);
    }
    assert_eq!((streams, refused), (32, 488));
    assert_eq!(state.open_streams(), 32);
    // The server closed every refused one: reading it ends.
    let mut closed = 0;
    for s in kept.iter_mut().skip(32) {
        let mut buf = [0u8; 64];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert_eq!(closed, 488);
    for (name, req) in [
        ("healthz", get("/healthz", "")),
        ("readyz", get("/readyz", "")),
        ("admin", get("/v1/queues", "boss")),
    ] {
        let (status, took) = timed(addr, req).await;
        assert_eq!(status, 200, "{name}");
        // 100 ms on a quiet machine; the bound leaves room for a loaded CI.
        assert!(took < Duration::from_secs(1), "{name} took {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn churning_half_sent_connections_do_not_crowd_out_another_address() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        header_timeout: Duration::from_millis(500),
        ..HttpConfig::default()
    };
    let (addr, _state, _stop) = start(backend, config).await;
    let churning = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    // 600 half-sent requests, each re-opened as soon as the server closes it.
    let mut attackers = Vec::new();
    for _ in 0..600 {
        let on = churning.clone();
        attackers.push(tokio::spawn(async move {
            while on.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(mut s) = connect_from(ATTACKER, addr).await {
                    let _ = s
                        .write_all(b"POST /v1/queues/q/jobs HTTP/1.1\r\nHost: local")
                        .await;
                    let mut buf = [0u8; 256];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                } else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }));
    }
    // Real time: the attackers' connections pile up for 0.3 s, then 14 probes 30 ms apart.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answered = 0;
    for _ in 0..14 {
        let (status, took) = timed(addr, get("/healthz", "")).await;
        if status == 200 && took < Duration::from_secs(2) {
            answered += 1;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    churning.store(false, std::sync::atomic::Ordering::Relaxed);
    for a in attackers {
        a.abort();
    }
    eprintln!("{answered} of 14 answered within 2 s under the churn");
    assert!(answered >= 13, "{answered} of 14 answered within 2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hundred_streams_of_a_queue_cost_redis_what_one_does() {
    let server = delayq_test_support::RedisServer::start();
    let backend = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    // The reader reads every 100 ms (1 s by default) and nothing else samples the queue, so a
    // short count sees several reads.
    let config = HttpConfig {
        max_streams: 400,
        max_streams_total: 400,
        max_short_per_address: 1024,
        stats_every: Duration::from_millis(100),
        depth_every: Duration::from_secs(3600),
        ..HttpConfig::default()
    };
    let (addr, state, _stop) = start(backend, config).await;
    let commands = || {
        server
            .info_field("stats", "total_commands_processed")
            .unwrap()
    };
    // Commands a second, measured over 0.4 s (four reads) with `n` streams of queue q open.
    let rate = |n: usize| {
        let state = state.clone();
        async move {
            let (streams, refused) = open_many(addr, n, get("/v1/queues/q/events", "")).await;
            assert!(refused.is_empty(), "{refused:?}");
            assert_eq!(state.open_streams(), n);
            // Real time: the streams' reader polls Redis on its own timer; a rate is measured
            // over time (settled 0.15 s, counted over 0.4 s).
            tokio::time::sleep(Duration::from_millis(150)).await;
            let before = commands();
            tokio::time::sleep(Duration::from_millis(400)).await;
            let per_s = (commands() - before) / 0.4;
            drop(streams);
            per_s
        }
    };
    let one = rate(1).await;
    let many = rate(300).await;
    eprintln!("Redis commands/s with 1 stream: {one:.1}, with 300: {many:.1}");
    assert!(one > 0.0);
    // The same reader either way (plus the server's own depth sampling and noise).
    assert!(
        many <= one * 1.5 + 5.0,
        "1 stream: {one}/s, 300 streams: {many}/s"
    );
    assert_eq!(state.stats_readers(), 1);
}

/// Without tokens each client address has its own long-poll budget: one local process's 300
/// polls do not make another's answer 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_tokens_each_address_has_its_own_long_poll_budget() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        max_short_per_address: 1024,
        ..HttpConfig::default()
    };
    let (addr, state, _stop) = start(backend, config).await;
    let poll = "POST /v1/queues/q/claim HTTP/1.1\r\nHost: localhost\r\nContent-Type: \
                application/json\r\nContent-Length: 17\r\n\r\n{\"wait_ms\":60000}";
    let (polls, refused) = open_many(addr, 300, poll.to_owned()).await;
    assert_eq!((polls.len(), refused.len()), (256, 44));
    // Another address's poll waits (no answer within a second) instead of a 429.
    let mut s = connect_from("127.0.0.1", addr).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(1), head(&mut s, poll)).await;
    assert!(r.is_err(), "answered at once: {r:?}");
    assert_eq!(state.waiting_polls(), 257);
    drop(polls);
}

/// A long poll is cut only by its own caller: another token's `DELETE …/polls/{id}` of the
/// same id answers 204 and leaves it waiting; its own token's cut ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_its_caller_cuts_a_long_poll() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        tokens: ["consume:alice", "consume:mallory"]
            .iter()
            .map(|t| Token::parse_scoped(t).unwrap())
            .collect(),
        ..HttpConfig::default()
    };
    let (addr, state, _stop) = start(backend, config).await;
    let body = r#"{"wait_ms": 20000, "poll_id": "w-1"}"#;
    let poll = tokio::spawn(timed(addr, post("/v1/queues/cut/claim", "alice", body)));
    while state.waiting_polls() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cut = |who: &str| {
        format!(
            "DELETE /v1/queues/cut/polls/w-1 HTTP/1.1\r\nHost: localhost\r\n\
             Authorization: Bearer {who}\r\n\r\n"
        )
    };
    assert_eq!(timed(addr, cut("mallory")).await.0, 204);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!poll.is_finished(), "another caller's cut left it waiting");
    assert_eq!(timed(addr, cut("alice")).await.0, 204);
    let (status, took) = poll.await.unwrap();
    assert_eq!(status, 200);
    assert!(took < Duration::from_secs(10), "cut by alice: {took:?}");
}
