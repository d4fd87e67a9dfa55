//! Spans exported over OTLP/HTTP to a real collector (test-support's, which decodes the
//! protobuf): an HTTP enqueue with a `traceparent` → the server's SERVER span and the `send`
//! span → a `delayq worker --exec` attempt's `process` span (its program continues under it),
//! a retry's second attempt, a push delivery's CLIENT span — all in the caller's trace; a job
//! without a context gets a process span of a fresh trace and stores none; `--trace-mode link`
//! links instead; a collector that is down costs jobs nothing and counts the dropped spans.

use std::process::{Command, Stdio};
use std::time::Duration;

use delayq_test_support::otlp::{Collector, SpanRecord};
use serde_json::{Value, json};

use crate::common::{Killed, delayq, free_port, request, spawn_serve, until};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";
const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const WAIT: Duration = Duration::from_secs(30);

fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Value {
    let (status, body) = request(addr, method, path, headers, body);
    assert!(status < 300, "{method} {path}: {status} {body}");
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

/// `delayq` exporting to `endpoint` quickly (a 50 ms batch delay instead of 5 s), as `service`.
fn exporting(dir: &std::path::Path, endpoint: &str, service: &str) -> Command {
    let mut c = delayq(dir);
    c.args(["--otlp-endpoint", endpoint])
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("OTEL_SERVICE_NAME", service);
    c
}

fn worker(mut c: Command, queue: &str, program: &str, extra: &[&str]) -> Killed {
    Killed(
        c.args(["--queue", queue])
            .args(extra)
            .args(["worker", "--exec", program])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn stop(k: &Killed) {
    // SIGTERM: the worker drains and flushes its spans before it exits.
    let _ = Command::new("kill")
        .args(["-TERM", &k.0.id().to_string()])
        .status();
}

fn process_of<'a>(spans: &'a [SpanRecord], id: &str, attempt: u32) -> Option<&'a SpanRecord> {
    spans.iter().find(|s| {
        s.kind == "consumer"
            && s.attr("messaging.message.id") == Some(id)
            && s.attr("delayq.attempt") == Some(&attempt.to_string())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_is_exported_from_the_enqueue_through_each_attempt_and_the_push() {
    let collector = Collector::start().await;
    let rx = delayq_test_support::receiver::Receiver::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let seen = dir.join("seen.txt");
    let target = rx.url("/ok");
    let (serve, addr, worker_a, worker_l) = tokio::task::block_in_place(|| {
        let (serve, addr) = spawn_serve(exporting(dir, &collector.url(), "api").args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--push",
            "--allow-private-targets",
        ]));
        http(
            &addr,
            "PUT",
            "/v1/queues/hooks",
            &[],
            r#"{"delivery": "push"}"#,
        );
        let fixed = json!({"kind": "fixed", "delay_ms": 10});
        let jobs = json!([
            {"id": "t1", "payload": 1},
            {"id": "flaky", "payload": 2, "backoff": fixed, "max_attempts": 3},
        ]);
        http(
            &addr,
            "POST",
            "/v1/queues/t/jobs",
            &[("traceparent", TP)],
            &jobs.to_string(),
        );
        http(
            &addr,
            "POST",
            "/v1/queues/t/jobs",
            &[],
            r#"{"id": "plain", "payload": 3}"#,
        );
        let plain = http(&addr, "GET", "/v1/queues/t/jobs/plain", &[], "");
        assert!(
            plain.get("traceparent").is_none(),
            "no context stored: {plain}"
        );
        http(
            &addr,
            "POST",
            "/v1/queues/l/jobs",
            &[("traceparent", TP)],
            r#"{"id": "linked", "payload": 4}"#,
        );
        let push = json!({"id": "p1", "payload": 5, "target": {"url": target}});
        http(
            &addr,
            "POST",
            "/v1/queues/hooks/jobs",
            &[("traceparent", TP)],
            &push.to_string(),
        );
        // The program fails the flaky job's first attempt and notes every TRACEPARENT.
        let program = format!(
            "echo \"$DELAYQ_JOB_ID $DELAYQ_ATTEMPT ${{TRACEPARENT:-none}}\" >> {}; \
             [ \"$DELAYQ_JOB_ID.$DELAYQ_ATTEMPT\" != flaky.1 ]",
            seen.display()
        );
        let a = worker(
            exporting(dir, &collector.url(), "worker"),
            "t",
            &program,
            &[],
        );
        let l = worker(
            exporting(dir, &collector.url(), "worker"),
            "l",
            &program,
            &["--trace-mode", "link"],
        );
        (serve, addr, a, l)
    });
    let spans = collector
        .wait_for("every attempt's process span, and the push", WAIT, |s| {
            ["t1", "plain", "linked", "p1"]
                .iter()
                .all(|id| process_of(s, id, 1).is_some())
                && process_of(s, "flaky", 2).is_some()
                && s.iter().any(|x| x.kind == "client")
        })
        .await;

    // The caller's request: a SERVER span by the route template, then the send span.
    let server = spans
        .iter()
        .find(|s| s.kind == "server" && s.trace_id == TRACE && s.parent.as_deref() == Some(CALLER))
        .expect("the request's server span, child of the caller's");
    assert_eq!(server.name, "POST /v1/queues/{q}/jobs");
    assert_eq!(server.attr("http.route"), Some("/v1/queues/{q}/jobs"));
    assert_eq!(server.attr("http.response.status_code"), Some("201"));
    assert_eq!(server.service.as_deref(), Some("api"));
    let send = spans
        .iter()
        .find(|s| s.name == "send t" && s.trace_id == TRACE)
        .expect("the send span");
    assert_eq!(send.kind, "producer");
    assert_eq!(send.parent.as_deref(), Some(server.span_id.as_str()));
    assert_eq!(send.attr("messaging.batch.message_count"), Some("2"));
    assert_eq!(send.attr("messaging.system"), Some("delayq"));

    // Each attempt: a process span under the send span, with the messaging attributes.
    let p = process_of(&spans, "t1", 1).unwrap();
    assert_eq!(p.name, "process t");
    assert_eq!(
        (p.trace_id.as_str(), p.parent.as_deref()),
        (TRACE, Some(send.span_id.as_str()))
    );
    assert_eq!(p.service.as_deref(), Some("worker"));
    assert_eq!(p.attr("messaging.destination.name"), Some("t"));
    assert_eq!(p.attr("messaging.operation.type"), Some("process"));
    assert!(
        p.attr("delayq.lateness_ms")
            .is_some_and(|l| l.parse::<u64>().is_ok()),
        "{p:?}"
    );
    assert!(p.attr("delayq.due_at").is_some());
    assert!(!p.error);
    let first = process_of(&spans, "flaky", 1).unwrap();
    let second = process_of(&spans, "flaky", 2).unwrap();
    assert!(
        first.error && first.attr("error.type").is_some(),
        "{first:?}"
    );
    assert!(!second.error, "{second:?}");
    assert_eq!(
        (first.trace_id.as_str(), second.trace_id.as_str()),
        (TRACE, TRACE)
    );
    assert_ne!(first.span_id, second.span_id);

    // The program ran under its attempt's span.
    let lines = std::fs::read_to_string(&seen).unwrap();
    let program_tp = |id: &str, attempt: u32| {
        let l = lines
            .lines()
            .find(|l| l.starts_with(&format!("{id} {attempt} ")))
            .unwrap_or_else(|| panic!("{id} {attempt} in {lines}"));
        l.rsplit(' ').next().unwrap().to_owned()
    };
    assert_eq!(program_tp("t1", 1), format!("00-{TRACE}-{}-01", p.span_id));
    assert_eq!(
        program_tp("flaky", 2),
        format!("00-{TRACE}-{}-01", second.span_id)
    );

    // Without a context: a fresh trace, a root span, and the program continues it.
    let plain = process_of(&spans, "plain", 1).unwrap();
    assert_ne!(plain.trace_id, TRACE);
    assert_eq!(plain.parent, None);
    assert!(program_tp("plain", 1).contains(&plain.trace_id));

    // --trace-mode link: its own trace, linked to the enqueue's send span.
    let linked = process_of(&spans, "linked", 1).unwrap();
    let send_l = spans.iter().find(|s| s.name == "send l").unwrap();
    assert_ne!(linked.trace_id, TRACE);
    assert_eq!(
        linked.links,
        vec![(TRACE.to_owned(), send_l.span_id.clone())]
    );

    // The push: a CLIENT span under its process span, and the target continues under it.
    let pushed = process_of(&spans, "p1", 1).unwrap();
    assert_eq!(
        (pushed.trace_id.as_str(), pushed.service.as_deref()),
        (TRACE, Some("api"))
    );
    let client = spans.iter().find(|s| s.kind == "client").unwrap();
    assert_eq!(client.parent.as_deref(), Some(pushed.span_id.as_str()));
    assert_eq!(client.name, "POST");
    assert_eq!(client.attr("http.request.method"), Some("POST"));
    assert_eq!(client.attr("http.response.status_code"), Some("200"));
    assert_eq!(client.attr("url.full"), Some(target.as_str()));
    let header = rx.requests()[0].header("traceparent").unwrap().to_owned();
    assert_eq!(header, format!("00-{TRACE}-{}-01", client.span_id));

    // The collector took everything: the drop counter is there, at 0.
    let (_, m) = tokio::task::block_in_place(|| request(&addr, "GET", "/metrics", &[], ""));
    assert!(
        m.lines().any(|l| l == "delayq_trace_spans_dropped_total 0"),
        "{m}"
    );

    stop(&worker_a);
    stop(&worker_l);
    drop((serve, addr));
}

#[test]
fn a_collector_that_is_down_costs_jobs_nothing_and_counts_the_dropped_spans() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Nothing listens there: every export is refused.
    let down = format!("http://127.0.0.1:{}", free_port());
    let (_serve, addr) =
        spawn_serve(exporting(dir, &down, "api").args(["serve", "--listen", "127.0.0.1:0"]));
    let jobs: Vec<Value> = (0..200)
        .map(|i| json!({"id": format!("j{i}"), "payload": i}))
        .collect();
    http(
        &addr,
        "POST",
        "/v1/queues/d/jobs",
        &[("traceparent", TP)],
        &Value::from(jobs).to_string(),
    );
    let _w = worker(exporting(dir, &down, "worker"), "d", "true", &[]);
    until("the worker finished all 200 jobs", || {
        let s = http(&addr, "GET", "/v1/queues/d/series", &[], "");
        s["totals"]["completed"].as_u64() == Some(200)
    });
    until("the server counts the spans it could not export", || {
        let (_, m) = request(&addr, "GET", "/metrics", &[], "");
        m.lines().any(|l| {
            l.starts_with("delayq_trace_spans_dropped_total")
                && l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
        })
    });
}

#[test]
fn a_collector_that_does_not_answer_fills_the_bounded_queue_and_the_rest_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Connections are taken (the listen backlog) and never answered: the first export hangs
    // for its 30 s timeout while the spans pile up against a queue of 16.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let (_serve, addr) = spawn_serve(
        exporting(dir, &endpoint, "api")
            .env("OTEL_BSP_MAX_QUEUE_SIZE", "16")
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "30000")
            .args(["serve", "--listen", "127.0.0.1:0"]),
    );
    for i in 0..40 {
        let job = json!({"id": format!("q{i}"), "payload": i});
        http(
            &addr,
            "POST",
            "/v1/queues/full/jobs",
            &[("traceparent", TP)],
            &job.to_string(),
        );
    }
    // Each request made a server span and a send span: far more than 16 fit.
    until("the spans the full queue turned away are counted", || {
        let (_, m) = request(&addr, "GET", "/metrics", &[], "");
        m.lines().any(|l| {
            l.strip_prefix("delayq_trace_spans_dropped_total ")
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v >= 40.0)
        })
    });
    drop(silent);
}
