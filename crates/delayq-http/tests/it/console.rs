//! The console's API on both backends: listings with cursors, search, one-job and bulk actions
//! (and their 409s), pause and resume, the series, token scopes, the metrics token and the
//! live event stream.

use std::time::Duration;

use crate::common::{call_as as call, ids};
use axum::Router;
use delayq_embedded::EmbeddedBackend;
use delayq_http::auth::Token;
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

enum Guard {
    Redis(#[allow(dead_code)] RedisServer),
    Embedded(#[allow(dead_code)] tempfile::TempDir),
}

async fn state_on(redis: bool, config: HttpConfig) -> (Guard, Router) {
    if redis {
        let server = RedisServer::start();
        let b = RedisBackend::connect(&server.url()).await.unwrap();
        let r = delayq_http::router(AppState::new(b, config, None));
        (Guard::Redis(server), r)
    } else {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        let r = delayq_http::router(AppState::new(b, config, None));
        (Guard::Embedded(dir), r)
    }
}

async fn enqueue(r: &Router, id: &str, delay_ms: u64) {
    let body = json!({"id": id, "payload": {"n": id}, "delay_ms": delay_ms});
    let (s, v) = call(r, "POST", "/v1/queues/c/jobs", "", Some(body)).await;
    assert_eq!(s, 201, "{v}");
}

/// A dead job named `id`: enqueued, claimed and nacked dead.
async fn make_dead(r: &Router, id: &str) {
    enqueue(r, id, 0).await;
    let (_, v) = call(r, "POST", "/v1/queues/c/claim", "", Some(json!({"max": 1}))).await;
    let j = &v["jobs"][0];
    assert_eq!(j["id"], id, "{v}");
    let path = format!("/v1/queues/c/jobs/{id}/nack");
    let body = json!({"lease_token": j["lease_token"], "error": "boom", "dead": true});
    let (s, v) = call(r, "POST", &path, "", Some(body)).await;
    assert_eq!(s, 200, "{v}");
}

async fn browse_and_act(redis: bool) {
    let (_g, r) = state_on(redis, HttpConfig::default()).await;
    // No tokens: whoever reaches the server may do everything.
    let (_, who) = call(&r, "GET", "/v1/whoami", "", None).await;
    assert_eq!(
        (
            &who["scope"],
            &who["tokens_required"],
            who["allows"].as_array().map(Vec::len)
        ),
        (&json!("all"), &json!(false), Some(4))
    );
    make_dead(&r, "gone-1").await;
    make_dead(&r, "gone-2").await;
    for i in 0..5 {
        enqueue(&r, &format!("later-{i}"), 60_000 + i * 1000).await;
    }
    enqueue(&r, "now-1", 0).await;
    // Paging by cursor: 5 scheduled jobs in pages of 2, each once, in due order.
    let mut seen = Vec::new();
    let mut path = "/v1/queues/c/jobs?state=scheduled&limit=2".to_owned();
    loop {
        let (s, v) = call(&r, "GET", &path, "", None).await;
        assert_eq!(s, 200, "{v}");
        seen.extend(ids(&v));
        match v["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/queues/c/jobs?state=scheduled&limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(
        seen,
        (0..5).map(|i| format!("later-{i}")).collect::<Vec<_>>()
    );
    let (_, due) = call(&r, "GET", "/v1/queues/c/jobs?state=due", "", None).await;
    assert_eq!(ids(&due), ["now-1"]);
    assert_eq!(due["jobs"][0]["state"], "due");
    assert_eq!(due["jobs"][0]["payload"], json!({"n": "now-1"}));
    let (_, dead) = call(&r, "GET", "/v1/queues/c/jobs?state=dead", "", None).await;
    assert_eq!(ids(&dead), ["gone-1", "gone-2"]);
    assert_eq!(dead["jobs"][0]["last_error"], "boom");

    // Bad input: a 400 with a code, nothing changed.
    for bad in [
        "state=finished",
        "",
        "state=due&limit=0",
        "state=due&limit=1001",
        "state=due&cursor=nonsense",
        "state=due&color=red",
        "id_prefix=",
    ] {
        let (s, v) = call(&r, "GET", &format!("/v1/queues/c/jobs?{bad}"), "", None).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_query")),
            "{bad}: {v}"
        );
    }
    let (s, v) = call(&r, "DELETE", "/v1/queues/c/jobs?state=dead", "", None).await;
    assert_eq!((s, v["code"].as_str()), (400, Some("invalid_query")));
    let (s, _) = call(&r, "DELETE", "/v1/queues/c/jobs", "", None).await;
    assert_eq!(s, 400);

    // Search: the exact id always; a prefix where the store can.
    let (_, v) = call(&r, "GET", "/v1/queues/c/jobs?id_prefix=later-3", "", None).await;
    assert_eq!(ids(&v), ["later-3"]);
    let (_, v) = call(&r, "GET", "/v1/queues/c/jobs?id_prefix=later-", "", None).await;
    if v["by_prefix"] == true {
        assert_eq!(ids(&v).len(), 5);
    } else {
        assert!(ids(&v).is_empty());
    }

    // Acting on a job in the wrong state: 409 with its state, nothing changed.
    let (s, v) = call(&r, "POST", "/v1/queues/c/jobs/gone-1/run", "", None).await;
    assert_eq!(
        (s, v["code"].as_str(), v["state"].as_str()),
        (409, Some("job_dead"), Some("dead"))
    );
    let (s, v) = call(&r, "DELETE", "/v1/queues/c/dead/later-0", "", None).await;
    assert_eq!(
        (s, v["code"].as_str(), v["state"].as_str()),
        (409, Some("job_not_dead"), Some("scheduled"))
    );
    let (s, v) = call(&r, "POST", "/v1/queues/c/jobs/nobody/run", "", None).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")));
    let (_, st) = call(&r, "GET", "/v1/queues/c", "", None).await;
    let counts = (
        st["scheduled"].as_u64(),
        st["due"].as_u64(),
        st["dead"].as_u64(),
    );
    // `scheduled`: due later; `due`: due now (together the 6 waiting).
    assert_eq!(counts, (Some(5), Some(1), Some(2)));

    // One job: run now, delete a dead one.
    let (s, v) = call(&r, "POST", "/v1/queues/c/jobs/later-4/run", "", None).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("due_now")), "{v}");
    let (_, due) = call(&r, "GET", "/v1/queues/c/jobs?state=due", "", None).await;
    assert_eq!(ids(&due).len(), 2);
    let (s, v) = call(&r, "DELETE", "/v1/queues/c/dead/gone-2", "", None).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("deleted")));
    let (s, _) = call(&r, "DELETE", "/v1/queues/c/dead/gone-2", "", None).await;
    assert_eq!(s, 404);

    // Pause: enqueues accepted, nothing leased; resume.
    let (s, v) = call(&r, "POST", "/v1/queues/c/pause", "", None).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("paused")));
    enqueue(&r, "while-paused", 0).await;
    let (_, st) = call(&r, "GET", "/v1/queues/c", "", None).await;
    assert_eq!(st["paused"], true);
    let claim = || {
        call(
            &r,
            "POST",
            "/v1/queues/c/claim",
            "",
            Some(json!({"max": 10})),
        )
    };
    let (_, v) = claim().await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 0, "paused: {v}");
    let (s, v) = call(&r, "POST", "/v1/queues/c/resume", "", None).await;
    assert_eq!((s, v["outcome"].as_str()), (200, Some("resumed")));
    let (_, v) = claim().await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 3, "{v}");

    // Bulk: cancel every scheduled job; requeue and purge dead.
    let (s, v) = call(&r, "DELETE", "/v1/queues/c/jobs?state=scheduled", "", None).await;
    assert_eq!(
        (s, v["outcome"].as_str(), v["count"].as_u64()),
        (200, Some("cancelled"), Some(4))
    );
    let (_, v) = call(&r, "POST", "/v1/queues/c/dead/requeue", "", None).await;
    assert_eq!(v["count"], 1);

    // The series counted it all.
    let (s, v) = call(&r, "GET", "/v1/queues/c/series", "", None).await;
    assert_eq!(s, 200);
    assert_eq!(v["interval_ms"], 10_000);
    assert_eq!(v["intervals"].as_array().unwrap().len(), 360);
    assert_eq!(v["totals"]["enqueued"], 9, "{}", v["totals"]);
    assert_eq!(v["totals"]["dead"], 2);
    assert_eq!(v["totals"]["started"], 5);
    assert!(v["totals"]["lateness_p99_ms"].is_number());
}

