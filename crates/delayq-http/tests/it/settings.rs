//! Queue settings over HTTP: `PUT /v1/queues/{q}` makes a sharded queue or one with the
//! one-delay lane on Redis (and refuses both on the embedded store), `GET` shows settings with counts summed over shards, and a
//! shard change of a queue holding jobs is a 409 that changes nothing.

use axum::Router;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use serde_json::json;
use tower::ServiceExt;

use crate::common::call;

#[tokio::test]
async fn redis_queues_take_shards_while_empty() {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));

    let (s, v) = call(&r, "GET", "/v1/queues/orders", None).await;
    assert_eq!((s, v["settings"]["shards"].as_u64()), (200, Some(1)), "{v}");
    let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(json!({"shards": 4}))).await;
    assert_eq!((s, v["settings"]["shards"].as_u64()), (200, Some(4)), "{v}");
    assert!(
        server
            .command(&["HGET", "dq:{orders}:conf", "shards"])
            .contains('4')
    );

    for i in 0..20 {
        let (s, _) = call(
            &r,
            "POST",
            "/v1/queues/orders/jobs",
            Some(json!({"id": format!("o{i}"), "payload": i, "delay_ms": 60000})),
        )
        .await;
        assert_eq!(s, 201);
    }
    // Spread over the shards' own keys, counted together.
    let keys = server.command(&["KEYS", "dq:{orders#*}:sched"]);
    assert!(keys.lines().count() >= 3, "jobs spread over shards: {keys}");
    let (_, v) = call(&r, "GET", "/v1/queues/orders", None).await;
    assert_eq!(v["scheduled"].as_u64(), Some(20), "{v}");
    let (s, v) = call(&r, "GET", "/v1/queues/orders/jobs/o7", None).await;
    assert_eq!((s, v["state"].as_str()), (200, Some("scheduled")));

    let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(json!({"shards": 2}))).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("conflict")), "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("20 scheduled"),
        "{v}"
    );
    let (_, v) = call(&r, "GET", "/v1/queues/orders", None).await;
    assert_eq!(v["settings"]["shards"].as_u64(), Some(4), "unchanged");
    // The same count again is fine; out of range and unknown fields are 400.
    let (s, _) = call(&r, "PUT", "/v1/queues/orders", Some(json!({"shards": 4}))).await;
    assert_eq!(s, 200);
    // A field not given keeps its value.
    let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(json!({}))).await;
    assert_eq!((s, v["settings"]["shards"].as_u64()), (200, Some(4)), "{v}");
    for bad in [
        json!({"shards": 0}),
        json!({"shards": 257}),
        json!({"shard": 2}),
    ] {
        let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(bad.clone())).await;
        assert_eq!(s, 400, "{bad}: {v}");
    }
}

#[tokio::test]
async fn redis_queues_take_the_lane_while_empty() {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));
    let (s, v) = call(&r, "GET", "/v1/queues/carts", None).await;
    assert_eq!(
        (s, v["settings"]["lane"].as_bool()),
        (200, Some(false)),
        "{v}"
    );
    let (s, v) = call(&r, "PUT", "/v1/queues/carts", Some(json!({"lane": true}))).await;
    assert_eq!(
        (s, v["settings"]["lane"].as_bool()),
        (200, Some(true)),
        "{v}"
    );
    let (s, _) = call(
        &r,
        "POST",
        "/v1/queues/carts/jobs",
        Some(json!({"id": "c1", "payload": 1, "delay_ms": 1_800_000})),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(server.command(&["LLEN", "dq:{carts}:lane"]).trim(), "1");
    let (s, v) = call(&r, "GET", "/v1/queues/carts/jobs/c1", None).await;
    assert_eq!((s, v["state"].as_str()), (200, Some("scheduled")), "{v}");
    let (_, v) = call(&r, "GET", "/v1/queues/carts", None).await;
    assert_eq!(v["scheduled"].as_u64(), Some(1), "{v}");
    let (s, v) = call(&r, "PUT", "/v1/queues/carts", Some(json!({"lane": false}))).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("conflict")), "{v}");
    let (s, v) = call(&r, "PUT", "/v1/queues/carts", Some(json!({"lane": 1}))).await;
    assert_eq!(s, 400, "{v}");
    let (_, v) = call(&r, "GET", "/v1/queues/carts", None).await;
    assert_eq!(v["settings"]["lane"].as_bool(), Some(true), "unchanged");
}

