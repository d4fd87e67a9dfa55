//! A newcomer's path, as the README walks it, on the embedded default: `delayq serve` in one
//! terminal owns `./delayq-data`; in another, `enqueue`, `stats`, `get`, `cancel` and a
//! `delayq worker --exec` in the same directory go through that server. Read-only commands
//! never create a store.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Killed, delayq, spawn_serve, spawn_serve_line, text, until};

fn run(dir: &Path, args: &[&str]) -> Output {
    delayq(dir).args(args).output().unwrap()
}

#[test]
fn the_readme_flow_works_with_a_server_in_another_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (server, first) = spawn_serve_line(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    assert!(first.contains("embedded store"), "{first}");

    let o = run(
        dir,
        &[
            "enqueue",
            "--id",
            "order-42",
            "--delay",
            "1s",
            "--payload",
            r#"{"order":42}"#,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).starts_with("order-42\tcreated"), "{}", text(&o));
    let o = run(
        dir,
        &[
            "enqueue",
            "--id",
            "order-43",
            "--delay",
            "1h",
            "--payload",
            "x",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(dir, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert_eq!(v["scheduled"], 2, "{}", text(&o));
    let o = run(dir, &["get", "order-42", "--json"]);
    assert!(text(&o).contains("order-42"), "{}", text(&o));
    let o = run(dir, &["cancel", "order-43"]);
    assert_eq!(text(&o).trim(), "order-43\tcancelled", "{}", text(&o));

    // A worker in the same directory is a client of the server, not a second owner.
    let worker = delayq(dir)
        .args(["worker", "--exec", "cat >> handled.txt"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let handled = dir.join("handled.txt");
    while std::fs::read_to_string(&handled).unwrap_or_default() != r#"{"order":42}"# {
        assert!(Instant::now() < deadline, "the worker did not run the job");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(Killed(worker));
    let o = run(dir, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert_eq!(
        (
            v["scheduled"].as_u64(),
            v["due"].as_u64(),
            v["leased"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "{}",
        text(&o)
    );

    drop(server);
    assert!(
        !dir.join("delayq-data/SERVER").exists(),
        "the server's address is removed"
    );
    // With the server gone, the CLI owns the store itself again.
    let o = run(dir, &["get", "order-42"]);
    assert_eq!(o.status.code(), Some(3), "done and deleted: {}", text(&o));
}

/// A busy remote worker acks with its claims: 60 due jobs through `delayq worker` in the
/// server's directory all complete, with fewer ack requests than jobs (a finished job's ack
/// rides on the next claim; it goes alone only when nothing held is left to start).
#[test]
fn a_remote_worker_acks_with_its_claims() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (server, _) = spawn_serve_line(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    let jobs: String = (0..60)
        .map(|i| format!("{{\"id\":\"j{i}\",\"payload\":{i}}}\n"))
        .collect();
    let mut enq = delayq(dir)
        .args(["enqueue", "--jsonl"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut enq.stdin.take().unwrap(), jobs.as_bytes()).unwrap();
    assert!(enq.wait().unwrap().success());
    let worker = delayq(dir)
        .args(["worker", "--quiet", "--exec", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A hang guard, not a speed check (the jobs are done within a second; the worker's
    // shutdown waits for its long poll, up to 5 s).
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let o = run(dir, &["stats", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        let waiting = (
            v["scheduled"].as_u64(),
            v["due"].as_u64(),
            v["leased"].as_u64(),
        );
        if waiting == (Some(0), Some(0), Some(0)) {
            break;
        }
        assert!(Instant::now() < deadline, "not all done: {}", text(&o));
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(Killed(worker));
    let count = |route: &str| -> u64 {
        http_get(dir, "/metrics")
            .lines()
            .filter(|l| l.starts_with("delayq_http_request_duration_seconds_count"))
            .filter(|l| l.contains(&format!("route=\"{route}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let metrics = http_get(dir, "/metrics");
    assert!(
        metrics.contains("delayq_acked_total{queue=\"default\"} 60"),
        "{metrics}"
    );
    let (claims, batches, single) = (
        count("/v1/queues/{q}/claim"),
        count("/v1/queues/{q}/acks"),
        count("/v1/queues/{q}/jobs/{id}/ack"),
    );
    eprintln!("60 jobs: {claims} claims, {batches} ack batches, {single} single acks");
    assert_eq!(single, 0, "acks go with claims or in batches");
    assert!(
        claims + batches < 30,
        "{batches} ack requests and {claims} claims for 60 jobs"
    );
    drop(server);
}

/// Ctrl-C on a worker whose claim long-polls the server (5 s) stops it at once: the worker
/// cuts its poll short instead of waiting it out, and the cut poll leased nothing.
#[test]
fn a_remote_worker_stops_without_waiting_out_its_long_poll() {
    use std::io::BufRead;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (server, _) = spawn_serve_line(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    let mut worker = delayq(dir)
        .args(["worker", "--exec", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(worker.stderr.take().unwrap()).lines();
    let banner = lines.next().unwrap().unwrap();
    assert!(
        banner.starts_with("delayq worker: queue default"),
        "{banner}"
    );
    // Its first claim finds nothing due and waits on the server.
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = worker.wait().unwrap();
    let took = t.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_millis(2500),
        "the worker waited out its long poll: stopped {took:?} after SIGTERM"
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter()
            .any(|l| l.starts_with("delayq worker stopped: 0 acked")),
        "{rest:?}"
    );
    let o = run(dir, &["enqueue", "--id", "next", "--payload", "x"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(dir, &["stats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert_eq!(
        (v["due"].as_u64(), v["leased"].as_u64()),
        (Some(1), Some(0)),
        "{}",
        text(&o)
    );
    drop(server);
}

/// A GET to the server that owns `dir`'s store (its address from `delayq-data/SERVER`).
fn http_get(dir: &Path, path: &str) -> String {
    use std::io::{Read, Write};
    let url = std::fs::read_to_string(dir.join("delayq-data/SERVER")).unwrap();
    let addr = url
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn read_only_commands_never_create_a_store() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["stats"][..],
        &["get", "x"],
        &["dead", "list"],
        &["queue", "show", "q"],
    ] {
        let o = run(tmp.path(), args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("no delayq store at ./delayq-data"),
            "{}",
            text(&o)
        );
        assert!(
            !tmp.path().join("delayq-data").exists(),
            "{args:?} created a store"
        );
    }
}

#[test]
fn a_worker_whose_program_is_missing_touches_no_job() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = run(dir, &["enqueue", "--id", "j1", "--payload", "x"]);
    assert!(o.status.success(), "{}", text(&o));

    // Clearly missing at start: refused before anything is claimed.
    let o = run(dir, &["worker", "--exec", "./nonexistent.sh"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("./nonexistent.sh does not exist"),
        "{}",
        text(&o)
    );

    // Missing only when run (the shell answers 127): the job is given back, not failed,
    // and the worker stops.
    let o = delayq(dir)
        .args(["worker", "--exec", "sh -c 'exit 127'"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("gave 1 job(s) back"), "{}", text(&o));
    let o = run(dir, &["get", "j1", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["attempt"].as_u64()),
        (Some("scheduled"), Some(0)),
        "{v}"
    );
}

#[test]
fn the_worker_logs_one_line_per_job_as_text_or_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for id in ["ok-1", "bad-1"] {
        assert!(
            run(dir, &["enqueue", "--id", id, "--payload", "x"])
                .status
                .success()
        );
    }
    let handler = r#"test "$DELAYQ_JOB_ID" = ok-1"#;
    for (format, want) in [
        (
            "text",
            vec![
                "ok-1 attempt 1/10 acked",
                "bad-1 attempt 1/10 failed, retry by backoff",
            ],
        ),
        ("json", vec![r#""id":"ok-1""#, r#""outcome":"acked""#]),
    ] {
        let mut child = delayq(dir)
            .args(["worker", "--log-format", format, "--exec", handler])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The log as it comes: the worker is stopped once the lines looked for are there.
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let reader = {
            use std::io::BufRead;
            let stderr = child.stderr.take().unwrap();
            let log = log.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    log.lock().unwrap().push_str(&(line + "\n"));
                }
            })
        };
        until("the worker logged what the format shows", || {
            let l = log.lock().unwrap();
            want.iter().all(|w| l.contains(w))
        });
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        child.wait().unwrap();
        reader.join().unwrap();
        let err = log.lock().unwrap().clone();
        for w in &want {
            assert!(err.contains(w), "{format}: {w} missing in {err}");
        }
        if format == "json" {
            let line = err
                .lines()
                .find(|l| l.starts_with('{') && l.contains("ok-1"))
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["attempt"], 1);
            assert!(!err.contains('\u{1b}'), "no ANSI escapes off a terminal");
        }
        // Requeue ok-1 for the next format.
        assert!(
            run(dir, &["enqueue", "--id", "ok-1", "--payload", "x"])
                .status
                .success()
        );
    }
    let handled = dir.join("handled");
    let child = delayq(dir)
        .args(["worker", "--quiet", "--exec"])
        .arg(format!("touch {}", handled.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    until("the quiet worker handled ok-1", || handled.exists());
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let o = child.wait_with_output().unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("attempt"),
        "--quiet"
    );
}

#[test]
fn a_refused_serve_creates_no_store() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(tmp.path(), &["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("without a token"), "{}", text(&o));
    assert!(!tmp.path().join("delayq-data").exists());
}

#[test]
fn server_names_a_server_explicitly_with_its_token() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = dir.join("elsewhere");
    let (server, addr) = spawn_serve(delayq(dir).arg("--data").arg(&data).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--token",
        "s3cret",
    ]));
    let url = format!("http://{addr}");
    let o = run(
        dir,
        &["--server", &url, "enqueue", "--id", "a", "--payload", "x"],
    );
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o).contains("--server-token"), "{}", text(&o));
    let o = run(
        dir,
        &[
            "--server",
            &url,
            "--server-token",
            "s3cret",
            "enqueue",
            "--id",
            "a",
            "--payload",
            "x",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = delayq(dir)
        .env("DELAYQ_SERVER", &url)
        .env("DELAYQ_SERVER_TOKEN", "s3cret")
        .args(["get", "a", "--json"])
        .output()
        .unwrap();
    assert!(text(&o).contains("\"a\""), "{}", text(&o));
    assert!(!dir.join("delayq-data").exists(), "no local store was made");
    drop(server);
}

#[test]
fn empty_listings_say_so_json_commands_fail_in_json_and_bad_lines_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(
        run(
            dir,
            &["enqueue", "--id", "a", "--payload", "x", "--delay", "1h"]
        )
        .status
        .success()
    );
    // An empty listing says so on stderr; stdout stays empty for a pipe.
    for (args, says) in [
        (&["dead", "list"][..], "no dead jobs in queue default"),
        (
            &["jobs", "list", "--state", "due"][..],
            "no due jobs in queue default",
        ),
        (&["schedule", "list"][..], "no schedules in queue default"),
    ] {
        let o = run(dir, args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{args:?}: {}",
            text(&o)
        );
    }
    // Asked for JSON, an error is JSON on stderr, with the API's code.
    let o = run(dir, &["get", "nope", "--json"]);
    assert_eq!(o.status.code(), Some(3));
    let e: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(e["code"], "not_found", "{e}");
    let o = run(
        dir,
        &[
            "--redis",
            "redis://127.0.0.1:1",
            "--connect-timeout",
            "0s",
            "stats",
            "--json",
        ],
    );
    let e: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(e["code"], "unavailable", "{e}");
    // A bad --jsonl line: its number, the field and what it must be; nothing stored.
    for (line, says) in [
        (
            "{\"id\": 5, \"payload\": 1}",
            "line 1: field `id` must be a string, got 5",
        ),
        (
            "{\"id\": \"b\", \"payload\": 1, \"delay\": 5}",
            "unknown field `delay`",
        ),
        ("{\"id\": \"b\"}", "field `payload` is missing"),
        ("[1]", "expected a JSON object"),
    ] {
        let o = crate::common::with_stdin(delayq(dir).args(["enqueue", "--jsonl"]), line);
        assert_eq!(o.status.code(), Some(2), "{line}: {}", text(&o));
        assert!(text(&o).contains(says), "{line}: {}", text(&o));
    }
    let o = run(dir, &["get", "b", "--json"]);
    assert_eq!(o.status.code(), Some(3), "nothing stored");
}

#[test]
fn doctor_without_redis_checks_the_embedded_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // No store yet: said, exit 1, and nothing created.
    let o = run(dir, &["doctor"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no embedded store"), "{}", text(&o));
    assert!(!dir.join("delayq-data").exists());
    assert!(
        run(dir, &["enqueue", "--id", "a", "--payload", "x"])
            .status
            .success()
    );
    let o = run(dir, &["doctor"]);
    let out = text(&o);
    // (Only a nearly full disk under the test's directory may fail it.)
    assert!(
        o.status.code() == Some(0) || out.contains("FAIL  disk"),
        "{out}"
    );
    for line in [
        "ok    integrity    SQLite quick_check: ok",
        "ok    wal",
        "  disk ",
        "ok    owner        no process holds the store",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    // Beside the server that owns it: read-only, and it names the owner.
    let (_server, addr) = spawn_serve(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    let out = text(&run(dir, &["doctor"]));
    assert!(
        out.contains("held by delayq serve") && out.contains(&addr),
        "{out}"
    );
    // A damaged database file (its header overwritten) fails the check.
    drop(_server);
    let db = dir.join("delayq-data/delayq.sqlite3");
    let mut bytes = std::fs::read(&db).unwrap();
    for b in &mut bytes[..100] {
        *b = 0x5a;
    }
    std::fs::write(&db, bytes).unwrap();
    // (Pages in the write-ahead log would stand in for the damaged ones: drop it.)
    for f in ["delayq.sqlite3-wal", "delayq.sqlite3-shm"] {
        let _ = std::fs::remove_file(dir.join("delayq-data").join(f));
    }
    let o = run(dir, &["doctor"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("FAIL"), "{}", text(&o));
}
