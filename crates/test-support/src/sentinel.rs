//! A master, its replica and one sentinel watching them as `mymaster` (quorum 1, master down
//! after 1 s), each a throwaway process; dropping it kills all three.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lifecycle::DetachIfShared as _;
use crate::lifecycle::Stoppable;
use crate::partition::{self, Endpoint};
use crate::{RedisServer, command_on, free_port, ping};

/// Name of the master the sentinel watches.
pub const MASTER: &str = "mymaster";

/// Master, replica and sentinel.
pub struct SentinelSet {
    /// The master at start.
    pub master: RedisServer,
    /// Its replica.
    pub replica: RedisServer,
    sentinel: Option<Child>,
    /// The sentinel's process id when another test process started it.
    attached: Option<u32>,
    sentinel_port: u16,
    /// The source addresses of master, replica and sentinel when started partitionable.
    sources: Option<[std::net::Ipv4Addr; 3]>,
    _dir: crate::Dir,
}

impl SentinelSet {
    /// Starts the three and waits until the replica is in sync and the sentinel watches it.
    pub fn start() -> Self {
        Self::start_with_replica(&[])
    }

    /// [`SentinelSet::start`] with extra arguments for the replica's `redis-server` (e.g. an
    /// ACL that refuses the sentinel's `REPLICAOF NO ONE`, to hold a failover in progress).
    pub fn start_with_replica(extra: &[&str]) -> Self {
        Self::start_inner(&[], extra, None)
    }

    /// [`SentinelSet::start`] with extra arguments for the master's `redis-server` (e.g. an
    /// ACL that refuses the sentinel's `REPLICAOF`: demoted, it goes on taking writes).
    pub fn start_with_master(extra: &[&str]) -> Self {
        Self::start_inner(extra, &[], None)
    }

    /// [`SentinelSet::start`] with each process connecting out from an address of its own,
    /// so that [`partition::cut`] can separate them ([`SentinelSet::sides`]). Only inside a
    /// network namespace of the caller's ([`partition::enter_namespace`]).
    pub fn start_partitionable() -> Self {
        let sources = [(); 3].map(|()| partition::next_source());
        Self::start_inner(&[], &[], Some(sources))
    }

