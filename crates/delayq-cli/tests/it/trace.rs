//! A job's W3C trace context end to end: in from an HTTP enqueue's `traceparent` header (or
//! the job's own field, or `delayq enqueue`'s environment), shown by `GET …/jobs/{id}`, out to
//! a `delayq worker --exec` program as `TRACEPARENT` (same trace, the attempt's own span) and
//! to a push target as the `traceparent` header.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Killed, delayq, request, spawn_serve, until};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let (status, body) = request(addr, method, path, headers, body);
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn a_trace_goes_from_the_enqueue_to_the_worker_program() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_server, addr) = spawn_serve(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    // The header gives the context; a job's own field wins; a bad header is ignored.
    let body = json!([{"id": "from-header", "payload": 1}, {"id": "own", "payload": 2,
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}]);
    let (s, v) = http(
        &addr,
        "POST",
        "/v1/queues/t/jobs",
        &[("traceparent", TP), ("tracestate", "congo=t61rcWkgMzE")],
        &body.to_string(),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = http(
        &addr,
        "POST",
        "/v1/queues/t/jobs",
        &[("traceparent", "00-not-a-trace-01")],
        r#"{"id": "bad-header", "payload": 3}"#,
    );
    assert_eq!(s, 201, "an invalid header is ignored: {v}");
    let (s, v) = http(
        &addr,
        "POST",
        "/v1/queues/t/jobs",
        &[],
        r#"{"id": "bad-field", "payload": 4, "traceparent": "00-nope"}"#,
    );
    assert_eq!((s, v["code"].as_str()), (400, Some("invalid_trace")), "{v}");
    let (_, v) = http(&addr, "GET", "/v1/queues/t/jobs/bad-field", &[], "");
    assert_eq!(v["code"], "not_found", "a refused job writes nothing");

    let (_, job) = http(&addr, "GET", "/v1/queues/t/jobs/from-header", &[], "");
    assert_eq!(job["traceparent"], TP, "{job}");
    assert_eq!(job["tracestate"], "congo=t61rcWkgMzE");
    let (_, own) = http(&addr, "GET", "/v1/queues/t/jobs/own", &[], "");
    assert!(
        own["traceparent"]
            .as_str()
            .unwrap()
            .contains("0af7651916cd43dd")
    );
    let (_, bad) = http(&addr, "GET", "/v1/queues/t/jobs/bad-header", &[], "");
    assert!(bad.get("traceparent").is_none(), "{bad}");

    // `delayq enqueue` takes TRACEPARENT from its environment.
    let o = delayq(dir)
        .args([
            "--queue",
            "t",
            "enqueue",
            "--id",
            "from-env",
            "--payload",
            "5",
        ])
        .env("TRACEPARENT", TP)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, env_job) = http(&addr, "GET", "/v1/queues/t/jobs/from-env", &[], "");
    assert_eq!(env_job["traceparent"], TP, "{env_job}");

    // The worker's program sees the job's trace under the attempt's own span.
    let out = dir.join("seen.txt");
    let program = format!(
        "echo \"$DELAYQ_JOB_ID ${{TRACEPARENT:-none}} ${{TRACESTATE:-none}}\" >> {}",
        out.display()
    );
    let worker = Killed(
        delayq(dir)
            .args([
                "--queue",
                "t",
                "worker",
                "--log-format",
                "json",
                "--exec",
                &program,
            ])
            .env(
                "TRACEPARENT",
                "00-11111111111111111111111111111111-2222222222222222-01",
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = || std::fs::read_to_string(&out).unwrap_or_default();
    until("the worker ran the four jobs", || {
        lines().lines().count() >= 4
    });
    let _ = Command::new("kill")
        .args(["-TERM", &worker.0.id().to_string()])
        .status();
    let seen = lines();
    let line = |id: &str| {
        seen.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("{id} in {seen}"))
            .to_owned()
    };
    let header = line("from-header");
    let tp = header.split(' ').nth(1).unwrap();
    assert!(tp.starts_with(&format!("00-{TRACE}-")), "{header}");
    assert_ne!(
        tp, TP,
        "the program's parent is the attempt's span, not the enqueuer's"
    );
    assert!(header.ends_with(" congo=t61rcWkgMzE"), "{header}");
    // A job without a context: none, not the worker's own environment's.
    assert_eq!(line("bad-header"), "bad-header none none");
    assert!(line("from-env").contains(TRACE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_carries_the_trace_to_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rx = delayq_test_support::receiver::Receiver::start().await;
    let (_server, addr) = tokio::task::block_in_place(|| {
        spawn_serve(delayq(dir).args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--push",
            "--allow-private-targets",
        ]))
    });
    let url = rx.url("/ok");
    tokio::task::block_in_place(|| {
        let (s, v) = http(
            &addr,
            "PUT",
            "/v1/queues/hooks",
            &[],
            r#"{"delivery": "push"}"#,
        );
        assert_eq!(s, 200, "{v}");
        let job = json!({"id": "p1", "payload": {"n": 1}, "target": {"url": url}});
        let (s, v) = http(
            &addr,
            "POST",
            "/v1/queues/hooks/jobs",
            &[("traceparent", TP)],
            &job.to_string(),
        );
        assert_eq!(s, 201, "{v}");
        let job = json!({"id": "p2", "payload": {"n": 2}, "target": {"url": url}});
        let (s, v) = http(
            &addr,
            "POST",
            "/v1/queues/hooks/jobs",
            &[],
            &job.to_string(),
        );
        assert_eq!(s, 201, "{v}");
        until("both pushes arrive", || rx.requests().len() >= 2);
    });
    let reqs = rx.requests();
    let by = |id: &str| {
        reqs.iter()
            .find(|r| r.header("webhook-id") == Some(id))
            .unwrap()
    };
    let tp = by("p1").header("traceparent").unwrap();
    assert!(tp.starts_with(&format!("00-{TRACE}-")), "{tp}");
    assert_ne!(tp, TP, "the request's own span");
    assert_eq!(by("p2").header("traceparent"), None);
}
