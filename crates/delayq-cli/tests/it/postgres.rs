//! PostgreSQL beside the store, through the binary: `delayq migrate`, `serve` and `worker`
//! relaying jobs an application enqueued in its own transaction (with the password in a
//! file), `/readyz` and `doctor` saying when PostgreSQL is down, a newer schema refused.

use std::path::Path;

use delayq_test_support::postgres::{PG_PASSWORD, PgServer};
use delayq_test_support::shared;

use crate::common::{Killed, delayq, request, spawn_serve, text, until};

/// `delayq` on the run's Redis in a namespace of its own, with `--postgres` and any `args`.
pub(crate) fn on(dir: &Path, ns: &str, pg: &str, args: &[&str]) -> std::process::Command {
    let mut c = delayq(dir);
    c.args(["--redis", &shared::redis().url(), "--namespace", ns])
        .args(["--postgres", pg])
        .args(args);
    c
}

fn state_of(dir: &Path, ns: &str, pg: &str, queue: &str, id: &str) -> String {
    let o = on(dir, ns, pg, &["--queue", queue, "get", id, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    v["state"].as_str().unwrap_or("").to_owned()
}

#[test]
fn migrate_then_serve_and_worker_relay_jobs_enqueued_in_a_transaction() {
    let pg = shared::postgres();
    let db = pg.database();
    let dir = tempfile::tempdir().unwrap();
    let ns = shared::namespace();
    // The password kept apart, in a file only its owner reads.
    let pass = dir.path().join("pg-password");
    std::fs::write(&pass, format!("{PG_PASSWORD}\n")).unwrap();
    crate::common::chmod(&pass, 0o600);
    let url = pg.url_without_password(&db);
    let with_pass = |args: &[&str]| {
        let mut c = on(dir.path(), &ns, &url, args);
        c.args(["--postgres-password-file", &pass.to_string_lossy()]);
        c
    };
    let o = with_pass(&["migrate"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let latest = delayq_postgres::LATEST;
    assert!(
        text(&o).contains(&format!("version 0 → {latest}")),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains(PG_PASSWORD));
    let o = with_pass(&["migrate"]).output().unwrap();
    assert!(
        text(&o).contains(&format!("already at version {latest}")),
        "{}",
        text(&o)
    );

    let (serve, addr) = spawn_serve(&mut with_pass(&["serve", "--listen", "127.0.0.1:0"]));
    pg.psql(
        &db,
        "BEGIN;
         CREATE TABLE orders (id int PRIMARY KEY);
         INSERT INTO orders VALUES (42);
         SELECT delayq.enqueue('orders', 'cancel-42', '{\"order\": 42}', now() + interval '30 minutes',
                               '{\"max_attempts\": 3}');
         COMMIT;
         BEGIN;
         SELECT delayq.enqueue('orders', 'never', '{}');
         ROLLBACK;",
    )
    .unwrap();
    let full = pg.url(&db);
    until("the committed job in Redis", || {
        state_of(dir.path(), &ns, &full, "orders", "cancel-42") == "scheduled"
    });
    assert_eq!(state_of(dir.path(), &ns, &full, "orders", "never"), "");
    let (status, body) = request(&addr, "GET", "/readyz", &[], "");
    assert_eq!((status, body.as_str()), (200, "ready\n"));
    let o = with_pass(&["doctor"]).output().unwrap();
    let report = text(&o);
    let schema = format!("pg-schema    version {latest}");
    for line in ["postgres", &schema, "pg-outbox", "pg-rejected"] {
        assert!(report.contains(line), "{line}: {report}");
    }
    drop(serve);

    // A worker relays too, and runs what it relayed.
    let out = dir.path().join("ran");
    let exec = format!("cat >> {}; echo >> {}", out.display(), out.display());
    let worker = Killed(
        with_pass(&["--queue", "now", "worker", "--exec", &exec, "--quiet"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    pg.psql(
        &db,
        "SELECT delayq.enqueue('now', 'hello', '\"from a transaction\"')",
    )
    .unwrap();
    until("the worker ran the relayed job", || {
        std::fs::read_to_string(&out).is_ok_and(|s| s.contains("\"from a transaction\""))
    });
    drop(worker);
}

#[test]
fn readyz_and_doctor_say_when_postgres_is_down_and_plain_jobs_keep_flowing() {
    let mut pg = PgServer::start();
    let db = pg.database();
    let url = pg.url(&db);
    let dir = tempfile::tempdir().unwrap();
    let ns = shared::namespace();
    let (_serve, addr) = spawn_serve(&mut on(
        dir.path(),
        &ns,
        &url,
        &["serve", "--listen", "127.0.0.1:0"],
    ));
    until("the relay made the schema", || {
        pg.psql(&db, "SELECT to_regclass('delayq.outbox') IS NOT NULL")
            .is_ok_and(|s| s == "t")
    });
    pg.kill();
    until("/readyz says postgres is down", || {
        let (status, body) = request(&addr, "GET", "/readyz", &[], "");
        status == 200 && body.starts_with("ready\n") && body.contains("degraded: postgres")
    });
    let (status, _) = request(
        &addr,
        "POST",
        "/v1/queues/plain/jobs",
        &[],
        r#"{"id": "p-1", "payload": 1}"#,
    );
    assert_eq!(status, 201, "plain jobs keep flowing");
    let o = on(dir.path(), &ns, &url, &["doctor"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cannot reach"), "{}", text(&o));
    pg.restart();
    pg.psql(&db, "SELECT delayq.enqueue('orders', 'after', '{}')")
        .unwrap();
    until("relayed after the restart", || {
        state_of(dir.path(), &ns, &url, "orders", "after") == "due"
            || state_of(dir.path(), &ns, &url, "orders", "after") == "scheduled"
    });
    until("/readyz is well again", || {
        request(&addr, "GET", "/readyz", &[], "").1 == "ready\n"
    });
}

#[test]
fn a_database_a_newer_delayq_migrated_is_refused() {
    let pg = shared::postgres();
    let db = pg.database();
    let dir = tempfile::tempdir().unwrap();
    let ns = shared::namespace();
    let url = pg.url(&db);
    assert!(
        on(dir.path(), &ns, &url, &["migrate"])
            .status()
            .unwrap()
            .success()
    );
    pg.psql(
        &db,
        "INSERT INTO delayq.schema_version (version) VALUES (99)",
    )
    .unwrap();
    let o = on(dir.path(), &ns, &url, &["migrate"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains(&format!(
            "version 99, newer than this build's {}",
            delayq_postgres::LATEST
        )),
        "{}",
        text(&o)
    );
    let o = delayq(dir.path()).args(["migrate"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--postgres"), "{}", text(&o));
}

/// The cold tier through a `delayq serve --postgres`: a queue set to keep jobs due more than an
/// hour ahead cold (`delayq queue set --cold-after 1h` through the server), a job due in two
/// hours is kept in PostgreSQL — `GET` says `tier: "cold"`, the counts include it, Redis
/// holds nothing of it — and is cancelled there; a near job of the same queue goes to Redis.
#[test]
fn a_queue_keeps_its_far_jobs_in_postgres_through_the_server() {
    let pg = shared::postgres();
    let db = pg.database();
    let url = pg.url(&db);
    let dir = tempfile::tempdir().unwrap();
    let ns = shared::namespace();
    let (_serve, addr) = spawn_serve(&mut on(
        dir.path(),
        &ns,
        &url,
        &["serve", "--listen", "127.0.0.1:0"],
    ));
    let server = format!("http://{addr}");
    until("the schema", || {
        pg.psql(&db, "SELECT to_regclass('delayq.cold_queues') IS NOT NULL")
            .is_ok_and(|s| s == "t")
    });
    let o = delayq(dir.path())
        .args([
            "--server",
            &server,
            "queue",
            "set",
            "orders",
            "--cold-after",
            "1h",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let (status, body) = request(&addr, "GET", "/v1/queues/orders", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"cold_after_ms\":3600000"), "{body}");
    let two_hours = 2 * 3_600_000;
    let (status, body) = request(
        &addr,
        "POST",
        "/v1/queues/orders/jobs",
        &[],
        &format!(
            r#"{{"id": "remind-7", "payload": {{"user": 7}}, "delay_ms": {two_hours}, "key": "u7"}}"#
        ),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = request(
        &addr,
        "POST",
        "/v1/queues/orders/jobs",
        &[],
        r#"{"id": "soon-1", "payload": 1, "delay_ms": 60000}"#,
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = request(&addr, "GET", "/v1/queues/orders/jobs/remind-7", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"tier\":\"cold\""), "{body}");
    assert!(body.contains("\"state\":\"scheduled\""), "{body}");
    let (_, body) = request(&addr, "GET", "/v1/queues/orders/jobs/soon-1", &[], "");
    assert!(!body.contains("tier"), "{body}");
    assert_eq!(
        pg.psql(&db, "SELECT id FROM delayq.cold").unwrap(),
        "remind-7"
    );
    // Redis itself holds only the near one.
    let plain = |id: &str| {
        let o = delayq(dir.path())
            .args([
                "--redis",
                &shared::redis().url(),
                "--namespace",
                &ns,
                "--queue",
                "orders",
                "get",
                id,
                "--json",
            ])
            .output()
            .unwrap();
        text(&o)
    };
    assert!(
        plain("remind-7").contains("not_found"),
        "{}",
        plain("remind-7")
    );
    // A one-shot command given --postgres sees the tier too.
    let o = on(
        dir.path(),
        &ns,
        &url,
        &["--queue", "orders", "get", "remind-7", "--json"],
    )
    .output()
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert_eq!(v["tier"], "cold", "{}", text(&o));
    assert!(
        plain("soon-1").contains("\"scheduled\""),
        "{}",
        plain("soon-1")
    );
    let (status, listed) = request(
        &addr,
        "GET",
        "/v1/queues/orders/jobs?state=scheduled",
        &[],
        "",
    );
    assert_eq!(status, 200, "{listed}");
    let at = |id: &str| {
        listed
            .find(id)
            .unwrap_or_else(|| panic!("{id} not listed: {listed}"))
    };
    assert!(
        at("soon-1") < at("remind-7"),
        "the store's first, then the tier's: {listed}"
    );
    assert!(listed.contains("\"tier\":\"cold\""), "{listed}");
    let (_, stats) = request(&addr, "GET", "/v1/queues/orders", &[], "");
    assert!(stats.contains("\"scheduled\":2"), "{stats}");
    // A key's jobs, wherever they are.
    let (status, keyed) = request(&addr, "GET", "/v1/queues/orders/keys/u7/jobs", &[], "");
    assert_eq!(status, 200, "{keyed}");
    assert!(
        keyed.contains("remind-7") && keyed.contains("\"tier\":\"cold\""),
        "{keyed}"
    );
    let (status, body) = request(&addr, "DELETE", "/v1/queues/orders/jobs/remind-7", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(pg.psql(&db, "SELECT count(*) FROM delayq.cold").unwrap() == "0");
    let (status, _) = request(&addr, "GET", "/v1/queues/orders/jobs/remind-7", &[], "");
    assert_eq!(status, 404);
}
