//! Build facts for `delayq --version` and `/healthz`: the git commit and the build date (UTC),
//! from `DELAYQ_GIT_COMMIT` / `SOURCE_DATE_EPOCH` when set (package builds), else from git and
//! the clock.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let commit = std::env::var("DELAYQ_GIT_COMMIT").ok().or_else(|| {
        let o = Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()?;
        o.status
            .success()
            .then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    });
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
    println!(
        "cargo:rustc-env=DELAYQ_GIT_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
    println!("cargo:rustc-env=DELAYQ_BUILD_DATE={}", date(secs / 86_400));
    println!("cargo:rerun-if-env-changed=DELAYQ_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit rebuilds the version string (HEAD names the branch; its ref moves).
    if let Ok(o) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
    {
        let dir = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        if o.status.success() && !dir.is_empty() {
            println!("cargo:rerun-if-changed={dir}/HEAD");
            if let Ok(head) = std::fs::read_to_string(format!("{dir}/HEAD"))
                && let Some(r) = head.trim().strip_prefix("ref: ")
            {
                println!("cargo:rerun-if-changed={dir}/{r}");
            }
        }
    }
}

/// `YYYY-MM-DD` of a day number since 1970-01-01 (Howard Hinnant's civil_from_days).
fn date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
