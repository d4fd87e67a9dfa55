//! delayq starts in any order beside its Redis: `serve` listens at once (`/healthz` 200,
//! `/readyz` 503 with the reason) and serves once Redis is up; `worker` waits and then works;
//! `--connect-timeout` bounds the wait with a clear message; behind Sentinel, a start during a
//! failover waits for the promotion and says "failover in progress".

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_test_support::RedisServer;
use delayq_test_support::sentinel::SentinelSet;

use crate::common::Killed;

fn http(addr: &str, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.get(9..12)?.parse().ok()?;
    Some((
        status,
        out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?,
    ))
}

fn until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Spawns `delayq ARGS` with stderr collected into the returned buffer.
fn spawn(args: &[&str]) -> (Killed, Arc<Mutex<String>>) {
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = Arc::new(Mutex::new(String::new()));
    let sink = err.clone();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    (Killed(child), err)
}

#[test]
fn serve_started_before_redis_answers_health_then_serves() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.kill();
    let addr = format!("127.0.0.1:{}", delayq_test_support::free_port());
    let (mut serve, err) = spawn(&["--redis", &url, "serve", "--listen", &addr]);
    until("/healthz answered", Duration::from_secs(10), || {
        http(&addr, "GET", "/healthz", "").is_some_and(|(s, _)| s == 200)
    });
    let (s, body) = http(&addr, "GET", "/readyz", "").unwrap();
    assert_eq!(s, 503, "{body}");
    assert!(
        body.contains("not reachable") && body.contains("unavailable"),
        "{body}"
    );
    let job = r#"{"id":"early","payload":1}"#;
    let (s, body) = http(&addr, "POST", "/v1/queues/q/jobs", job).unwrap();
    assert_eq!(s, 503, "refused while starting, not hung: {body}");
    // Past its first connection attempts (the client's own retries come first): still alive,
    // saying why it waits.
    until(
        "serve says it waits for Redis",
        Duration::from_secs(10),
        || err.lock().unwrap().contains("waiting for Redis"),
    );
    assert!(serve.0.try_wait().unwrap().is_none(), "serve exited");
    redis.restart();
    until("/readyz 200", Duration::from_secs(15), || {
        http(&addr, "GET", "/readyz", "").is_some_and(|(s, _)| s == 200)
    });
    let (s, body) = http(&addr, "POST", "/v1/queues/q/jobs", job).unwrap();
    assert_eq!(s, 201, "{body}");
    assert_eq!(redis.command(&["HEXISTS", "dq:{q}:jobs", "early"]), "1");
}

#[test]
fn worker_started_before_redis_waits_then_works_and_the_timeout_bounds_it() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    redis.kill();
    // With a bound: a clear message and exit 1 once it passes.
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            &url,
            "--connect-timeout",
            "1s",
            "worker",
            "--exec",
            "true",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert!(
        text.contains("127.0.0.1") && text.to_lowercase().contains("refused"),
        "{text}"
    );

    // Without one it waits as long as it takes.
    let (mut worker, err) = spawn(&["--redis", &url, "--queue", "w", "worker", "--exec", "true"]);
    // As above: past its first attempts, the worker says it waits, and still runs.
    until(
        "the worker says it waits for Redis",
        Duration::from_secs(10),
        || err.lock().unwrap().contains("waiting for Redis"),
    );
    assert!(worker.0.try_wait().unwrap().is_none(), "worker exited");
    redis.restart();
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            &url,
            "--queue",
            "w",
            "enqueue",
            "--id",
            "j1",
            "--payload",
            "1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    until("the worker ran the job", Duration::from_secs(20), || {
        redis.command(&["HEXISTS", "dq:{w}:jobs", "j1"]) == "0"
    });
}

