//! `delayq doctor`: checks the Redis deployment it is pointed at — one server, a Cluster or
//! Sentinel — and says in plain words what is wrong. Per-server checks (version, eviction,
//! persistence) run on every master; topology checks are in `topology`; the embedded
//! store's checks in `embedded`; PostgreSQL's (with `--postgres`) in `postgres`; what a check is and how the verdicts are printed, in `report`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_redis::{ConnectOptions, Connection, RedisBackend};

pub(crate) mod embedded;
pub(crate) mod postgres;
mod report;
mod topology;

use report::{Check, Verdict, field, report};

async fn config_get(conn: &mut Connection, name: &str) -> Option<String> {
    redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query_async::<Vec<String>>(conn)
        .await
        .ok()
        .and_then(|v| v.get(1).cloned())
}

/// Version, eviction and persistence of one master; `at` names it when there are several.
async fn server_checks(conn: &mut Connection, at: &str, out: &mut Vec<Check>) {
    let info: String = match redis::cmd("INFO").arg("all").query_async(conn).await {
        Ok(i) => i,
        Err(e) => {
            out.push(Check::new(
                "server",
                Verdict::Fail,
                format!("{at}INFO failed: {e}"),
            ));
            return;
        }
    };
    let version = field(&info, "redis_version")
        .unwrap_or("unknown")
        .to_owned();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    out.push(if major >= 7 {
        Check::new("version", Verdict::Ok, format!("{at}Redis {version}"))
    } else {
        Check::new(
            "version",
            Verdict::Fail,
            format!("{at}Redis {version}: delayq needs 7.0 or newer"),
        )
    });
    if let Some(c) = topology::lua_cves(&version) {
        out.push(Check::new("lua-cves", Verdict::Warn, format!("{at}{c}")));
    } else {
        out.push(Check::new(
            "lua-cves",
            Verdict::Ok,
            format!("{at}Redis {version} has the fixes for the known Lua sandbox CVEs"),
        ));
    }

    let policy = match config_get(conn, "maxmemory-policy").await {
        Some(p) => p,
        None => field(&info, "maxmemory_policy")
            .unwrap_or("unknown")
            .to_owned(),
    };
    out.push(if policy == "noeviction" {
        Check::new(
            "eviction",
            Verdict::Ok,
            format!("{at}maxmemory-policy noeviction: a full Redis refuses writes instead of deleting jobs"),
        )
    } else {
        Check::new(
            "eviction",
            Verdict::Fail,
            format!("{at}maxmemory-policy {policy}: Redis may silently delete jobs when memory is full; set `maxmemory-policy noeviction`"),
        )
    });

    let aof = field(&info, "aof_enabled") == Some("1");
    let fsync = config_get(conn, "appendfsync")
        .await
        .unwrap_or_else(|| "unknown".into());
    let rdb = config_get(conn, "save")
        .await
        .is_some_and(|s| !s.is_empty());
    let (verdict, detail) = match (aof, fsync.as_str(), rdb) {
        (true, "always", _) => (Verdict::Ok, "appendonly yes, appendfsync always: nothing acknowledged is lost in a crash".to_owned()),
        (true, f, _) => (Verdict::Warn, format!("appendonly yes, appendfsync {f}: a crash can lose about the last second of enqueues and acks")),
        (false, _, true) => (Verdict::Warn, "RDB snapshots only: a crash loses everything since the last snapshot; use appendonly yes".to_owned()),
        (false, _, false) => (Verdict::Warn, "no persistence: a restart loses every job; use appendonly yes (appendfsync always for no loss)".to_owned()),
    };
    out.push(Check::new("persistence", verdict, format!("{at}{detail}")));
}

