//! `POST /v1/claim` on both stores: one claim over several queues — acks naming their queues,
//! jobs naming theirs, weights over many claims, strict order, one long poll over all the
//! queues, and bad requests refused with nothing changed.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api_harness::{Api, Store, start_on};

on_both_backends!(
    a_claim_over_several_queues_acks_and_leases_from_each,
    weights_share_the_claims_and_strict_keeps_the_order,
    one_claim_shares_its_max_by_weight_in_interleaved_order,
    one_long_poll_waits_on_every_queue,
    bad_claims_over_several_queues_are_refused,
);

async fn fill(api: &Api, queue: &str, n: usize) {
    api.enqueue_numbered(queue, n, |i| format!("{queue}-{i}"))
        .await;
}

async fn claim(api: &Api, body: Value) -> Value {
    let r = api.call("POST", "/v1/claim", Some(body)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn queues_of(v: &Value) -> Vec<String> {
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["queue"].as_str().unwrap().to_owned())
        .collect()
}

async fn a_claim_over_several_queues_acks_and_leases_from_each(store: Store) {
    let api = start_on(store, Vec::new()).await;
    fill(&api, "mails", 2).await;
    fill(&api, "reports", 2).await;
    let both = json!([{"name": "mails"}, {"name": "reports"}]);
    let v = claim(&api, json!({"queues": both, "max": 10, "strict": true})).await;
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4, "{v}");
    assert_eq!(
        queues_of(&v),
        ["mails", "mails", "reports", "reports"],
        "{v}"
    );
    // Acks name their queues; the outcomes come back in order.
    let acks: Vec<Value> = jobs
        .iter()
        .map(|j| json!({"queue": j["queue"], "id": j["id"], "lease_token": j["lease_token"]}))
        .chain([json!({"queue": "reports", "id": "mails-0", "lease_token": 1})])
        .collect();
    let v = claim(&api, json!({"queues": both, "acks": acks})).await;
    assert_eq!(
        v["acks"],
        json!(["acked", "acked", "acked", "acked", "not_found"]),
        "{v}"
    );
    assert!(v["jobs"].as_array().unwrap().is_empty(), "{v}");
    let stats = api.call("GET", "/v1/queues/mails", None).await.json();
    assert_eq!(
        (stats["leased"].as_u64(), stats["due"].as_u64()),
        (Some(0), Some(0)),
        "{stats}"
    );
}

async fn weights_share_the_claims_and_strict_keeps_the_order(store: Store) {
    let api = start_on(store, Vec::new()).await;
    fill(&api, "heavy", 900).await;
    fill(&api, "light", 900).await;
    let weighted = json!([{"name": "heavy", "weight": 3}, {"name": "light", "weight": 1}]);
    let mut heavy = 0;
    for _ in 0..800 {
        let v = claim(&api, json!({"queues": weighted, "max": 1})).await;
        heavy += usize::from(queues_of(&v) == ["heavy"]);
    }
    // 3:1 by weight: 600 of 800 expected (a draw per claim: within 6 standard deviations).
    assert!(
        (530..=670).contains(&heavy),
        "{heavy} of 800 from the weight-3 queue"
    );
    // Strict: the first queue while it has due jobs, however light its weight.
    let strict = json!([{"name": "light", "weight": 1}, {"name": "heavy", "weight": 1000}]);
    for _ in 0..5 {
        let v = claim(&api, json!({"queues": strict, "strict": true, "max": 2})).await;
        assert_eq!(queues_of(&v), ["light", "light"], "{v}");
    }
}

