//! `delayq doctor`'s topology checks: TLS, Cluster state and slot coverage, masters without
//! replicas, what the sentinels say, the ACL rule (with `ACL DRYRUN`), and the Redis version
//! against the known Lua sandbox CVEs.

use delayq_redis::RedisBackend;

use super::report::{Check, Verdict, field};

/// Lua sandbox CVEs and, per release line, the first release that fixes all of them:
/// CVE-2025-49844 (use-after-free, "RediShell"), CVE-2025-46817 (`unpack` overflow),
/// CVE-2025-46818 (metatables), CVE-2025-46819 (out-of-bounds read) — fixed in 6.2.20, 7.2.11,
/// 7.4.6, 8.0.4, 8.2.2; CVE-2024-46981 (GC use-after-free: 6.2.17, 7.2.7, 7.4.2) and
/// CVE-2024-31449 (`bit` stack overflow: 6.2.16, 7.2.6, 7.4.1) are older.
const FIXED: &[((u32, u32), u32)] = &[
    ((6, 2), 20),
    ((7, 2), 11),
    ((7, 4), 6),
    ((8, 0), 4),
    ((8, 2), 2),
];

/// A warning when `version` predates the fixes of the known Lua sandbox CVEs (distributions
/// backport fixes without changing the version: hence a warning, not a failure).
pub(crate) fn lua_cves(version: &str) -> Option<String> {
    let v: Vec<u32> = version.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    let (major, minor, patch) = (v.first().copied()?, v.get(1).copied()?, v.get(2).copied()?);
    if (major, minor) > (8, 2) {
        return None;
    }
    let cves = "CVE-2025-49844, CVE-2025-46817, CVE-2025-46818, CVE-2025-46819 (Lua sandbox)";
    match FIXED.iter().find(|(line, _)| *line == (major, minor)) {
        Some((_, fixed)) if patch >= *fixed => None,
        Some((_, fixed)) => Some(format!(
            "Redis {version} predates {major}.{minor}.{fixed}, which fixes {cves}; upgrade unless \
             your distribution backported the fixes"
        )),
        None => Some(format!(
            "Redis {version}: the {major}.{minor} line has no release fixing {cves} (fixed in \
             6.2.20, 7.2.11, 7.4.6, 8.0.4, 8.2.2); upgrade unless your distribution backported \
             them"
        )),
    }
}

/// TLS, Cluster and Sentinel checks.
pub(crate) async fn topology_checks(b: &RedisBackend, out: &mut Vec<Check>) {
    out.push(Check::new(
        "topology",
        Verdict::Ok,
        format!("{} at {}", b.topology(), b.url()),
    ));
    out.push(if b.uses_tls() {
        Check::new("tls", Verdict::Ok, "connections use TLS")
    } else {
        Check::new(
            "tls",
            Verdict::Warn,
            "connections are not encrypted (use rediss:// across untrusted networks)",
        )
    });
    match b.topology() {
        "cluster" => cluster_checks(b, out).await,
        "sentinel" => sentinel_checks(b, out).await,
        _ => {}
    }
}

async fn cluster_checks(b: &RedisBackend, out: &mut Vec<Check>) {
    let mut conn = b.connection();
    match redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async::<String>(&mut conn)
        .await
    {
        Ok(info) => {
            let state = field(&info, "cluster_state").unwrap_or("unknown");
            let ok: u32 = field(&info, "cluster_slots_ok")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            out.push(if state == "ok" && ok == 16384 {
                Check::new("cluster", Verdict::Ok, "cluster_state ok, all 16384 slots served")
            } else {
                Check::new(
                    "cluster",
                    Verdict::Fail,
                    format!("cluster_state {state}, {ok} of 16384 slots served: jobs in the other slots cannot be reached"),
                )
            });
        }
        Err(e) => out.push(Check::new(
            "cluster",
            Verdict::Fail,
            format!("CLUSTER INFO failed: {e}"),
        )),
    }
    match b.cluster_masters().await {
        Ok(masters) => {
            for m in masters {
                out.push(if m.replicas == 0 {
                    Check::new(
                        "replicas",
                        Verdict::Warn,
                        format!("{}: {} slots and no replica: if it fails, its shards are unavailable until it is back", m.addr, m.slots),
                    )
                } else {
                    Check::new(
                        "replicas",
                        Verdict::Ok,
                        format!("{}: {} slots, {} replica(s)", m.addr, m.slots, m.replicas),
                    )
                });
            }
        }
        Err(e) => out.push(Check::new(
            "replicas",
            Verdict::Fail,
            format!("CLUSTER SLOTS failed: {e}"),
        )),
    }
}