async fn latency_and_clock(conn: &mut Connection, out: &mut Vec<Check>) -> anyhow::Result<()> {
    let mut rtts = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        redis::cmd("PING").query_async::<String>(conn).await?;
        rtts.push(t.elapsed());
    }
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    out.push(Check::new(
        "latency",
        if median < Duration::from_millis(5) {
            Verdict::Ok
        } else {
            Verdict::Warn
        },
        format!(
            "round trip median {:.2} ms, max {:.2} ms (each job costs one or two round trips)",
            median.as_secs_f64() * 1e3,
            rtts[rtts.len() - 1].as_secs_f64() * 1e3
        ),
    ));

    let t0 = SystemTime::now();
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    let t1 = SystemTime::now();
    let mid = t0 + t1.duration_since(t0).unwrap_or_default() / 2;
    let local_ms = mid
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64;
    let offset = (secs * 1000 + micros / 1000) as i64 - local_ms;
    out.push(Check::new(
        "clock",
        if offset.abs() < 1000 { Verdict::Ok } else { Verdict::Warn },
        format!(
            "Redis clock is {offset:+} ms from this host's; due times use Redis's clock, so jobs stay on time{}",
            if offset.abs() >= 1000 { ", but run_at values computed on this host will be off by that much" } else { "" }
        ),
    ));
    Ok(())
}

/// Each queue with a one-delay lane: is its id index still compact (listpack buckets), and how
/// near is its largest shard to outgrowing them? `limits`: the servers' smallest
/// `hash-max-listpack-entries` and `-value` (unknown when `CONFIG` is not allowed).
async fn lane_checks(backend: &RedisBackend, limits: Option<(u64, u64)>, out: &mut Vec<Check>) {
    let queues = match delayq::Inspect::queues(backend).await {
        Ok(q) => q,
        Err(e) => {
            out.push(Check::new(
                "lane",
                Verdict::Warn,
                format!("could not list the queues: {e}"),
            ));
            return;
        }
    };
    let capacity = limits.map(|(e, _)| e * u64::from(delayq_redis::LANE_INDEX_BUCKETS));
    for q in queues {
        let shards = match backend.lane_report(&q).await {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                out.push(Check::new(
                    "lane",
                    Verdict::Warn,
                    format!("queue {q}: could not read its lane: {e}"),
                ));
                continue;
            }
        };
        // (The index's room is for live jobs: tombstones have left it.)
        let largest = shards.iter().map(|s| s.indexed()).max().unwrap_or(0);
        let windows: u64 = shards.iter().map(|s| s.windows).sum();
        let in_windows: u64 = shards.iter().map(|s| s.in_windows).sum();
        let windowed = if windows > 0 {
            format!(" ({in_windows} of all its shards' in {windows} time windows)")
        } else {
            String::new()
        };
        let cancelled: u64 = shards.iter().map(|s| s.cancelled).sum();
        let tombs = if cancelled > 0 {
            format!(
                " (and {cancelled} tombstones of cancelled jobs, ~14 B each until a claim \
                 passes their due time)"
            )
        } else {
            String::new()
        };
        let sampled: u32 = shards.iter().map(|s| s.sampled).sum();
        let hashtable: u32 = shards.iter().map(|s| s.hashtable).sum();
        let room = capacity.map_or(String::new(), |c| {
            let buckets = delayq_redis::LANE_INDEX_BUCKETS;
            let e = c / u64::from(buckets);
            format!(
                "; its index is compact up to ~{c} jobs a shard ({buckets} index buckets × \
                 hash-max-listpack-entries {e})"
            )
        });
        let check = if hashtable > 0 {
            let value = limits.map_or("hash-max-listpack-value".to_owned(), |(_, v)| {
                format!("hash-max-listpack-value ({v} bytes)")
            });
            Check::new(
                "lane",
                Verdict::Warn,
                format!(
                    "queue {q}: {hashtable} of {sampled} sampled index buckets are hashtables, \
                     not listpacks, so each lane job costs ~50 B more. Its largest shard holds \
                     {largest} lane jobs{room}. Raise hash-max-listpack-entries (CONFIG SET and \
                     redis.conf; a bucket that turned into a hashtable stays one until Redis \
                     reloads it), give a new queue more shards, or keep ids within {value}"
                ),
            )
        } else if let Some(off) = off_lane(backend, &q, &shards).await {
            Check::new("lane", Verdict::Warn, off)
        } else if capacity.is_some_and(|c| largest * 10 > c * 8) {
            Check::new(
                "lane",
                Verdict::Warn,
                format!(
                    "queue {q}: its largest shard holds {largest} lane jobs{room}: past it each \
                     job costs ~50 B more. Raise hash-max-listpack-entries"
                ),
            )
        } else {
            Check::new(
                "lane",
                Verdict::Ok,
                format!(
                    "queue {q}: {largest} lane jobs in its largest shard of {}{windowed}{tombs}\
                     {room}",
                    shards.len()
                ),
            )
        };
        out.push(check);
    }
}

