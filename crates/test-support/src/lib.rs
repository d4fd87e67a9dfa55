//! Throwaway `redis-server` processes for tests: each on a free port with its own temporary
//! directory, ready (answering `PING`) when returned, killed when dropped; or shared by the
//! tests of one binary ([`shared`], each test in a namespace of its own). Tests never touch
//! port 6379.
//!
//! Beyond one plain server: [`tls`] (certificates made at test time, a TLS port beside the
//! plain one), ACL users ([`RedisServer::add_user`]), [`cluster`] (a local Redis Cluster) and
//! [`sentinel`] (master, replica and a sentinel), both of which [`partition`] can cut apart;
//! [`postgres`], a throwaway PostgreSQL cluster (initdb in a temporary directory);
//! and [`receiver`], an HTTP server that push
//! deliveries are sent to. [`conformance`] reads the shared client conformance suite.

pub mod cluster;
pub mod conformance;
mod lifecycle;
pub mod otlp;
pub mod partition;
pub mod postgres;
pub mod proxy;
pub mod receiver;
pub mod sentinel;
pub mod shared;
pub mod tls;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lifecycle::{DetachIfShared as _, Stoppable};

/// A running `redis-server` owned by a test, or attached to one another test process of
/// the run started ([`shared`]).
pub struct RedisServer {
    child: Option<Child>,
    /// The process id of a server another test process started (never killed from here).
    attached: Option<u32>,
    port: u16,
    dir: Dir,
    extra: Vec<String>,
    prefix: Vec<String>,
}

/// Append-only persistence with `appendfsync <fsync>` (`always`: a restart loses nothing
/// acknowledged).
const fn durable(fsync: &str) -> [&str; 6] {
    ["--save", "", "--appendonly", "yes", "--appendfsync", fsync]
}

impl RedisServer {
    /// Starts a server without persistence.
    pub fn start() -> Self {
        Self::start_with(&["--save", "", "--appendonly", "no"])
    }

    /// Starts a server with append-only persistence fsynced on every write, so that a restart
    /// loses nothing acknowledged.
    pub fn start_durable() -> Self {
        Self::start_with(&durable("always"))
    }

    /// Starts a server for fault runs: append-only with `appendfsync always` (a restart loses
    /// nothing acknowledged) and the `DEBUG` command enabled (`DEBUG SLEEP`).
    pub fn start_for_faults() -> Result<Self, String> {
        Self::start_for_faults_with("always")
    }

    /// The same with `appendfsync <fsync>` (`always`, `everysec`, `no`). The append-only
    /// file is never rewritten (its files stay the same set for [`RedisServer::disk_snapshot`]).
    pub fn start_for_faults_with(fsync: &str) -> Result<Self, String> {
        let args: Vec<&str> = durable(fsync)
            .into_iter()
            .chain(["--enable-debug-command", "yes"])
            .chain(["--auto-aof-rewrite-percentage", "0"])
            .collect();
        Self::start_prefixed(&[], &args)
    }

    /// A copy of the append-only files as they are now: what a disk would hold if everything
    /// written so far had been fsynced and nothing after (see [`RedisServer::power_cut`]).
    pub fn disk_snapshot(&self) -> tempfile::TempDir {
        let copy = tempfile::tempdir().expect("temp dir");
        let aof = self.dir.path().join("appendonlydir");
        if let Ok(files) = std::fs::read_dir(&aof) {
            for f in files.flatten() {
                let _ = std::fs::copy(f.path(), copy.path().join(f.file_name()));
            }
        }
        copy
    }

    /// A power cut: the server is SIGKILLed and its append-only files replaced by `disk` (a
    /// [`RedisServer::disk_snapshot`]) — everything written after the snapshot never reached
    /// the disk, as with `appendfsync everysec` when the machine loses power. The server stays
    /// down until [`RedisServer::restart`].
    pub fn power_cut(&mut self, disk: &Path) {
        self.kill();
        let aof = self.dir.path().join("appendonlydir");
        let _ = std::fs::remove_dir_all(&aof);
        std::fs::create_dir_all(&aof).expect("appendonlydir");
        for f in std::fs::read_dir(disk).expect("snapshot").flatten() {
            std::fs::copy(f.path(), aof.join(f.file_name())).expect("restore");
        }
    }

    /// Starts a server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_prefixed(&[], extra).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts `prefix… redis-server …` (e.g. `taskset -c 0`) with extra arguments; an error
    /// says why it could not start.
    pub fn start_prefixed(prefix: &[&str], extra: &[&str]) -> Result<Self, String> {
        let mut last_err = String::new();
        for _ in 0..20 {
            let mut s = Self {
                child: None,
                attached: None,
                port: free_port(),
                dir: Dir::Own(tempfile::tempdir().expect("temp dir")),
                extra: extra.iter().map(|s| s.to_string()).collect(),
                prefix: prefix.iter().map(|s| s.to_string()).collect(),
            };
            match s.spawn() {
                Ok(()) => return Ok(s),
                Err(e) => last_err = e,
            }
        }
        Err(format!("could not start redis-server: {last_err}"))
    }

