//! A local Redis Cluster: `masters` nodes (plus `replicas` per master) started with
//! `cluster-enabled yes`, joined by `redis-cli --cluster create`, returned once every node
//! reports `cluster_state:ok`. Dropping it kills every node.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::RedisServer;
use crate::lifecycle::Stoppable;
use crate::partition::{self, Endpoint};

/// A running cluster.
pub struct RedisCluster {
    /// Every node (masters first, as created).
    pub nodes: Vec<RedisServer>,
    /// Each node's source address when started partitionable.
    sources: Vec<std::net::Ipv4Addr>,
}

impl RedisCluster {
    /// Starts a cluster of `masters` masters with `replicas` replicas each.
    pub fn start(masters: usize, replicas: usize) -> Self {
        Self::start_prefixed(&[], masters, replicas)
    }

    /// The same, each node started as `prefix… redis-server …` (e.g. `taskset -c 0`).
    pub fn start_prefixed(prefix: &[&str], masters: usize, replicas: usize) -> Self {
        Self::start_inner(prefix, masters, replicas, false)
    }

    /// [`RedisCluster::start`] with each node connecting out from an address of its own, so
    /// that [`partition::cut`] can separate them ([`RedisCluster::sides`]). Only inside a
    /// network namespace of the caller's ([`partition::enter_namespace`]).
    pub fn start_partitionable(masters: usize, replicas: usize) -> Self {
        Self::start_inner(&[], masters, replicas, true)
    }

