//! `delayq worker --exec … --keep-output` through a `delayq serve`: each successful
//! command's standard output is the job's result, shown by `delayq get` (text and JSON) while
//! the queue keeps done jobs; an output over the limit fails the job as dead, saying why.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Killed, delayq, spawn_serve};

fn ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn job(dir: &std::path::Path, id: &str) -> Value {
    let out = ok(delayq(dir).args(["--queue", "mail", "get", id, "--json"]));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn keep_output_stores_each_commands_output_as_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The server owns the store; the other commands (the worker too) go through it, so the
    // results travel over HTTP (the ack's `result`).
    let (_server, _) = spawn_serve(delayq(d).args(["serve", "--listen", "127.0.0.1:0"]));
    ok(delayq(d).args(["queue", "set", "mail", "--keep-done", "10m"]));
    for (id, payload) in [("m1", r#"{"to":"a@example.com"}"#), ("big", "{}")] {
        ok(delayq(d).args([
            "--queue",
            "mail",
            "enqueue",
            "--id",
            id,
            "--payload",
            payload,
        ]));
    }
    // The command prints a receipt as JSON for m1, and 70,000 bytes for `big`.
    let cmd = r#"if [ "$DELAYQ_JOB_ID" = big ]; then head -c 70000 /dev/zero | tr '\0' x; else printf '{"sent":true,"job":"%s"}' "$DELAYQ_JOB_ID"; fi"#;
    let worker = Killed(
        delayq(d)
            .args(["--queue", "mail", "worker", "--keep-output", "--quiet"])
            .args(["--exec", cmd])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while !(job(d, "m1")["state"] == "done" && job(d, "big")["state"] == "dead") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not settled: {} {}",
            job(d, "m1"),
            job(d, "big")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(worker);
    let m1 = job(d, "m1");
    assert_eq!(m1["result"], serde_json::json!({"sent": true, "job": "m1"}));
    let text = ok(delayq(d).args(["--queue", "mail", "get", "m1"]));
    assert!(
        text.contains(r#"result: {"sent":true,"job":"m1"}"#),
        "{text}"
    );
    let listed = ok(delayq(d).args(["--queue", "mail", "jobs", "list", "--state", "done"]));
    assert!(
        listed.contains("m1\tcompleted ") && listed.contains(r#"{"sent":true,"job":"m1"}"#),
        "{listed}"
    );
    let big = job(d, "big");
    let err = big["last_error"].as_str().unwrap_or_default();
    assert!(
        err.contains("70000 bytes") && err.contains("65535"),
        "{big}"
    );
    assert!(big.get("result").is_none(), "{big}");
}

#[test]
fn keep_output_needs_exec() {
    let dir = tempfile::tempdir().unwrap();
    let o = delayq(dir.path())
        .args(["worker", "--keep-output"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--exec"), "{err}");
}

/// `--keep-output` on a queue that keeps no done jobs says so at start (the outputs would be
/// dropped as the jobs end), naming the command that keeps them; on a queue that keeps done
/// jobs it says nothing.
#[test]
fn keep_output_without_retention_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(delayq(d).args(["queue", "set", "kept", "--keep-done", "10m"]));
    for (queue, warned) in [("bare", true), ("kept", false)] {
        let mut worker = delayq(d)
            .args([
                "--queue",
                queue,
                "worker",
                "--keep-output",
                "--exec",
                "true",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = std::io::BufReader::new(worker.stderr.take().unwrap());
        // Its first line is the warning or the start line; the start line comes either way.
        let mut seen = String::new();
        while !seen.contains("delayq worker:") {
            let mut line = String::new();
            if std::io::BufRead::read_line(&mut err, &mut line).unwrap() == 0 {
                break;
            }
            seen.push_str(&line);
        }
        drop(Killed(worker));
        assert_eq!(
            seen.contains("keeps no done jobs"),
            warned,
            "{queue}: {seen}"
        );
        if warned {
            assert!(seen.contains("delayq queue set bare --keep-done"), "{seen}");
        }
    }
}
