//! The HTTP API end to end, on both backends: most tests call `router(state)` in process
//! (`oneshot`, no socket); long polls and shutdown run over a real listener on Redis. Bad input
//! is `bad_input.rs`; the harness is `api_harness`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api_harness::{Store, start_on, start_socket};

on_both_backends!(
    enqueue_get_cancel_reschedule,
    batch_enqueue_claim_ack_nack_extend_and_dead_letters,
    payloads_come_out_byte_for_byte,
    bearer_tokens_guard_the_api,
    health_metrics_openapi_dashboard,
    stale_and_foreign_lease_tokens_are_refused,
    a_claim_carries_acks,
    acks_go_in_one_request,
);

/// Enqueues jobs a, b and c on queue `k` and claims `max` of them; the claim's answer.
async fn enqueue_abc_and_claim(api: &crate::api_harness::Api, max: usize) -> Value {
    let batch = json!([{"id":"a","payload":1},{"id":"b","payload":2},{"id":"c","payload":3}]);
    assert_eq!(
        api.call("POST", "/v1/queues/k/jobs", Some(batch))
            .await
            .status,
        201
    );
    api.call("POST", "/v1/queues/k/claim", Some(json!({ "max": max })))
        .await
        .json()
}

/// The lease token of job `id` in a claim's answer.
fn token(claim: &Value, id: &str) -> u64 {
    claim["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .unwrap()["lease_token"]
        .as_u64()
        .unwrap()
}

/// `POST /v1/queues/{q}/acks` acknowledges several jobs at once and answers each in order; a
/// bad ack refuses the whole request before anything changes.
async fn acks_go_in_one_request(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let c = enqueue_abc_and_claim(&api, 3).await;
    let (a, b, cc) = (token(&c, "a"), token(&c, "b"), token(&c, "c"));
    // A bad id anywhere refuses all: c stays leased.
    let r = api
        .call(
            "POST",
            "/v1/queues/k/acks",
            Some(json!({"acks":[{"id":"c","lease_token":cc},{"id":"","lease_token":1}]})),
        )
        .await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "invalid_job_id"),
        "{}",
        r.body
    );
    let now = api.call("GET", "/v1/queues/k/jobs/c", None).await.json();
    assert_eq!(now["state"], "leased", "{now}");
    let acks = json!([
        {"id":"a","lease_token":a},
        {"id":"b","lease_token":b + 1000},
        {"id":"nope","lease_token":1},
        {"id":"c","lease_token":cc}
    ]);
    let r = api
        .call("POST", "/v1/queues/k/acks", Some(json!({"acks":acks})))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"acks":["acked", "lease_lost", "not_found", "acked"]})
    );
    for (id, status) in [("a", 404), ("c", 404), ("b", 200)] {
        let r = api
            .call("GET", &format!("/v1/queues/k/jobs/{id}"), None)
            .await;
        assert_eq!(r.status, status, "{id}: {}", r.body);
    }
    let stats = api.call("GET", "/v1/queues/k", None).await.json();
    assert_eq!(stats["leased"], 1, "a stale token changes nothing: {stats}");
}