#[tokio::test]
async fn browse_and_act_on_redis() {
    browse_and_act(true).await;
}

#[tokio::test]
async fn browse_and_act_on_embedded() {
    browse_and_act(false).await;
}

#[tokio::test]
async fn scopes_limit_what_a_token_may_do() {
    let config = HttpConfig {
        tokens: ["read:r", "produce:p", "consume:c", "admin:a", "all"]
            .into_iter()
            .map(|t| Token::parse(t).unwrap())
            .collect(),
        metrics_token: Some("m".into()),
        ..HttpConfig::default()
    };
    let (_g, r) = state_on(false, config).await;
    let job = json!({"id": "j", "payload": 1});
    assert_eq!(
        call(&r, "POST", "/v1/queues/c/jobs", "r", Some(job.clone()))
            .await
            .0,
        403
    );
    assert_eq!(
        call(&r, "POST", "/v1/queues/c/jobs", "p", Some(job.clone()))
            .await
            .0,
        201
    );
    assert_eq!(call(&r, "GET", "/v1/queues/c", "r", None).await.0, 200);
    assert_eq!(call(&r, "GET", "/v1/queues/c", "", None).await.0, 401);
    assert_eq!(call(&r, "GET", "/v1/queues/c", "wrong", None).await.0, 401);
    // A read token cannot act: 403 forbidden, nothing changed.
    for (method, path) in [
        ("POST", "/v1/queues/c/pause"),
        ("POST", "/v1/queues/c/jobs/j/run"),
        ("DELETE", "/v1/queues/c/jobs?state=due"),
        ("DELETE", "/v1/queues/c/jobs/j"),
    ] {
        let (s, v) = call(&r, method, path, "r", None).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (403, Some("forbidden")),
            "{method} {path}"
        );
    }
    let (_, st) = call(&r, "GET", "/v1/queues/c", "r", None).await;
    assert_eq!(
        (st["paused"].as_bool(), st["due"].as_u64()),
        (Some(false), Some(1))
    );
    // A consume token claims but cannot purge or enqueue.
    let (s, v) = call(
        &r,
        "POST",
        "/v1/queues/c/claim",
        "c",
        Some(json!({"max": 1})),
    )
    .await;
    assert_eq!((s, v["jobs"].as_array().map(Vec::len)), (200, Some(1)));
    let token = v["jobs"][0]["lease_token"].clone();
    let nack = json!({"lease_token": token, "error": "x", "dead": true});
    assert_eq!(
        call(&r, "POST", "/v1/queues/c/jobs/j/nack", "c", Some(nack))
            .await
            .0,
        200
    );
    let (s, v) = call(&r, "DELETE", "/v1/queues/c/dead", "c", None).await;
    assert_eq!((s, v["code"].as_str()), (403, Some("forbidden")));
    assert_eq!(
        call(&r, "POST", "/v1/queues/c/jobs", "c", Some(job.clone()))
            .await
            .0,
        403
    );
    let (_, st) = call(&r, "GET", "/v1/queues/c", "c", None).await;
    assert_eq!(st["dead"], 1, "the purge was refused");
    // Admin and a bare token may do everything.
    assert_eq!(
        call(&r, "DELETE", "/v1/queues/c/dead", "a", None).await.0,
        200
    );
    assert_eq!(
        call(&r, "POST", "/v1/queues/c/pause", "all", None).await.0,
        200
    );
    // The metrics token guards /metrics (API tokens work there too).
    assert_eq!(call(&r, "GET", "/metrics", "", None).await.0, 401);
    assert_ne!(call(&r, "GET", "/metrics", "m", None).await.0, 401);
    assert_ne!(call(&r, "GET", "/metrics", "r", None).await.0, 401);
    // Each token learns what it may do (the console greys out the rest).
    for (token, scope, allows) in [
        ("r", "read", json!(["read"])),
        ("p", "produce", json!(["read", "produce"])),
        ("c", "consume", json!(["read", "consume"])),
        ("a", "admin", json!(["read", "produce", "consume", "admin"])),
        ("all", "all", json!(["read", "produce", "consume", "admin"])),
    ] {
        let (s, v) = call(&r, "GET", "/v1/whoami", token, None).await;
        assert_eq!(s, 200, "{token}: {v}");
        assert_eq!(
            (&v["scope"], &v["allows"], &v["tokens_required"]),
            (&json!(scope), &allows, &json!(true)),
            "{token}"
        );
    }
    assert_eq!(call(&r, "GET", "/v1/whoami", "wrong", None).await.0, 401);
    // The page and its assets need no token (the page asks for one).
    assert_eq!(call(&r, "GET", "/", "", None).await.0, 200);
    assert_eq!(
        call(&r, "GET", "/assets/console.css", "", None).await.0,
        200
    );
}

