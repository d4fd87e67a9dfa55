//! A local Redis Cluster: `masters` nodes (plus `replicas` per master) started with
//! `cluster-enabled yes`, joined by `redis-cli --cluster create`, returned once every node
//! reports `cluster_state:ok`. Dropping it kills every node.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::RedisServer;

/// A running cluster.
pub struct RedisCluster {
    /// Every node (masters first, as created).
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts a cluster of `masters` masters with `replicas` replicas each.
    pub fn start(masters: usize, replicas: usize) -> Self {
        let n = masters * (1 + replicas);
        let nodes: Vec<RedisServer> = (0..n)
            .map(|_| {
                RedisServer::start_with(&[
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
                ])
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
        let c = Self { nodes };
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
