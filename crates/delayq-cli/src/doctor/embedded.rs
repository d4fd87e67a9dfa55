//! `delayq doctor` without `--redis`: checks the embedded store in `--data` read-only, beside
//! the process that owns it — SQLite's consistency check, the write-ahead log's size, the free
//! disk under it and which process holds it.

use std::path::Path;

use super::report::{Check, Verdict, report};

/// A write-ahead log past this is worth a word: checkpoints are not keeping up.
const WAL_WARN: u64 = 256 * 1024 * 1024;
/// Free disk under this fails: a full disk stops every commit.
const DISK_FAIL: u64 = 256 * 1024 * 1024;
/// Free disk under this warns.
const DISK_WARN: u64 = 2 * 1024 * 1024 * 1024;

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / 1_048_576.0)
}

/// Runs the checks and prints them; the exit code (1 when one fails).
pub(crate) fn run(dir: &Path, extra: Vec<Check>) -> anyhow::Result<u8> {
    let shown = dir.display();
    let health = match delayq_embedded::health(dir) {
        Ok(h) => h,
        Err(e) => {
            let c = Check::new(
                "integrity",
                Verdict::Fail,
                format!("cannot read the store in {shown}: {e} — restore from a backup"),
            );
            return Ok(report(&std::iter::once(c).chain(extra).collect::<Vec<_>>()));
        }
    };
    let Some(h) = health else {
        let c = Check::new(
            "store",
            Verdict::Fail,
            format!(
                "no embedded store in {shown}: `delayq serve` creates one there (or pass --data \
                 DIR; for Redis, --redis URL)"
            ),
        );
        return Ok(report(&std::iter::once(c).chain(extra).collect::<Vec<_>>()));
    };
    let mut checks = vec![Check::new(
        "store",
        Verdict::Ok,
        format!(
            "embedded store in {shown} (SQLite, WAL, synchronous=FULL), {}",
            mib(h.db_bytes)
        ),
    )];
    checks.push(if h.integrity == "ok" {
        Check::new("integrity", Verdict::Ok, "SQLite quick_check: ok")
    } else {
        Check::new(
            "integrity",
            Verdict::Fail,
            format!(
                "SQLite quick_check found: {} — restore from a backup",
                h.integrity
            ),
        )
    });
    checks.push(if h.wal_bytes > WAL_WARN {
        Check::new(
            "wal",
            Verdict::Warn,
            format!(
                "write-ahead log is {}: a long-running reader may be holding checkpoints back",
                mib(h.wal_bytes)
            ),
        )
    } else {
        Check::new(
            "wal",
            Verdict::Ok,
            format!("write-ahead log {}", mib(h.wal_bytes)),
        )
    });
    if let Ok(fs) = rustix::fs::statvfs(dir) {
        let free = fs.f_bavail.saturating_mul(fs.f_frsize);
        let (verdict, what) = match free {
            f if f < DISK_FAIL => (Verdict::Fail, "commits will fail when it runs out"),
            f if f < DISK_WARN => (Verdict::Warn, "little room left"),
            _ => (Verdict::Ok, "free"),
        };
        checks.push(Check::new("disk", verdict, format!("{} {what}", mib(free))));
    }
    let server = std::fs::read_to_string(crate::store::server_file(dir))
        .ok()
        .map(|u| u.trim().to_owned());
    checks.push(match (h.locked, h.owner_pid, server) {
        (false, _, _) => Check::new(
            "owner",
            Verdict::Ok,
            "no process holds the store (commands open it directly)",
        ),
        (true, pid, Some(url)) => Check::new(
            "owner",
            Verdict::Ok,
            format!(
                "held by delayq serve{} at {url}: commands go through it",
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
            ),
        ),
        (true, pid, None) => Check::new(
            "owner",
            Verdict::Warn,
            format!(
                "held by a delayq process{} that serves no HTTP API (a worker?): other commands \
                 cannot reach the store until it stops",
                pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
            ),
        ),
    });
    checks.extend(extra);
    Ok(report(&checks))
}
