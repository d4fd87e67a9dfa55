//! The `delayq` binary end to end against a throwaway Redis.

use std::process::{Command, Output, Stdio};

use delayq_test_support::RedisServer;

fn delayq(server: &RedisServer, args: &[&str]) -> Output {
    delayq_stdin(server, args, "")
}

fn delayq_stdin(server: &RedisServer, args: &[&str], stdin: &str) -> Output {
    delayq_on(server, "orders", args, stdin)
}

/// `delayq` on queue `queue` of `server`, with `stdin`.
fn delayq_on(server: &RedisServer, queue: &str, args: &[&str], stdin: &str) -> Output {
    crate::common::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--redis", &server.url(), "--queue", queue])
            .args(args),
        stdin,
    )
}

/// Jobs `<prefix><i>` for `i` in `ids`, due in `delay_ms`, as `enqueue --jsonl` reads them.
fn jsonl(prefix: &str, ids: std::ops::Range<u32>, delay_ms: u64) -> String {
    ids.map(|i| format!(r#"{{"id":"{prefix}{i}","payload":{{"n":{i}}},"delay_ms":{delay_ms}}}"#))
        .collect::<Vec<_>>()
        .join("\n")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stats(server: &RedisServer) -> serde_json::Value {
    let o = delayq(server, &["stats", "--json"]);
    assert!(o.status.success(), "{o:?}");
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn enqueue_get_cancel_stats() {
    let s = RedisServer::start();
    let o = delayq(
        &s,
        &[
            "enqueue",
            "--id",
            "o-1",
            "--delay",
            "30m",
            "--payload",
            "cancel o-1",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).starts_with("o-1\tcreated\tdue "),
        "{}",
        stdout(&o)
    );
    let again = delayq(
        &s,
        &["enqueue", "--id", "o-1", "--delay", "5s", "--payload", "x"],
    );
    assert!(
        stdout(&again).starts_with("o-1\texists"),
        "{}",
        stdout(&again)
    );
    let o = delayq(
        &s,
        &[
            "enqueue",
            "--at",
            "2030-01-01T00:00:00Z",
            "--max-attempts",
            "3",
            "--payload",
            "y",
        ],
    );
    assert!(o.status.success());
    let generated = stdout(&o).split('\t').next().unwrap().to_owned();

    let g = delayq(&s, &["get", "o-1", "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
    assert_eq!(info["state"], "scheduled");
    // The HTTP API's shape: text that is not JSON comes as payload_b64.
    assert_eq!(info["payload_b64"], "Y2FuY2VsIG8tMQ==", "{info}");
    let g = delayq(&s, &["get", &generated, "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
    assert_eq!(info["due_at"], 1_893_456_000_000u64);
    assert_eq!(info["max_attempts"], 3);

    let st = stats(&s);
    assert_eq!(
        (st["scheduled"].as_u64(), st["due"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(
        (st["leased"].as_u64(), st["dead"].as_u64()),
        (Some(0), Some(0))
    );
    let text = stdout(&delayq(&s, &["stats"]));
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("queue "), "{text}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..6], ["orders", "2", "0", "0", "0", "0"], "{text}");
    let other = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            &s.url(),
            "--queue",
            "mail",
            "enqueue",
            "--payload",
            "m",
        ])
        .output()
        .unwrap();
    assert!(other.status.success());
    let all: serde_json::Value =
        serde_json::from_slice(&delayq(&s, &["stats", "--all", "--json"]).stdout).unwrap();
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["mail", "orders"]);
    assert_eq!(stdout(&delayq(&s, &["stats", "--all"])).lines().count(), 3);

    let c = delayq(&s, &["cancel", "o-1"]);
    assert_eq!(c.status.code(), Some(0));
    assert!(stdout(&c).contains("cancelled"));
    let c = delayq(&s, &["cancel", "o-1"]);
    assert_eq!(c.status.code(), Some(3), "second cancel finds nothing");
    assert_eq!(delayq(&s, &["get", "o-1"]).status.code(), Some(3));
}

#[test]
fn payload_file_and_jsonl() {
    let s = RedisServer::start();
    let (_d, path) = delayq_test_support::temp_path("payload.bin");
    std::fs::write(&path, b"from a file").unwrap();
    let o = delayq(
        &s,
        &[
            "enqueue",
            "--id",
            "f",
            "--payload-file",
            path.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let input = (0..2500)
        .map(|i| format!(r#"{{"id":"j{i}","payload":{{"n":{i}}},"delay_ms":60000}}"#))
        .chain([r#"{"id":"at","payload":"text","run_at":"2030-01-01T00:00:00+01:00"}"#.into()])
        .collect::<Vec<_>>()
        .join("\n");
    let o = delayq_stdin(&s, &["enqueue", "--jsonl"], &input);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o).trim(), "created 2501\texisting 0");
    let again = delayq_stdin(&s, &["enqueue", "--jsonl"], &input);
    assert_eq!(stdout(&again).trim(), "created 0\texisting 2501");
    let g = delayq(&s, &["get", "j7", "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
    assert_eq!(
        info["payload"],
        serde_json::json!({"n": 7}),
        "the JSON payload itself"
    );
    let g = delayq(&s, &["get", "at", "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
    assert_eq!(info["due_at"], 1_893_452_400_000u64);
    let st = stats(&s);
    assert_eq!(
        st["scheduled"].as_u64().unwrap() + st["due"].as_u64().unwrap(),
        2502,
        "{st}"
    );
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let s = RedisServer::start();
    let cases: &[(&[&str], &str)] = &[
        (&["enqueue", "--delay=-5s", "--payload", "x"], ""),
        (&["enqueue", "--delay", "-5s", "--payload", "x"], ""),
        (&["enqueue", "--id", "no-payload"], ""),
        (&["enqueue", "--delay", "11y", "--payload", "x"], ""),
        (&["enqueue", "--at", "tomorrow", "--payload", "x"], ""),
        (&["enqueue", "--id", "a\u{1}b", "--payload", "x"], ""),
        (&["enqueue", "--id", &"x".repeat(257), "--payload", "x"], ""),
        (&["enqueue", "--max-attempts", "0", "--payload", "x"], ""),
        (
            &[
                "enqueue",
                "--payload",
                "x",
                "--payload-file",
                "/etc/hostname",
            ],
            "",
        ),
        (
            &["enqueue", "--jsonl"],
            "{\"id\":\"ok\",\"payload\":1}\n{\"payload\":1,\"extra\":true}\n",
        ),
        (
            &["enqueue", "--jsonl"],
            "{\"id\":\"ok\",\"payload\":1}\n{not json\n",
        ),
        (&["enqueue", "--jsonl"], "{\"payload\":1,\"delay_ms\":-1}\n"),
        (
            &["enqueue", "--jsonl"],
            "{\"payload\":1,\"delay_ms\":1,\"run_at\":5}\n",
        ),
    ];
    for (args, stdin) in cases {
        let o = delayq_stdin(&s, args, stdin);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(!o.stderr.is_empty());
    }
    // A negative delay is named as such, not swallowed as an unknown flag.
    let o = delayq(&s, &["enqueue", "--delay", "-5s", "--payload", "x"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is negative"),
        "{o:?}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--redis", &s.url(), "--queue", "bad{name}", "stats"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(s.command(&["DBSIZE"]), "0");
}

#[test]
fn dead_letter_commands() {
    let s = RedisServer::start();
    let o = delayq(
        &s,
        &[
            "enqueue",
            "--id",
            "bad",
            "--max-attempts",
            "1",
            "--payload",
            "p",
        ],
    );
    assert!(o.status.success());
    let w = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis",
            &s.url(),
            "--queue",
            "orders",
            "worker",
            "--exec",
            "printf 'é%.0s' $(seq 600) >&2; echo broken >&2; exit 7",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while stats(&s)["dead"] != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stop(w);
    let l = delayq(&s, &["dead", "list", "--json"]);
    let j: serde_json::Value = serde_json::from_str(stdout(&l).lines().next().unwrap()).unwrap();
    assert_eq!(j["id"], "bad");
    assert_eq!(j["attempt"], 1);
    // The tail of a long, non-ASCII stderr is kept, cut on a character boundary.
    let err = j["last_error"].as_str().unwrap();
    assert!(
        err.starts_with("exit status: 7: é") && err.ends_with("éébroken"),
        "{j}"
    );
    assert!(err.len() <= "exit status: 7: ".len() + 512, "{}", err.len());
    assert!(delayq(&s, &["dead", "requeue", "bad"]).status.success());
    assert_eq!(stats(&s)["due"], 1);
    assert_eq!(
        delayq(&s, &["dead", "requeue", "bad"]).status.code(),
        Some(4)
    );
    assert!(stdout(&delayq(&s, &["dead", "purge"])).contains("purged 0"));
}

fn stop(mut child: std::process::Child) {
    // SIGTERM for a graceful drain.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

#[test]
fn doctor_gives_a_verdict_per_check() {
    let good = RedisServer::start();
    let o = delayq(&good, &["doctor"]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    for check in ["version", "eviction", "persistence", "latency", "clock"] {
        assert!(text.contains(check), "{check} missing: {text}");
    }
    assert!(
        text.contains("WARN  persistence"),
        "no persistence is a warning: {text}"
    );
    let bad = RedisServer::start_with(&["--save", "", "--maxmemory-policy", "allkeys-lru"]);
    let o = delayq(&bad, &["doctor"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("FAIL  eviction"), "{}", stdout(&o));
    let durable = RedisServer::start_durable();
    assert!(stdout(&delayq(&durable, &["doctor"])).contains("ok    persistence"));
}

/// A queue with the one-delay lane: the doctor says whether most of its jobs are in the lane,
/// how many of its lane entries are cancelled jobs' tombstones, and whether its id index is compact,
/// from the buckets' encoding — here a server whose hashes stay listpacks only up to 4
/// entries, so 6,000 lane jobs (~6 a bucket) turn most buckets into hashtables.
#[test]
fn doctor_looks_at_each_lane_index() {
    let s = RedisServer::start_with(&["--hash-max-listpack-entries", "4"]);
    let o = delayq(&s, &["queue", "create", "orders", "--lane"]);
    assert!(o.status.success(), "{o:?}");
    let few = jsonl("o", 0..200, 1_800_000);
    let o = delayq_stdin(&s, &["enqueue", "--jsonl"], &few);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&delayq(&s, &["doctor"]));
    assert!(
        text.contains("ok    lane         queue orders: 200 lane jobs in its largest shard of 1; its index is compact up to ~4096 jobs a shard"),
        "{text}"
    );
    // Jobs due earlier than the lane's last and too soon for a time window (within two widths)
    // go beside it: most of the queue is not in the lane.
    let sooner = jsonl("s", 0..300, 5_000);
    let o = delayq_stdin(&s, &["enqueue", "--jsonl"], &sooner);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&delayq(&s, &["doctor"]));
    assert!(
        text.contains(
            "WARN  lane         queue orders: 200 of its 500 scheduled jobs are in its lane or \
             windows"
        ) && text.contains("its 10000-ms windows take only jobs due more than one width"),
        "{text}"
    );
    let many = jsonl("o", 200..6000, 1_800_000);
    let o = delayq_stdin(&s, &["enqueue", "--jsonl"], &many);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&delayq(&s, &["doctor"]));
    assert!(
        text.contains("WARN  lane         queue orders: ")
            && text.contains("sampled index buckets are hashtables"),
        "{text}"
    );
    assert!(text.contains("holds 6000 lane jobs"), "{text}");
    // A lane queue that cancels many of its jobs keeps their tombstones until their due time.
    let refunds = |args: &[&str], stdin: &str| delayq_on(&s, "refunds", args, stdin);
    let o = refunds(&["queue", "create", "refunds", "--lane"], "");
    assert!(o.status.success(), "{o:?}");
    let jobs = jsonl("r", 0..200, 1_800_000);
    let o = refunds(&["enqueue", "--jsonl"], &jobs);
    assert!(o.status.success(), "{o:?}");
    for i in 0..80 {
        let o = refunds(&["cancel", &format!("r{i}")], "");
        assert!(o.status.success(), "{o:?}");
    }
    // Jobs due earlier than the lane's last, further ahead than two widths: in time windows.
    let later = |args: &[&str], stdin: &str| delayq_on(&s, "later", args, stdin);
    let o = later(&["queue", "create", "later", "--lane"], "");
    assert!(o.status.success(), "{o:?}");
    for (prefix, delay) in [("a", 1_800_000), ("b", 600_000)] {
        let o = later(&["enqueue", "--jsonl"], &jsonl(prefix, 0..50, delay));
        assert!(o.status.success(), "{o:?}");
    }
    let text = stdout(&delayq(&s, &["doctor"]));
    assert!(
        text.contains("ok    lane         queue later: 100 lane jobs in its largest shard of 1 (50 of all its shards' in ")
            && text.contains(" time windows)"),
        "{text}"
    );
    assert!(
        text.contains(
            "ok    lane         queue refunds: 120 lane jobs in its largest shard of 1 (and 80 \
             tombstones of cancelled jobs, ~14 B each until a claim passes their due time)"
        ),
        "{text}"
    );
}

#[test]
fn demo_settles_every_order() {
    let s = RedisServer::start();
    let o = delayq(&s, &["demo", "--orders", "40"]);
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("every order was settled exactly once"),
        "{text}"
    );
    assert!(
        text.contains("dead letter                   cursed after 3 attempts"),
        "{text}"
    );
    assert!(text.contains("timeout lateness"), "{text}");
}

#[test]
fn serve_refuses_a_public_address_without_a_token() {
    let s = RedisServer::start();
    let o = delayq(&s, &["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("without a token"));
}

#[test]
fn without_redis_the_embedded_store_is_used_and_owned_by_one_process() {
    let (_d, data) = delayq_test_support::temp_path("data");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .env_remove("DELAYQ_REDIS_URL")
            .arg("--data")
            .arg(&data)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["enqueue", "--id", "e1", "--delay", "1h", "--payload", "x"]);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&o).starts_with("e1\tcreated"));
    let g = run(&["get", "e1", "--json"]);
    let info: serde_json::Value = serde_json::from_slice(&g.stdout).unwrap();
    assert_eq!(info["state"], "scheduled");
    // `serve` owns the directory; other commands go through it.
    let mut server = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .env_remove("DELAYQ_REDIS_URL")
        .arg("--data")
        .arg(&data)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = crate::common::first_line(&mut server);
    assert!(first.contains("embedded store"), "{first}");
    let through = run(&["stats", "--json"]);
    assert_eq!(through.status.code(), Some(0), "{through:?}");
    assert!(
        stdout(&through).contains("\"scheduled\":1"),
        "{}",
        stdout(&through)
    );
    stop(server);
    assert_eq!(stdout(&run(&["cancel", "e1"])).trim(), "e1\tcancelled");
}

#[test]
fn jobs_list_pages_by_cursor_and_queue_pause_resume() {
    let s = RedisServer::start();
    for i in 0..3 {
        let id = format!("p-{i}");
        let delay = format!("{}m", 10 + i);
        let o = delayq(
            &s,
            &["enqueue", "--id", &id, "--delay", &delay, "--payload", "x"],
        );
        assert!(o.status.success(), "{o:?}");
    }
    let o = delayq(
        &s,
        &["jobs", "list", "--state", "scheduled", "--limit", "2"],
    );
    assert!(o.status.success(), "{o:?}");
    let first: Vec<String> = stdout(&o)
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect();
    assert_eq!(first, ["p-0", "p-1"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let cursor = err
        .trim()
        .strip_prefix("more: --cursor ")
        .unwrap_or_else(|| panic!("{err}"));
    let o = delayq(
        &s,
        &["jobs", "list", "--state", "scheduled", "--cursor", cursor],
    );
    assert!(stdout(&o).starts_with("p-2\t"), "{}", stdout(&o));
    assert!(o.stderr.is_empty(), "the last page names no cursor");
    let o = delayq(&s, &["jobs", "list", "--state", "finished"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown state is a usage error"
    );
    let o = delayq(&s, &["queue", "pause", "orders"]);
    assert_eq!(stdout(&o), "orders\tpaused\n");
    assert_eq!(stats(&s)["paused"], true);
    let o = delayq(&s, &["queue", "show", "orders"]);
    assert!(stdout(&o).contains("\tpaused"), "{}", stdout(&o));
    let o = delayq(&s, &["queue", "resume", "orders"]);
    assert_eq!(stdout(&o), "orders\tresumed\n");
    assert_eq!(stats(&s)["paused"], false);
}

#[test]
fn keys_commands_list_cancel_and_move_one_keys_jobs() {
    let s = RedisServer::start();
    let lines = [
        r#"{"id":"u1-a","payload":1,"key":"user-1","delay_ms":3600000}"#,
        r#"{"id":"u1-b","payload":2,"key":"user-1","delay_ms":7200000}"#,
        r#"{"id":"u2-a","payload":3,"key":"user-2","delay_ms":3600000}"#,
    ]
    .join("\n");
    let o = delayq_stdin(&s, &["enqueue", "--jsonl"], &lines);
    assert!(o.status.success(), "{o:?}");
    let o = delayq(&s, &["keys", "jobs", "user-1", "--limit", "1"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).starts_with("u1-a\tscheduled\tdue "),
        "{}",
        stdout(&o)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("more: --cursor u1-a"), "{err}");
    let o = delayq(
        &s,
        &["keys", "jobs", "user-1", "--cursor", "u1-a", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["id"].as_str(), v["state"].as_str()),
        (Some("u1-b"), Some("scheduled"))
    );
    let due = |id: &str| {
        let o = delayq(&s, &["get", id, "--json"]);
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["due_at"]
            .as_u64()
            .unwrap()
    };
    let (a, b, other) = (due("u1-a"), due("u1-b"), due("u2-a"));
    let o = delayq(&s, &["keys", "reschedule", "user-1", "--shift", "-30m"]);
    assert_eq!(stdout(&o), "user-1\t2 rescheduled\n", "{o:?}");
    assert_eq!((due("u1-a"), due("u1-b")), (a - 1_800_000, b - 1_800_000));
    assert_eq!(due("u2-a"), other, "another key stays");
    let o = delayq(
        &s,
        &[
            "keys",
            "reschedule",
            "user-1",
            "--at",
            "2030-01-01T00:00:00Z",
        ],
    );
    assert_eq!(stdout(&o), "user-1\t2 rescheduled\n", "{o:?}");
    assert_eq!(due("u1-b"), 1_893_456_000_000);
    let o = delayq(&s, &["keys", "cancel", "user-1"]);
    assert_eq!(stdout(&o), "user-1\t2 cancelled\n", "{o:?}");
    let o = delayq(&s, &["keys", "jobs", "user-1"]);
    assert_eq!(stdout(&o), "");
    assert_eq!(stats(&s)["scheduled"], 1);
    // Bad input exits 2 and changes nothing.
    for bad in [
        vec!["keys", "reschedule", "user-2"],
        vec!["keys", "reschedule", "user-2", "--shift", "soon"],
        vec!["keys", "jobs", "user-2", "--state", "done"],
    ] {
        let o = delayq(&s, &bad);
        assert!(!o.status.success(), "{bad:?}: {o:?}");
    }
    assert_eq!(due("u2-a"), other);
}

#[test]
fn flows_and_after_make_jobs_wait_for_others() {
    let s = RedisServer::start();
    let flow = r#"{"jobs": [
        {"queue": "mail", "id": "email-7", "payload": {}, "depends_on": [{"queue": "orders", "id": "thumbs-7"}]},
        {"queue": "orders", "id": "thumbs-7", "payload": {}, "depends_on": ["resize-7"]},
        {"queue": "orders", "id": "resize-7", "payload": {}}
    ]}"#;
    let o = delayq_stdin(&s, &["flow", "create"], flow);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("mail/email-7\tcreated"), "{out}");
    assert!(lines[2].starts_with("orders/resize-7\tcreated"), "{out}");
    let state = |q: &str, id: &str| {
        let o = delayq_on(&s, q, &["get", id, "--json"], "");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state("orders", "thumbs-7"), "waiting");
    assert_eq!(state("mail", "email-7"), "waiting");
    let o = delayq(
        &s,
        &[
            "enqueue",
            "--id",
            "notify-7",
            "--after",
            "mail/email-7,resize-7",
            "--payload",
            "{}",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(state("orders", "notify-7"), "waiting");
    // A cycle is refused whole, nothing written.
    let cycle = r#"{"jobs": [
        {"queue": "orders", "id": "a", "payload": 1, "depends_on": ["b"]},
        {"queue": "orders", "id": "b", "payload": 1, "depends_on": ["a"]}
    ]}"#;
    let o = delayq_stdin(&s, &["flow", "create"], cycle);
    assert!(!o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cycle"), "{err}");
    let o = delayq(&s, &["get", "a"]);
    assert!(!o.status.success(), "a was not written");
}