/// When most of a lane queue's scheduled jobs are not in its lane (their due times do not come
/// in arrival order), what to say: the lane then saves little.
async fn off_lane(
    backend: &RedisBackend,
    q: &delayq::QueueName,
    shards: &[delayq_redis::LaneShard],
) -> Option<String> {
    let scheduled = delayq::Inspect::stats(backend, q).await.ok()?.waiting();
    let in_lane: u64 = shards.iter().map(|s| s.indexed()).sum();
    if scheduled < 100 || in_lane * 2 >= scheduled {
        return None;
    }
    let width = delayq::Inspect::settings(backend, q)
        .await
        .ok()?
        .lane_window_ms;
    let advice = if width == 0 {
        "; time windows would keep those due further ahead compact too (`delayq queue set \
         --lane-window 10s`, only while the queue is empty)"
            .to_owned()
    } else {
        format!(
            "; its {width}-ms windows take only jobs due more than one width past their \
             window's start, up to {} a window: a narrower width suits a busier queue",
            delayq_redis::LANE_WINDOW_ENTRIES
        )
    };
    Some(format!(
        "queue {q}: {in_lane} of its {scheduled} scheduled jobs are in its lane or windows: the \
         others (due soon, retries, reschedules, priorities, or past the lane's last job with \
         no window for them) cost what a queue without the lane pays, so the lane saves little \
         here{advice}"
    ))
}

/// Runs every check against the deployment `opts` names.
pub(crate) async fn checks(
    opts: ConnectOptions,
    acl_user: Option<&str>,
) -> anyhow::Result<Vec<Check>> {
    let backend = RedisBackend::connect_with(opts).await?;
    let mut out = Vec::new();
    topology::topology_checks(&backend, &mut out).await;
    let masters = backend.masters().await?;
    let several = masters.len() > 1;
    // The smallest listpack limits of any master (a lane's index buckets must fit them).
    let mut limits: Option<(u64, u64)> = None;
    for (addr, mut conn) in masters {
        let at = if several {
            format!("{addr}: ")
        } else {
            String::new()
        };
        server_checks(&mut conn, &at, &mut out).await;
        let entries = config_get(&mut conn, "hash-max-listpack-entries").await;
        let value = config_get(&mut conn, "hash-max-listpack-value").await;
        if let (Some(Ok(e)), Some(Ok(v))) = (entries.map(|e| e.parse()), value.map(|v| v.parse())) {
            limits = Some(limits.map_or((e, v), |(le, lv)| (le.min(e), lv.min(v))));
        }
    }
    lane_checks(&backend, limits, &mut out).await;
    topology::acl_check(&backend, acl_user, &mut out).await;
    latency_and_clock(&mut backend.connection(), &mut out).await?;
    Ok(out)
}

/// Runs `delayq doctor`: prints a verdict per check; exit 1 when one fails.
pub(crate) async fn run(
    opts: ConnectOptions,
    acl_user: Option<String>,
    pg: Option<&delayq_postgres::PgOptions>,
) -> anyhow::Result<u8> {
    let mut checks = checks(opts, acl_user.as_deref()).await?;
    checks.extend(postgres::checks(pg).await);
    if crate::connect::password_in_arguments() {
        checks.push(Check::new(
            "password",
            Verdict::Warn,
            "the Redis password is in the --redis URL on the command line, where `ps` and \
             /proc/PID/cmdline show it to every local user: give it with \
             --redis-password-file FILE or DELAYQ_REDIS_PASSWORD instead",
        ));
    }
    Ok(report(&checks))
}