/// The lane's time windows: on with the lane, checked, in use for a job due earlier than the
/// lane's last, and their width changes only while the queue is empty.
#[tokio::test]
async fn redis_lane_queues_keep_later_jobs_in_time_windows() {
    let server = RedisServer::start();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));
    let (s, v) = call(&r, "PUT", "/v1/queues/later", Some(json!({"lane": true}))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["settings"]["lane_window_ms"].as_u64(),
        Some(10_000),
        "turned on with the default windows: {v}"
    );
    for bad in [
        json!({"lane_window_ms": 99}),
        json!({"lane_window_ms": 60_001}),
    ] {
        let (s, v) = call(&r, "PUT", "/v1/queues/later", Some(bad.clone())).await;
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_settings")),
            "{bad}: {v}"
        );
    }
    // A job due in 40 minutes after one in an hour: in its time window.
    for (id, delay_ms) in [("c0", 3_600_000), ("w1", 2_400_000)] {
        let job = json!({"id": id, "payload": 0, "delay_ms": delay_ms});
        let (s, v) = call(&r, "POST", "/v1/queues/later/jobs", Some(job)).await;
        assert_eq!(s, 201, "{v}");
    }
    assert_eq!(server.command(&["ZCARD", "dq:{later}:lane:w"]).trim(), "1");
    let (s, v) = call(&r, "GET", "/v1/queues/later/jobs/w1", None).await;
    assert_eq!((s, v["state"].as_str()), (200, Some("scheduled")), "{v}");
    let no_windows = || {
        call(
            &r,
            "PUT",
            "/v1/queues/later",
            Some(json!({"lane_window_ms": 0})),
        )
    };
    let (s, v) = no_windows().await;
    assert_eq!((s, v["code"].as_str()), (409, Some("conflict")), "{v}");
    for id in ["c0", "w1"] {
        let (s, _) = call(&r, "DELETE", &format!("/v1/queues/later/jobs/{id}"), None).await;
        assert!(s == 200 || s == 204, "{s}");
    }
    let (s, v) = no_windows().await;
    assert_eq!(
        (s, v["settings"]["lane_window_ms"].as_u64()),
        (200, Some(0)),
        "{v}"
    );
}

#[tokio::test]
async fn the_embedded_store_refuses_shards() {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));
    let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(json!({"shards": 4}))).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (400, Some("invalid_settings")),
        "{v}"
    );
    let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(json!({"lane": true}))).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (400, Some("invalid_settings")),
        "the lane is a Redis layout: {v}"
    );
    let (s, v) = call(&r, "PUT", "/v1/queues/orders", Some(json!({"shards": 1}))).await;
    assert_eq!((s, v["settings"]["shards"].as_u64()), (200, Some(1)), "{v}");
    assert_eq!(v["settings"]["lane"].as_bool(), Some(false), "{v}");
}

/// After Redis comes back, `/readyz` answers 200 as soon as requests succeed again (it probes
/// through the same connection as every request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_backend_back() {
    let mut server = RedisServer::start_durable();
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let r = delayq_http::router(AppState::new(backend, HttpConfig::default(), None));
    let ready = |r: Router| async move {
        let req = axum::http::Request::builder()
            .uri("/readyz")
            .header("host", "test")
            .body(axum::body::Body::empty())
            .unwrap();
        r.oneshot(req).await.unwrap().status().as_u16()
    };
    assert_eq!(ready(r.clone()).await, 200);
    server.kill();
    assert_eq!(ready(r.clone()).await, 503, "down is not ready");
    server.restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (s, _) = call(&r, "GET", "/v1/queues/orders", None).await;
        if s == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "requests never recovered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        ready(r.clone()).await,
        200,
        "ready as soon as requests succeed"
    );
}
