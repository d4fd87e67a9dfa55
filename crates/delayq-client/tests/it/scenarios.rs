//! The shared client conformance suite (`clients/conformance`) run by the Rust client: every
//! scenario through [`delayq_client::Client`] against a server on the embedded store and one
//! on Redis, and every Standard Webhooks vector through the pusher's verifier.

use std::collections::HashMap;

use delayq::CancelOutcome;
use delayq_client::wire::{
    BatchJobsRequest, BatchRequest, BatchView, CallbackBody, Carried, ClaimPoll, ClaimRequest,
    EnqueueRequest, ListQuery, NackRequest, OutcomeKind, Page, RescheduleRequest, RunOptions,
    ScheduleBody, ScheduleTiming, SettingsPatch,
};
use delayq_client::{Client, Error};
use delayq_test_support::conformance::{matches, suite};
use serde_json::{Value, json};

fn raw(v: &Value) -> Option<Box<serde_json::value::RawValue>> {
    Some(serde_json::value::to_raw_value(v).unwrap())
}

fn enqueue_of(a: &Value) -> EnqueueRequest {
    EnqueueRequest {
        id: a["id"].as_str().map(Into::into),
        payload: raw(&a["payload"]),
        delay_ms: a["delay_ms"].as_f64(),
        run_at: a.get("run_at").cloned(),
        priority: a["priority"].as_u64().map(|n| n as u8),
        on_conflict: a
            .get("on_conflict")
            .map(|v| serde_json::from_value(v.clone()).unwrap()),
        key: a["key"].as_str().map(Into::into),
        depends_on: a
            .get("depends_on")
            .map(|v| serde_json::from_value(v.clone()).unwrap()),
        on_dependency_failure: a
            .get("on_dependency_failure")
            .map(|v| serde_json::from_value(v.clone()).unwrap()),
        include_dependency_results: a["include_dependency_results"].as_bool(),
        run: RunOptions {
            max_attempts: a["max_attempts"].as_u64().map(|n| n as u32),
            ..RunOptions::default()
        },
        carried: Carried {
            target: a
                .get("target")
                .map(|v| serde_json::from_value(v.clone()).unwrap()),
            ..Carried::default()
        },
        ..EnqueueRequest::default()
    }
}

fn jobs_of(a: &Value) -> Vec<EnqueueRequest> {
    a["jobs"]
        .as_array()
        .map(|js| js.iter().map(enqueue_of).collect())
        .unwrap_or_default()
}

/// A callback `{payload?}` of a step, to the scenario's own queue.
fn callback(q: &str, v: &Value) -> Option<CallbackBody> {
    v.as_object().map(|o| CallbackBody {
        queue: q.to_owned(),
        payload: o.get("payload").cloned().unwrap_or_else(|| json!({})),
        delay_ms: None,
    })
}

fn batch(b: BatchView) -> Value {
    json!({"id": b.id, "state": b.state, "total": b.total, "pending": b.pending,
        "succeeded": b.succeeded, "dead": b.dead, "cancelled": b.cancelled})
}

fn listed(mut ids: Vec<String>) -> Value {
    ids.sort();
    json!({"count": ids.len(), "ids": ids})
}

/// One scenario's queue and the lease tokens its claims handed out.
struct Runner {
    c: Client,
    q: String,
    leases: HashMap<String, u64>,
}

impl Runner {
    fn token(&self, a: &Value) -> u64 {
        if let Some(t) = a["lease_token"].as_u64() {
            return t;
        }
        let t = self.leases[a["id"].as_str().unwrap()];
        if a["lease"] == "stale" {
            t + 1_000_000
        } else {
            t
        }
    }