async fn sentinel_checks(b: &RedisBackend, out: &mut Vec<Check>) {
    let views = b.sentinels().await;
    let mut masters = std::collections::BTreeSet::new();
    let mut reachable = 0;
    for v in &views {
        match &v.answer {
            Ok(a) => {
                reachable += 1;
                masters.insert(a.master.clone());
                let (verdict, q) = match &a.ckquorum {
                    Ok(text) => (Verdict::Ok, text.clone()),
                    Err(e) => (Verdict::Fail, e.clone()),
                };
                out.push(Check::new(
                    "sentinel",
                    verdict,
                    format!(
                        "{} names master {} (quorum {}, {} other sentinels, {} replicas): {q}",
                        v.addr, a.master, a.quorum, a.other_sentinels, a.replicas
                    ),
                ));
                if a.replicas == 0 {
                    out.push(Check::new(
                        "replicas",
                        Verdict::Warn,
                        format!(
                            "{} has no replica: a failover has nothing to promote",
                            a.master
                        ),
                    ));
                }
            }
            Err(e) => out.push(Check::new(
                "sentinel",
                Verdict::Warn,
                format!("{} did not answer: {e}", v.addr),
            )),
        }
    }
    if reachable == 0 {
        out.push(Check::new(
            "sentinel",
            Verdict::Fail,
            "no sentinel answered",
        ));
    } else if masters.len() > 1 {
        out.push(Check::new(
            "sentinel",
            Verdict::Fail,
            format!("sentinels disagree about the master: {masters:?}"),
        ));
    }
}

/// Arguments for `ACL DRYRUN` of one command of the rule (a key and channel of delayq's).
fn dryrun_args(cmd: &str) -> Vec<&'static str> {
    const K: &str = "dq:{doctor}:sched";
    const C: &str = "dq:{doctor}:wake";
    match cmd {
        "eval" => vec!["EVAL", "return 1", "1", K],
        "evalsha" => vec![
            "EVALSHA",
            "0000000000000000000000000000000000000000",
            "1",
            K,
        ],
        "hget" | "hdel" | "hmget" => vec![cmd_static(cmd), K, "f"],
        "getrange" => vec!["GETRANGE", K, "0", "0"],
        "setrange" => vec!["SETRANGE", K, "0", "v"],
        "bitfield" => vec!["BITFIELD", K, "GET", "u8", "0"],
        "hset" | "hsetnx" => vec![cmd_static(cmd), K, "f", "v"],
        "hincrby" => vec!["HINCRBY", K, "f", "1"],
        "incrby" => vec!["INCRBY", K, "1"],
        "set" => vec!["SET", K, "v"],
        "zadd" => vec!["ZADD", K, "1", "m"],
        "zcard" => vec!["ZCARD", K],
        "hgetall" | "llen" | "del" | "bitcount" | "strlen" => vec![cmd_static(cmd), K],
        "setbit" => vec!["SETBIT", K, "0", "1"],
        "bitpos" => vec!["BITPOS", K, "0"],
        "lrange" | "ltrim" => vec![cmd_static(cmd), K, "0", "1"],
        "lindex" => vec!["LINDEX", K, "0"],
        "lset" => vec!["LSET", K, "0", "x"],
        "rpush" => vec!["RPUSH", K, "v"],
        "zcount" | "zrange" | "zrangebyscore" => vec![cmd_static(cmd), K, "0", "1"],
        "zrem" | "zscore" | "zrank" => vec![cmd_static(cmd), K, "m"],
        "publish" | "spublish" => vec![cmd_static(cmd), C, "1"],
        "subscribe" | "ssubscribe" | "unsubscribe" | "sunsubscribe" => vec![cmd_static(cmd), C],
        "wait" => vec!["WAIT", "0", "0"],
        "scan" => vec!["SCAN", "0"],
        "cluster|slots" => vec!["CLUSTER", "SLOTS"],
        "cluster|info" => vec!["CLUSTER", "INFO"],
        "hello" => vec!["HELLO", "2"],
        other => vec![cmd_static(other)],
    }
}