#[tokio::test]
async fn the_event_stream_sends_counts_and_actions() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let state = AppState::new(b, HttpConfig::default(), None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(delayq_http::serve(listener, state, async {
        let _ = stopped.await;
    }));
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(b"GET /v1/queues/c/events HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut lines = BufReader::new(sock).lines();
    let mut next_event = async || -> (String, String) {
        let mut event = String::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
                .await
                .expect("an event within 5 s")
                .unwrap()
                .expect("stream open");
            if let Some(e) = line.strip_prefix("event: ") {
                event = e.to_owned();
            } else if let Some(d) = line.strip_prefix("data: ") {
                return (event, d.to_owned());
            }
        }
    };
    let (event, data) = next_event().await;
    assert_eq!(event, "stats");
    let v: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(
        (v["queue"].as_str(), v["paused"].as_bool()),
        (Some("c"), Some(false))
    );
    let r = reqwest_lite(addr, "POST", "/v1/queues/c/pause").await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(next_event().await);
    }
    assert!(
        got.iter()
            .any(|(e, d)| e == "action" && d.contains("\"outcome\":\"paused\"")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|(e, d)| e == "stats" && d.contains("\"paused\":true")),
        "{got:?}"
    );
    // Shutdown ends the stream (and so lets the server stop).
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops with a stream open")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_server_samples_depth_for_the_chart() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let config = HttpConfig {
        depth_every: Duration::from_millis(50),
        ..HttpConfig::default()
    };
    let state = AppState::new(b, config, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(delayq_http::serve(listener, state, async {
        let _ = stopped.await;
    }));
    let body = r#"[{"id":"a","payload":1,"delay_ms":60000},{"id":"b","payload":2}]"#;
    let req = format!(
        "POST /v1/queues/d/jobs HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let r = raw(addr, &req).await;
    assert!(r.starts_with("HTTP/1.1 201"), "{r}");
    // Samples every 50 ms: until two of them follow the enqueue.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let v = loop {
        let r = reqwest_lite(addr, "GET", "/v1/queues/d/series").await;
        let v: Value = serde_json::from_str(r.split_once("\r\n\r\n").unwrap().1).unwrap();
        let sampled = v["depth"].as_array().unwrap().iter();
        if sampled.filter(|d| d["scheduled"] == 1).count() >= 2 {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let depth = v["depth"].as_array().unwrap();
    assert!(depth.len() >= 2, "{v}");
    let last = depth.last().unwrap();
    assert_eq!(
        (last["scheduled"].as_u64(), last["due"].as_u64()),
        (Some(1), Some(1))
    );
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

/// One request on its own connection; the whole answer as text.
async fn reqwest_lite(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    raw(addr, &req).await
}

/// `req` on its own connection; the whole answer as text.
async fn raw(addr: std::net::SocketAddr, req: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// Idle queues cost the store nothing: the depth sampler reads an empty queue again only when
/// something happens to it here (an enqueue, the console's page) — 60 empty queues sampled
/// every 50 ms cost a few Redis commands a second, not 60 × 13 × 20 — and a queue that gains
/// jobs is sampled from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_queues_are_not_sampled() {
    use delayq::{Backend, NewJob, Producer};
    let server = RedisServer::start();
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    for i in 0..60 {
        let q = delayq::QueueName::new(format!("idle-{i}")).unwrap();
        let p = Producer::new(b.clone(), q.clone());
        let id = delayq::JobId::new("x").unwrap();
        p.enqueue(NewJob::new(b"1".to_vec()).id(id.clone()))
            .await
            .unwrap();
        assert!(b.cancel(&q, &id).await.is_ok());
    }
    let config = HttpConfig {
        depth_every: Duration::from_millis(50),
        ..HttpConfig::default()
    };
    let state = AppState::new(b.clone(), config, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(delayq_http::serve(listener, state, async {
        let _ = stopped.await;
    }));
    // The first round samples each once; after that the empty ones are left alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let commands = || {
        server
            .info_field("stats", "total_commands_processed")
            .unwrap()
    };
    let before = commands();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = commands() - before;
    assert!(idle < 200.0, "{idle} commands in 1 s for 60 idle queues");
    // One gains a job through the server: it is sampled from then on.
    let body = r#"{"id":"a","payload":1,"delay_ms":60000}"#;
    let req = format!(
        "POST /v1/queues/idle-7/jobs HTTP/1.1\r\nhost: localhost\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    assert!(raw(addr, &req).await.starts_with("HTTP/1.1 201"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = reqwest_lite(addr, "GET", "/v1/queues/idle-7/series").await;
        let v: Value = serde_json::from_str(r.split_once("\r\n\r\n").unwrap().1).unwrap();
        let sampled = v["depth"].as_array().unwrap().iter();
        if sampled.filter(|d| d["scheduled"] == 1).count() >= 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    server_task.await.unwrap().unwrap();
}