    fn start_inner(prefix: &[&str], masters: usize, replicas: usize, part: bool) -> Self {
        let n = masters * (1 + replicas);
        let sources: Vec<std::net::Ipv4Addr> = if part {
            (0..n).map(|_| partition::next_source()).collect()
        } else {
            Vec::new()
        };
        let nodes: Vec<RedisServer> = (0..n)
            .map(|i| {
                let mut args: Vec<String> = [
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ]
                .map(String::from)
                .to_vec();
                if let Some(src) = sources.get(i) {
                    args.extend(partition::server_args(*src));
                    args.extend(["--cluster-announce-ip".into(), "127.0.0.1".into()]);
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                RedisServer::start_prefixed(prefix, &args).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(RedisServer::addr));
        args.extend([
            "--cluster-replicas".into(),
            replicas.to_string(),
            "--cluster-yes".into(),
        ]);
        let out = Command::new("redis-cli")
            .args(&args)
            .output()
            .expect("redis-cli not runnable (is it installed?)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let c = Self { nodes, sources };
        c.wait_ok();
        c
    }

    /// Waits until every running node says `cluster_state:ok` and knows every other node.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = self.nodes.iter().filter(|n| n.is_running()).all(|n| {
                let info = n.command(&["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "cluster did not become ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis+cluster://` with every node as a seed (`user:password@` when given).
    pub fn url(&self, auth: Option<(&str, &str)>) -> String {
        let seeds: Vec<String> = self.nodes.iter().map(RedisServer::addr).collect();
        let auth = auth.map(|(u, p)| format!("{u}:{p}@")).unwrap_or_default();
        format!("redis+cluster://{auth}{}", seeds.join(","))
    }

    /// The running node that serves `slot` as master.
    pub fn master_of(&self, slot: u16) -> &RedisServer {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .find(|n| {
                n.command(&["CLUSTER", "NODES"])
                    .lines()
                    .any(|l| l.contains("myself") && l.contains("master") && owns(l, slot))
            })
            .expect("a master serves the slot")
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> u16 {
        let n = self.nodes.iter().find(|n| n.is_running()).expect("a node");
        n.command(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("slot")
    }

    /// The replica of the master serving `slot`, when it has one.
    pub fn replica_of_slot(&self, slot: u16) -> Option<&RedisServer> {
        let master = self.master_of(slot);
        let port = format!("master_port:{}", master.port());
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .find(|n| n.info("replication").contains(&port))
    }

    /// `CLUSTER FAILOVER` on the replica of `slot`'s master; returns once the replica serves
    /// the slot.
    pub fn failover(&self, slot: u16) {
        let replica = self.replica_of_slot(slot).expect("a replica");
        let deadline = Instant::now() + Duration::from_secs(30);
        // A manual failover gives up after 5 s when the master does not pause in time (a
        // loaded master): ask again until it happens.
        'ask: loop {
            let r = replica.command(&["CLUSTER", "FAILOVER"]);
            assert_eq!(r, "OK", "CLUSTER FAILOVER: {r}");
            let asked = Instant::now();
            while asked.elapsed() < Duration::from_secs(6) {
                if replica.info("replication").contains("role:master")
                    && self.master_of_opt(slot).map(RedisServer::port) == Some(replica.port())
                {
                    break 'ask;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                Instant::now() < deadline,
                "failover did not complete: {}",
                replica.command(&["CLUSTER", "NODES"])
            );
        }
    }

    fn master_of_opt(&self, slot: u16) -> Option<&RedisServer> {
        // The node the others agree on: every running node's view of the slot's master.
        self.nodes.iter().filter(|n| n.is_running()).find(|n| {
            n.command(&["CLUSTER", "NODES"])
                .lines()
                .any(|l| l.contains("myself") && l.contains("master") && owns(l, slot))
        })
    }

    /// Moves `slot` (and its keys) to another master, the way `redis-cli --cluster reshard`
    /// does: IMPORTING/MIGRATING, `MIGRATE` in batches, then `SETSLOT NODE` everywhere.
    pub fn migrate_slot(&self, slot: u16) {
        let from = self.master_of(slot);
        let to = self
            .nodes
            .iter()
            .filter(|n| n.is_running() && n.port() != from.port())
            .find(|n| n.info("replication").contains("role:master"))
            .expect("another master");
        let id = |n: &RedisServer| n.command(&["CLUSTER", "MYID"]).trim().to_owned();
        let (from_id, to_id) = (id(from), id(to));
        let s = slot.to_string();
        assert_eq!(
            to.command(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]),
            "OK"
        );
        assert_eq!(
            from.command(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]),
            "OK"
        );
        loop {
            let keys = from.command(&["CLUSTER", "GETKEYSINSLOT", &s, "100"]);
            let keys: Vec<&str> = keys.lines().filter(|l| !l.is_empty()).collect();
            if keys.is_empty() {
                break;
            }
            let port = to.port().to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys);
            let r = from.command(&args);
            assert!(r == "OK" || r == "NOKEY", "MIGRATE: {r}");
        }
        let masters = self
            .nodes
            .iter()
            .filter(|n| n.is_running() && n.info("replication").contains("role:master"));
        for n in masters {
            let r = n.command(&["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
            assert_eq!(r, "OK", "SETSLOT NODE on {}", n.port());
        }
    }

    /// The first half of an unplanned failover: SIGKILLs the master serving `slot`.
    pub fn kill_master_of(&mut self, slot: u16) {
        let port = self.master_of(slot).port();
        if let Some(n) = self.nodes.iter_mut().find(|n| n.port() == port) {
            n.kill();
        }
    }

    /// The second half: waits until a replica takes `slot` over (after the node timeout),
    /// restarts every killed node (each rejoins as a replica, empty, and syncs) and waits
    /// until every node is ok again.
    pub fn recover(&mut self, slot: u16) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.master_of_opt(slot).is_none() {
            assert!(
                Instant::now() < deadline,
                "no replica took slot {slot} over"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let killed: Vec<usize> = (0..self.nodes.len())
            .filter(|i| !self.nodes[*i].is_running())
            .collect();
        for &i in &killed {
            self.nodes[i].restart();
        }
        for i in killed {
            loop {
                let info = self.nodes[i].info("replication");
                if info.contains("role:slave") && info.contains("master_link_status:up") {
                    break;
                }
                assert!(Instant::now() < deadline, "the old master did not rejoin");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.wait_ok();
    }

    /// For a partition: the master serving `slot` and every other node (its replica and the
    /// other masters with theirs), with their client and bus ports. `None` unless started by
    /// [`RedisCluster::start_partitionable`].
    pub fn sides(&self, slot: u16) -> Option<(Endpoint, Vec<Endpoint>)> {
        let port = self.master_of(slot).port();
        let mut master = None;
        let mut others = Vec::new();
        for (n, src) in self.nodes.iter().zip(&self.sources) {
            let e = Endpoint {
                source: *src,
                ports: vec![n.port(), n.port() + 10_000],
            };
            if n.port() == port {
                master = Some(e);
            } else {
                others.push(e);
            }
        }
        Some((master?, others))
    }

    /// After a partition healed: waits until `port` (a master cut off on the minority side)
    /// serves as a replica in sync and every node is ok again.
    pub fn wait_rejoined(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let node = self
            .nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("a node");
        loop {
            let info = node.info("replication");
            if info.contains("role:slave") && info.contains("master_link_status:up") {
                break;
            }
            assert!(Instant::now() < deadline, "the old master did not rejoin");
            std::thread::sleep(Duration::from_millis(100));
        }
        self.wait_ok();
    }

    /// Adds a user with `rule` on every node.
    pub fn add_user(&self, user: &str, password: &str, rule: &str) {
        for n in &self.nodes {
            n.add_user(user, password, rule);
        }
    }
}

/// Whether a `CLUSTER NODES` line's slot ranges include `slot`.
fn owns(line: &str, slot: u16) -> bool {
    line.split_whitespace().skip(8).any(|r| {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
    })
}

impl Stoppable for RedisCluster {
    fn leftovers(&self) -> (Vec<u32>, Vec<std::path::PathBuf>) {
        let mut out = (Vec::new(), Vec::new());
        for n in &self.nodes {
            let (p, d) = n.leftovers();
            out.0.extend(p);
            out.1.extend(d);
        }
        out
    }
    /// One line per node, which [`RedisCluster::attach`] reads back in another process.
    fn describe(&self) -> String {
        let lines: Vec<String> = self.nodes.iter().map(RedisServer::describe).collect();
        lines.join("\n")
    }

    /// The cluster [`RedisCluster::describe`] names, started by another process.
    fn attach(text: &str) -> Self {
        Self {
            nodes: text.lines().map(RedisServer::attach).collect(),
            sources: Vec::new(),
        }
    }
}
