//! `delayq worker` over several queues, on the embedded store it owns and through a `delayq
//! serve` (one claim over all of them): `--queue a:3 --queue
//! b:1` shares its claims by weight, `--strict` serves them in the order given; bad lists are
//! refused before anything runs, and other commands take one queue.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{Killed, delayq, spawn_serve, with_stdin};

fn fill(dir: &Path, queue: &str, n: usize) {
    let lines: String = (0..n)
        .map(|i| format!("{{\"id\":\"{queue}-{i}\",\"payload\":{i}}}\n"))
        .collect();
    let out = with_stdin(
        delayq(dir).args(["--queue", queue, "enqueue", "--jsonl"]),
        &lines,
    );
    assert!(out.status.success(), "{out:?}");
}

/// A fresh store with `n` jobs in each of `queues`, drained by [`drain`] with `args`.
fn fill_and_drain(queues: &[(&str, usize)], args: &[&str], strict: bool, n: usize) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    for (q, jobs) in queues {
        fill(tmp.path(), q, *jobs);
    }
    drain(tmp.path(), args, strict, n)
}

/// Runs a one-at-a-time worker of the queues `args` name (`--strict` with `strict`) until it
/// handled `n` jobs; answers each job's queue in the order handled.
fn drain(dir: &Path, args: &[&str], strict: bool, n: usize) -> Vec<String> {
    let log = dir.join("handled.txt");
    let _ = std::fs::remove_file(&log);
    let worker = Killed(
        delayq(dir)
            .args(args)
            .args(["worker", "--concurrency", "1", "--prefetch", "0", "--quiet"])
            .args(strict.then_some("--strict"))
            .arg("--exec")
            .arg(format!("echo \"$DELAYQ_QUEUE\" >> {}", log.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while read().lines().count() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{args:?}: {n} jobs not handled in 30 s; handled: {}",
            read().replace('\n', " ")
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &worker.0.id().to_string()])
        .status();
    read().lines().take(n).map(str::to_owned).collect()
}

#[test]
fn a_worker_shares_its_claims_by_weight() {
    let seen = fill_and_drain(
        &[("mails", 100), ("reports", 100)],
        &["--queue", "mails:3", "--queue", "reports:1"],
        false,
        80,
    );
    let mails = seen.iter().filter(|q| *q == "mails").count();
    let reports = seen.len() - mails;
    assert!(
        (54..=66).contains(&mails),
        "{mails} mails and {reports} reports of 80 (weights 3:1)"
    );
}

#[test]
fn a_strict_worker_serves_its_queues_in_order() {
    // Given as "urgent,bulk" then "later": three queues in that order.
    let seen = fill_and_drain(
        &[("urgent", 10), ("bulk", 10)],
        &["--queue", "urgent,bulk", "--queue", "later"],
        true,
        20,
    );
    assert!(seen[..10].iter().all(|q| q == "urgent"), "{seen:?}");
    assert!(seen[10..].iter().all(|q| q == "bulk"), "{seen:?}");
    // The order given decides, not the names.
    let seen = fill_and_drain(
        &[("urgent", 5), ("bulk", 5)],
        &["--queue", "bulk", "--queue", "urgent"],
        true,
        10,
    );
    assert!(seen[..5].iter().all(|q| q == "bulk"), "{seen:?}");
}

/// Through a `delayq serve` that owns the store, the worker claims over all its queues in one
/// call (`POST /v1/claim`): the server shares by weight (its fair-share account of the list) or
/// keeps the order strict, as the worker does on a store it reaches itself.
#[test]
fn through_a_server_a_worker_shares_and_orders_its_queues_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (_server, _) = spawn_serve(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    fill(dir, "mails", 100);
    fill(dir, "reports", 100);
    let seen = drain(
        dir,
        &["--queue", "mails:3", "--queue", "reports:1"],
        false,
        80,
    );
    let mails = seen.iter().filter(|q| *q == "mails").count();
    assert!(
        (54..=66).contains(&mails),
        "{mails} mails and {} reports of 80 (weights 3:1)",
        seen.len() - mails
    );
    fill(dir, "urgent", 10);
    fill(dir, "bulk", 10);
    let seen = drain(dir, &["--queue", "bulk", "--queue", "urgent"], true, 20);
    assert!(seen[..10].iter().all(|q| q == "bulk"), "{seen:?}");
    assert!(seen[10..].iter().all(|q| q == "urgent"), "{seen:?}");
}

#[test]
fn bad_queue_lists_are_refused_and_other_commands_take_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    for (args, says) in [
        (
            vec!["--queue", "a:0", "worker", "--exec", "true"],
            "expected 1-1000",
        ),
        (
            vec!["--queue", "a:x", "worker", "--exec", "true"],
            "expected 1-1000",
        ),
        (
            vec!["--queue", "a", "--queue", "a", "worker", "--exec", "true"],
            "named twice",
        ),
        (
            vec!["--queue", "a", "--queue", "b", "stats"],
            "only `delayq worker`",
        ),
        (
            vec!["--queue", "a:2", "enqueue", "--payload", "1"],
            "only `delayq worker`",
        ),
    ] {
        let o = delayq(dir).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!dir.join("delayq-data").exists(), "nothing was created");
}
