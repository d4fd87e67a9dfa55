//! Network partitions between Redis processes on one host, with `iptables` inside a network
//! namespace of the caller's own (`unshare --net`; [`in_namespace`] says whether this process
//! runs in one, so that rules can never touch the host's network).
//!
//! Every server listens on 127.0.0.1 as usual; a partitionable server also makes its own
//! outgoing connections (replication, the sentinel's links, the cluster bus) from an address
//! of its own, 127.0.0.N (`bind-source-addr`), and announces 127.0.0.1 (so peers still dial
//! the listening address). A rule then names one process's source address and the other's
//! ports: [`cut`] drops every packet between two processes in both directions while clients,
//! which connect from 127.0.0.1, still reach both sides — the partition of Jepsen's Redis
//! tests, where a master is cut off from its replicas and sentinels but not from its clients.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};

/// One process as the rules see it: where its connections come from, and its listening
/// ports (a cluster node's bus port included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The address its outgoing connections come from.
    pub source: Ipv4Addr,
    /// The ports it listens on.
    pub ports: Vec<u16>,
}

/// A fresh source address for a partitionable process (127.0.0.10 upwards).
pub fn next_source() -> Ipv4Addr {
    static NEXT: AtomicU8 = AtomicU8::new(10);
    Ipv4Addr::new(127, 0, 0, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The `redis-server` arguments that make a server partitionable from `source` (protected
/// mode off: it counts only 127.0.0.1 as local, and peers now come from 127.0.0.N).
pub fn server_args(source: Ipv4Addr) -> Vec<String> {
    vec![
        "--protected-mode".into(),
        "no".into(),
        "--bind-source-addr".into(),
        source.to_string(),
        "--replica-announce-ip".into(),
        "127.0.0.1".into(),
    ]
}

/// The environment variable [`enter_namespace`] leaves for the process it starts: the
/// namespace it came from.
const HOST_NS: &str = "DELAYQ_PARTITION_HOST_NETNS";

fn current_ns() -> Option<String> {
    std::fs::read_link("/proc/self/ns/net")
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Whether this process runs in a network namespace [`enter_namespace`] made for it (not
/// the one it was started from).
pub fn in_namespace() -> bool {
    match (std::env::var(HOST_NS), current_ns()) {
        (Ok(host), Some(me)) => host != me,
        _ => false,
    }
}

/// Runs this program again, with the same arguments, in a new network namespace
/// (`unshare --net`, mapping the user to root when not root) with its loopback up, and
/// returns its exit code. Call it when [`in_namespace`] is false.
pub fn enter_namespace() -> Result<i32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let host = current_ns().ok_or("cannot read /proc/self/ns/net")?;
    let mut cmd = Command::new("unshare");
    cmd.arg("--net");
    if !is_root() {
        cmd.arg("--map-root-user");
    }
    let status = cmd
        .arg("--")
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(HOST_NS, host)
        .status()
        .map_err(|e| format!("unshare not runnable (util-linux): {e}"))?;
    Ok(status.code().unwrap_or(1))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// Brings the namespace's loopback up (a new namespace starts with it down).
pub fn loopback_up() -> Result<(), String> {
    run("ip", &["link", "set", "lo", "up"])
}

/// Drops every packet between `a` and `b`, both directions (established connections hang,
/// as behind a failed switch; new ones time out).
pub fn cut(a: &Endpoint, b: &Endpoint) -> Result<(), String> {
    guard()?;
    for (from, to) in [(a, b), (b, a)] {
        for port in &to.ports {
            let (src, port) = (from.source.to_string(), port.to_string());
            rule("-A", &["-s", &src, "-d", "127.0.0.1", "--dport", &port])?;
            rule("-A", &["-s", "127.0.0.1", "--sport", &port, "-d", &src])?;
        }
    }
    Ok(())
}

/// Removes every partition.
pub fn heal() -> Result<(), String> {
    guard()?;
    run("iptables", &["-F", "INPUT"])
}

fn guard() -> Result<(), String> {
    if in_namespace() {
        Ok(())
    } else {
        Err("refusing to change iptables outside a network namespace of our own".into())
    }
}

fn rule(op: &str, spec: &[&str]) -> Result<(), String> {
    let mut args = vec![op, "INPUT", "-p", "tcp"];
    args.extend_from_slice(spec);
    args.extend_from_slice(&["-j", "DROP"]);
    run("iptables", &args)
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} not runnable (apt-get install iptables iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
