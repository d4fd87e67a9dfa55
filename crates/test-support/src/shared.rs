//! Servers shared by every test of one test binary: started on first use, stopped when the
//! process has exited (a watchdog kills them and removes their directories), so a binary's
//! tests pay for one plain server, one TLS + ACL server, one Cluster and one Sentinel set
//! instead of one each. A test that shares a server works in a namespace of its own
//! ([`namespace`]: `delayq_redis::ConnectOptions::namespace`), so tests never see each
//! other's queues. A test that breaks its server (kills, fails over, fills it) starts its own.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::RedisServer;
use crate::cluster::RedisCluster;
use crate::sentinel::SentinelSet;
use crate::tls::TlsServer;

/// The user the shared ACL servers know, with `delayq_redis::ACL_RULE` (added by the caller).
pub const ACL_USER: (&str, &str) = ("delayq", "s3cret");

/// What a shared server leaves behind: its processes and directories.
pub trait Stoppable {
    /// Process ids to kill and directories to remove at exit.
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>);
}

impl Stoppable for RedisServer {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        (
            self.pid().into_iter().collect(),
            vec![self.dir().to_path_buf()],
        )
    }
}

impl Stoppable for RedisCluster {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        let mut out = (Vec::new(), Vec::new());
        for n in &self.nodes {
            let (p, d) = n.leftovers();
            out.0.extend(p);
            out.1.extend(d);
        }
        out
    }
}

impl Stoppable for TlsServer {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        let (p, mut d) = self.server.leftovers();
        d.push(self.certs_dir().to_path_buf());
        (p, d)
    }
}

impl Stoppable for SentinelSet {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        let mut out = self.master.leftovers();
        let (p, d) = self.replica.leftovers();
        out.0.extend(p);
        out.1.extend(d);
        let (p, d) = self.sentinel_leftovers();
        out.0.extend(p);
        out.1.extend(d);
        out
    }
}

/// `cell`'s server, started by `start` on first use and stopped after this process exits:
/// a watchdog (`sh`) waits for the process to end — however it ends, a kill included — then
/// kills the server's processes and removes its directories.
pub fn shared<T: Stoppable + Send + Sync>(
    cell: &'static OnceLock<T>,
    start: fn() -> T,
) -> &'static T {
    cell.get_or_init(|| {
        let server = start();
        let (pids, dirs) = server.leftovers();
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        let dirs: Vec<String> = dirs
            .iter()
            .map(|d| format!("'{}'", d.display().to_string().replace('\'', "")))
            .collect();
        let script = format!(
            "while kill -0 {} 2>/dev/null; do sleep 0.2; done; kill -9 {} 2>/dev/null; rm -rf {}",
            std::process::id(),
            pids.join(" "),
            dirs.join(" ")
        );
        // The watchdog outlives this process by design: nothing here waits for it.
        #[expect(
            clippy::zombie_processes,
            reason = "the watchdog outlives the test process"
        )]
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh");
        server
    })
}

/// The binary's plain server.
pub fn redis() -> &'static RedisServer {
    static S: OnceLock<RedisServer> = OnceLock::new();
    shared(&S, RedisServer::start)
}

/// The binary's TLS server (mutual TLS; its certificates made once).
pub fn tls() -> &'static TlsServer {
    static S: OnceLock<TlsServer> = OnceLock::new();
    shared(&S, TlsServer::start)
}

/// The binary's Cluster of 3 masters.
pub fn cluster() -> &'static RedisCluster {
    static S: OnceLock<RedisCluster> = OnceLock::new();
    shared(&S, || RedisCluster::start(3, 0))
}

/// The binary's Sentinel set (master, replica, sentinel).
pub fn sentinel() -> &'static SentinelSet {
    static S: OnceLock<SentinelSet> = OnceLock::new();
    shared(&S, SentinelSet::start)
}

/// A namespace no other test of this process (nor another process) uses.
pub fn namespace() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "t{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
