//! The workers under one contract: every scenario of clients/conformance/workers.json run by
//! each client's worker — TypeScript's, Go's and Python's as their scripted-worker programs,
//! the Rust Consumer over HTTP in this process — against `delayq serve` on the embedded store
//! and on Redis. The server follows a test clock: backoffs, retry-ins and lease expiries pass
//! by moving it, and the harness waits on what the server and the worker say, never a fixed
//! sleep.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::Clock as _;
use serde_json::{Value, json};

use delayq_test_support::conformance::{matches, suite};
use delayq_test_support::shared::namespace;

use crate::common::{Killed, SharedClock, delayq, holds_within, request, root, spawn_serve};

/// A worker's printed lines (`{"start": id, …}`, `{"end": id}`), in order.
type Events = Arc<Mutex<Vec<Value>>>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lang {
    TypeScript,
    Go,
    Python,
    Rust,
}

/// One scenario's worker settings.
struct Settings {
    queues: Vec<(String, u32)>,
    lease_ms: u64,
    concurrency: usize,
}

/// A running worker: a process, or the Rust consumer on a thread of this process.
enum Running {
    Process(Child),
    Rust {
        stop: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl Running {
    /// Asks for a graceful stop (SIGTERM, or the consumer's shutdown future).
    fn stop(&mut self) {
        match self {
            Running::Process(child) => {
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
            }
            Running::Rust { stop, .. } => {
                if let Some(s) = stop.take() {
                    let _ = s.send(());
                }
            }
        }
    }

    /// Whether it has exited.
    fn exited(&mut self) -> bool {
        match self {
            Running::Process(child) => child.try_wait().unwrap().is_some(),
            Running::Rust { thread, .. } => thread.as_ref().is_none_or(|t| t.is_finished()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        match self {
            Running::Process(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Running::Rust { stop, thread } => {
                if let Some(s) = stop.take() {
                    let _ = s.send(());
                }
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
        }
    }
}

/// The Go worker program, built into `dir` (Go's build cache makes a rebuild quick).
fn build_go(dir: &Path) -> PathBuf {
    let go = dir.join("scriptedworker");
    crate::common::succeeds(
        Command::new("go")
            .args(["build", "-o"])
            .arg(&go)
            .arg("./internal/scriptedworker")
            .env("GOFLAGS", "-mod=mod")
            .current_dir(root().join("clients/go")),
    );
    go
}

/// Starts `lang`'s worker on `url` with `s`; its events go to `events`.
fn start(lang: Lang, url: &str, s: &Settings, gates: &Path, go: &Path, events: &Events) -> Running {
    if lang == Lang::Rust {
        return start_rust(url, s, gates, events);
    }
    let queues = serde_json::to_string(&s.queues).unwrap();
    let mut cmd = match lang {
        Lang::TypeScript => {
            let mut c = Command::new("node");
            c.arg(root().join("clients/typescript/build/scripted/worker.js"));
            c
        }
        Lang::Go => Command::new(go),
        Lang::Python => {
            let mut c = crate::common::python3();
            c.arg(root().join("clients/python/tests/scripted_worker.py"));
            c
        }
        Lang::Rust => unreachable!(),
    };
    let mut child = cmd
        .env("DELAYQ_URL", url)
        .env("DELAYQ_QUEUES", queues)
        .env("DELAYQ_LEASE_MS", s.lease_ms.to_string())
        .env("DELAYQ_CONCURRENCY", s.concurrency.to_string())
        .env("DELAYQ_GATES", gates)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{lang:?} worker: {e}"));
    let out = BufReader::new(child.stdout.take().unwrap());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let seen = events.clone();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v.get("ready").is_some() {
                let _ = ready_tx.send(());
            } else {
                seen.lock().unwrap().push(v);
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the {lang:?} worker did not start"));
    Running::Process(child)
}

/// The scripted handler in Rust: the Consumer over HTTP (`RemoteBackend`).
fn start_rust(url: &str, s: &Settings, gates: &Path, events: &Events) -> Running {
    use delayq::{Completion, Consumer, ConsumerOptions, Failure, Job, QueueName, QueueOrder};
    let backend = delayq_client::RemoteBackend::new(delayq_client::Client::new(url));
    let queues = s
        .queues
        .iter()
        .map(|(q, w)| (QueueName::new(q.clone()).unwrap(), *w))
        .collect();
    let opts = ConsumerOptions {
        concurrency: s.concurrency,
        lease: Duration::from_millis(s.lease_ms),
        ..ConsumerOptions::default()
    };
    let consumer = Consumer::over(backend, queues, QueueOrder::Weighted, opts).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (events, gates) = (events.clone(), gates.to_path_buf());
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            fn perform(
                s: Value,
                job: &Job,
                gates: PathBuf,
            ) -> std::pin::Pin<Box<dyn Future<Output = Result<Completion, Failure>> + Send + '_>>
            {
                Box::pin(async move {
                    let text = |k: &str| s[k].as_str().unwrap_or("failed").to_owned();
                    match s["do"].as_str().unwrap_or("") {
                        "ok" if s.get("result").is_some() => Completion::json(&s["result"]),
                        "ok" => Ok(Completion::default()),
                        "fail" => Err(Failure::from(text("error"))),
                        "dead" => Err(Failure::dead(text("error"))),
                        "retry_in" if job.attempt > 1 && s.get("then").is_some() => {
                            perform(s["then"].clone(), job, gates).await
                        }
                        "retry_in" => Err(Failure::retry_in(
                            "retry later",
                            Duration::from_millis(s["ms"].as_u64().unwrap_or(1000)),
                        )),
                        "hold" => {
                            let gate = gates.join(text("gate"));
                            while !gate.exists() {
                                if job.cancellation.is_cancelled() {
                                    return Err(Failure::retry("aborted"));
                                }
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            match s.get("then") {
                                Some(then) => perform(then.clone(), job, gates).await,
                                None => Ok(Completion::default()),
                            }
                        }
                        other => Err(Failure::dead(format!("no such script {other}"))),
                    }
                })
            }
            let handler = move |job: Job| {
                let (events, gates) = (events.clone(), gates.clone());
                async move {
                    let id = job.id.to_string();
                    events.lock().unwrap().push(
                        json!({"start": id, "attempt": job.attempt, "queue": job.queue.to_string()}),
                    );
                    let script: Value = job.json().unwrap_or(Value::Null);
                    let out = perform(script, &job, gates).await;
                    if job.cancellation.is_cancelled() {
                        events.lock().unwrap().push(json!({"aborted": id}));
                    }
                    events.lock().unwrap().push(json!({"end": id}));
                    out
                }
            };
            consumer
                .run(handler, async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    Running::Rust {
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// One scenario's run: the server, its clock, the worker and what it printed.
struct Run<'a> {
    addr: &'a str,
    clock: &'a SharedClock,
    lang: Lang,
    settings: Settings,
    gates: tempfile::TempDir,
    /// The Go worker program (built by `run_all`).
    go: &'a Path,
    events: Events,
    worker: Option<Running>,
    /// The scenario's queue names (`main`, `heavy`, …) → this run's names.
    names: HashMap<String, String>,
    first: String,
    what: String,
    /// When the scenario's `cancel_running` step answered.
    cancelled_at: Option<std::time::Instant>,
}

impl Run<'_> {
    fn queue(&self, a: &Value) -> String {
        match a.get("queue").and_then(Value::as_str) {
            Some(q) => self.names[q].clone(),
            None => self.first.clone(),
        }
    }

    fn call(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let (s, text) = request(self.addr, method, path, &[], &body.to_string());
        (s, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn job(&self, queue: &str, id: &str) -> (u16, Value) {
        self.call(
            "GET",
            &format!("/v1/queues/{queue}/jobs/{id}"),
            &Value::Null,
        )
    }

    fn starts(&self) -> Vec<Value> {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .filter(|e| e.get("start").is_some())
            .cloned()
            .collect()
    }

    fn saw(&self, key: &str, id: &str, attempt: Option<u64>) -> bool {
        let events = self.events.lock().unwrap();
        events
            .iter()
            .any(|e| e[key] == id && attempt.is_none_or(|a| e["attempt"].as_u64() == Some(a)))
    }

    fn start_worker(&mut self) {
        self.worker = Some(start(
            self.lang,
            &format!("http://{}", self.addr),
            &self.settings,
            self.gates.path(),
            self.go,
            &self.events,
        ));
    }

    fn step(&mut self, op: &str, a: &Value) {
        let q = self.queue(a);
        let id = a["id"].as_str().unwrap_or("");
        let what = format!("{}: {op} {a}", self.what);
        match op {
            "put_queue" => {
                let (s, v) = self.call("PUT", &format!("/v1/queues/{q}"), &a["settings"]);
                assert_eq!(s, 200, "{what}: {v}");
            }
            "enqueue" => {
                let (s, v) = self.call("POST", &format!("/v1/queues/{q}/jobs"), &a["job"]);
                assert_eq!(s, 201, "{what}: {v}");
            }
            "enqueue_many" => {
                let prefix = a["prefix"].as_str().unwrap();
                let jobs: Vec<Value> = (0..a["count"].as_u64().unwrap())
                    .map(|n| json!({"id": format!("{prefix}{n}"), "payload": a["payload"]}))
                    .collect();
                let (s, v) = self.call("POST", &format!("/v1/queues/{q}/jobs"), &json!(jobs));
                assert_eq!(s, 201, "{what}: {v}");
            }
            "go" => self.start_worker(),
            "started" => {
                let attempt = a["attempt"].as_u64();
                wait(&what, || self.saw("start", id, attempt));
            }
            "ended" => wait(&what, || self.saw("end", id, None)),
            "cancel_running" => {
                let path = format!("/v1/queues/{q}/jobs/{id}?running=true");
                let (s, v) = self.call("DELETE", &path, &Value::Null);
                assert_eq!(
                    (s, &v["outcome"]),
                    (202, &json!("cancelling")),
                    "{what}: {v}"
                );
                self.cancelled_at = Some(std::time::Instant::now());
            }
            "aborted" => {
                wait(&what, || self.saw("aborted", id, None));
                let took = self.cancelled_at.map(|t| t.elapsed()).unwrap_or_default();
                assert!(
                    took < Duration::from_millis(a["within_ms"].as_u64().unwrap_or(5_000)),
                    "{what}: the handler heard of it {took:?} after the cancel"
                );
            }
            "gone" => {
                let (s, v) = self.job(&q, id);
                assert_eq!(s, 404, "{what}: {v}");
            }
            "ended_count" => {
                let n = a["count"].as_u64().unwrap() as usize;
                wait(&what, || {
                    let events = self.events.lock().unwrap();
                    events.iter().filter(|e| e.get("end").is_some()).count() >= n
                });
            }
            "extended" => {
                for _ in 0..a["times"].as_u64().unwrap() {
                    let before = self.job(&q, id).1["lease_deadline"].as_u64().unwrap();
                    self.clock
                        .advance(Duration::from_millis(a["advance_ms"].as_u64().unwrap()));
                    wait(&what, || {
                        let (_, v) = self.job(&q, id);
                        assert_eq!(v["state"], "leased", "{what}: the lease ran out: {v}");
                        v["lease_deadline"].as_u64() > Some(before)
                    });
                }
            }
            "open" => {
                std::fs::write(self.gates.path().join(a["gate"].as_str().unwrap()), "").unwrap();
            }
            "advance_ms" => self
                .clock
                .advance(Duration::from_millis(a["ms"].as_u64().unwrap())),
            "expect" => {
                let within = a["within_ms"].as_u64().map_or(WAIT, Duration::from_millis);
                let mut last = Value::Null;
                let met = holds_within(within, || {
                    let (s, v) = self.job(&q, id);
                    last = v;
                    s == 200 && matches(&a["job"], &last)
                });
                assert!(met, "{what}: not within {within:?}; the job: {last}");
            }
            "expect_dead" => {
                let want = a["error_contains"].as_str().unwrap();
                wait(&what, || {
                    let (_, v) = self.job(&q, id);
                    v["state"] == "dead"
                        && v["last_error"].as_str().is_some_and(|e| e.contains(want))
                });
            }
            "due_in" => {
                let (_, v) = self.job(&q, id);
                let now = self.clock.clock.now_ms();
                let due = v["due_at"].as_u64().unwrap();
                let (lo, hi) = (a["min_ms"].as_u64().unwrap(), a["max_ms"].as_u64().unwrap());
                assert!(
                    due >= now + lo && due <= now + hi,
                    "{what}: due in {} ms",
                    due as i64 - now as i64
                );
            }
            "stop" => {
                let worker = self.worker.as_mut().unwrap();
                worker.stop();
                // The worker has heard it before the held handlers may finish.
                std::thread::sleep(Duration::from_millis(300));
                assert!(!worker.exited(), "{what}: exited with handlers running");
                for gate in a["then_open"].as_array().unwrap() {
                    std::fs::write(self.gates.path().join(gate.as_str().unwrap()), "").unwrap();
                }
                wait(&what, || self.worker.as_mut().unwrap().exited());
            }
            "not_leased" => {
                let prefix = a["prefix"].as_str().unwrap();
                for n in 0..a["count"].as_u64().unwrap() {
                    let job = format!("{prefix}{n}");
                    wait(&format!("{what}: {job}"), || {
                        self.job(&q, &job).1["state"] == "scheduled"
                    });
                    assert!(!self.saw("start", &job, None), "{what}: {job} was started");
                }
            }
            "starts" => {
                let starts = self.starts();
                for (job, n) in a["counts"].as_object().unwrap() {
                    let seen = starts.iter().filter(|e| e["start"] == **job).count();
                    assert_eq!(seen as u64, n.as_u64().unwrap(), "{what}: starts of {job}");
                }
            }
            "share" => {
                let first = a["first"].as_u64().unwrap() as usize;
                let starts = self.starts();
                assert!(starts.len() >= first, "{what}");
                for (name, range) in a["ranges"].as_object().unwrap() {
                    let queue = &self.names[name];
                    let n = starts[..first]
                        .iter()
                        .filter(|e| e["queue"] == **queue)
                        .count();
                    let (lo, hi) = (range[0].as_u64().unwrap(), range[1].as_u64().unwrap());
                    assert!(
                        (lo..=hi).contains(&(n as u64)),
                        "{what}: {name} had {n} of the first {first} starts"
                    );
                }
            }
            other => panic!("{what}: no step {other} (workers.json's steps list it?)"),
        }
    }
}

/// How long a step waits for what it expects.
const WAIT: Duration = Duration::from_secs(20);

/// Waits up to [`WAIT`] for `f` to hold.
fn wait(what: &str, f: impl FnMut() -> bool) {
    assert!(holds_within(WAIT, f), "timed out after {WAIT:?}: {what}");
}

/// Every scenario with `lang`'s worker, on the embedded store and on Redis.
fn run_all(lang: Lang) {
    let redis = delayq_test_support::shared::redis();
    let ns = namespace();
    let dir = tempfile::tempdir().unwrap();
    let on_redis = ["--redis", &redis.url(), "--namespace", &ns];
    let suite = suite("workers.json");
    match lang {
        Lang::TypeScript => {
            crate::clients::typescript_built();
        }
        Lang::Go | Lang::Python | Lang::Rust => {}
    }
    let go = if lang == Lang::Go {
        build_go(dir.path())
    } else {
        PathBuf::new()
    };
    for store in [&[][..], &on_redis[..]] {
        let clock = SharedClock::new();
        let (var, file) = clock.env();
        let (_server, addr): (Killed, String) = spawn_serve(
            delayq(dir.path())
                .args(store)
                .args(["serve", "--listen", "127.0.0.1:0"])
                .env(var, file),
        );
        for sc in suite["scenarios"].as_array().unwrap() {
            let name = sc["name"].as_str().unwrap();
            let w = &sc["worker"];
            let tag = format!("{}-{lang:?}", namespace()).to_lowercase();
            let declared: Vec<(String, u32)> = match w.get("queues") {
                Some(qs) => qs
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            p[0].as_str().unwrap().to_owned(),
                            p[1].as_u64().unwrap() as u32,
                        )
                    })
                    .collect(),
                None => vec![("main".to_owned(), 1)],
            };
            let names: HashMap<String, String> = declared
                .iter()
                .map(|(q, _)| (q.clone(), format!("w-{q}-{tag}")))
                .collect();
            let settings = Settings {
                queues: declared
                    .iter()
                    .map(|(q, w)| (names[q].clone(), *w))
                    .collect(),
                lease_ms: w["lease_ms"].as_u64().unwrap(),
                concurrency: w["concurrency"].as_u64().unwrap() as usize,
            };
            let first = settings.queues[0].0.clone();
            let mut run = Run {
                addr: &addr,
                clock: &clock,
                lang,
                settings,
                gates: tempfile::tempdir().unwrap(),
                go: &go,
                events: Arc::default(),
                worker: None,
                names,
                first,
                cancelled_at: None,
                what: format!(
                    "{lang:?} worker, {name}, {}",
                    if store.is_empty() {
                        "embedded"
                    } else {
                        "Redis"
                    }
                ),
            };
            let steps = sc["steps"].as_array().unwrap();
            if !steps.iter().any(|s| s["do"] == "go") {
                run.start_worker();
            }
            for st in steps {
                run.step(st["do"].as_str().unwrap(), &st["args"]);
            }
        }
    }
}

#[test]
fn the_typescript_worker_keeps_the_worker_contract() {
    run_all(Lang::TypeScript);
}

#[test]
fn the_go_worker_keeps_the_worker_contract() {
    run_all(Lang::Go);
}

#[test]
fn the_python_worker_keeps_the_worker_contract() {
    run_all(Lang::Python);
}

#[test]
fn the_rust_consumer_over_http_keeps_the_worker_contract() {
    run_all(Lang::Rust);
}

#[test]
fn every_step_the_scenarios_use_is_documented() {
    let suite = suite("workers.json");
    let documented = suite["steps"].as_object().unwrap();
    for sc in suite["scenarios"].as_array().unwrap() {
        for st in sc["steps"].as_array().unwrap() {
            let op = st["do"].as_str().unwrap();
            assert!(
                documented.contains_key(op),
                "{}: step {op} is not in workers.json's steps",
                sc["name"]
            );
        }
    }
}
