//! The console's batches panel in a real browser: a batch's progress while its jobs run, and
//! a batch whose callbacks cannot be enqueued, with the reason.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::{Value, json};

use crate::common::{delayq, spawn_serve};
use crate::console::{ADMIN, browser, http, pwned, serve, shot, sign_in, text_of, wait_text};

/// A queue with a batch not done yet shows its progress — its jobs ended of all that joined,
/// acked, dead and cancelled, where its callbacks go — and no longer once it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_batchs_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(tmp.path());
    let jobs: Vec<Value> = (0..4)
        .map(|i| json!({"id": format!("r{i}"), "payload": {"n": i}}))
        .collect();
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/mail/batches",
        Some(json!({"id": "report-7", "jobs": jobs, "on_complete": {"queue": "reports"}})),
    );
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["batch"]["state"], "closed", "{v}");
    run_one(addr, "mail");

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/mail")).await.unwrap();
    sign_in(&c, ADMIN).await;
    wait_text(&c, "#batches", "report-7").await;
    let row = c
        .find(Locator::Css("#batches tbody tr"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        row.contains("1 of 4") && row.to_lowercase().contains("closed") && row.contains("reports"),
        "{row}"
    );
    shot(&c, "batches").await;
    assert!(!pwned(&c).await);
}

/// A batch whose callbacks cannot be enqueued (its callback queue was switched to push
/// without a target) shows as failed — in GET, on the console with the reason, in the
/// metrics — and goes through once its queue is mended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_callbacks_fail_shows_why() {
    let redis = delayq_test_support::RedisServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = spawn_serve(
        delayq(tmp.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--redis", &redis.url()])
            .args(["--token", &format!("admin:{ADMIN}"), "--push"]),
    );
    let addr: SocketAddr = addr.parse().unwrap();
    let batch = json!({"id": "nightly", "jobs": [{"id": "n1", "payload": {}}],
                       "on_complete": {"queue": "reports"}});
    let (s, v) = http(addr, "POST", "/v1/queues/mail/batches", Some(batch));
    assert_eq!(s, 201, "{v}");
    let push = Some(json!({"delivery": "push"}));
    assert_eq!(http(addr, "PUT", "/v1/queues/reports", push).0, 200);
    run_one(addr, "mail");
    let started = Instant::now();
    let failed = loop {
        let (_, v) = http(addr, "GET", "/v1/queues/mail/batches/nightly", None);
        if v["state"] == "callback_failed" {
            break v;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let why = failed["callback_error"].as_str().unwrap();
    assert!(why.contains("reports"), "{failed}");
    assert!(
        failed["callback_attempts"].as_u64().unwrap() >= 1,
        "{failed}"
    );
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!(
        "GET /metrics HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {ADMIN}\r\n\
         connection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut metrics = String::new();
    s.read_to_string(&mut metrics).unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("delayq_batch_callback_failures_total{queue=\"mail\"}")),
        "{metrics}"
    );

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/mail")).await.unwrap();
    sign_in(&c, ADMIN).await;
    wait_text(&c, "#batches", "nightly").await;
    let row = text_of(&c, "#batches tbody tr").await;
    assert!(
        row.to_lowercase().contains("callback failed") && row.contains("reports"),
        "{row}"
    );
    shot(&c, "batch-callback-failed").await;

    // Mended: the next try (backoff 1 s, then 2 s) enqueues the callback.
    let pull = Some(json!({"delivery": "pull"}));
    assert_eq!(http(addr, "PUT", "/v1/queues/reports", pull).0, 200);
    let started = Instant::now();
    while http(addr, "GET", "/v1/queues/mail/batches/nightly", None).1["state"] != "done" {
        assert!(started.elapsed() < Duration::from_secs(30), "not done");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (s, v) = http(
        addr,
        "GET",
        "/v1/queues/reports/jobs/batch-nightly-complete",
        None,
    );
    assert_eq!(s, 200, "{v}");
}

/// Claims one job of `queue` and acks it, as a worker would.
fn run_one(addr: SocketAddr, queue: &str) {
    let claim = Some(json!({"max": 1}));
    let (_, v) = http(addr, "POST", &format!("/v1/queues/{queue}/claim"), claim);
    let j = &v["jobs"][0];
    let ack = json!({"acks": [{"id": j["id"], "lease_token": j["lease_token"]}]});
    let (s, v) = http(addr, "POST", &format!("/v1/queues/{queue}/acks"), Some(ack));
    assert_eq!(s, 200, "{v}");
}
