//! `delayq serve --push` end to end: jobs with a target enqueued through the API are pushed
//! to a receiver, their requests listed by `…/deliveries` and counted in `/metrics`; bad
//! targets and push options are refused; and a pushing server SIGKILLed mid-run loses no job
//! (a second server delivers the rest; duplicates only for jobs in flight at the kill).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use delayq::{Inspect, JobId, NewJob, Producer, QueueName, Target};
use delayq_test_support::RedisServer;
use delayq_test_support::receiver::Receiver;
use serde_json::{Value, json};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

use crate::common::{Killed, delayq, request, spawn_serve};

/// `delayq serve --push` on a free port with `store` args; returns it and its `host:port`.
fn serve(dir: &Path, store: &[&str], extra: &[&str]) -> (Killed, String) {
    spawn_serve(
        delayq(dir)
            .args(store)
            .args(["serve", "--listen", "127.0.0.1:0", "--push"])
            .args(["--allow-private-targets", "--push-secret", SECRET])
            .args(extra),
    )
}

fn http(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    request(addr, method, path, &[], &body)
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_jobs_are_pushed_listed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start().await;
    let (_server, addr) = serve(dir.path(), &[], &[]);
    let post = |job: Value| http(&addr, "POST", "/v1/queues/orders/jobs", Some(job));
    // A job with a target needs a push queue; a pull queue refuses it, writing nothing.
    let aimed = json!({"id": "early", "payload": 1, "target": {"url": rx.url("/ok")}});
    let (s, b) = post(aimed);
    assert_eq!(
        (s, json_of(&b)["code"].as_str()),
        (400, Some("delivery_mismatch")),
        "{b}"
    );
    let (s, b) = http(
        &addr,
        "PUT",
        "/v1/queues/orders",
        Some(json!({"delivery": "push"})),
    );
    assert_eq!(
        (s, json_of(&b)["settings"]["delivery"].as_str()),
        (200, Some("push")),
        "{b}"
    );
    let (s, b) = post(json!({"id": "bare", "payload": 1}));
    assert_eq!(
        (s, json_of(&b)["code"].as_str()),
        (400, Some("delivery_mismatch")),
        "{b}"
    );
    let (s, b) = post(json!({
        "id": "order-1", "payload": {"order": 1}, "delay_ms": 200, "max_attempts": 2,
        "backoff": {"kind": "fixed", "delay_ms": 100},
        "target": {"url": rx.url("/fail"), "headers": {"authorization": "Bearer k"}}
    }));
    assert_eq!(s, 201, "{b}");
    let (s, b) = post(
        json!({"id": "order-2", "payload": {"order": 2}, "target": {"url": rx.url("/ok"), "method": "PUT"}}),
    );
    assert_eq!(s, 201, "{b}");
    let (s, b) = http(&addr, "GET", "/v1/queues/orders/jobs/order-1", None);
    assert_eq!(s, 200);
    assert_eq!(json_of(&b)["target"]["url"], rx.url("/fail"));
    // Bad targets: a typed error, nothing stored.
    for bad in [
        json!({"url": "ftp://x/"}),
        json!({"url": rx.url("/ok"), "headers": {"webhook-id": "x"}}),
        json!({"url": rx.url("/ok"), "method": "TRACE"}),
        json!({"url": rx.url("/ok"), "extra": 1}),
    ] {
        let (s, b) = post(json!({"id": "bad", "payload": 1, "target": bad}));
        assert_eq!(s, 400, "{b}");
        let code = json_of(&b)["code"].as_str().unwrap_or("").to_owned();
        assert!(code == "invalid_target" || code == "invalid_body", "{b}");
    }
    let (s, b) = post(
        json!({"id": "bad", "payload": 1, "timeout_ms": 3_600_000, "target": {"url": rx.url("/ok")}}),
    );
    assert_eq!(s, 400, "{b}");
    assert_eq!(json_of(&b)["code"], "invalid_deadline");
    let (s, _) = http(&addr, "GET", "/v1/queues/orders/jobs/bad", None);
    assert_eq!(s, 404);
    // Wait for order-1 to be dead and order-2 delivered.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let (s1, b1) = http(&addr, "GET", "/v1/queues/orders/jobs/order-1", None);
        let (s2, _) = http(&addr, "GET", "/v1/queues/orders/jobs/order-2", None);
        if s1 == 200 && json_of(&b1)["state"] == "dead" && s2 == 404 {
            assert!(
                json_of(&b1)["last_error"]
                    .as_str()
                    .unwrap()
                    .starts_with("HTTP 500")
            );
            break;
        }
        assert!(Instant::now() < until, "not settled: {b1}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reqs = rx.requests();
    let put = reqs
        .iter()
        .find(|r| r.header("webhook-id") == Some("order-2"))
        .unwrap();
    assert_eq!(put.path, "/ok");
    let fail: Vec<_> = reqs
        .iter()
        .filter(|r| r.header("webhook-id") == Some("order-1"))
        .collect();
    assert_eq!(fail.len(), 2);
    assert_eq!(fail[0].header("authorization"), Some("Bearer k"));
    // The deliveries of the dead job.
    let (s, b) = http(
        &addr,
        "GET",
        "/v1/queues/orders/jobs/order-1/deliveries",
        None,
    );
    assert_eq!(s, 200, "{b}");
    let v = json_of(&b);
    assert_eq!(v["pusher"], true);
    let d = v["deliveries"].as_array().unwrap();
    assert_eq!(d.len(), 2, "{b}");
    assert_eq!(d[0]["status"], 500);
    assert_eq!(d[0]["outcome"], "http_error");
    assert_eq!(d[1]["attempt"], 2);
    // Metrics by outcome and status class, response times by host.
    let (_, m) = http(&addr, "GET", "/metrics", None);
    assert!(
        m.lines()
            .any(|l| l.starts_with("delayq_push_requests_total")
                && l.contains("outcome=\"http_error\"")
                && l.contains("status_class=\"5xx\"")
                && l.ends_with(" 2")),
        "{m}"
    );
    assert!(
        m.lines()
            .any(|l| l.starts_with("delayq_push_requests_total")
                && l.contains("outcome=\"delivered\"")
                && l.contains("status_class=\"2xx\"")),
        "{m}"
    );
    assert!(
        m.contains("delayq_push_response_seconds_bucket{host=\"127.0.0.1\""),
        "{m}"
    );
    // A queue's default target, set and removed through the API.
    let (s, b) = http(
        &addr,
        "PUT",
        "/v1/queues/hooks",
        Some(json!({"target": {"url": rx.url("/nocontent")}})),
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(
        json_of(&b)["settings"]["target"]["url"],
        rx.url("/nocontent")
    );
    let (s, _) = http(
        &addr,
        "POST",
        "/v1/queues/hooks/jobs",
        Some(json!({"id": "d1", "payload": {"x": 1}})),
    );
    assert_eq!(s, 201);
    let until = Instant::now() + Duration::from_secs(20);
    while !rx
        .requests()
        .iter()
        .any(|r| r.header("webhook-id") == Some("d1"))
    {
        assert!(Instant::now() < until, "default target not pushed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (s, b) = http(
        &addr,
        "PUT",
        "/v1/queues/hooks",
        Some(json!({"target": null})),
    );
    assert_eq!(s, 200);
    assert!(json_of(&b)["settings"]["target"].is_null(), "{b}");
}

#[test]
fn bad_push_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .current_dir(dir.path())
            .env_remove("DELAYQ_REDIS_URL")
            .env_remove("DELAYQ_PUSH_SECRETS")
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["--push", "--push-secret", "whsec_!!notbase64"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("push-secret"));
    let o = run(&["--push-secret", SECRET]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("need --push"));
    let o = run(&["--push", "--push-host-rate", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("rate"));
    // A short secret: the error says what a secret is and how to make one.
    let o = run(&["--push", "--push-secret", "whsec_mysecret"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("at least 16") && err.contains("delayq push-secret"),
        "{err}"
    );
}

#[test]
fn push_secret_prints_a_new_secret_that_serve_takes() {
    let dir = tempfile::tempdir().unwrap();
    let secret = || {
        let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .arg("push-secret")
            .output()
            .unwrap();
        assert!(o.status.success());
        String::from_utf8(o.stdout).unwrap().trim().to_owned()
    };
    let (a, b) = (secret(), secret());
    assert!(a.starts_with("whsec_") && a.len() > 40, "{a}");
    assert_ne!(a, b, "random each time");
    assert!(delayq_push::signing::Secret::parse(&a).is_ok());
    let (_server, addr) = serve(dir.path(), &[], &["--push-secret", &a]);
    assert_eq!(http(&addr, "GET", "/healthz", None).0, 200);
}

/// SIGKILL a pushing server mid-run, start another: every job delivered, duplicates only for
/// jobs whose request was in flight (or whose ack had not been written) at the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_push_loses_nothing() {
    let redis = RedisServer::start();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start().await;
    let b = delayq_redis::RedisBackend::connect(&url).await.unwrap();
    let q = QueueName::new("kill").unwrap();
    let push = delayq::QueueSettings {
        delivery: delayq::DeliveryMode::Push,
        ..delayq::QueueSettings::default()
    };
    b.configure(&q, push).await.unwrap();
    let n = 1000;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            NewJob::new(format!("{i}"))
                .id(JobId::new(format!("j{i}")).unwrap())
                .target(Target::post(rx.url("/brief")))
                .lease(Duration::from_millis(1000))
        })
        .collect();
    Producer::new(b.clone(), q.clone())
        .enqueue_batch(jobs)
        .await
        .unwrap();
    let concurrency = 16;
    let flags = [
        "--push-concurrency",
        "16",
        "--push-host-rate",
        "100000",
        "--push-host-burst",
        "10000",
    ];
    let (mut first, _) = serve(dir.path(), &["--redis", &url], &flags);
    let until = Instant::now() + Duration::from_secs(30);
    while rx.count() < 300 {
        assert!(Instant::now() < until, "the first server pushed too little");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    // Requests the dead server had already written reach the receiver (in this process) a
    // moment later: the kill's instant, for "which server sent it", is once they are in.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed_at = SystemTime::now();
    let at_kill = rx.count();
    assert!(at_kill < n as u64, "killed before the end");
    let (_second, _) = serve(dir.path(), &["--redis", &url], &flags);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let st = b.stats(&q).await.unwrap();
        if st.waiting() + st.leased == 0 {
            assert_eq!(st.dead, 0);
            break;
        }
        assert!(Instant::now() < until, "not drained: {st:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reqs = rx.requests();
    let mut by_id: HashMap<String, Vec<SystemTime>> = HashMap::new();
    for r in &reqs {
        by_id
            .entry(r.header("webhook-id").unwrap().to_owned())
            .or_default()
            .push(r.at);
    }
    assert_eq!(by_id.len(), n, "every job delivered");
    let dups: Vec<_> = by_id.iter().filter(|(_, v)| v.len() > 1).collect();
    for (id, times) in &dups {
        assert_eq!(times.len(), 2, "{id} delivered {} times", times.len());
        assert!(times[0] < killed_at, "{id}: first request after the kill");
        assert!(times[1] > killed_at, "{id}: second request before the kill");
    }
    // Leased by the killed server: at most `concurrency` requests running plus as many
    // finished ones whose ack rides on the next claim.
    assert!(
        dups.len() <= 2 * concurrency,
        "{} duplicates, more than were in flight",
        dups.len()
    );
    eprintln!(
        "pushed {at_kill} before the kill, {} duplicates after it",
        dups.len()
    );
}

#[test]
fn the_cli_sets_targets() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .env_remove("DELAYQ_REDIS_URL")
            .env_remove("DELAYQ_SERVER")
            .arg("--data")
            .arg(dir.path().join("data"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["queue", "set", "hooks", "--delivery", "push"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("hooks\tpush\t"));
    let o = run(&[
        "--queue",
        "hooks",
        "enqueue",
        "--id",
        "hook-1",
        "--delay",
        "1h",
        "--payload",
        "{}",
        "--target",
        "https://example.com/hook",
        "--target-method",
        "put",
        "--target-header",
        "Authorization: Bearer k",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["--queue", "hooks", "get", "hook-1", "--json"]);
    let v = json_of(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(v["target"]["url"], "https://example.com/hook", "{v}");
    assert_eq!(v["target"]["method"], "PUT");
    assert_eq!(v["target"]["headers"]["Authorization"], "Bearer k");
    let o = run(&[
        "enqueue",
        "--payload",
        "{}",
        "--target",
        "ftp://example.com/",
    ]);
    assert_eq!(o.status.code(), Some(2), "bad input");
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid target"));
    let o = run(&[
        "enqueue",
        "--payload",
        "{}",
        "--target",
        "https://example.com/",
        "--target-header",
        "no colon",
    ]);
    assert!(!o.status.success());
    let o = run(&[
        "queue",
        "set",
        "hooks",
        "--target",
        "https://example.com/default",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("target POST https://example.com/default"));
    let o = run(&["queue", "set", "hooks", "--no-target"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains("\tpush\t") && !out.contains("target"), "{out}");
    // Back to pull: shown, and a targeted job is refused (exit 2) with the way out named.
    let o = run(&["queue", "set", "hooks", "--delivery", "pull"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("\tpull\t"));
    let o = run(&[
        "--queue",
        "hooks",
        "enqueue",
        "--payload",
        "{}",
        "--target",
        "https://example.com/",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--delivery push"));
}

/// A pushing server that refuses private targets refuses them at enqueue, naming the flag
/// that allows them — for a job, a schedule and a queue's default target — and nothing is
/// written; with `--allow-private-targets` the same job is taken.
#[test]
fn private_targets_are_refused_at_enqueue_by_a_server_that_would_not_deliver_them() {
    let dir = tempfile::tempdir().unwrap();
    let (_strict, addr) = spawn_serve(
        delayq(dir.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--push"])
            .args(["--push-secret", SECRET]),
    );
    let (s, _) = http(
        &addr,
        "PUT",
        "/v1/queues/hooks",
        Some(json!({"delivery": "push"})),
    );
    assert_eq!(s, 200);
    for url in [
        "http://127.0.0.1:9/x",
        "http://localhost/x",
        "http://10.1.2.3/x",
        "http://169.254.169.254/latest",
        "http://[::1]/x",
    ] {
        let job = json!({"id": "j", "payload": 1, "target": {"url": url}});
        let (s, body) = http(&addr, "POST", "/v1/queues/hooks/jobs", Some(job));
        assert_eq!(s, 400, "{url}: {body}");
        let v = json_of(&body);
        assert_eq!(v["code"], "invalid_target", "{url}: {v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains("--allow-private-targets"),
            "{v}"
        );
    }
    let sched = json!({"every_ms": 60000, "payload": 1, "target": {"url": "http://127.0.0.1/x"}});
    let (s, body) = http(&addr, "PUT", "/v1/queues/hooks/schedules/s", Some(sched));
    assert_eq!(s, 400, "{body}");
    let default = json!({"target": {"url": "http://192.168.1.1/x"}});
    let (s, body) = http(&addr, "PUT", "/v1/queues/hooks", Some(default));
    assert_eq!(s, 400, "{body}");
    let (s, body) = http(&addr, "GET", "/v1/queues/hooks", None);
    assert_eq!(s, 200);
    let v = json_of(&body);
    assert_eq!(
        (v["scheduled"].as_u64(), v["due"].as_u64()),
        (Some(0), Some(0)),
        "nothing written: {v}"
    );
    // A public name is taken (its addresses are checked when it is delivered).
    let job = json!({"id": "ok", "payload": 1, "delay_ms": 600000,
        "target": {"url": "https://hooks.example.com/x"}});
    let (s, body) = http(&addr, "POST", "/v1/queues/hooks/jobs", Some(job));
    assert_eq!(s, 201, "{body}");
    drop(_strict);

    // The same server allowing private targets takes them.
    let (_lax, addr) = serve(dir.path(), &[], &[]);
    let job = json!({"id": "j", "payload": 1, "delay_ms": 600000,
        "target": {"url": "http://127.0.0.1:9/x"}});
    let (s, body) = http(&addr, "POST", "/v1/queues/hooks/jobs", Some(job));
    assert_eq!(s, 201, "{body}");
}
