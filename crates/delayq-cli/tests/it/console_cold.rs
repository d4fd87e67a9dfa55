//! The cold tier in a real browser: a job kept in PostgreSQL says so on its page and in the
//! queue's Scheduled tab (a `delayq serve --postgres` on the run's Redis and PostgreSQL).

use serde_json::json;

use delayq_test_support::shared;

use crate::common::{spawn_serve, until};
use crate::console::{browser, http, shot, wait_text};
use crate::postgres::on;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_job_says_where_it_is_kept() {
    let pg = shared::postgres();
    let db = pg.database();
    let dir = tempfile::tempdir().unwrap();
    let ns = shared::namespace();
    let (_serve, addr) = spawn_serve(&mut on(
        dir.path(),
        &ns,
        &pg.url(&db),
        &["serve", "--listen", "127.0.0.1:0"],
    ));
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    until("the schema", || {
        pg.psql(&db, "SELECT to_regclass('delayq.cold_queues') IS NOT NULL")
            .is_ok_and(|s| s == "t")
    });
    let (s, v) = http(
        addr,
        "PUT",
        "/v1/queues/reminders",
        Some(json!({"cold_after_ms": 3_600_000})),
    );
    assert_eq!(s, 200, "{v}");
    for (id, delay) in [("renew-7", 30 * 86_400_000u64), ("nudge-3", 600_000)] {
        let (s, v) = http(
            addr,
            "POST",
            "/v1/queues/reminders/jobs",
            Some(json!({"id": id, "payload": {"user": 7}, "delay_ms": delay})),
        );
        assert_eq!(s, 201, "{v}");
    }

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/reminders/job/renew-7"))
        .await
        .unwrap();
    wait_text(&c, "#job-state", "scheduled").await;
    wait_text(&c, "#job-tier", "in PostgreSQL (cold tier)").await;
    shot(&c, "cold-job").await;
    // The near job is in Redis: no such line (read once its own page has replaced the
    // last one: the route changes before the page does).
    c.goto(&format!("http://{addr}/#/q/reminders/job/nudge-3"))
        .await
        .unwrap();
    wait_text(&c, "#job-id", "nudge-3").await;
    wait_text(&c, "#job-state", "scheduled").await;
    let tier = c
        .execute("return !!document.querySelector('#job-tier');", vec![])
        .await
        .unwrap();
    assert_eq!(tier, json!(false), "a job in Redis is not marked cold");

    // The Scheduled tab lists both, Redis's first, the cold one marked.
    c.goto(&format!("http://{addr}/#/q/reminders/scheduled"))
        .await
        .unwrap();
    wait_text(&c, "table.jobs .tier-cold", "cold").await;
    wait_text(&c, "#settings-summary", "cold after 1.0 h").await;
    let rows = c
        .execute(
            "return [...document.querySelectorAll('table.jobs tbody tr')].map(r => \
             r.querySelector('th').textContent + ':' + !!r.querySelector('.tier-cold'));",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rows, json!(["nudge-3:false", "renew-7:true"]));
    shot(&c, "cold-scheduled").await;
}
