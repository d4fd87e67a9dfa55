//! Results over HTTP on both stores: every kind of ack carries `result` / `result_b64` (the
//! single ack, an ack batch, a claim's acks, `POST /v1/claim`'s acks) and `GET …/jobs/{id}`
//! answers it while the job is kept as done; acks with and without results in one request
//! answer in order; a bad or oversized result refuses the request with nothing changed.

use serde_json::{Value, json};

use crate::api_harness::{Api, Store, start_on};

on_both_backends!(
    every_ack_carries_a_result_kept_with_the_done_job,
    bad_results_are_refused_and_change_nothing,
);

async fn setup(api: &Api, queue: &str, n: usize) -> Vec<(String, u64)> {
    let r = api
        .call(
            "PUT",
            &format!("/v1/queues/{queue}"),
            Some(json!({"keep_done_ms": 600_000})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    api.enqueue_numbered(queue, n, |i| format!("j{i}")).await;
    let r = api
        .call(
            "POST",
            &format!("/v1/queues/{queue}/claim"),
            Some(json!({"max": n})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut leased: Vec<(String, u64)> = r.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap().to_owned(),
                j["lease_token"].as_u64().unwrap(),
            )
        })
        .collect();
    leased.sort();
    assert_eq!(leased.len(), n);
    leased
}

async fn job(api: &Api, queue: &str, id: &str) -> Value {
    let r = api
        .call("GET", &format!("/v1/queues/{queue}/jobs/{id}"), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

async fn every_ack_carries_a_result_kept_with_the_done_job(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let l = setup(&api, "res", 6).await;
    // The single ack.
    let r = api
        .call(
            "POST",
            "/v1/queues/res/jobs/j0/ack",
            Some(json!({"lease_token": l[0].1, "result": {"sent": 1}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // An ack batch: with a result, bytes, and none — answered in order.
    let r = api
        .call(
            "POST",
            "/v1/queues/res/acks",
            Some(json!({"acks": [
                {"id": "j1", "lease_token": l[1].1, "result": [1, 2]},
                {"id": "j2", "lease_token": l[2].1},
                {"id": "j3", "lease_token": l[3].1, "result_b64": "AP8="},
                {"id": "ghost", "lease_token": 1, "result": 1},
            ]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["acks"],
        json!(["acked", "acked", "acked", "not_found"])
    );
    // A claim's acks, and POST /v1/claim's.
    let r = api
        .call(
            "POST",
            "/v1/queues/res/claim",
            Some(json!({"acks": [{"id": "j4", "lease_token": l[4].1, "result": "four"}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["acks"], json!(["acked"]));
    let r = api
        .call(
            "POST",
            "/v1/claim",
            Some(json!({"queues": [{"name": "res"}],
                        "acks": [{"queue": "res", "id": "j5", "lease_token": l[5].1,
                                  "result": {"five": true}}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["acks"], json!(["acked"]));
    for (id, want) in [
        ("j0", json!({"sent": 1})),
        ("j1", json!([1, 2])),
        ("j4", json!("four")),
        ("j5", json!({"five": true})),
    ] {
        let j = job(&api, "res", id).await;
        assert_eq!((&j["state"], &j["result"]), (&json!("done"), &want), "{j}");
    }
    let j2 = job(&api, "res", "j2").await;
    assert!(
        j2.get("result").is_none() && j2.get("result_b64").is_none(),
        "{j2}"
    );
    let j3 = job(&api, "res", "j3").await;
    assert_eq!(j3["result_b64"], "AP8=", "{j3}");
    // An ack of a done job: refused (lease lost), its result unchanged.
    let r = api
        .call(
            "POST",
            "/v1/queues/res/jobs/j0/ack",
            Some(json!({"lease_token": l[0].1, "result": "again"})),
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(job(&api, "res", "j0").await["result"], json!({"sent": 1}));
}

async fn bad_results_are_refused_and_change_nothing(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let l = setup(&api, "bad", 2).await;
    let big = "x".repeat(70_000);
    for (path, body, status, code) in [
        (
            "/v1/queues/bad/jobs/j0/ack",
            json!({"lease_token": l[0].1, "result": big}),
            413,
            "result_too_large",
        ),
        (
            "/v1/queues/bad/jobs/j0/ack",
            json!({"lease_token": l[0].1, "result": 1, "result_b64": "AQ=="}),
            400,
            "invalid_body",
        ),
        (
            "/v1/queues/bad/acks",
            json!({"acks": [{"id": "j1", "lease_token": l[1].1},
                            {"id": "j0", "lease_token": l[0].1, "result_b64": "%%"}]}),
            400,
            "invalid_body",
        ),
        (
            "/v1/queues/bad/claim",
            json!({"acks": [{"id": "j1", "lease_token": l[1].1},
                            {"id": "j0", "lease_token": l[0].1, "result": big}]}),
            413,
            "result_too_large",
        ),
    ] {
        let r = api.call("POST", path, Some(body)).await;
        assert_eq!(r.status, status, "{path}: {}", r.body);
        assert_eq!(r.json()["code"], code, "{path}: {}", r.body);
    }
    for id in ["j0", "j1"] {
        assert_eq!(job(&api, "bad", id).await["state"], "leased", "{id}");
    }
}
