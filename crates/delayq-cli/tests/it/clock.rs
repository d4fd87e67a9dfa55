//! The test clock reaches into the processes a test starts: a `delayq serve` started with
//! `DELAYQ_TEST_CLOCK` reads its store's clock (the embedded store's, or Redis's `TIME` plus
//! the offset) from the test, and a long poll it holds wakes when the test moves the clock —
//! on both stores. What lets the schedule and README tests move time instead of waiting.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{SharedClock, delayq, request, spawn_serve};

fn post(addr: &str, path: &str, body: Value) -> (u16, Value) {
    let (s, text) = request(addr, "POST", path, &[], &body.to_string());
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn a_served_store_follows_the_test_clock_and_its_long_polls_wake() {
    let redis = delayq_test_support::shared::redis();
    let dir = tempfile::tempdir().unwrap();
    let ns = delayq_test_support::shared::namespace();
    let on_redis = ["--redis", &redis.url(), "--namespace", &ns];
    for store in [&[][..], &on_redis[..]] {
        let clock = SharedClock::new();
        let (var, file) = clock.env();
        let (_server, addr) = spawn_serve(
            delayq(dir.path())
                .args(store)
                .args(["serve", "--listen", "127.0.0.1:0"])
                .env(var, file),
        );
        let (s, v) = post(
            &addr,
            "/v1/queues/hours/jobs",
            json!({"id": "later", "payload": 1, "delay_ms": 3_600_000}),
        );
        assert_eq!(s, 201, "{v}");
        let waiting = std::thread::spawn({
            let addr = addr.clone();
            move || {
                let began = Instant::now();
                let answer = post(&addr, "/v1/queues/hours/claim", json!({"wait_ms": 20_000}));
                (answer, began.elapsed())
            }
        });
        // The poll is waiting (a claim now finds nothing due), then an hour passes at once.
        let (s, v) = post(&addr, "/v1/queues/hours/claim", json!({}));
        assert_eq!(
            (s, v["jobs"].as_array().map(Vec::len)),
            (200, Some(0)),
            "{v}"
        );
        clock.advance(Duration::from_secs(3600));
        let ((s, v), took) = waiting.join().unwrap();
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["jobs"][0]["id"], "later", "{store:?}: {v}");
        assert!(
            took < Duration::from_secs(15),
            "{store:?}: the long poll ran out its wait ({took:?}) instead of waking"
        );
    }
}
