//! `delayq worker --exec` and a job's `timeout_ms`: the command is stopped with SIGTERM at the
//! timeout and, when it ignores that, killed with SIGKILL after the grace; the attempt fails
//! with `timeout`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use delayq_test_support::RedisServer;

fn delayq(url: &str, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--redis", url, "--queue", "slow"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn alive(pid: &str) -> bool {
    // A zombie is gone for this purpose: it runs nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn a_command_past_its_timeout_gets_sigterm_then_sigkill() {
    let redis = RedisServer::start();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    delayq(
        &url,
        &[
            "enqueue",
            "--id",
            "stuck",
            "--payload",
            "x",
            "--timeout",
            "300ms",
            "--max-attempts",
            "1",
        ],
    );
    // The command ignores SIGTERM (as a stuck program might), records its pid and hangs.
    let cmd = format!(
        "trap '' TERM; echo $$ > {}; exec sleep 60",
        pidfile.display()
    );
    let mut worker = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "--redis", &url, "--queue", "slow", "worker", "--exec", &cmd, "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let dead = loop {
        let out = delayq(&url, &["get", "stuck", "--json"]);
        if out.contains("\"dead\"") {
            break out;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "not dead: {out}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(dead.contains("timeout"), "{dead}");
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    assert!(
        alive(&pid),
        "SIGTERM is ignored: the command is still there within the grace"
    );
    let killed = Instant::now();
    while alive(&pid) {
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "SIGKILL after the grace"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let _ = worker.wait();
    let _ = Path::new(&pidfile);
}

/// `delayq cancel --running` on a job whose command runs: the command's group gets SIGTERM at
/// once (a command that obeys stops), then SIGKILL after `--kill-after` (one that ignores
/// SIGTERM is killed); both jobs end cancelled — gone, never run again.
#[test]
fn a_command_cancelled_while_it_runs_is_stopped() {
    let redis = RedisServer::start();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    for (id, how) in [("obeys", "plain"), ("stubborn", "stubborn")] {
        delayq(&url, &["enqueue", "--id", id, "--payload", how]);
    }
    // The payload says whether the command ignores SIGTERM; it records its pid and hangs.
    let cmd = format!(
        "p=$(cat); if [ \"$p\" = stubborn ]; then trap '' TERM; fi; \
         echo $$ > {}/$DELAYQ_JOB_ID.pid; exec sleep 60",
        dir.path().display()
    );
    let mut worker = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--redis", &url, "--queue", "slow", "worker", "--exec", &cmd])
        .args(["--quiet", "--concurrency", "2", "--kill-after", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid_of = |id: &str| {
        let t0 = Instant::now();
        loop {
            if let Ok(p) = std::fs::read_to_string(dir.path().join(format!("{id}.pid")))
                && !p.trim().is_empty()
            {
                return p.trim().to_owned();
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "{id} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let (obeys, stubborn) = (pid_of("obeys"), pid_of("stubborn"));
    for id in ["obeys", "stubborn"] {
        let out = delayq(&url, &["cancel", id, "--running"]);
        assert!(out.contains("cancelling"), "{out}");
    }
    let asked = Instant::now();
    while alive(&obeys) {
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "the obeying command stops on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        alive(&stubborn),
        "the stubborn one outlives SIGTERM until --kill-after"
    );
    while alive(&stubborn) {
        assert!(
            asked.elapsed() < Duration::from_secs(8),
            "SIGKILL after --kill-after"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        asked.elapsed() >= Duration::from_millis(900),
        "not before --kill-after"
    );
    for id in ["obeys", "stubborn"] {
        let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--redis", &url, "--queue", "slow", "get", id])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{id} is gone");
    }
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let _ = worker.wait();
}
