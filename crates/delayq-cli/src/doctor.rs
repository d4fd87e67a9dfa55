//! `delayq doctor`: checks the Redis it is pointed at and says in plain words what is wrong.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verdict {
    /// Fine.
    Ok,
    /// Works, with a caveat worth reading.
    Warn,
    /// delayq's guarantees do not hold on this server.
    Fail,
}

/// One check's outcome.
pub(crate) struct Check {
    /// What was checked.
    pub name: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// What was found and what to do.
    pub detail: String,
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Runs every check against `url`.
pub(crate) async fn checks(url: &str) -> anyhow::Result<Vec<Check>> {
    let client = redis::Client::open(url)?;
    let mut conn = tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await
    .context("connecting timed out")?
    .with_context(|| format!("cannot connect to {url}"))?;
    let info: String = redis::cmd("INFO").arg("all").query_async(&mut conn).await?;
    let mut out = Vec::new();

    let version = field(&info, "redis_version")
        .unwrap_or("unknown")
        .to_owned();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    out.push(Check {
        name: "version",
        verdict: if major >= 7 {
            Verdict::Ok
        } else {
            Verdict::Fail
        },
        detail: if major >= 7 {
            format!("Redis {version}")
        } else {
            format!("Redis {version}: delayq needs 7.0 or newer")
        },
    });

    let policy: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    let policy = policy.get(1).cloned().unwrap_or_else(|| {
        field(&info, "maxmemory_policy")
            .unwrap_or("unknown")
            .to_owned()
    });
    out.push(Check {
        name: "eviction",
        verdict: if policy == "noeviction" { Verdict::Ok } else { Verdict::Fail },
        detail: if policy == "noeviction" {
            "maxmemory-policy noeviction: a full Redis refuses writes instead of deleting jobs".into()
        } else {
            format!("maxmemory-policy {policy}: Redis may silently delete jobs when memory is full; set `maxmemory-policy noeviction`")
        },
    });

    let aof = field(&info, "aof_enabled") == Some("1");
    let fsync: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    let fsync = fsync.get(1).cloned().unwrap_or_else(|| "unknown".into());
    let rdb = field(&info, "rdb_last_save_time").is_some()
        && redis::cmd("CONFIG")
            .arg("GET")
            .arg("save")
            .query_async::<Vec<String>>(&mut conn)
            .await
            .ok()
            .and_then(|v| v.get(1).cloned())
            .is_some_and(|s| !s.is_empty());
    let (verdict, detail) = match (aof, fsync.as_str(), rdb) {
        (true, "always", _) => (Verdict::Ok, "appendonly yes, appendfsync always: nothing acknowledged is lost in a crash".to_owned()),
        (true, f, _) => (Verdict::Warn, format!("appendonly yes, appendfsync {f}: a crash can lose about the last second of enqueues and acks")),
        (false, _, true) => (Verdict::Warn, "RDB snapshots only: a crash loses everything since the last snapshot; use appendonly yes".to_owned()),
        (false, _, false) => (Verdict::Warn, "no persistence: a restart loses every job; use appendonly yes (appendfsync always for no loss)".to_owned()),
    };
    out.push(Check {
        name: "persistence",
        verdict,
        detail,
    });

    let mut rtts = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        redis::cmd("PING").query_async::<String>(&mut conn).await?;
        rtts.push(t.elapsed());
    }
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    out.push(Check {
        name: "latency",
        verdict: if median < Duration::from_millis(5) {
            Verdict::Ok
        } else {
            Verdict::Warn
        },
        detail: format!(
            "round trip median {:.2} ms, max {:.2} ms (each job costs one or two round trips)",
            median.as_secs_f64() * 1e3,
            rtts[rtts.len() - 1].as_secs_f64() * 1e3
        ),
    });

    let t0 = SystemTime::now();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await?;
    let t1 = SystemTime::now();
    let mid = t0 + t1.duration_since(t0).unwrap_or_default() / 2;
    let local_ms = mid
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64;
    let offset = (secs * 1000 + micros / 1000) as i64 - local_ms;
    out.push(Check {
        name: "clock",
        verdict: if offset.abs() < 1000 { Verdict::Ok } else { Verdict::Warn },
        detail: format!(
            "Redis clock is {offset:+} ms from this host's; due times use Redis's clock, so jobs stay on time{}",
            if offset.abs() >= 1000 { ", but run_at values computed on this host will be off by that much" } else { "" }
        ),
    });
    Ok(out)
}

/// Runs `delayq doctor`: prints a verdict per check; exit 1 when one fails.
pub(crate) async fn run(url: &str) -> anyhow::Result<u8> {
    let checks = checks(url).await?;
    for c in &checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        println!("{v}  {:<12} {}", c.name, c.detail);
    }
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    Ok(if worst == Verdict::Fail { 1 } else { 0 })
}