fn cmd_static(cmd: &str) -> &'static str {
    delayq_redis::acl_commands()
        .find(|c| *c == cmd)
        .unwrap_or("PING")
}

/// Checks the ACL rule of `user` (default: the connected user) with `ACL DRYRUN`.
pub(crate) async fn acl_check(b: &RedisBackend, user: Option<&str>, out: &mut Vec<Check>) {
    let mut conn = b.connection();
    let user = match user {
        Some(u) => u.to_owned(),
        None => match redis::cmd("ACL")
            .arg("WHOAMI")
            .query_async::<String>(&mut conn)
            .await
        {
            Ok(u) => u,
            Err(_) => {
                out.push(Check::new(
                    "acl",
                    Verdict::Warn,
                    "this user may not run ACL commands (as a least-privilege delayq user should \
                     not); run `delayq doctor --acl-user NAME` as an admin user to check its rule",
                ));
                return;
            }
        },
    };
    let mut missing = Vec::new();
    for cmd in delayq_redis::acl_commands() {
        let args = dryrun_args(cmd);
        let r = redis::cmd("ACL")
            .arg("DRYRUN")
            .arg(&user)
            .arg(&args)
            .query_async::<String>(&mut conn)
            .await;
        match r {
            Ok(s) if s == "OK" => {}
            Ok(s) => missing.push(format!("{cmd} ({s})")),
            Err(e) if e.code() == Some("NOPERM") && missing.is_empty() => {
                out.push(Check::new(
                    "acl",
                    Verdict::Warn,
                    format!("user {user} may not run ACL DRYRUN; run `delayq doctor --acl-user {user}` as an admin user to check its rule"),
                ));
                return;
            }
            Err(e) => missing.push(format!("{cmd} ({e})")),
        }
    }
    out.push(if missing.is_empty() {
        Check::new(
            "acl",
            Verdict::Ok,
            format!("user {user} may run every command delayq needs on dq:* keys and channels"),
        )
    } else {
        Check::new(
            "acl",
            Verdict::Fail,
            format!(
                "user {user} lacks: {}; give it the rule in docs/GUIDE.md (ACL SETUSER …)",
                missing.join("; ")
            ),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_before_the_lua_fixes_warn() {
        assert!(lua_cves("7.0.15").unwrap().contains("no release fixing"));
        assert!(lua_cves("7.2.10").unwrap().contains("7.2.11"));
        assert!(lua_cves("7.2.11").is_none());
        assert!(lua_cves("7.4.6").is_none());
        assert!(lua_cves("8.2.1").is_some());
        assert!(lua_cves("8.4.0").is_none());
        assert!(lua_cves("6.0.9").is_some());
    }

    #[test]
    fn every_command_of_the_rule_has_dryrun_arguments() {
        for cmd in delayq_redis::acl_commands() {
            let a = dryrun_args(cmd);
            let head = cmd.split('|').next().unwrap();
            assert!(a[0].eq_ignore_ascii_case(head), "{cmd}: {a:?}");
        }
    }
}