    fn spawn(&mut self) -> Result<(), String> {
        let (program, pre) = match self.prefix.split_first() {
            Some((p, rest)) => (p.as_str(), rest.to_vec()),
            None => ("redis-server", Vec::new()),
        };
        let server: &[&str] = if self.prefix.is_empty() {
            &[]
        } else {
            &["redis-server"]
        };
        let child = Command::new(program)
            .args(pre)
            .args(server)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", &self.dir.path().to_string_lossy()])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .args([
                "--logfile",
                &self.dir.path().join("redis.log").to_string_lossy(),
            ])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .detached_if_shared()
            .spawn()
            .map_err(|e| format!("redis-server not runnable (is it installed?): {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!("redis-server exited with {status}: {}", self.log()));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        Err("redis-server did not answer PING within 10 s".into())
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id).or(self.attached)
    }

    /// The server's data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server and starts it again on the same port and data directory.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("restart failed: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Adds an ACL user with `password` and `rule` (space-separated ACL rules, e.g.
    /// `delayq_redis::ACL_RULE`); panics when the server refuses the rule.
    pub fn add_user(&self, user: &str, password: &str, rule: &str) {
        let pass = format!(">{password}");
        let mut args = vec!["ACL", "SETUSER", user, "reset", "on", pass.as_str()];
        args.extend(rule.split_whitespace());
        let reply = self.command(&args);
        assert_eq!(reply, "OK", "ACL SETUSER {user}: {reply}");
    }

    /// The URL of this server as `user` with `password`.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!("redis://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// The server's `host:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Whether the process is running (not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some() || self.attached.is_some()
    }

    /// Sends one command (arguments as strings) and returns the raw RESP reply.
    pub fn command(&self, args: &[&str]) -> String {
        command_on(self.port, args)
    }

    /// `INFO <section>` as text.
    pub fn info(&self, section: &str) -> String {
        self.command(&["INFO", section])
    }

    /// Scripts the server has run so far (`EVALSHA` and `EVAL` calls, `INFO commandstats`).
    pub fn scripts_run(&self) -> u64 {
        self.info("commandstats")
            .lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| {
                let calls = l.split("calls=").nth(1)?.split(',').next()?;
                calls.parse::<u64>().ok()
            })
            .sum()
    }

    /// The integer field `name` of `INFO <section>`.
    pub fn info_field(&self, section: &str, name: &str) -> Option<f64> {
        self.info(section).lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        })
    }

    fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join("redis.log")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Stoppable for RedisServer {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        (
            self.pid().into_iter().collect(),
            vec![self.dir().to_path_buf()],
        )
    }
    /// One line that [`RedisServer::attach`] reads back in another process.
    fn describe(&self) -> String {
        format!(
            "{} {} {}",
            self.port,
            self.pid().unwrap_or(0),
            self.dir().display()
        )
    }

    /// The server a [`RedisServer::describe`] line names, started by another process: usable
    /// as the one that started it, but never killed or restarted from here.
    fn attach(line: &str) -> Self {
        let mut parts = line.splitn(3, ' ');
        let mut next = || parts.next().expect("a described server");
        let port = next().parse().expect("port");
        let pid = next().parse().expect("pid");
        Self {
            child: None,
            attached: Some(pid),
            port,
            dir: Dir::Kept(PathBuf::from(next())),
            extra: Vec::new(),
            prefix: Vec::new(),
        }
    }
}

/// A temporary directory this process owns (removed when dropped), or one another test
/// process of the run owns.
pub(crate) enum Dir {
    /// Made here.
    Own(tempfile::TempDir),
    /// Made by the process that started a shared server.
    Kept(PathBuf),
}

impl Dir {
    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Dir::Own(d) => d.path(),
            Dir::Kept(p) => p,
        }
    }
}

/// Sends one command to the server on `port` and returns its reply as text.
pub fn command_on(port: u16, args: &[&str]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{}\r\n", a.len(), a));
    }
    s.write_all(req.as_bytes()).expect("write");
    read_reply(&mut BufReader::new(s))
}

/// A free TCP port on 127.0.0.1 (free when asked; a server binding it may still race).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Whether a server answers `PING` on `port` (a `NOAUTH` refusal counts: the server is up,
/// its `default` user is off, as deploy/redis/users.acl has it).
pub fn ping(port: u16) -> bool {
    let Ok(mut s) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    s.set_read_timeout(Some(Duration::from_millis(500))).ok();
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).is_ok()
        && (line.starts_with("+PONG") || line.starts_with("-NOAUTH"))
}

/// Reads one RESP2 reply and renders it as text (bulk strings as their content, arrays as
/// lines).
pub(crate) fn read_reply(r: &mut impl BufRead) -> String {
    let mut line = String::new();
    r.read_line(&mut line).expect("reply");
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1);
    match kind {
        "$" => {
            let n: i64 = rest.parse().unwrap_or(-1);
            if n < 0 {
                return String::new();
            }
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf).expect("bulk");
            buf.truncate(n as usize);
            String::from_utf8_lossy(&buf).into_owned()
        }
        "*" => {
            let n: i64 = rest.parse().unwrap_or(0);
            (0..n.max(0))
                .map(|_| read_reply(r))
                .collect::<Vec<_>>()
                .join("\n")
        }
        _ => rest.to_owned(),
    }
}

/// A path in a fresh temporary directory that lives as long as the returned guard.
pub fn temp_path(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("temp dir");
    let p = d.path().join(name);
    (d, p)
}
