//! The CLI on production topologies: TLS as an ACL user, connection errors that name the
//! problem without the password, sharded queues, and `doctor` on a Cluster, behind Sentinel
//! and checking an ACL rule.

use std::process::{Command, Output};

use crate::common::text;
use delayq_test_support::RedisServer;
use delayq_test_support::cluster::RedisCluster;
use delayq_test_support::sentinel::SentinelSet;
use delayq_test_support::tls::TlsServer;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(args)
        .env_remove("DELAYQ_REDIS_URL")
        .output()
        .unwrap()
}

#[test]
fn connection_errors_name_the_problem_and_never_the_password() {
    let s = RedisServer::start();
    s.add_user("app", "right-pass", delayq_redis::ACL_RULE);
    let wrong = format!("redis://app:hunter2@127.0.0.1:{}", s.port());
    let o = run(&["--redis", &wrong, "stats"]);
    let t = text(&o);
    assert_ne!(o.status.code(), Some(0), "{t}");
    assert!(!t.contains("hunter2"), "password leaked: {t}");
    assert!(t.contains("app:***@127.0.0.1"), "{t}");

    for (url, says) in [
        ("http://h:1", "unknown scheme"),
        ("redis+sentinel://a:1", "name the master"),
        ("redis://u:hunter2@h:notaport", "not a number"),
    ] {
        let t = text(&run(&["--redis", url, "stats"]));
        assert!(t.contains(says) && !t.contains("hunter2"), "{url}: {t}");
    }
    let o = run(&[
        "--redis",
        "rediss://h:1",
        "--tls-ca",
        "/nonexistent.pem",
        "stats",
    ]);
    assert!(text(&o).contains("/nonexistent.pem"), "{}", text(&o));
}

#[test]
fn tls_as_an_acl_user_and_doctor_checks_the_rule() {
    let s = TlsServer::start();
    s.server.add_user("delayq", "pw", delayq_redis::ACL_RULE);
    s.server.add_user(
        "weak",
        "pw",
        "resetkeys ~dq:* resetchannels -@all +evalsha +ping",
    );
    let c = s.certs();
    let ca = c.ca.to_string_lossy().into_owned();
    let url = s.url(Some(("delayq", "pw")));
    let o = run(&[
        "--redis",
        &url,
        "--tls-ca",
        &ca,
        "enqueue",
        "--id",
        "t1",
        "--payload",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["--redis", &url, "--tls-ca", &ca, "get", "t1", "--json"]);
    assert!(text(&o).contains("\"t1\""), "{}", text(&o));

    // Without the CA the server's certificate is not trusted.
    let o = run(&["--redis", &url, "stats"]);
    assert_ne!(o.status.code(), Some(0));

    // An admin checks users' rules with ACL DRYRUN.
    let admin = s.url(None);
    let doctor = |user: &str| {
        let args = [
            "--redis",
            &admin,
            "--tls-ca",
            &ca,
            "doctor",
            "--acl-user",
            user,
        ];
        run(&args)
    };
    let t = text(&doctor("delayq"));
    assert!(t.contains("ok    tls"), "{t}");
    assert!(t.contains("ok    acl          user delayq"), "{t}");
    let o = doctor("weak");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("FAIL  acl") && t.contains("zadd") && t.contains("publish"),
        "{t}"
    );
    // The least-privilege user itself cannot run ACL DRYRUN: a warning says what to do.
    let o = run(&["--redis", &url, "--tls-ca", &ca, "doctor"]);
    assert!(text(&o).contains("--acl-user"), "{}", text(&o));
}

#[test]
fn sharded_queues_from_the_cli() {
    let s = RedisServer::start();
    let url = s.url();
    let o = run(&[
        "--redis", &url, "queue", "create", "orders", "--shards", "4",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for i in 0..10 {
        let id = format!("o{i}");
        let o = run(&[
            "--redis",
            &url,
            "-q",
            "orders",
            "enqueue",
            "--id",
            &id,
            "--delay",
            "1h",
            "--payload",
            "x",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let o = run(&["--redis", &url, "queue", "show", "orders", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["settings"]["shards"], 4);
    assert_eq!(v["stats"]["scheduled"], 10);
    let o = run(&[
        "--redis", &url, "queue", "create", "orders", "--shards", "2",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(text(&o).contains("holds jobs"), "{}", text(&o));
    let o = run(&["--redis", &url, "-q", "orders", "cancel", "o3"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn doctor_on_a_cluster_and_behind_sentinel() {
    let c = RedisCluster::start(3, 0);
    let o = run(&["--redis", &c.url(None), "doctor"]);
    let t = text(&o);
    assert!(t.contains("ok    topology     cluster"), "{t}");
    assert!(
        t.contains("ok    cluster      cluster_state ok, all 16384 slots"),
        "{t}"
    );
    assert_eq!(
        t.matches("WARN  replicas").count(),
        3,
        "masters without replicas: {t}"
    );
    assert_eq!(
        t.matches("ok    eviction").count(),
        3,
        "checked on every master: {t}"
    );

    let s = SentinelSet::start();
    let o = run(&["--redis", &s.url(), "doctor"]);
    let t = text(&o);
    assert!(t.contains("ok    topology     sentinel"), "{t}");
    let master = format!("names master 127.0.0.1:{}", s.master.port());
    assert!(t.contains(&master) && t.contains("quorum 1"), "{t}");
}

/// A password kept out of the process list: from a file or the environment (it wins over the
/// URL's), and `doctor` warns when the URL on the command line carries one.
#[test]
fn the_redis_password_can_stay_out_of_the_process_list() {
    let s = RedisServer::start();
    s.add_user("app", "file-pass", delayq_redis::ACL_RULE);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redis-password");
    std::fs::write(&file, "file-pass\n").unwrap();
    // Readable by every user: refused, naming the file and the mode.
    let f = file.to_str().unwrap();
    let o = run(&["--redis", &s.url(), "--redis-password-file", f, "stats"]);
    assert!(
        !o.status.success() && text(&o).contains("mode 0644"),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("file-pass"), "{}", text(&o));
    crate::common::chmod(&file, 0o600);
    // `redis://app@host` with the password in a file logs in as `app` (the shipped
    // deploy files' form).
    let bare = format!("redis://app@127.0.0.1:{}", s.port());
    let o = run(&["--redis", &bare, "--redis-password-file", f, "stats"]);
    assert!(o.status.success(), "{}", text(&o));
    let url = format!("redis://app:@127.0.0.1:{}", s.port());
    let o = run(&["--redis", &url, "--redis-password-file", f, "stats"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--redis", &url, "stats"])
        .env("DELAYQ_REDIS_PASSWORD", "file-pass")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // It is what logs in: a wrong one is refused at once (no waiting, no password shown).
    std::fs::write(&file, "wrong-pass\n").unwrap();
    let o = run(&["--redis", &url, "--redis-password-file", f, "stats"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("wrong-pass"), "{}", text(&o));
    std::fs::write(&file, "file-pass\n").unwrap();
    let visible = format!("redis://app:file-pass@127.0.0.1:{}", s.port());
    let o = run(&["--redis", &visible, "doctor"]);
    assert!(text(&o).contains("WARN  password"), "{}", text(&o));
    let o = run(&["--redis", &url, "--redis-password-file", f, "doctor"]);
    assert!(!text(&o).contains("WARN  password"), "{}", text(&o));
}