/// A claim acknowledges the finished jobs it carries before it leases (one request per claim
/// for a worker, not one per job) and answers how each ack went, in order.
async fn a_claim_carries_acks(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let c = enqueue_abc_and_claim(&api, 2).await;
    assert!(c.get("acks").is_none(), "no acks asked, none answered: {c}");
    let (a, b) = (token(&c, "a"), token(&c, "b"));
    let acks = json!([
        {"id":"a","lease_token":a},
        {"id":"b","lease_token":b + 1000},
        {"id":"nope","lease_token":1}
    ]);
    let r = api
        .call(
            "POST",
            "/v1/queues/k/claim",
            Some(json!({"max":5,"acks":acks})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(
        v["acks"],
        json!(["acked", "lease_lost", "not_found"]),
        "{v}"
    );
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c"], "then it leases");
    assert_eq!(
        api.call("GET", "/v1/queues/k/jobs/a", None).await.status,
        404
    );
    let b_now = api.call("GET", "/v1/queues/k/jobs/b", None).await.json();
    assert_eq!(
        b_now["state"], "leased",
        "a stale token changes nothing: {b_now}"
    );
    // Bad acks, or a bad field beside good ones, refuse the whole claim: nothing acked,
    // nothing leased.
    let good = json!([{"id":"b","lease_token":b}]);
    for (body, code) in [
        (
            json!({"max":1,"acks":[{"id":"b","lease_token":b},{"id":"","lease_token":1}]}),
            "invalid_job_id",
        ),
        (json!({"max":1,"acks":[{"id":"b"}]}), "invalid_body"),
        (
            json!({"max":1,"acks":good,"wait_ms":10,"poll_id":"a b"}),
            "invalid_poll_id",
        ),
        (json!({"max":1,"acks":good,"lease_ms":1}), "invalid_lease"),
    ] {
        let r = api.call("POST", "/v1/queues/k/claim", Some(body)).await;
        assert_eq!((r.status, r.code().as_str()), (400, code), "{}", r.body);
    }
    let b_now = api.call("GET", "/v1/queues/k/jobs/b", None).await.json();
    assert_eq!(b_now["state"], "leased", "{b_now}");
    // Acks alone answer at once, even with nothing due.
    let r = api
        .call(
            "POST",
            "/v1/queues/k/claim",
            Some(json!({"max":1,"acks":[{"id":"b","lease_token":b}]})),
        )
        .await
        .json();
    assert_eq!(
        (r["acks"].clone(), r["jobs"].clone()),
        (json!(["acked"]), json!([]))
    );
    assert_eq!(
        api.call("GET", "/v1/queues/k/jobs/b", None).await.status,
        404
    );
    api.stop().await;
}

async fn enqueue_get_cancel_reschedule(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let r = api
        .call(
            "POST",
            "/v1/queues/orders/jobs",
            Some(json!({"id":"o1","payload":{"order":1},"delay_ms":60000,"max_attempts":3})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let due = r.json()["due_at"].as_u64().unwrap();
    assert_eq!(r.json()["created"], true);
    let again = api
        .call(
            "POST",
            "/v1/queues/orders/jobs",
            Some(json!({"id":"o1","payload":2})),
        )
        .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["created"], false);
    assert_eq!(again.json()["due_at"].as_u64(), Some(due));

    let g = api.call("GET", "/v1/queues/orders/jobs/o1", None).await;
    assert_eq!(g.status, 200);
    let j = g.json();
    assert_eq!(
        (
            j["state"].as_str(),
            j["attempt"].as_u64(),
            j["max_attempts"].as_u64()
        ),
        (Some("scheduled"), Some(0), Some(3))
    );
    assert_eq!(j["payload"], json!({"order":1}));

    let p = api
        .call(
            "PATCH",
            "/v1/queues/orders/jobs/o1",
            Some(json!({"run_at":"2030-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(p.status, 200, "{}", p.body);
    assert_eq!(p.json()["due_at"].as_u64(), Some(1_893_456_000_000));

    let c = api.call("DELETE", "/v1/queues/orders/jobs/o1", None).await;
    assert_eq!(
        (c.status, c.json()["outcome"].as_str()),
        (200, Some("cancelled"))
    );
    let c = api.call("DELETE", "/v1/queues/orders/jobs/o1", None).await;
    assert_eq!((c.status, c.code()), (404, "not_found".into()));
    assert_eq!(
        api.call("GET", "/v1/queues/orders/jobs/o1", None)
            .await
            .status,
        404
    );
    api.stop().await;
}

async fn batch_enqueue_claim_ack_nack_extend_and_dead_letters(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let batch = json!([
        {"id":"a","payload":"A"},
        {"id":"b","payload":"B","max_attempts":1},
        {"id":"c","payload":"C","backoff":{"kind":"fixed","delay_ms":50}},
        {"id":"a","payload":"dup"}
    ]);
    let r = api.call("POST", "/v1/queues/w/jobs", Some(batch)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let created: Vec<bool> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["created"].as_bool().unwrap())
        .collect();
    assert_eq!(created, [true, true, true, false]);

    let c = api
        .call(
            "POST",
            "/v1/queues/w/claim",
            Some(json!({"max":10,"lease_ms":30000})),
        )
        .await;
    assert_eq!(c.status, 200, "{}", c.body);
    let jobs = c.json()["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 3);
    let token = |id: &str| {
        jobs.iter().find(|j| j["id"] == id).unwrap()["lease_token"]
            .as_u64()
            .unwrap()
    };
    assert!(
        jobs.iter()
            .all(|j| j["attempt"] == 1 && j["lease_deadline"].as_u64().is_some())
    );

    let a = api
        .call(
            "POST",
            "/v1/queues/w/jobs/a/ack",
            Some(json!({"lease_token": token("a")})),
        )
        .await;
    assert_eq!(
        (a.status, a.json()["outcome"].as_str()),
        (200, Some("acked"))
    );
    let n = api
        .call(
            "POST",
            "/v1/queues/w/jobs/b/nack",
            Some(json!({"lease_token": token("b"), "error":"boom"})),
        )
        .await;
    assert_eq!(n.json()["outcome"], "dead", "max_attempts 1: dead at once");
    let e = api
        .call(
            "POST",
            "/v1/queues/w/jobs/c/extend",
            Some(json!({"lease_token": token("c"), "lease_ms": 60000})),
        )
        .await;
    assert_eq!(e.status, 200);
    assert!(e.json()["lease_deadline"].as_u64().is_some());
    let n = api
        .call(
            "POST",
            "/v1/queues/w/jobs/c/nack",
            Some(json!({"lease_token": token("c"), "error":"later", "retry_in_ms": 100})),
        )
        .await;
    assert_eq!(n.json()["outcome"], "retrying");
    let again = api
        .call(
            "POST",
            "/v1/queues/w/claim",
            Some(json!({"max":1,"wait_ms":3000})),
        )
        .await;
    let j = &again.json()["jobs"][0];
    assert_eq!(
        (
            j["id"].as_str(),
            j["attempt"].as_u64(),
            j["last_error"].as_str()
        ),
        (Some("c"), Some(2), Some("later"))
    );
    let n = api
        .call(
            "POST",
            "/v1/queues/w/jobs/c/nack",
            Some(json!({"lease_token": j["lease_token"], "dead": true, "error":"give up"})),
        )
        .await;
    assert_eq!(n.json()["outcome"], "dead");

    let s = api.call("GET", "/v1/queues/w", None).await.json();
    assert_eq!(
        (
            s["dead"].as_u64(),
            s["scheduled"].as_u64(),
            s["leased"].as_u64()
        ),
        (Some(2), Some(0), Some(0))
    );
    let l = api.call("GET", "/v1/queues", None).await.json();
    assert!(l.as_array().unwrap().iter().any(|q| q["queue"] == "w"));

    let d = api
        .call("GET", "/v1/queues/w/dead?offset=0&limit=10", None)
        .await
        .json();
    let d = d.as_array().unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!(d[0]["id"], "b");
    assert_eq!(d[0]["last_error"], "boom");
    assert_eq!(d[0]["payload"], "B");
    assert_eq!(
        api.call("GET", "/v1/queues/w/dead?offset=1&limit=10", None)
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let r1 = api.call("POST", "/v1/queues/w/dead/b/requeue", None).await;
    assert_eq!(r1.status, 200, "{}", r1.body);
    let all = api
        .call("POST", "/v1/queues/w/dead/requeue", None)
        .await
        .json();
    assert_eq!(all["count"], 1);
    assert_eq!(api.call("GET", "/v1/queues/w", None).await.json()["due"], 2);
    let c = api
        .call("POST", "/v1/queues/w/claim", Some(json!({"max":10})))
        .await
        .json();
    for j in c["jobs"].as_array().unwrap() {
        api.call(
            "POST",
            &format!("/v1/queues/w/jobs/{}/nack", j["id"].as_str().unwrap()),
            Some(json!({"lease_token": j["lease_token"], "dead": true})),
        )
        .await;
    }
    let p = api.call("DELETE", "/v1/queues/w/dead", None).await.json();
    assert_eq!(p["count"], 2);
    assert_eq!(
        api.call("GET", "/v1/queues/w", None).await.json()["dead"],
        0
    );
    api.stop().await;
}

async fn payloads_come_out_byte_for_byte(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let odd = r#"{"id":"j","payload": {"n": 1.50, "big": 123456789012345678901234567890, "s":"é\u00e9"} }"#;
    let r = api
        .raw("POST", "/v1/queues/p/jobs", Some("application/json"), odd)
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let g = api.call("GET", "/v1/queues/p/jobs/j", None).await;
    assert!(
        g.body.contains(
            r#""payload":{"n": 1.50, "big": 123456789012345678901234567890, "s":"é\u00e9"}"#
        ),
        "{}",
        g.body
    );
    // Bytes that are not JSON go in and out as base64.
    let b = api
        .call(
            "POST",
            "/v1/queues/p/jobs",
            Some(json!({"id":"bin","payload_b64":"/wABAg=="})),
        )
        .await;
    assert_eq!(b.status, 201);
    let c = api
        .call("POST", "/v1/queues/p/claim", Some(json!({"max":10})))
        .await
        .json();
    let bin = c["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == "bin")
        .unwrap()
        .clone();
    assert_eq!(bin["payload_b64"], "/wABAg==");
    assert!(bin.get("payload").is_none());
    api.stop().await;
}

#[tokio::test]
async fn claim_is_a_long_poll_that_returns_when_a_job_is_due() {
    let api = start_socket().await;
    // Nothing there: waits the whole wait_ms, returns empty.
    let t = Instant::now();
    let r = api
        .call("POST", "/v1/queues/lp/claim", Some(json!({"wait_ms":300})))
        .await;
    assert_eq!(r.json()["jobs"].as_array().unwrap().len(), 0);
    assert!(t.elapsed() >= Duration::from_millis(290));
    // A job due in 400 ms ends a 10 s poll when it is due, not at the end.
    api.call(
        "POST",
        "/v1/queues/lp/jobs",
        Some(json!({"id":"soon","payload":1,"delay_ms":400})),
    )
    .await;
    let t = Instant::now();
    let r = api
        .call(
            "POST",
            "/v1/queues/lp/claim",
            Some(json!({"wait_ms":10000})),
        )
        .await;
    assert_eq!(r.json()["jobs"][0]["id"], "soon");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    api.stop().await;
}

#[tokio::test]
async fn a_waiting_claim_is_woken_by_an_enqueue() {
    let api = start_socket().await;
    let waiter = {
        let a = api.client.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let r = a
                .call(
                    "POST",
                    "/v1/queues/wake/claim",
                    Some(json!({"wait_ms":20000})),
                )
                .await;
            (r.json(), t.elapsed())
        })
    };
    api.until_polls_wait(1).await;
    api.call(
        "POST",
        "/v1/queues/wake/jobs",
        Some(json!({"id":"now","payload":1})),
    )
    .await;
    let (r, waited) = waiter.await.unwrap();
    assert_eq!(r["jobs"][0]["id"], "now");
    assert!(
        waited < Duration::from_secs(5),
        "woken by the enqueue, not the 20 s deadline: {waited:?}"
    );
    api.stop().await;
}

#[tokio::test]
async fn shutdown_ends_pending_long_polls() {
    let mut api = start_socket().await;
    let a = api.client.clone();
    let waiter = tokio::spawn(async move {
        let t = Instant::now();
        let r = a
            .call(
                "POST",
                "/v1/queues/sd/claim",
                Some(json!({"wait_ms":30000})),
            )
            .await;
        (r.status, t.elapsed())
    });
    api.until_polls_wait(1).await;
    let _ = api.stop.take().unwrap().send(());
    let (status, waited) = waiter.await.unwrap();
    assert_eq!(status, 200);
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    api.task.take().unwrap().await.unwrap().unwrap();
}

/// A client cuts its own long poll short (`DELETE …/polls/{poll_id}`, a worker shutting down):
/// it answers at once with nothing leased; a cut that overtakes its poll still ends it, and
/// polls of other ids keep waiting.
#[tokio::test]
async fn a_client_cuts_its_long_poll_short() {
    let api = start_socket().await;
    let poll = |id: &'static str, wait_ms: u64| {
        let a = api.client.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            let body = json!({"wait_ms": wait_ms, "poll_id": id, "max": 5});
            let r = a.call("POST", "/v1/queues/cut/claim", Some(body)).await;
            (r.status, r.json(), t.elapsed())
        })
    };
    let (mine, other) = (poll("w-1", 30000), poll("w-2", 1500));
    api.until_polls_wait(2).await;
    let r = api.call("DELETE", "/v1/queues/cut/polls/w-1", None).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let (status, v, waited) = mine.await.unwrap();
    assert_eq!(
        (status, v["jobs"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    assert!(
        waited < Duration::from_secs(10),
        "cut, not its 30 s: {waited:?}"
    );
    let (status, _, waited) = other.await.unwrap();
    assert_eq!(status, 200);
    assert!(
        waited >= Duration::from_millis(1400),
        "w-2 was not cut: {waited:?}"
    );
    // The cut first, then its poll: it answers at once.
    let r = api.call("DELETE", "/v1/queues/cut/polls/w-3", None).await;
    assert_eq!(r.status, 204);
    let (status, v, waited) = poll("w-3", 30000).await.unwrap();
    assert_eq!(
        (status, v["jobs"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{v}"
    );
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    // A cut poll leased nothing: a job enqueued now is due for the next claim.
    api.call(
        "POST",
        "/v1/queues/cut/jobs",
        Some(json!({"id":"after","payload":1})),
    )
    .await;
    let stats = api.call("GET", "/v1/queues/cut", None).await.json();
    assert_eq!(
        (stats["due"].as_u64(), stats["leased"].as_u64()),
        (Some(1), Some(0)),
        "{stats}"
    );
    api.stop().await;
}

async fn bearer_tokens_guard_the_api(store: Store) {
    let mut api = start_on(store, vec!["s3cret".into(), "other".into()]).await;
    assert_eq!(api.call("GET", "/v1/queues", None).await.status, 200);
    api.token = Some("other".into());
    assert_eq!(api.call("GET", "/v1/queues", None).await.status, 200);
    api.token = Some("wrong".into());
    let r = api
        .call("POST", "/v1/queues/a/jobs", Some(json!({"payload":1})))
        .await;
    assert_eq!((r.status, r.code()), (401, "unauthorized".into()));
    api.token = None;
    assert_eq!(api.call("GET", "/v1/queues", None).await.status, 401);
    assert_eq!(api.stored().await, "0");
    // Health stays open for probes.
    assert_eq!(api.call("GET", "/healthz", None).await.status, 200);
    api.stop().await;
}

async fn health_metrics_openapi_dashboard(store: Store) {
    let api = start_on(store, Vec::new()).await;
    assert_eq!(api.call("GET", "/healthz", None).await.status, 200);
    assert_eq!(api.call("GET", "/readyz", None).await.status, 200);
    // One queue per backend: both tests share the process's metrics recorder.
    let q = format!("m{store:?}");
    let jobs = format!("/v1/queues/{q}/jobs");
    for _ in 0..2 {
        let body = json!({"id":"x","payload":1});
        api.call("POST", &jobs, Some(body)).await;
    }
    let c = api
        .call("POST", &format!("/v1/queues/{q}/claim"), Some(json!({})))
        .await
        .json();
    let token = c["jobs"][0]["lease_token"].as_u64().unwrap();
    let ack = format!("/v1/queues/{q}/jobs/x/ack");
    let stale = api
        .call("POST", &ack, Some(json!({"lease_token": token + 1000})))
        .await;
    assert_eq!(stale.code(), "lease_lost");
    api.call("POST", &ack, Some(json!({"lease_token": token})))
        .await;
    let m = api.call("GET", "/metrics", None).await;
    assert_eq!(m.status, 200);
    // Each event is counted once, whichever layer handled it (Instrumented meters them all).
    for (counter, n) in [
        ("delayq_enqueued_total", 1),
        ("delayq_enqueue_existing_total", 1),
        ("delayq_claimed_total", 1),
        ("delayq_acked_total", 1),
        ("delayq_lease_lost_total", 1),
    ] {
        let line = format!("{counter}{{queue=\"{q}\"}} {n}");
        assert!(m.body.lines().any(|l| l == line), "{line} not in /metrics");
    }
    for name in [
        "delayq_scheduled{queue=\"Q\"}",
        "delayq_leased{queue=\"Q\"}",
        "delayq_dead{queue=\"Q\"}",
        "delayq_oldest_overdue_seconds{queue=\"Q\"}",
        "delayq_paused{queue=\"Q\"}",
        "delayq_queue_jobs_total{queue=\"Q\",event=\"enqueued\"}",
        "delayq_queue_lateness_p99_seconds{queue=\"Q\"}",
        "delayq_lateness_seconds_bucket{queue=\"Q\",le=\"0.001\"}",
        "delayq_lateness_seconds_bucket{queue=\"Q\",le=\"60\"}",
        "delayq_http_request_duration_seconds_bucket",
    ] {
        let name = name.replace('Q', &q);
        assert!(m.body.contains(&name), "{name} missing from /metrics");
    }
    let doc = api.call("GET", "/openapi.json", None).await.json();
    assert_eq!(doc["openapi"], "3.1.0");
    for p in [
        "/v1/queues/{q}/jobs",
        "/v1/queues/{q}/claim",
        "/v1/queues/{q}/jobs/{id}/nack",
        "/v1/queues/{q}/dead/requeue",
        "/v1/whoami",
    ] {
        assert!(
            doc["paths"].get(p).is_some(),
            "{p} not in the OpenAPI document"
        );
    }
    let d = api.call("GET", "/", None).await;
    assert!(d.status == 200 && d.body.contains("/assets/console.js"));
    let js = api.call("GET", "/assets/console.js", None).await;
    assert!(js.status == 200 && js.body.contains("/v1/queues"));
    assert_eq!(api.call("GET", "/assets/nope.js", None).await.status, 404);
    api.stop().await;
}

async fn stale_and_foreign_lease_tokens_are_refused(store: Store) {
    let api = start_on(store, Vec::new()).await;
    api.call(
        "POST",
        "/v1/queues/f/jobs",
        Some(json!([{"id":"a","payload":1},{"id":"b","payload":2}])),
    )
    .await;
    let c = api
        .call(
            "POST",
            "/v1/queues/f/claim",
            Some(json!({"max":2,"lease_ms":200})),
        )
        .await
        .json();
    let tok = |i: usize| c["jobs"][i]["lease_token"].as_u64().unwrap();
    let (a_tok, b_tok) = if c["jobs"][0]["id"] == "a" {
        (tok(0), tok(1))
    } else {
        (tok(1), tok(0))
    };
    // The token of another job.
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/a/ack",
            Some(json!({"lease_token": b_tok})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "lease_lost".into()));
    // Double ack.
    assert_eq!(
        api.call(
            "POST",
            "/v1/queues/f/jobs/b/ack",
            Some(json!({"lease_token": b_tok}))
        )
        .await
        .status,
        200
    );
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/b/ack",
            Some(json!({"lease_token": b_tok})),
        )
        .await;
    assert_eq!(r.status, 404, "acked jobs are gone: {}", r.body);
    // Nack after the lease expired and the job was claimed again (real time: the server's
    // clock, with the 200 ms lease of the claim above).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = api
        .call("POST", "/v1/queues/f/claim", Some(json!({"max":1})))
        .await
        .json();
    assert_eq!(again["jobs"][0]["attempt"], 2);
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/a/nack",
            Some(json!({"lease_token": a_tok, "error":"late"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "lease_lost".into()));
    let r = api
        .call(
            "POST",
            "/v1/queues/f/jobs/a/extend",
            Some(json!({"lease_token": a_tok})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "lease_lost".into()));
    // Nothing changed: the new owner still holds it.
    let g = api.call("GET", "/v1/queues/f/jobs/a", None).await.json();
    assert_eq!(
        (
            g["state"].as_str(),
            g["attempt"].as_u64(),
            g.get("last_error").and_then(Value::as_str)
        ),
        (Some("leased"), Some(2), Some("lease expired (attempt 1)"))
    );
    // Cancel and reschedule of a leased job, requeue of a job that is not dead: 409.
    assert_eq!(
        api.call("DELETE", "/v1/queues/f/jobs/a", None).await.code(),
        "job_leased"
    );
    assert_eq!(
        api.call("PATCH", "/v1/queues/f/jobs/a", Some(json!({"delay_ms":5})))
            .await
            .code(),
        "job_leased"
    );
    assert_eq!(
        api.call("POST", "/v1/queues/f/dead/a/requeue", None)
            .await
            .code(),
        "job_not_dead"
    );
    api.stop().await;
}
