//! Issue 13's fields over HTTP, on both stores: rate and concurrency limits in the queue
//! settings (patched field by field, `null` removes, bad values 400 with nothing stored),
//! `waiting_on_limit`, job deadlines (`timeout_ms`, `expires_at`, `expire_after_ms`) in and out,
//! and `on_conflict`.

use axum::Router;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use serde_json::{Value, json};

use crate::common::call;

async fn limits(r: &Router) {
    let put = |body: Value| call(r, "PUT", "/v1/queues/lim", Some(body));
    let (s, v) = put(json!({"rate": {"per_s": 2, "burst": 3}})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["settings"]["rate"],
        json!({"per_s": 2.0, "burst": 3}),
        "{v}"
    );
    assert_eq!(v["settings"]["max_in_flight"], Value::Null);
    // A patch keeps what it does not name.
    let (_, v) = put(json!({"max_in_flight": 2})).await;
    assert_eq!(v["settings"]["rate"]["burst"], 3, "{v}");
    assert_eq!(v["settings"]["max_in_flight"], 2);
    for bad in [
        json!({"rate": {"per_s": -1, "burst": 3}}),
        json!({"rate": {"per_s": 0, "burst": 3}}),
        json!({"rate": {"per_s": 5, "burst": 0}}),
        json!({"max_in_flight": 0}),
    ] {
        let (s, v) = put(bad.clone()).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_settings")),
            "{bad}: {v}"
        );
    }
    for bad in [
        json!({"rate": {"per_s": 5, "burst": -1}}),
        json!({"rate": {"per_s": 5}}),
        json!({"rate": {"per_s": 5, "burst": 2, "extra": 1}}),
        json!({"max_inflight": 3}),
    ] {
        let (s, v) = put(bad.clone()).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_body")),
            "{bad}: {v}"
        );
    }
    let (_, v) = call(r, "GET", "/v1/queues/lim", None).await;
    assert_eq!(
        v["settings"]["rate"],
        json!({"per_s": 2.0, "burst": 3}),
        "unchanged: {v}"
    );
    assert_eq!(v["settings"]["max_in_flight"], 2);
    // Five due jobs, two may be leased: three wait on the limit.
    for i in 0..5 {
        let (s, _) = call(
            r,
            "POST",
            "/v1/queues/lim/jobs",
            Some(json!({"id": format!("j{i}"), "payload": i})),
        )
        .await;
        assert_eq!(s, 201);
    }
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let (_, v) = call(r, "POST", "/v1/queues/lim/claim", Some(json!({"max": 10}))).await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 2, "{v}");
    let (_, v) = call(r, "GET", "/v1/queues/lim", None).await;
    assert_eq!(v["waiting_on_limit"], 3, "{v}");
    // null removes a limit.
    let (_, v) = put(json!({"rate": null, "max_in_flight": null})).await;
    assert_eq!(v["settings"]["rate"], Value::Null, "{v}");
    assert_eq!(v["settings"]["max_in_flight"], Value::Null);
    let (_, v) = call(r, "POST", "/v1/queues/lim/claim", Some(json!({"max": 10}))).await;
    assert_eq!(v["jobs"].as_array().unwrap().len(), 3, "{v}");
}