async fn one_claim_shares_its_max_by_weight_in_interleaved_order(store: Store) {
    let api = start_on(store, Vec::new()).await;
    fill(&api, "heavy", 40).await;
    fill(&api, "light", 40).await;
    let weighted = json!([{"name": "heavy", "weight": 3}, {"name": "light", "weight": 1}]);
    // One claim of 40 (what a prefetching consumer asks): each queue its weight's share, and
    // in the order a consumer starts them, by weight from the first job on.
    let v = claim(&api, json!({"queues": weighted, "max": 40})).await;
    let got = queues_of(&v);
    let light = |jobs: &[String]| jobs.iter().filter(|q| *q == "light").count();
    assert_eq!((got.len(), light(&got)), (40, 10), "{got:?}");
    for first in [4, 8, 20] {
        assert_eq!(
            light(&got[..first]),
            first / 4,
            "the first {first}: {got:?}"
        );
    }
    // A queue with fewer due jobs than its share gives what it has; the others take the rest.
    fill(&api, "few", 3).await;
    fill(&api, "many", 40).await;
    let uneven = json!([{"name": "few", "weight": 3}, {"name": "many", "weight": 1}]);
    let v = claim(&api, json!({"queues": uneven, "max": 20})).await;
    let got = queues_of(&v);
    let few = got.iter().filter(|q| *q == "few").count();
    assert_eq!((got.len(), few), (20, 3), "{got:?}");
}

async fn one_long_poll_waits_on_every_queue(store: Store) {
    let api = start_on(store, Vec::new()).await;
    let both = json!([{"name": "idle-a"}, {"name": "idle-b"}]);
    let body = json!({"queues": both, "wait_ms": 10_000, "max": 5});
    let started = Instant::now();
    let poll = {
        let api = api.client.clone();
        tokio::spawn(async move { api.call("POST", "/v1/claim", Some(body)).await })
    };
    // The poll waits (nothing due anywhere); a job in the second queue answers it.
    api.until_polls_wait(1).await;
    assert!(!poll.is_finished(), "the poll waits while nothing is due");
    fill(&api, "idle-b", 1).await;
    let r = poll.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(queues_of(&v), ["idle-b"], "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "answered by the job, not the deadline"
    );
    // Nothing was left leased elsewhere.
    let a = api.call("GET", "/v1/queues/idle-a", None).await.json();
    assert_eq!(a["leased"].as_u64(), Some(0), "{a}");
    // A named poll is cut through its first queue: it answers at once, with nothing.
    let body = json!({"queues": both, "wait_ms": 30_000, "poll_id": "stop-me"});
    let started = Instant::now();
    let poll = {
        let api = api.client.clone();
        tokio::spawn(async move { api.call("POST", "/v1/claim", Some(body)).await })
    };
    let cut = api
        .call("DELETE", "/v1/queues/idle-a/polls/stop-me", None)
        .await;
    assert_eq!(cut.status, 204, "{}", cut.body);
    let r = poll.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["jobs"].as_array().unwrap().is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cut, not run out"
    );
}

async fn bad_claims_over_several_queues_are_refused(store: Store) {
    let api = start_on(store, Vec::new()).await;
    fill(&api, "kept", 1).await;
    let many: Vec<Value> = (0..33).map(|i| json!({"name": format!("q{i}")})).collect();
    for (body, code) in [
        (json!({"queues": []}), "invalid_batch"),
        (json!({"queues": many}), "invalid_batch"),
        (
            json!({"queues": [{"name": "kept"}, {"name": "kept"}]}),
            "invalid_batch",
        ),
        (
            json!({"queues": [{"name": "kept", "weight": 0}]}),
            "invalid_batch",
        ),
        (
            json!({"queues": [{"name": "bad name"}]}),
            "invalid_queue_name",
        ),
        (
            json!({"queues": [{"name": "kept"}], "max": 0}),
            "invalid_batch",
        ),
        (
            json!({"queues": [{"name": "kept"}], "wait_ms": 60_001}),
            "invalid_batch",
        ),
        (
            json!({"queues": [{"name": "kept"}], "acks": [{"queue": "kept", "id": "", "lease_token": 1}]}),
            "invalid_job_id",
        ),
        (
            json!({"queues": [{"name": "kept"}], "poll": 1}),
            "invalid_body",
        ),
        (
            json!({"queues": [{"name": "kept"}], "poll_id": "a b"}),
            "invalid_poll_id",
        ),
    ] {
        let r = api.call("POST", "/v1/claim", Some(body.clone())).await;
        assert_eq!(
            (r.status, r.code()),
            (400, code.to_owned()),
            "{body}: {}",
            r.body
        );
    }
    let kept = api.call("GET", "/v1/queues/kept", None).await.json();
    assert_eq!(
        (kept["due"].as_u64(), kept["leased"].as_u64()),
        (Some(1), Some(0)),
        "{kept}"
    );
}
