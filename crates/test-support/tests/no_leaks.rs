//! Every server a test starts is gone when the test binary exits: this test runs another test
//! of this binary in a child process (which starts a plain server, a TLS server, a Sentinel set
//! and a Cluster, and reports their ports and directories), then checks that nothing answers on
//! those ports and the directories are removed. The shared servers too: a binary's under
//! `cargo test`, gone when it exits; a run's under nextest, one for every test process of the
//! run and gone when the runner exits.

use std::process::Command;
use std::time::{Duration, Instant};

use delayq_test_support::shared;

use delayq_test_support::cluster::RedisCluster;
use delayq_test_support::sentinel::SentinelSet;
use delayq_test_support::tls::TlsServer;
use delayq_test_support::{RedisServer, ping};

#[test]
#[ignore = "run by servers_are_gone_when_the_test_binary_exits"]
fn child_starts_servers() {
    let plain = RedisServer::start();
    let tls = TlsServer::start();
    let set = SentinelSet::start();
    let cluster = RedisCluster::start(3, 0);
    let mut ports = vec![plain.port(), tls.server.port(), tls.tls_port()];
    ports.extend([set.master.port(), set.replica.port(), set.sentinel_port()]);
    ports.extend(cluster.nodes.iter().map(RedisServer::port));
    let dirs = [plain.dir(), tls.server.dir(), set.master.dir()];
    println!(
        "PORTS {}",
        ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for d in dirs {
        println!("DIR {}", d.display());
    }
}

#[test]
fn servers_are_gone_when_the_test_binary_exits() {
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_starts_servers",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ports: Vec<u16> = out
        .lines()
        .find_map(|l| l.strip_prefix("PORTS "))
        .expect("the child reports its ports")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(ports.len() >= 9, "{ports:?}");
    for p in &ports {
        assert!(!ping(*p), "a server still answers on port {p}");
    }
    let dirs: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("DIR ")).collect();
    assert_eq!(dirs.len(), 3);
    for d in dirs {
        assert!(!std::path::Path::new(d).exists(), "{d} was not removed");
    }
}

#[test]
#[ignore = "run by shared_servers_are_one_per_run_and_gone_when_it_ends"]
fn child_uses_shared_servers() {
    let plain = shared::redis();
    let tls = shared::tls();
    assert_eq!(plain.command(&["PING"]), "PONG");
    println!(
        "SHARED {} {} {}",
        plain.port(),
        tls.tls_port(),
        tls.certs_dir().display()
    );
}

/// Runs `child_uses_shared_servers` in `runner` (a shell command in which `$CHILD` runs the
/// child test) and returns each child's line: plain port, TLS port, certificates' directory.
fn shared_lines(runner: &str, run_id: Option<&str>) -> Vec<Vec<String>> {
    let child = format!(
        "'{}' --ignored --exact child_uses_shared_servers --nocapture",
        std::env::current_exe().unwrap().display()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", runner]).env("CHILD", child);
    match run_id {
        Some(id) => cmd.env("NEXTEST_RUN_ID", id),
        None => cmd.env_remove("NEXTEST_RUN_ID"),
    };
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.lines()
        .filter_map(|l| l.strip_prefix("SHARED "))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Waits until nothing answers on `line`'s ports and its directory is gone (the watchdog
/// looks every 200 ms).
fn gone(line: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let ports: Vec<u16> = line[..2].iter().map(|p| p.parse().unwrap()).collect();
    while ports.iter().any(|p| ping(*p)) || std::path::Path::new(&line[2]).exists() {
        assert!(Instant::now() < deadline, "still there: {line:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn shared_servers_are_one_per_run_and_gone_when_it_ends() {
    // Under cargo test: each process its own, gone when it exits.
    let lines = shared_lines("eval \"$CHILD\" && eval \"$CHILD\"", None);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_ne!(lines[0], lines[1], "two processes shared a server");
    lines.iter().for_each(|l| gone(l));

    // Under nextest: the run's (`sh` plays the runner), the second process attaches to the
    // first one's while it is gone, and the servers go when the runner ends.
    let run = format!("no-leaks-{}", std::process::id());
    let lines = shared_lines(
        "eval \"$CHILD\" && eval \"$CHILD\" && eval \"$CHILD\"",
        Some(&run),
    );
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| *l == lines[0]), "{lines:?}");
    gone(&lines[0]);
    let described = std::env::temp_dir().join(format!("delayq-shared-{run}"));
    assert!(
        !described.exists(),
        "{} was not removed",
        described.display()
    );
}