    fn start_inner(
        master_extra: &[&str],
        extra: &[&str],
        sources: Option<[std::net::Ipv4Addr; 3]>,
    ) -> Self {
        let own = |i: usize| {
            sources
                .map(|s| partition::server_args(s[i]))
                .unwrap_or_default()
        };
        let plain = ["--save", "", "--appendonly", "no"];
        let master_args: Vec<String> = plain
            .iter()
            .chain(master_extra)
            .map(|s| s.to_string())
            .chain(own(0))
            .collect();
        let master_args: Vec<&str> = master_args.iter().map(String::as_str).collect();
        let master = RedisServer::start_with(&master_args);
        let port = master.port().to_string();
        let mut args: Vec<&str> = plain.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &port]);
        args.extend_from_slice(extra);
        let replica_own = own(1);
        args.extend(replica_own.iter().map(String::as_str));
        let replica = RedisServer::start_with(&args);
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {MASTER} 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 5000\n\
                 sentinel parallel-syncs {MASTER} 1\n{}",
                dir.path().display(),
                master.port(),
                sources.map_or(String::new(), |s| format!(
                    "bind-source-addr {}\nprotected-mode no\nsentinel announce-ip 127.0.0.1\n",
                    s[2]
                ))
            ),
        )
        .expect("sentinel.conf");
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .detached_if_shared()
            .spawn()
            .expect("redis-server --sentinel not runnable");
        let s = Self {
            master,
            replica,
            sentinel: Some(child),
            attached: None,
            sentinel_port: port,
            sources,
            _dir: crate::Dir::Own(dir),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let synced = s
                .replica
                .info("replication")
                .contains("master_link_status:up");
            let watching = ping(port)
                && s.sentinel_command(&["SENTINEL", "REPLICAS", MASTER])
                    .contains(&s.replica.port().to_string());
            if synced && watching {
                return s;
            }
            assert!(Instant::now() < deadline, "sentinel set not ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The sentinel's process id (while it runs) and its directory.
    pub fn sentinel_leftovers(&self) -> (Vec<u32>, Vec<std::path::PathBuf>) {
        (
            self.sentinel
                .as_ref()
                .map(Child::id)
                .or(self.attached)
                .into_iter()
                .collect(),
            vec![self._dir.path().to_path_buf()],
        )
    }

    /// `redis+sentinel://127.0.0.1:<sentinel>/mymaster`.
    pub fn url(&self) -> String {
        format!("redis+sentinel://127.0.0.1:{}/{MASTER}", self.sentinel_port)
    }

    /// The sentinel's port.
    pub fn sentinel_port(&self) -> u16 {
        self.sentinel_port
    }

    /// One command to the sentinel.
    pub fn sentinel_command(&self, args: &[&str]) -> String {
        command_on(self.sentinel_port, args)
    }

    /// The flags the sentinel gives the master now (`master`, `s_down`, `failover_in_progress`
    /// …), from `SENTINEL MASTER`.
    pub fn master_flags(&self) -> String {
        let m = self.sentinel_command(&["SENTINEL", "MASTER", MASTER]);
        let lines: Vec<&str> = m.lines().collect();
        lines
            .iter()
            .position(|l| *l == "flags")
            .and_then(|at| lines.get(at + 1))
            .map_or_else(String::new, |f| (*f).to_owned())
    }

    /// The port of the master the sentinel names now.
    pub fn current_master_port(&self) -> Option<u16> {
        let r = self.sentinel_command(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER]);
        r.lines().nth(1).and_then(|p| p.trim().parse().ok())
    }

    /// The first half of an unplanned failover: SIGKILLs the master the sentinel names.
    pub fn kill_master(&mut self) {
        let current = self
            .current_master_port()
            .expect("the sentinel names a master");
        if self.master.port() == current {
            self.master.kill();
        } else {
            self.replica.kill();
        }
    }

    /// The second half: waits until the sentinel names the server still running as master,
    /// restarts the killed one (it comes back empty, calling itself master, until the
    /// sentinel makes it a replica), then waits until the sentinel names a master and the
    /// other server replicates it in sync — asking the sentinel every time, since a failover
    /// may still end otherwise (never acting on its own view: making a server a replica by
    /// hand on a stale view destroyed acknowledged writes in one run).
    pub fn recover(&mut self) {
        let killed_master = !self.master.is_running();
        let alive = if killed_master {
            self.replica.port()
        } else {
            self.master.port()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.current_master_port() != Some(alive) {
            assert!(Instant::now() < deadline, "no promotion");
            std::thread::sleep(Duration::from_millis(100));
        }
        if killed_master {
            self.master.restart();
        } else {
            self.replica.restart();
        }
        self.wait_settled();
    }

    /// Waits until the sentinel names a master and the other server replicates it in sync
    /// (asking the sentinel every time: a failover may still end otherwise).
    pub fn wait_settled(&self) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some(m) = self.current_master_port() {
                let other = if m == self.master.port() {
                    &self.replica
                } else {
                    &self.master
                };
                let info = other.info("replication");
                if info.contains(&format!("master_port:{m}"))
                    && info.contains("master_link_status:up")
                {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "the old master did not rejoin");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// For a partition: the server the sentinel names master now, and the two others (its
    /// replica and the sentinel). `None` unless started by
    /// [`SentinelSet::start_partitionable`].
    pub fn sides(&self) -> Option<(Endpoint, Vec<Endpoint>)> {
        let [m, r, s] = self.sources?;
        let master = Endpoint {
            source: m,
            ports: vec![self.master.port()],
        };
        let replica = Endpoint {
            source: r,
            ports: vec![self.replica.port()],
        };
        let sentinel = Endpoint {
            source: s,
            ports: vec![self.sentinel_port],
        };
        Some(if self.current_master_port() == Some(self.replica.port()) {
            (replica, vec![master, sentinel])
        } else {
            (master, vec![replica, sentinel])
        })
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        if let Some(mut c) = self.sentinel.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Stoppable for SentinelSet {
    fn leftovers(&self) -> (Vec<u32>, Vec<std::path::PathBuf>) {
        let mut out = self.master.leftovers();
        let (p, d) = self.replica.leftovers();
        out.0.extend(p);
        out.1.extend(d);
        let (p, d) = self.sentinel_leftovers();
        out.0.extend(p);
        out.1.extend(d);
        out
    }
    /// Lines that [`SentinelSet::attach`] reads back in another process.
    fn describe(&self) -> String {
        let (pids, _) = self.sentinel_leftovers();
        format!(
            "{}\n{}\n{} {} {}",
            self.master.describe(),
            self.replica.describe(),
            self.sentinel_port,
            pids.first().copied().unwrap_or(0),
            self._dir.path().display()
        )
    }

    /// The set [`SentinelSet::describe`] names, started by another process.
    fn attach(text: &str) -> Self {
        let lines: Vec<&str> = text.lines().collect();
        let [master, replica, sentinel] = lines[..] else {
            panic!("a described sentinel set: {text}")
        };
        let mut parts = sentinel.splitn(3, ' ');
        let mut next = || parts.next().expect("a described sentinel");
        let sentinel_port = next().parse().expect("sentinel port");
        let pid = next().parse().expect("sentinel pid");
        Self {
            master: RedisServer::attach(master),
            replica: RedisServer::attach(replica),
            sentinel: None,
            attached: Some(pid),
            sentinel_port,
            sources: None,
            _dir: crate::Dir::Kept(std::path::PathBuf::from(next())),
        }
    }
}