    async fn step(&mut self, op: &str, a: &Value) -> Result<Value, Error> {
        let (c, q) = (&self.c, self.q.as_str());
        let id = a["id"].as_str().unwrap_or_default();
        Ok(match op {
            "enqueue" => {
                let e = c.enqueue(q, enqueue_of(a)).await?;
                json!({"id": e.id, "created": e.created})
            }
            "enqueue_batch" => {
                let jobs = a["jobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(enqueue_of)
                    .collect();
                let out = c.enqueue_batch(q, jobs).await?;
                out.iter()
                    .map(|e| json!({"id": e.id, "created": e.created}))
                    .collect()
            }
            "get" => match c.get(q, id).await? {
                None => Value::Null,
                Some(j) => {
                    let mut v = json!({"id": j.id, "state": j.state, "attempt": j.facts.attempt,
                        "max_attempts": j.facts.max_attempts,
                        "payload": serde_json::from_str::<Value>(j.payload.unwrap().get()).unwrap()});
                    if let Some(e) = j.facts.last_error {
                        v["last_error"] = e.into();
                    }
                    if let Some(k) = j.facts.key {
                        v["key"] = k.into();
                    }
                    v["result"] = match (j.result, j.result_b64) {
                        (Some(r), _) => serde_json::from_str(r.get()).unwrap(),
                        (None, Some(b)) => b.into(),
                        (None, None) => Value::Null,
                    };
                    v
                }
            },
            "cancel" => json!(match if a["running"] == true {
                c.cancel_running(q, id).await?
            } else {
                c.cancel(q, id).await?
            } {
                CancelOutcome::Cancelled => "cancelled",
                CancelOutcome::Cancelling => "cancelling",
                CancelOutcome::NotFound => "not_found",
                CancelOutcome::Leased => "leased",
                CancelOutcome::Dead => "dead",
            }),
            "reschedule" => {
                let body = RescheduleRequest {
                    delay_ms: a["delay_ms"].as_f64(),
                    run_at: a.get("run_at").cloned(),
                };
                c.reschedule(q, id, &body).await?;
                Value::Null
            }
            "claim" => {
                let req = ClaimRequest {
                    poll: ClaimPoll {
                        max: a["max"].as_u64().map(|n| n as usize),
                        lease_ms: a["lease_ms"].as_u64(),
                        ..ClaimPoll::default()
                    },
                    ..ClaimRequest::default()
                };
                let r = c.claim(q, &req).await?;
                for j in &r.jobs {
                    self.leases.insert(j.id.clone(), j.lease_token);
                }
                let mut jobs: Vec<_> = r.jobs.into_iter().map(|j| (j.id, j.facts.key)).collect();
                jobs.sort();
                let keys: Vec<Value> = jobs.iter().map(|(_, k)| json!(k)).collect();
                let mut v = listed(jobs.into_iter().map(|(id, _)| id).collect());
                v["keys"] = keys.into();
                v
            }
            "ack" => {
                let result = match (&a["result"], a["result_repeat"].as_u64()) {
                    (Value::Null, _) => None,
                    (Value::String(s), Some(n)) => Some(json!(s.repeat(n as usize))),
                    (v, _) => Some(v.clone()),
                };
                match result {
                    None => c.ack(q, id, self.token(a)).await?,
                    Some(r) => {
                        let bytes = serde_json::to_vec(&r).expect("JSON");
                        c.ack_result(q, id, self.token(a), bytes).await?
                    }
                };
                json!("acked")
            }
            "nack" => {
                let body = NackRequest {
                    lease_token: self.token(a),
                    error: a["error"].as_str().map(Into::into),
                    retry_in_ms: a["retry_in_ms"].as_u64(),
                    dead: a["dead"].as_bool().unwrap_or(false),
                };
                json!(match c.nack(q, id, &body).await?.outcome {
                    OutcomeKind::Retrying => "retrying",
                    OutcomeKind::Dead => "dead",
                    other => panic!("nack answered {other:?}"),
                })
            }
            "extend" => {
                let ms = a["lease_ms"].as_u64().unwrap_or(30_000);
                c.extend(q, id, self.token(a), ms).await?;
                json!("extended")
            }
            "release" => {
                c.release(q, id, self.token(a), true).await?;
                Value::Null
            }
            "list" => {
                let mut ids = Vec::new();
                let mut cursor = None;
                loop {
                    let query = ListQuery {
                        state: a["state"].as_str().map(Into::into),
                        limit: a["page_size"].as_u64().map(|n| n as usize),
                        cursor,
                        id_prefix: None,
                    };
                    let page = c.list_jobs(q, &query).await?;
                    ids.extend(page.jobs.into_iter().map(|j| j.id));
                    match page.next_cursor {
                        Some(n) => cursor = Some(n),
                        None => break,
                    }
                }
                listed(ids)
            }
            "list_dead" => listed(
                c.list_dead(q, &Page::default())
                    .await?
                    .into_iter()
                    .map(|j| j.id)
                    .collect(),
            ),
            "requeue_dead" if a.get("id").is_some() => {
                c.requeue_dead(q, id).await?;
                json!(1)
            }
            "requeue_dead" => json!(c.requeue_all_dead(q).await?.count),
            "purge_dead" => json!(c.purge_dead(q).await?.count),
            "put_schedule" => {
                let spec = ScheduleBody {
                    timing: ScheduleTiming {
                        cron: a["cron"].as_str().map(Into::into),
                        tz: a["tz"].as_str().map(Into::into),
                        every_ms: a["every_ms"].as_u64(),
                    },
                    payload: raw(&a["payload"]),
                    ..ScheduleBody::default()
                };
                let s = c
                    .put_schedule(q, a["name"].as_str().unwrap(), &spec)
                    .await?;
                json!({"name": s.name})
            }
            "list_schedules" => {
                let mut names: Vec<String> = c
                    .list_schedules(q)
                    .await?
                    .into_iter()
                    .map(|s| s.name)
                    .collect();
                names.sort();
                json!(names)
            }
            "delete_schedule" => json!(c.delete_schedule(q, a["name"].as_str().unwrap()).await?),
            "stats" => {
                let s = c.queue(q).await?;
                json!({"scheduled": s.scheduled, "due": s.due, "leased": s.leased,
                    "dead": s.dead, "paused": s.paused})
            }
            "get_queue" => {
                let s = c.queue(q).await?;
                json!({"paused": s.paused, "settings": s.settings})
            }
            "put_queue" => {
                let patch: SettingsPatch = serde_json::from_value(a["settings"].clone()).unwrap();
                c.put_queue(q, &patch).await?;
                Value::Null
            }
            "pause" => {
                c.pause(q).await?;
                Value::Null
            }
            "resume" => {
                c.resume(q).await?;
                Value::Null
            }
            "pause_key" => {
                let hold = delayq_wire::KeyPauseRequest {
                    until: None,
                    for_ms: a["for_ms"].as_u64(),
                };
                let v = c.pause_key(q, a["key"].as_str().unwrap(), &hold).await?;
                json!({"key": v.key, "paused": v.paused_until.is_some()})
            }
            "resume_key" => {
                let v = c.resume_key(q, a["key"].as_str().unwrap()).await?;
                json!({"key": v.key, "paused": v.paused_until.is_some()})
            }
            "create_flow" => {
                let jobs = a["jobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|j| {
                        let mut v = serde_json::to_value(enqueue_of(j)).unwrap();
                        v["queue"] = j.get("queue").cloned().unwrap_or_else(|| json!(q));
                        v
                    })
                    .collect();
                let out = c
                    .create_flow(&delayq_client::wire::FlowRequest { jobs })
                    .await?;
                out.jobs
                    .iter()
                    .map(|e| json!({"id": e.enqueued.id, "created": e.enqueued.created}))
                    .collect()
            }
            "key_jobs" => {
                let key = a["key"].as_str().unwrap();
                let (mut ids, mut states) = (Vec::new(), Vec::new());
                let mut cursor = None;
                loop {
                    let query = delayq_client::wire::KeyJobsQuery {
                        state: a["state"].as_str().map(Into::into),
                        limit: a["page_size"].as_u64().map(|n| n as usize),
                        cursor,
                    };
                    let page = c.key_jobs(q, key, &query).await?;
                    for j in page.jobs {
                        ids.push(j.id);
                        states.push(j.state);
                    }
                    match page.next_cursor {
                        Some(n) => cursor = Some(n),
                        None => break,
                    }
                }
                json!({"count": ids.len(), "ids": ids, "states": states})
            }
            "cancel_key" => {
                let running = a["running"].as_bool().unwrap_or(false);
                let v = c.cancel_key(q, a["key"].as_str().unwrap(), running).await?;
                json!({"cancelled": v.cancelled, "running": v.running})
            }
            "reschedule_key" => {
                let to = delayq_client::wire::KeyRescheduleRequest {
                    shift_ms: a["shift_ms"].as_i64(),
                    due_at: a.get("due_at").cloned(),
                };
                json!(
                    c.reschedule_key(q, a["key"].as_str().unwrap(), &to)
                        .await?
                        .rescheduled
                )
            }
            "keys" => {
                let v = c.keys(q, None).await?;
                v.keys
                    .iter()
                    .map(|k| {
                        json!({"key": k.key, "in_flight": k.in_flight, "due": k.due,
                            "paused": k.paused_until.is_some()})
                    })
                    .collect()
            }
            "create_batch" => {
                let req = BatchRequest {
                    id: a["id"].as_str().map(Into::into),
                    jobs: jobs_of(a),
                    on_complete: callback(q, &a["on_complete"]),
                    on_success: callback(q, &a["on_success"]),
                    open: a["open"].as_bool().unwrap_or(false),
                    include_results: a["include_results"].as_bool().unwrap_or(false),
                };
                batch(c.create_batch(q, &req).await?.batch)
            }
            "add_to_batch" => {
                let req = BatchJobsRequest {
                    jobs: jobs_of(a),
                    close: a["close"].as_bool().unwrap_or(false),
                };
                batch(c.add_to_batch(q, id, &req).await?.batch)
            }
            "close_batch" => batch(c.close_batch(q, id).await?),
            "batch" => {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    let b = c.batch(q, id).await?;
                    if a["wait"] != true
                        || b.state == "done"
                        || std::time::Instant::now() > deadline
                    {
                        break batch(b);
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
            other => panic!("unknown operation {other}"),
        })
    }
}

async fn run_all(url: &str) {
    let client = Client::new(url);
    let mut failures = Vec::new();
    for sc in suite("scenarios.json")["scenarios"].as_array().unwrap() {
        let name = sc["name"].as_str().unwrap();
        let mut r = Runner {
            c: client.clone(),
            q: format!("conf-{:08x}", rand::random::<u32>()),
            leases: HashMap::new(),
        };
        for (i, st) in sc["steps"].as_array().unwrap().iter().enumerate() {
            let op = st["do"].as_str().unwrap();
            let at = format!("{name}, step {} ({op})", i + 1);
            match (r.step(op, &st["args"]).await, st.get("error")) {
                (Err(e), Some(code)) if e.code().map(|c| c.as_str()) == code.as_str() => {}
                (Err(e), _) => failures.push(format!("{at}: {e}")),
                (Ok(got), Some(code)) => {
                    failures.push(format!("{at}: succeeded with {got}, expected {code}"))
                }
                (Ok(got), None) => {
                    if let Some(want) = st.get("expect")
                        && !matches(want, &got)
                    {
                        failures.push(format!("{at}: expected {want}, got {got}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_on_the_embedded_store() {
    let s = crate::Server::start(delayq_http::HttpConfig::default()).await;
    run_all(&s.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_on_redis() {
    let redis = delayq_test_support::shared::redis();
    let backend = delayq_redis::RedisBackend::connect(&redis.url())
        .await
        .unwrap();
    let (url, _stop) = crate::serve(backend).await;
    run_all(&url).await;
}

#[test]
fn every_webhook_vector() {
    for v in suite("webhooks.json")["vectors"].as_array().unwrap() {
        let secrets: Vec<String> = serde_json::from_value(v["secrets"].clone()).unwrap();
        let headers: Vec<(String, String)> = v["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, x)| (k.clone(), x.as_str().unwrap().to_owned()))
            .collect();
        let got = delayq_client::verify_webhook_at(
            &secrets,
            headers.iter().map(|(k, x)| (k.as_str(), x.as_str())),
            v["body"].as_str().unwrap().as_bytes(),
            v["now"].as_u64().unwrap(),
        );
        assert_eq!(
            got.is_ok(),
            v["valid"].as_bool().unwrap(),
            "{}: {got:?}",
            v["name"]
        );
        if let Ok(msg) = got {
            let header = |name: &str| {
                let (_, x) = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .unwrap();
                x.clone()
            };
            assert_eq!(msg.id, header("webhook-id"));
            assert_eq!(msg.timestamp.to_string(), header("webhook-timestamp"));
            assert_eq!(msg.payload, v["body"].as_str().unwrap().as_bytes());
        }
    }
}

/// The call × language table of clients/conformance/README.md says what the scenarios check:
/// the cancel row names exactly the outcomes the scenarios expect of a cancel, in every
/// language's column, and the webhook row the parts every runner checks (id, timestamp,
/// payload).
#[test]
fn the_readme_table_says_what_the_scenarios_check() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../clients/conformance/README.md"),
    )
    .unwrap();
    let row = |call: &str| -> Vec<String> {
        let line = readme
            .lines()
            .find(|l| l.starts_with(&format!("| {call} |")))
            .unwrap_or_else(|| panic!("no `{call}` row in the table"));
        line.split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .skip(1)
            .map(str::to_owned)
            .collect()
    };
    let mut expected: Vec<String> = suite("scenarios.json")["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["steps"].as_array().unwrap().iter())
        .filter(|st| st["do"] == "cancel")
        .filter_map(|st| st["expect"].as_str().map(str::to_owned))
        .collect();
    expected.sort();
    expected.dedup();
    assert_eq!(
        expected,
        ["cancelled", "cancelling", "dead", "leased", "not_found"]
    );
    let cancel = row("cancel");
    assert_eq!(cancel.len(), 4, "a column per language: {cancel:?}");
    for (lang, cell) in ["Rust", "Python", "TypeScript", "Go"].iter().zip(&cancel) {
        let cell = cell.to_ascii_lowercase().replace('_', "");
        for outcome in &expected {
            let bare = outcome.replace('_', "");
            let same = cell.contains(&bare)
                || *lang != "Python" && cell.contains("the same strings")
                || cell.contains(&format!("cancel{bare}"));
            assert!(
                same,
                "{lang}'s cancel cell does not name `{outcome}`: {cell}"
            );
        }
    }
    for (lang, cell) in ["Rust", "Python", "TypeScript", "Go"]
        .iter()
        .zip(&row("verify a webhook"))
    {
        let cell = cell.to_ascii_lowercase();
        for part in ["id", "timestamp", "payload"] {
            assert!(
                cell.contains(part),
                "{lang}'s webhook cell lacks `{part}`: {cell}"
            );
        }
    }
}
