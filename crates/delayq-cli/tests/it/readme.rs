//! README.md's Quickstart and HTTP sections run as written, line by line, in a fresh directory
//! beside the server of set-up command 1 (`delayq serve` on the embedded store there): a line
//! that fails fails the test, so the first page cannot drift from what the binary does. The
//! only change made to a line is the server's address (the test's server listens on a free
//! port, not 7070); the worker line, which runs until Ctrl-C, gets a SIGTERM after a moment.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{SharedClock, delayq, spawn_serve, until};

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap()
}

/// The command lines of the first ```sh block after `heading`: continuation lines joined,
/// comment-only lines dropped.
fn block_after(text: &str, heading: &str) -> Vec<String> {
    let from = text
        .find(heading)
        .unwrap_or_else(|| panic!("{heading:?} in README.md"));
    let rest = &text[from..];
    let start = rest.find("```sh\n").expect("a sh block") + 6;
    let end = start + rest[start..].find("```").expect("its end");
    let mut lines = Vec::new();
    let mut cur = String::new();
    for l in rest[start..end].lines() {
        if cur.is_empty() && (l.trim().is_empty() || l.trim_start().starts_with('#')) {
            continue;
        }
        match l.strip_suffix('\\') {
            Some(head) => cur.push_str(head),
            None => {
                cur.push_str(l);
                lines.push(std::mem::take(&mut cur));
            }
        }
    }
    lines
}

/// The directory of the `delayq` binary, for PATH.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_delayq"))
        .parent()
        .unwrap()
        .to_owned()
}

fn sh(dir: &Path, line: &str, path: &str) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_DATA")
        .env_remove("DELAYQ_SERVER");
    c
}

#[test]
fn the_quickstart_and_http_sections_run_as_written() {
    let text = readme();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The server owns the store and its clock: the test moves it past b's 2-s delay.
    let clock = SharedClock::new();
    let (_server, addr) = spawn_serve(
        delayq(dir)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env(clock.env().0, clock.env().1),
    );
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let quick = block_after(&text, "## Quickstart");
    assert!(quick.len() >= 6, "{quick:?}");
    for line in &quick {
        if line.contains("delayq worker") {
            // Runs until Ctrl-C: let it work until both jobs are done (b is due in 2 s: the
            // clock moves there), then stop it as Ctrl-C would.
            let mut child = sh(dir, &format!("exec {line}"), &path).spawn().unwrap();
            clock.advance(Duration::from_millis(2000));
            until("the worker has done a and b", || {
                let o = sh(dir, "delayq stats --json", &path).output().unwrap();
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
                v["scheduled"] == 0 && v["due"] == 0 && v["leased"] == 0
            });
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let status = child.wait().unwrap();
            assert!(status.success(), "{line}: {status}");
            continue;
        }
        let o = sh(dir, line, &path).output().unwrap();
        assert!(
            o.status.success(),
            "README line failed: {line}\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The worker handled the two --jsonl jobs: nothing is left scheduled or dead.
    let o = sh(dir, "delayq stats --json", &path).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (
            v["scheduled"].as_u64(),
            v["due"].as_u64(),
            v["dead"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "{v}"
    );

    let http = block_after(&text, "Any other language, over HTTP");
    assert!(!http.is_empty());
    for line in &http {
        let line = line.replace("localhost:7070", &addr);
        let o = sh(dir, &format!("set -e; {line} --fail-with-body -sS"), &path)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "README line failed: {line}\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
