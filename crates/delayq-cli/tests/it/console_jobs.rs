//! A job's page in a real browser: a job a worker runs is cancelled from there — its worker
//! told to stop, the job gone.

use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::json;

use crate::console::{ADMIN, browser, http, serve, shot, sign_in, wait_text};

/// A running job's page offers Cancel; confirmed, it asks `DELETE …?running=true`, and the job
/// is gone (its lease refused from then on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_job_is_cancelled_from_its_page() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(tmp.path());
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/exports/jobs",
        Some(json!({"id": "export-42", "payload": {"report": 42}})),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/exports/claim",
        Some(json!({"max": 1, "lease_ms": 600000})),
    );
    assert_eq!(
        (s, v["jobs"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{v}"
    );
    let token = v["jobs"][0]["lease_token"].as_u64().unwrap();

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/exports/job/export-42"))
        .await
        .unwrap();
    sign_in(&c, ADMIN).await;
    wait_text(&c, "#job-state", "leased").await;
    let found = c
        .execute(
            "const b = [...document.querySelectorAll('.actions button')]\
             .find(b => b.textContent === 'Cancel'); if (b) b.click(); return !!b;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(found, json!(true), "a running job's page offers Cancel");
    let ok = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#confirm-ok"))
        .await
        .unwrap();
    // Real time: the dialog's paint before its screenshot.
    tokio::time::sleep(Duration::from_millis(150)).await;
    shot(&c, "cancel-running").await;
    ok.click().await.unwrap();
    let asked = Instant::now();
    loop {
        let (s, _) = http(addr, "GET", "/v1/queues/exports/jobs/export-42", None);
        if s == 404 {
            break;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "the job is still there"
        );
        // Real time: the page's request in flight.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/exports/jobs/export-42/extend",
        Some(json!({"lease_token": token})),
    );
    assert_eq!((s, &v["code"]), (409, &json!("cancelled")), "{v}");
    c.close().await.unwrap();
}

/// A key's page lists its jobs by id with their states; "Cancel all" (confirmed) cancels its
/// scheduled and due jobs and leaves the running one and another key's; the busiest keys' row
/// links to it and offers "Cancel all" too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_jobs_are_listed_and_cancelled_from_its_page() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(tmp.path());
    let job = |id: &str, key: &str, delay: u64| json!({"id": id, "payload": {}, "key": key, "delay_ms": delay});
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/reminders/jobs",
        Some(json!([
            job("r-run", "user-42", 0),
            job("r-1", "user-42", 3_600_000),
            job("r-2", "user-42", 7_200_000),
            job("other", "user-7", 3_600_000),
        ])),
    );
    assert_eq!(s, 201, "{v}");
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/reminders/claim",
        Some(json!({"max": 1, "lease_ms": 600000})),
    );
    assert_eq!(v["jobs"][0]["id"], "r-run", "{s} {v}");

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/reminders"))
        .await
        .unwrap();
    sign_in(&c, ADMIN).await;
    // The busiest keys list user-42 (a job in flight) with a link to its jobs.
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#keys button[data-key='user-42']"))
        .await
        .unwrap();
    shot(&c, "keys-panel").await;
    let link = c
        .find(Locator::Css("#keys a[href$='/key/user-42']"))
        .await
        .unwrap();
    link.click().await.unwrap();
    wait_text(&c, "#key-jobs", "r-2").await;
    let rows = c
        .execute(
            "return [...document.querySelectorAll('#key-jobs tbody tr')]\
             .map(r => r.querySelector('a').textContent + ' ' + r.querySelector('.badge').textContent);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        rows,
        json!(["r-1 scheduled", "r-2 scheduled", "r-run leased"]),
        "by id, with states; another key's job not among them"
    );
    shot(&c, "key").await;
    let found = c
        .execute(
            "const b = [...document.querySelectorAll('button')]\
             .find(b => b.textContent === 'Cancel all'); if (b) b.click(); return !!b;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(found, json!(true));
    let ok = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#confirm-ok"))
        .await
        .unwrap();
    ok.click().await.unwrap();
    wait_text(&c, "#toast", "user-42: 2 cancelled").await;
    let (_, v) = http(addr, "GET", "/v1/queues/reminders/keys/user-42/jobs", None);
    let ids: Vec<&str> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["r-run"], "the running job stays");
    let (s, _) = http(addr, "GET", "/v1/queues/reminders/jobs/other", None);
    assert_eq!(s, 200, "another key's job stays");
    c.close().await.unwrap();
}

/// A waiting job's page says it waits, lists its dependencies with their states (each linked
/// to its page) and offers Cancel; the queue's `waiting` tab lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_jobs_page_lists_its_dependencies() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(tmp.path());
    let (s, v) = http(
        addr,
        "POST",
        "/v1/flows",
        Some(json!({"jobs": [
            {"queue": "images", "id": "resize-7", "payload": {}},
            {"queue": "scan", "id": "scan-7", "payload": {}},
            {"queue": "mail", "id": "email-7", "payload": {},
             "depends_on": [{"queue": "images", "id": "resize-7"}, {"queue": "scan", "id": "scan-7"}]}
        ]})),
    );
    assert_eq!(s, 201, "{v}");
    let (_, v) = http(
        addr,
        "POST",
        "/v1/queues/images/claim",
        Some(json!({"max": 1, "lease_ms": 60000})),
    );
    let token = v["jobs"][0]["lease_token"].as_u64().unwrap();
    let (s, _) = http(
        addr,
        "POST",
        "/v1/queues/images/jobs/resize-7/ack",
        Some(json!({"lease_token": token})),
    );
    assert_eq!(s, 200);

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/mail/job/email-7"))
        .await
        .unwrap();
    sign_in(&c, ADMIN).await;
    wait_text(&c, "#job-state", "waiting").await;
    wait_text(&c, "#deps-count", "1 of 2 pending").await;
    let rows = c
        .execute(
            "return [...document.querySelectorAll('#deps tbody tr')]\
             .map(r => r.querySelector('a').textContent + ' ' + r.querySelector('.badge').textContent);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rows, json!(["resize-7 done", "scan-7 pending"]));
    shot(&c, "waiting-job").await;
    // The pending dependency's page lists the job waiting for it.
    c.goto(&format!("http://{addr}/#/q/scan/job/scan-7"))
        .await
        .unwrap();
    wait_text(&c, "#dependents", "email-7").await;
    c.goto(&format!("http://{addr}/#/q/mail/waiting"))
        .await
        .unwrap();
    wait_text(&c, "#panel", "email-7").await;
    c.close().await.unwrap();
}