#[test]
fn a_start_during_a_sentinel_failover_waits_for_the_promotion() {
    let mut set = SentinelSet::start();
    let url = set.url();
    set.master.kill();
    // Before the sentinel even notices, and through the failover: a worker started now waits.
    let (mut worker, err) = spawn(&["--redis", &url, "--queue", "f", "worker", "--exec", "true"]);
    let t = Instant::now();
    while !err.lock().unwrap().contains("failover in progress") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{}",
            err.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let said = err.lock().unwrap().clone();
    assert!(
        !said.contains("Connection refused (os error 111)\n") || said.contains("failover"),
        "{said}"
    );
    let promoted = set.replica.port();
    until("promotion", Duration::from_secs(60), || {
        set.current_master_port() == Some(promoted)
    });
    assert!(
        worker.0.try_wait().unwrap().is_none(),
        "worker exited: {said}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            &url,
            "--queue",
            "f",
            "enqueue",
            "--id",
            "j",
            "--payload",
            "1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    until("the worker ran the job", Duration::from_secs(30), || {
        set.replica.command(&["HEXISTS", "dq:{f}:jobs", "j"]) == "0"
    });
}

/// Limits that would let long-lived requests take every connection are refused before
/// anything starts (and before any wait for Redis).
#[test]
fn serve_refuses_limits_that_leave_short_requests_no_room() {
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            "redis://127.0.0.1:1",
            "serve",
            "--max-connections",
            "1000",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("--max-connections 1000 must be above"),
        "{text}"
    );
}

#[test]
fn a_redis_url_that_reaches_something_else_says_so_and_does_not_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (_http, addr) = crate::common::spawn_serve(crate::common::delayq(dir.path()).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]));
    // `serve` waits for Redis indefinitely by default; a port that answers HTTP is no Redis
    // starting up, so it stops at once.
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            &format!("redis://{addr}"),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("not the Redis protocol"), "{text}");
}

/// A one-shot command against a Redis that is not there gives up after its short default
/// wait (2 s) with one message naming the URL, not a wait of 10 s and the refusal thrice.
#[test]
fn a_one_shot_command_gives_up_soon_with_one_message() {
    let port = crate::common::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["stats", "--redis", &url])
        .output()
        .unwrap();
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        took >= Duration::from_millis(1500),
        "it tried for its wait: {took:?}"
    );
    assert!(took < Duration::from_secs(8), "gave up late: {took:?}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(&url), "{err}");
}

/// The embedded store works where only its data directory is writable (a read-only root, a
/// hardened unit): a claim of 500 jobs — which sorts more than SQLite keeps in its page
/// cache — needs no temporary file in /tmp or /var/tmp. (A mount namespace with both
/// read-only; skipped where one cannot be made.)
#[test]
fn a_large_embedded_claim_needs_no_writable_tmp() {
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // A read-only root (and /tmp, /var/tmp, which may be mounts of their own), the data
    // directory alone writable, and the working directory `/` (SQLite's last resort).
    let d = data.path().display();
    let script = format!(
        "mount --bind -o ro / / && mount --bind -o ro /tmp /tmp && \
         mount --bind -o ro /var/tmp /var/tmp && mount --bind {d} {d} && \
         mount -o remount,bind,rw {d} && cd / && \
         exec {} serve --data {d} --listen 127.0.0.1:{port}",
        env!("CARGO_BIN_EXE_delayq"),
    );
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c", "mount --bind -o ro /tmp /tmp"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no mount namespace here");
        return;
    }
    let child = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _serve = Killed(child);
    let addr = format!("127.0.0.1:{port}");
    until("serve", Duration::from_secs(20), || {
        http(&addr, "GET", "/healthz", "").is_some_and(|(s, _)| s == 200)
    });
    let jobs: Vec<String> = (0..600)
        .map(|i| {
            format!(
                r#"{{"id": "j{i}", "payload": {{"pad": "{}"}}}}"#,
                "x".repeat(1000)
            )
        })
        .collect();
    let body = format!(r#"{{"jobs": [{}]}}"#, jobs.join(","));
    let (status, out) = http(&addr, "POST", "/v1/queues/ro/batches", &body).unwrap();
    assert_eq!(status, 201, "{out}");
    let (status, out) = http(&addr, "POST", "/v1/queues/ro/claim", r#"{"max": 500}"#).unwrap();
    assert_eq!(status, 200, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(500));
}