async fn deadlines_and_conflicts(r: &Router) {
    let post = |body: Value| call(r, "POST", "/v1/queues/dl/jobs", Some(body));
    let (s, v) = post(json!({"id": "a", "payload": 1, "timeout_ms": 1500,
        "expires_at": "2040-01-01T00:00:00Z"}))
    .await;
    assert_eq!(s, 201, "{v}");
    let (_, v) = call(r, "GET", "/v1/queues/dl/jobs/a", None).await;
    assert_eq!(v["timeout_ms"], 1500, "{v}");
    assert_eq!(v["expires_at"], 2_208_988_800_000u64);
    let (s, v) = post(json!({"id": "b", "payload": 1, "delay_ms": 60000,
        "expire_after_ms": 1000}))
    .await;
    assert_eq!(s, 201, "{v}");
    let (_, v) = call(r, "GET", "/v1/queues/dl/jobs/b", None).await;
    assert_eq!(
        v["expires_at"].as_u64(),
        v["due_at"].as_u64().map(|d| d + 1000),
        "{v}"
    );
    let (_, v) = call(r, "POST", "/v1/queues/dl/claim", Some(json!({"max": 1}))).await;
    assert_eq!(v["jobs"][0]["timeout_ms"], 1500, "{v}");
    assert_eq!(v["jobs"][0]["expires_at"], 2_208_988_800_000u64);
    for bad in [
        json!({"payload": 1, "timeout_ms": 1}),
        json!({"payload": 1, "timeout_ms": 90_000_000}),
        json!({"payload": 1, "expires_at": "tomorrow"}),
        json!({"payload": 1, "expires_at": 1, "expire_after_ms": 5}),
        json!({"payload": 1, "expire_after_ms": 400_000_000_000u64}),
    ] {
        let (s, v) = post(bad.clone()).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_deadline")),
            "{bad}: {v}"
        );
    }
    let (s, v) = post(json!({"id": "c", "payload": 1, "on_conflict": "sometimes"})).await;
    assert_eq!((s, v["code"].as_str()), (400, Some("invalid_body")), "{v}");
    let (_, v) = call(r, "GET", "/v1/queues/dl", None).await;
    assert_eq!(
        (v["scheduled"].as_u64(), v["due"].as_u64()),
        (Some(1), Some(0)),
        "nothing stored by the bad requests: {v}"
    );
    // Replace: the scheduled job b gets the new payload; the leased job a is not touched.
    let (s, v) = post(json!({"id": "b", "payload": "new", "delay_ms": 5000,
        "on_conflict": "replace"}))
    .await;
    assert_eq!(
        (s, v["replaced"].as_bool(), v["created"].as_bool()),
        (200, Some(true), Some(false)),
        "{v}"
    );
    let (_, v) = call(r, "GET", "/v1/queues/dl/jobs/b", None).await;
    assert_eq!(v["payload"], "new", "{v}");
    let (s, v) = post(json!({"id": "a", "payload": 2, "on_conflict": "replace"})).await;
    assert_eq!(
        (s, v["replaced"].as_bool(), v["state"].as_str()),
        (200, Some(false), Some("leased")),
        "{v}"
    );
    let (s, v) = post(json!({"id": "a", "payload": 2})).await;
    assert_eq!(
        (s, v["replaced"].as_bool(), v["state"].as_str()),
        (200, Some(false), None),
        "{v}"
    );
}

async fn retention_and_priorities(r: &Router) {
    let (s, v) = call(
        r,
        "PUT",
        "/v1/queues/ret",
        Some(json!({"keep_done_ms": 60000, "dedupe_ms": 60000})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["settings"]["keep_done_ms"], 60000);
    let (s, v) = call(
        r,
        "PUT",
        "/v1/queues/ret",
        Some(json!({"dedupe_ms": 9_999_999_999u64})),
    )
    .await;
    assert_eq!(
        (s, v["code"].as_str()),
        (400, Some("invalid_settings")),
        "{v}"
    );
    let post = |body: Value| call(r, "POST", "/v1/queues/ret/jobs", Some(body));
    let (s, _) = post(json!({"id": "lo", "payload": 1, "priority": 1})).await;
    assert_eq!(s, 201);
    let (s, _) = post(json!({"id": "hi", "payload": 2, "priority": 9})).await;
    assert_eq!(s, 201);
    let (s, v) = post(json!({"id": "bad", "payload": 3, "priority": 10})).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (400, Some("invalid_priority")),
        "{v}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let (_, v) = call(r, "POST", "/v1/queues/ret/claim", Some(json!({"max": 1}))).await;
    assert_eq!(v["jobs"][0]["id"], "hi", "{v}");
    assert_eq!(v["jobs"][0]["priority"], 9);
    let token = v["jobs"][0]["lease_token"].clone();
    let (s, v) = call(
        r,
        "POST",
        "/v1/queues/ret/jobs/hi/ack",
        Some(json!({"lease_token": token})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = call(r, "GET", "/v1/queues/ret/jobs/hi", None).await;
    assert_eq!(v["state"], "done", "{v}");
    assert!(v["completed_at"].as_u64().is_some(), "{v}");
    let (_, v) = call(r, "GET", "/v1/queues/ret/jobs?state=done", None).await;
    assert_eq!(v["jobs"][0]["id"], "hi", "{v}");
    let (s, v) = post(json!({"id": "hi", "payload": 2})).await;
    assert_eq!(
        (s, v["created"].as_bool(), v["state"].as_str()),
        (200, Some(false), Some("done")),
        "{v}"
    );
    let (_, v) = call(r, "GET", "/v1/queues/ret", None).await;
    assert_eq!(
        (
            v["done"].as_u64(),
            v["scheduled"].as_u64(),
            v["due"].as_u64()
        ),
        (Some(1), Some(0), Some(1)),
        "{v}"
    );
}

#[tokio::test]
async fn redis() {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));
    limits(&r).await;
    deadlines_and_conflicts(&r).await;
    retention_and_priorities(&r).await;
}

#[tokio::test]
async fn embedded() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));
    limits(&r).await;
    deadlines_and_conflicts(&r).await;
    retention_and_priorities(&r).await;
}
