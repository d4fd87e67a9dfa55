//! `delayq batch`: a batch created from JSON lines on stdin, run by `delayq worker --exec`,
//! calls back once when its jobs are done — on the embedded store (finished in the step that
//! acks the last job) and on Redis (finished by the worker's sweep) — with the jobs' results;
//! a closed batch refuses more jobs.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{Killed, delayq, spawn_serve, until, with_stdin};

fn run(cmd: &mut Command, stdin: &str) -> (bool, String, String) {
    let o = with_stdin(cmd, stdin);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The whole story against the store `store` adds to each command (`--data`, `--redis`).
fn story(dir: &std::path::Path, store: &[&str]) {
    let cmd = || {
        let mut c = delayq(dir);
        c.args(store).args(["--queue", "mail"]);
        c
    };
    let lines = "{\"id\":\"m1\",\"payload\":{\"to\":\"a\"}}\n{\"id\":\"m2\",\"payload\":{\"to\":\"b\"},\"key\":\"acme\"}\n";
    let (ok, out, err) = run(
        cmd().args([
            "batch",
            "create",
            "--id",
            "report-1",
            "--on-complete",
            "mail-done",
            "--on-success",
            "mail-done",
            "--callback-payload",
            r#"{"report":1}"#,
            "--include-results",
        ]),
        lines,
    );
    assert!(ok, "{err}");
    assert!(out.starts_with("report-1\tcreated with 2 jobs"), "{out}");
    // Closed by the create call: no more jobs join.
    let (ok, _, err) = run(
        cmd().args(["batch", "add", "report-1"]),
        "{\"payload\":1}\n",
    );
    assert!(!ok && err.contains("closed"), "{err}");
    let worker = Killed(
        cmd()
            .args(["worker", "--keep-output", "--quiet"])
            .args(["--exec", r#"printf '{"sent":"%s"}' "$DELAYQ_JOB_ID""#])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let get = || {
        let o = cmd()
            .args(["batch", "get", "report-1", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&o.stdout).unwrap_or(Value::Null)
    };
    until("the batch is done", || get()["state"] == "done");
    drop(worker);
    let b = get();
    assert_eq!(
        (b["total"].clone(), b["succeeded"].clone()),
        (2.into(), 2.into())
    );
    let o = delayq(dir)
        .args(store)
        .args([
            "--queue",
            "mail-done",
            "get",
            "batch-report-1-complete",
            "--json",
        ])
        .output()
        .unwrap();
    let job: Value = serde_json::from_slice(&o.stdout).unwrap();
    let payload = match &job["payload"] {
        Value::String(s) => serde_json::from_str(s).unwrap(),
        v => v.clone(),
    };
    assert_eq!(payload["report"], 1);
    assert_eq!(payload["batch"]["succeeded"], 2);
    assert_eq!(
        payload["batch"]["results"]["m2"],
        serde_json::json!({"sent": "m2"})
    );
    let o = delayq(dir)
        .args(store)
        .args(["--queue", "mail-done", "get", "batch-report-1-success"])
        .output()
        .unwrap();
    assert!(o.status.success(), "none dead: on_success too");
}

#[test]
fn a_batch_calls_back_once_its_jobs_are_done_embedded() {
    let dir = tempfile::tempdir().unwrap();
    // The server owns the store (the worker and the other commands go through it, as they
    // do beside a running `delayq serve`).
    let (_server, _) = spawn_serve(delayq(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]));
    story(dir.path(), &[]);
}

#[test]
fn a_batch_calls_back_once_its_jobs_are_done_redis() {
    let dir = tempfile::tempdir().unwrap();
    let redis = delayq_test_support::shared::redis();
    let ns = delayq_test_support::shared::namespace();
    story(dir.path(), &["--redis", &redis.url(), "--namespace", &ns]);
}
