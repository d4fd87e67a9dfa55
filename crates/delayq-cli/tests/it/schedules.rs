//! Schedules without a leader, end to end: a 1-second cron schedule served by two, then five
//! `delayq serve` processes on one Redis for eight seconds of a clock the test moves, drained
//! by a consumer. Every fire is
//! handled exactly once (no second missing, none twice) and none before its fire time. Also
//! `delayq schedule set|list|rm` and the HTTP endpoints' bad input.

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Clock as _, Consumer, ConsumerOptions, Failure, Job, QueueName};
use delayq_test_support::RedisServer;
use serde_json::{Value, json};

use crate::common::{Killed, SharedClock, request, spawn_serve, until};

/// `delayq serve` on a free port over `redis`, on `clock`; returns it and its `host:port`.
fn serve(redis: &str, clock: &SharedClock) -> (Killed, String) {
    let (var, file) = clock.env();
    spawn_serve(
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--redis", redis, "serve", "--listen", "127.0.0.1:0"])
            .env(var, file),
    )
}

fn http(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, text) = request(addr, method, path, &[], &body);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_then_five_servers_fire_each_second_exactly_once() {
    let redis = RedisServer::start();
    let url = redis.url();
    // Every process reads Redis's clock plus this test clock's offset; each step moves them
    // all a second on, so every second is one race between the tickers (all woken by the
    // move at once): four with two servers, four with five, in well under a second.
    let clock = SharedClock::new();
    let mut servers: Vec<(Killed, String)> = (0..2).map(|_| serve(&url, &clock)).collect();
    let addr = servers[0].1.clone();
    let (s, v) = http(
        &addr,
        "PUT",
        "/v1/queues/beat/schedules/sec",
        Some(json!({"cron": "* * * * * *", "tz": "Europe/Paris", "payload": {"k": 1}})),
    );
    assert_eq!(s, 200, "{v}");
    assert!(v["next_fire"].as_u64().is_some(), "{v}");

    // A consumer records each job's fire time (from its id) and claim time (store clock).
    let seen: Arc<Mutex<HashMap<u64, (u32, u64)>>> = Arc::default();
    let backend = delayq_redis::RedisBackend::connect(&url).await.unwrap();
    backend.drive_clock(clock.clock.clone());
    let queue = QueueName::new("beat").unwrap();
    let consumer = Consumer::new(backend, queue, ConsumerOptions::default()).unwrap();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let log = seen.clone();
    let run = tokio::spawn(consumer.run(
        move |j: Job| {
            let fire: u64 = j.id.as_str().strip_prefix("sec@").unwrap().parse().unwrap();
            let claimed = j.lease_deadline_ms - j.lease.as_millis() as u64;
            let mut m = log.lock().unwrap();
            let e = m.entry(fire).or_insert((0, claimed));
            e.0 += 1;
            e.1 = e.1.min(claimed);
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    // One second on, then until the second just passed has been fired and handled.
    let step = async |servers: usize| {
        clock.advance(Duration::from_secs(1));
        let second = clock.clock.now_ms() / 1000 * 1000;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !seen.lock().unwrap().contains_key(&second) {
            assert!(
                std::time::Instant::now() < deadline,
                "the fire of {second} was not handled with {servers} servers"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    for _ in 0..4 {
        step(2).await;
    }
    servers.extend((0..3).map(|_| serve(&url, &clock)));
    for _ in 0..4 {
        step(5).await;
    }
    let (s, _) = http(&addr, "DELETE", "/v1/queues/beat/schedules/sec", None);
    assert_eq!(s, 200);
    drop(servers);
    stop.send(true).unwrap();
    run.await.unwrap().unwrap();

    let seen = seen.lock().unwrap();
    let mut fires: Vec<u64> = seen.keys().copied().collect();
    fires.sort_unstable();
    assert!(fires.len() >= 8, "{} fires in 8 s", fires.len());
    let twice: Vec<_> = seen.iter().filter(|(_, (n, _))| *n != 1).collect();
    assert!(twice.is_empty(), "fires handled more than once: {twice:?}");
    let gaps: Vec<_> = fires.windows(2).filter(|w| w[1] - w[0] != 1000).collect();
    assert!(gaps.is_empty(), "missing seconds: {gaps:?}");
    let early: Vec<_> = seen.iter().filter(|(f, (_, c))| c < *f).collect();
    assert!(early.is_empty(), "claimed before the fire time: {early:?}");
}

#[test]
fn the_cli_and_the_api_refuse_bad_schedules() {
    let redis = RedisServer::start();
    let url = redis.url();
    let cli = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--redis", &url, "--queue", "reports"])
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    let (code, out) = cli(&[
        "schedule",
        "set",
        "nightly",
        "--cron",
        "30 2 * * *",
        "--tz",
        "Europe/Paris",
        "--payload",
        "run",
        "--catch-up",
        "one",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nightly\tnext "), "{out}");
    let (code, out) = cli(&["schedule", "set", "often", "--every", "30s"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = cli(&["schedule", "list"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("nightly\tcron \"30 2 * * *\" Europe/Paris"),
        "{out}"
    );
    assert!(out.contains("often\tevery 30000 ms"), "{out}");
    for bad in [
        vec![
            "schedule",
            "set",
            "x",
            "--cron",
            "30 2 * * *",
            "--tz",
            "Mars/Olympus",
        ],
        vec!["schedule", "set", "x", "--cron", "not a cron"],
        vec!["schedule", "set", "x", "--every", "10ms"],
        vec!["schedule", "set", "x@y", "--every", "1m"],
        vec![
            "schedule",
            "set",
            "x",
            "--every",
            "1m",
            "--catch-up",
            "some",
        ],
    ] {
        let (code, out) = cli(&bad);
        assert_ne!(code, 0, "{bad:?}: {out}");
        assert!(out.contains("invalid schedule"), "{bad:?}: {out}");
    }
    let (code, out) = cli(&["schedule", "rm", "often"]);
    assert_eq!(code, 0, "{out}");
    let (code, _) = cli(&["schedule", "rm", "often"]);
    assert_eq!(code, 1);
    let (_, out) = cli(&["schedule", "list"]);
    assert_eq!(out.lines().count(), 1, "{out}");

    let (_server, addr) = serve(&url, &SharedClock::new());
    let put = |body: Value| http(&addr, "PUT", "/v1/queues/reports/schedules/api", Some(body));
    for bad in [
        json!({"cron": "* * *", "payload": 1}),
        json!({"cron": "0 9 * * *", "tz": "Nowhere/City", "payload": 1}),
        json!({"every_ms": 5, "payload": 1}),
        json!({"cron": "0 9 * * *", "every_ms": 60000, "payload": 1}),
        json!({"payload": 1}),
        json!({"every_ms": 60000, "payload": 1, "catch_up": "sometimes"}),
    ] {
        let (s, v) = put(bad.clone());
        assert_eq!(
            (s, v["code"].as_str()),
            (400, Some("invalid_schedule")),
            "{bad}: {v}"
        );
    }
    let (s, v) = http(&addr, "GET", "/v1/queues/reports/schedules/api", None);
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")), "{v}");
    let (s, v) = put(json!({"every_ms": 60000, "payload": {"a": 1}, "catch_up": "all"}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["payload"], json!({"a": 1}));
    assert_eq!(v["catch_up"], "all");
    let (_, v) = http(&addr, "GET", "/v1/queues/reports/schedules", None);
    let names: Vec<&str> = v["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api", "nightly"], "{v}");
    let (s, _) = http(&addr, "GET", "/v1/queues/reports/schedules/bad@name", None);
    assert_eq!(s, 400);
}

/// Where Debian's `faketime` package puts the library that shifts a process's clock.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Fire times of schedule `name` stored in queue `q` (scheduled, not yet claimed), sorted.
fn fires(redis: &RedisServer, q: &str, name: &str) -> Vec<u64> {
    let listed = redis.command(&["ZRANGE", &format!("dq:{{{q}}}:sched"), "0", "-1"]);
    let mut out: Vec<u64> = listed
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix(&format!("{name}@"))
                .map(str::to_owned)
        })
        .map(|t| t.parse().unwrap())
        .collect();
    out.sort_unstable();
    out
}

/// Two schedulers on one Redis, one whose host clock is 120 s ahead (then behind): every
/// fire of an every-second schedule is enqueued exactly once — none skipped as "missed", none
/// twice — because fire times are planned on Redis's clock, not the hosts'.
#[test]
fn a_skewed_scheduler_neither_skips_nor_doubles_a_fire() {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "install Debian's faketime package (scripts/test does)"
    );
    let redis = RedisServer::start();
    let url = redis.url();
    // Both schedulers read Redis's clock plus this test clock's offset (their host clocks stay
    // skewed): the test moves it a second at a time instead of waiting for seconds to pass.
    let clock = SharedClock::new();
    let (var, file) = clock.env();
    for (q, skew) in [("ahead", "+120s"), ("behind", "-120s")] {
        let _right = serve(&url, &clock);
        // The schedule is created through the skewed server: its first fire too is planned on
        // Redis's clock.
        let (_skewed, addr) = spawn_serve(
            Command::new(env!("CARGO_BIN_EXE_delayq"))
                .env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME", skew)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
                .env(var, file)
                .args(["--redis", &url, "serve", "--listen", "127.0.0.1:0"]),
        );
        let (s, v) = http(
            &addr,
            "PUT",
            &format!("/v1/queues/{q}/schedules/sec"),
            Some(json!({"every_ms": 1000, "payload": 1, "catch_up": "none"})),
        );
        assert_eq!(s, 200, "{v}");
        let first = v["next_fire"].as_u64().unwrap();
        for n in 0..3 {
            clock.advance(Duration::from_secs(1));
            until(&format!("{q}: fire {n} enqueued"), || {
                fires(&redis, q, "sec").contains(&(first + n * 1000))
            });
        }
        let got = fires(&redis, q, "sec");
        assert!(got.len() >= 3, "{q}: {got:?}");
        let gaps: Vec<_> = got.windows(2).filter(|w| w[1] - w[0] != 1000).collect();
        assert!(
            gaps.is_empty(),
            "{q} ({skew}): fires skipped or doubled: {got:?}"
        );
        // None planned ahead of the store's clock.
        let now = redis.command(&["TIME"]);
        let secs: u64 = now.lines().next().unwrap().trim().parse().unwrap();
        let store_ms = secs * 1000 + clock.clock.offset().as_millis() as u64;
        assert!(
            *got.last().unwrap() <= store_ms + 1000,
            "{got:?} at {store_ms}"
        );
    }
}
