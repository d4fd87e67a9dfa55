//! Servers shared by the tests of a run: started on first use, stopped when their owner has
//! exited (a watchdog kills them and removes their directories), so the tests pay for one
//! plain server, one TLS + ACL server, one Cluster and one Sentinel set instead of one each.
//! Under `cargo test` the owner is the test binary's process; under nextest, which runs
//! every test in a process of its own, the first test process to need a server starts it
//! for the whole run (described in a directory named by the run, under a file lock) and the
//! runner is the owner. A test that shares a server works in a namespace of its own
//! ([`namespace`]: `delayq_redis::ConnectOptions::namespace`), so tests never see each
//! other's queues. A test that breaks its server (kills, fails over, fills it) starts its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::RedisServer;
use crate::cluster::RedisCluster;
pub use crate::lifecycle::Stoppable;
use crate::lifecycle::{self, DetachIfShared as _};
use crate::sentinel::SentinelSet;
use crate::tls::TlsServer;

/// The user the shared ACL servers know, with `delayq_redis::ACL_RULE` (added by the caller).
pub const ACL_USER: (&str, &str) = ("delayq", "s3cret");

/// Where the shared servers of a nextest run are described: nextest runs each test in a
/// process of its own, so "shared by the binary's tests" becomes "shared by the run's test
/// processes" — the first process to need a server starts it and describes it in this
/// directory (`NEXTEST_RUN_ID` names the run), the others attach to it. `None` under
/// `cargo test` (one process per binary: the server lives in this process's statics).
fn run_dir() -> Option<PathBuf> {
    let run = std::env::var("NEXTEST_RUN_ID").ok()?;
    let run: String = run
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Some(std::env::temp_dir().join(format!("delayq-shared-{run}")))
}

/// `cell`'s server, started by `start` on first use. Under `cargo test` it is this process's
/// and stopped after this process exits; under nextest it is the run's (described in a
/// directory named by `NEXTEST_RUN_ID`, started by the first test process that needs it,
/// under a file lock, and attached to by the others) and stopped after the runner exits. Either way a watchdog (`sh`) waits for
/// its owner to end — however it ends, a kill included — then kills the server's processes
/// and removes its directories.
pub fn shared<T: Stoppable + Send + Sync>(
    cell: &'static OnceLock<T>,
    name: &str,
    start: fn() -> T,
) -> &'static T {
    cell.get_or_init(|| match run_dir() {
        None => {
            let server = start();
            watch(std::process::id(), &server, None);
            server
        }
        Some(dir) => run_shared(&dir, name, start),
    })
}

/// The run's `name` server: described in `dir/name`, started here if nobody has yet.
fn run_shared<T: Stoppable>(dir: &Path, name: &str, start: fn() -> T) -> T {
    std::fs::create_dir_all(dir).expect("shared servers' directory");
    let lock = std::fs::File::create(dir.join(format!("{name}.lock"))).expect("lock file");
    lock.lock().expect("lock");
    let described = dir.join(name);
    if let Ok(text) = std::fs::read_to_string(&described) {
        return T::attach(&text);
    }
    lifecycle::starting_shared(true);
    let server = start();
    lifecycle::starting_shared(false);
    // The test process's parent is the nextest runner, which lives until the run ends.
    watch(std::os::unix::process::parent_id(), &server, Some(dir));
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, server.describe()).expect("describe");
    std::fs::rename(&tmp, &described).expect("describe");
    server
}

/// Starts a watchdog that waits for process `owner` to end, then kills `server`'s processes
/// and removes its directories (and `also`).
fn watch<T: Stoppable>(owner: u32, server: &T, also: Option<&Path>) {
    let (pids, mut dirs) = server.leftovers();
    dirs.extend(also.map(Path::to_path_buf));
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let dirs: Vec<String> = dirs
        .iter()
        .map(|d| format!("'{}'", d.display().to_string().replace('\'', "")))
        .collect();
    let script = format!(
        "while kill -0 {owner} 2>/dev/null; do sleep 0.2; done; kill -9 {} 2>/dev/null; rm -rf {}",
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
        .detached_if(also.is_some())
        .spawn()
        .expect("sh");
}

/// The binary's plain server.
pub fn redis() -> &'static RedisServer {
    static S: OnceLock<RedisServer> = OnceLock::new();
    shared(&S, "redis", RedisServer::start)
}

/// The binary's TLS server (mutual TLS; its certificates made once).
pub fn tls() -> &'static TlsServer {
    static S: OnceLock<TlsServer> = OnceLock::new();
    shared(&S, "tls", TlsServer::start)
}

/// The binary's Cluster of 3 masters.
pub fn cluster() -> &'static RedisCluster {
    static S: OnceLock<RedisCluster> = OnceLock::new();
    shared(&S, "cluster", || RedisCluster::start(3, 0))
}

/// The binary's Sentinel set (master, replica, sentinel).
pub fn sentinel() -> &'static SentinelSet {
    static S: OnceLock<SentinelSet> = OnceLock::new();
    shared(&S, "sentinel", SentinelSet::start)
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

/// The run's PostgreSQL server (each test makes a database of its own:
/// [`crate::postgres::PgServer::database`]).
pub fn postgres() -> &'static crate::postgres::PgServer {
    static S: OnceLock<crate::postgres::PgServer> = OnceLock::new();
    shared(&S, "postgres", crate::postgres::PgServer::start)
}
