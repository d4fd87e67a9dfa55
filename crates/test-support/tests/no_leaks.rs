//! Every server a test starts is gone when the test binary exits: this test runs another test
//! of this binary in a child process (which starts a plain server, a TLS server, a Sentinel set
//! and a Cluster, and reports their ports and directories), then checks that nothing answers on
//! those ports and the directories are removed.

use std::process::Command;

use delayq_test_support::cluster::RedisCluster;
use delayq_test_support::sentinel::SentinelSet;
use delayq_test_support::tls::TlsServer;
use delayq_test_support::{RedisServer, ping};

#[test]
#[ignore = "run by servers_are_gone_when_the_test_binary_exits"]
fn child_starts_servers() {
    let plain = RedisServer::start();
    let tls = TlsServer::start();
    let set = SentinelSet::start();
    let cluster = RedisCluster::start(3, 0);
    let mut ports = vec![plain.port(), tls.server.port(), tls.tls_port()];
    ports.extend([set.master.port(), set.replica.port(), set.sentinel_port()]);
    ports.extend(cluster.nodes.iter().map(RedisServer::port));
    let dirs = [plain.dir(), tls.server.dir(), set.master.dir()];
    println!(
        "PORTS {}",
        ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for d in dirs {
        println!("DIR {}", d.display());
    }
}

#[test]
fn servers_are_gone_when_the_test_binary_exits() {
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_starts_servers",
            "--nocapture",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ports: Vec<u16> = out
        .lines()
        .find_map(|l| l.strip_prefix("PORTS "))
        .expect("the child reports its ports")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(ports.len() >= 9, "{ports:?}");
    for p in &ports {
        assert!(!ping(*p), "a server still answers on port {p}");
    }
    let dirs: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("DIR ")).collect();
    assert_eq!(dirs.len(), 3);
    for d in dirs {
        assert!(!std::path::Path::new(d).exists(), "{d} was not removed");
    }
}
