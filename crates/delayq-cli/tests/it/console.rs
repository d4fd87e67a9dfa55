//! The console in a real browser: headless Chromium driven over WebDriver (chromium-driver,
//! from the distribution's packages, as `.ci/run` installs them) against a live `delayq serve`
//! with scoped tokens. Signs in, opens a queue, finds a dead job by id, requeues it and sees it
//! leave the dead tab, pauses and resumes, reads and changes the queue's limits, and checks
//! that ids, payloads and errors holding HTML are shown as text and run nothing. Screenshots
//! go to `target/console-*.png`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

pub(crate) const ADMIN: &str = "adm1n-token";
const XSS_ID: &str = "<img src=x onerror=window.__pwned=1>";

use crate::common::{Killed, delayq, spawn_serve};

/// One request with the admin token; (status, JSON body).
pub(crate) fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {ADMIN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let json = out
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, json)
}

/// `delayq serve --push` on the embedded store in `dir`, with an admin and a read token.
pub(crate) fn serve(dir: &Path) -> (Killed, SocketAddr) {
    let (child, addr) = spawn_serve(
        delayq(dir)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(["--token", &format!("admin:{ADMIN}"), "--token", "read:r3ad"])
            .args(["--push", "--allow-private-targets"]),
    );
    (child, addr.parse().unwrap())
}

/// Jobs for the pages: scheduled ones, completed ones (for the charts), two dead ones (one
/// whose id, payload and error hold HTML).
fn seed(addr: SocketAddr) {
    let jobs: Vec<Value> = (0..30)
        .map(|i| json!({"id": format!("order-{i:03}"), "payload": {"order": i, "total_cents": 1999 + i}, "delay_ms": 60_000 * (i + 1)}))
        .chain((0..120).map(|i| json!({"id": format!("done-{i}"), "payload": {"n": i}})))
        .collect();
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/orders/jobs",
        Some(Value::Array(jobs)),
    );
    assert_eq!(s, 201, "{v}");
    loop {
        let (_, v) = http(
            addr,
            "POST",
            "/v1/queues/orders/claim",
            Some(json!({"max": 40})),
        );
        let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
        if jobs.is_empty() {
            break;
        }
        for j in jobs {
            let path = format!("/v1/queues/orders/jobs/{}/ack", j["id"].as_str().unwrap());
            http(
                addr,
                "POST",
                &path,
                Some(json!({"lease_token": j["lease_token"]})),
            );
        }
    }
    // A job kept as done (its own keep_done_ms) with the result its handler acked.
    let body = json!({"id": "receipt-1", "payload": {"order": 1}, "keep_done_ms": 600_000});
    assert_eq!(
        http(addr, "POST", "/v1/queues/receipts/jobs", Some(body)).0,
        201
    );
    let (_, v) = http(addr, "POST", "/v1/queues/receipts/claim", Some(json!({})));
    let ack = json!({"lease_token": v["jobs"][0]["lease_token"],
                     "result": {"receipt": "R-1001", "emailed": true}});
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/receipts/jobs/receipt-1/ack",
        Some(ack),
    );
    assert_eq!(s, 200, "{v}");
    for (id, payload, error) in [
        (
            "dead-order-7",
            json!({"order": 7, "reason": "card declined"}),
            "payment gateway said 402",
        ),
        (
            XSS_ID,
            json!({"note": "<script>window.__pwned=1</script>"}),
            "<b onmouseover=window.__pwned=1>bold</b>",
        ),
    ] {
        let mut body = json!({"id": id, "payload": payload});
        if id == "dead-order-7" {
            // A job enqueued under a trace: its page shows the trace id.
            body["traceparent"] = json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        }
        assert_eq!(
            http(addr, "POST", "/v1/queues/orders/jobs", Some(body)).0,
            201
        );
        let (_, v) = http(
            addr,
            "POST",
            "/v1/queues/orders/claim",
            Some(json!({"max": 1})),
        );
        let j = &v["jobs"][0];
        assert_eq!(j["id"], id);
        let path = format!("/v1/queues/orders/jobs/{}/nack", enc(id));
        let nack = json!({"lease_token": j["lease_token"], "error": error, "dead": true});
        assert_eq!(http(addr, "POST", &path, Some(nack)).0, 200);
    }
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn find_binary(names: &[&str]) -> PathBuf {
    for n in names {
        for dir in ["/usr/bin", "/usr/lib/chromium", "/usr/local/bin"] {
            let p = Path::new(dir).join(n);
            if p.exists() {
                return p;
            }
        }
    }
    panic!("none of {names:?} is installed: `.ci/run` installs chromium and chromium-driver")
}

/// chromedriver and the Chromium it starts, with a profile directory of their own. Killing
/// chromedriver alone leaves Chromium running (parent 1, for ever): dropping this kills every
/// process whose command line names the profile, waits for them, then removes it.
pub(crate) struct Browser {
    _driver: Killed,
    profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let mark = format!("--user-data-dir={}", self.profile.path().display());
        let started = Instant::now();
        loop {
            let mut alive = 0;
            for pid in processes_naming(&mark) {
                alive += 1;
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
            if alive == 0 || started.elapsed() > Duration::from_secs(5) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Process ids whose command line contains `mark`.
fn processes_naming(mark: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (pid.parse::<u32>().is_ok() && cmd.contains(mark)).then_some(pid)
        })
        .collect()
}

pub(crate) async fn browser() -> (Browser, Client) {
    let port = free_port();
    let profile = tempfile::tempdir().expect("profile dir");
    // Chromium's own temporary directories (org.chromium.Chromium.*) go in the profile too:
    // a killed Chromium cannot remove them.
    let tmp = profile.path().join("tmp");
    std::fs::create_dir(&tmp).expect("profile tmp");
    let driver = Command::new(find_binary(&["chromedriver"]))
        .arg(format!("--port={port}"))
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let browser = Browser {
        _driver: Killed(driver),
        profile,
    };
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": find_binary(&["chromium", "chromium-browser"]),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--force-prefers-reduced-motion",
                     format!("--user-data-dir={}", browser.profile.path().display())],
        }),
    );
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    loop {
        let conn = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(conn)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(c) => return (browser, c),
            Err(e) if started.elapsed() < Duration::from_secs(20) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("chromedriver did not start a session: {e}"),
        }
    }
}

pub(crate) async fn text_of(c: &Client, css: &str) -> String {
    let e = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"));
    e.text().await.unwrap()
}

/// Waits until `css` has text containing `want` (ignoring case: CSS may upper-case labels).
pub(crate) async fn wait_text(c: &Client, css: &str, want: &str) {
    let started = Instant::now();
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await
            && e.text()
                .await
                .is_ok_and(|t| t.to_lowercase().contains(&want.to_lowercase()))
        {
            return;
        }
        if started.elapsed() > Duration::from_secs(10) {
            shot(c, "failure").await;
            panic!("{css} never showed {want:?} (target/console-failure.png)");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clicks the element `at` finds, waiting for it first.
async fn click(c: &Client, at: Locator<'_>) {
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(at)
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Waits for the sign-in form, types `token` and signs in.
pub(crate) async fn sign_in(c: &Client, token: &str) {
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    click(c, Locator::Css("#signin")).await;
}

pub(crate) async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("console-{name}.png")), png).unwrap();
}

pub(crate) async fn pwned(c: &Client) -> bool {
    c.execute("return window.__pwned !== undefined;", vec![])
        .await
        .unwrap()
        .as_bool()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_real_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(tmp.path());
    seed(addr);
    let (_driver, c) = browser().await;
    let base = format!("http://{addr}");

    // Tokens are configured: the page asks for one.
    c.goto(&format!("{base}/")).await.unwrap();
    sign_in(&c, ADMIN).await;
    wait_text(&c, "main table", "orders").await;
    let list = text_of(&c, "main table").await.to_lowercase();
    assert!(
        list.contains("completed, last hour") && list.contains("orders"),
        "{list}"
    );
    // Real time: the page's last paint (fonts, the sparkline) before its screenshot.
    tokio::time::sleep(Duration::from_millis(150)).await;
    shot(&c, "queues").await;

    // A queue page: counts, charts, tabs.
    click(&c, Locator::LinkText("orders")).await;
    wait_text(&c, ".stats", "Dead").await;
    wait_text(&c, "#panel", "order-000").await;
    let charts = c.find_all(Locator::Css("svg.chart")).await.unwrap();
    assert_eq!(charts.len(), 3, "throughput, depth, lateness");
    // Real time: the charts' last paint before the screenshot.
    tokio::time::sleep(Duration::from_millis(150)).await;
    shot(&c, "queue").await;

    // The queue's settings: a summary line that opens on the list and the limits' form.
    wait_text(&c, "#settings-summary", "1 shard").await;
    wait_text(&c, "#settings-summary", "in flight: no limit").await;
    click(&c, Locator::Css("#settings summary")).await;
    wait_text(&c, "#set-lane", "off").await;
    wait_text(&c, "#set-windows", "off").await;
    let fill = |css: &'static str, v: &'static str| {
        let c = c.clone();
        async move {
            let e = c.find(Locator::Css(css)).await.unwrap();
            e.clear().await.unwrap();
            if !v.is_empty() {
                e.send_keys(v).await.unwrap();
            }
        }
    };
    fill("#set-rate", "2.5").await;
    fill("#set-burst", "3").await;
    fill("#set-mif", "7").await;
    click(&c, Locator::Css("#set-save")).await;
    wait_text(&c, "#settings-summary", "in flight: 7").await;
    wait_text(&c, "#settings-summary", "rate: 2.5/s, burst 3").await;
    let stored = http(addr, "GET", "/v1/queues/orders", None).1;
    assert_eq!(stored["settings"]["max_in_flight"], 7, "{stored}");
    assert_eq!(
        stored["settings"]["rate"],
        json!({"per_s": 2.5, "burst": 3})
    );
    shot(&c, "settings").await;
    // A limit the API refuses: its error is shown and nothing changes.
    fill("#set-mif", "0").await;
    click(&c, Locator::Css("#set-save")).await;
    wait_text(&c, "#toast", "max_in_flight must be").await;
    let stored = http(addr, "GET", "/v1/queues/orders", None).1;
    assert_eq!(stored["settings"]["max_in_flight"], 7, "{stored}");
    // Empty fields remove the limits.
    fill("#set-rate", "").await;
    fill("#set-mif", "").await;
    click(&c, Locator::Css("#set-save")).await;
    wait_text(&c, "#settings-summary", "in flight: no limit").await;
    let stored = http(addr, "GET", "/v1/queues/orders", None).1;
    assert_eq!(stored["settings"]["max_in_flight"], Value::Null, "{stored}");
    assert_eq!(stored["settings"]["rate"], Value::Null, "{stored}");
    // The delivery: shown, and switched to push and back from the form.
    wait_text(&c, "#settings-summary", "pull (workers claim)").await;
    for (delivery, shown) in [("push", "push delivery"), ("pull", "pull (workers claim)")] {
        let option = format!("#set-delivery option[value={delivery}]");
        c.find(Locator::Css(&option))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        click(&c, Locator::Css("#set-save")).await;
        wait_text(&c, "#settings-summary", shown).await;
        let stored = http(addr, "GET", "/v1/queues/orders", None).1;
        assert_eq!(stored["settings"]["delivery"], delivery, "{stored}");
    }

    // Find the dead job by id, open it, requeue it.
    c.find(Locator::Css("#find"))
        .await
        .unwrap()
        .send_keys("dead-order-7")
        .await
        .unwrap();
    click(&c, Locator::Css("#find-go")).await;
    wait_text(&c, ".results", "dead-order-7").await;
    click(&c, Locator::Css(".results a")).await;
    wait_text(&c, "#job-state", "dead").await;
    wait_text(&c, "#last-error", "payment gateway said 402").await;
    wait_text(&c, "#job-trace", "4bf92f3577b34da6a3ce929d0e0e4736").await;
    assert!(
        text_of(&c, "#payload")
            .await
            .contains("\"reason\": \"card declined\"")
    );
    shot(&c, "job").await;
    click(&c, Locator::XPath("//button[text()='Requeue']")).await;
    // The queue was a push queue a moment ago: the server's pusher may take the requeued job
    // once before it sees the queue is pull again (it gives the job back and stops pushing the
    // queue at once); the page shows the state it read, so read it again until scheduled.
    let started = Instant::now();
    loop {
        // The page re-renders after the action: an element may go stale while it is read.
        let state = match c.find(Locator::Css("#job-state")).await {
            Ok(e) => e.text().await.unwrap_or_default().to_lowercase(),
            Err(_) => String::new(),
        };
        if state.contains("scheduled") || started.elapsed() > Duration::from_secs(10) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if state.contains("leased") {
            c.refresh().await.unwrap();
        }
    }
    wait_text(&c, "#job-state", "scheduled").await;
    c.goto(&format!("{base}/#/q/orders/dead")).await.unwrap();
    wait_text(&c, "#panel", "bold").await;
    let dead_tab = text_of(&c, "#panel").await;
    assert!(!dead_tab.contains("dead-order-7"), "requeued: {dead_tab}");
    assert_eq!(
        http(addr, "GET", "/v1/queues/orders/jobs/dead-order-7", None).1["state"],
        "scheduled"
    );

    // Pause and resume: the store says so.
    c.goto(&format!("{base}/#/q/orders")).await.unwrap();
    wait_text(&c, "#pause", "Pause").await;
    click(&c, Locator::Css("#pause")).await;
    wait_text(&c, "#pause", "Resume").await;
    assert_eq!(
        http(addr, "GET", "/v1/queues/orders", None).1["paused"],
        true
    );
    click(&c, Locator::Css("#pause")).await;
    wait_text(&c, "#pause", "Pause").await;
    assert_eq!(
        http(addr, "GET", "/v1/queues/orders", None).1["paused"],
        false
    );

    // HTML in an id, a payload and an error is text, and runs nothing.
    c.goto(&format!("{base}/#/q/orders/dead")).await.unwrap();
    wait_text(&c, "#panel", XSS_ID).await;
    c.goto(&format!("{base}/#/q/orders/job/{}", enc(XSS_ID)))
        .await
        .unwrap();
    wait_text(&c, "#job-id", XSS_ID).await;
    assert!(
        text_of(&c, "#payload")
            .await
            .contains("<script>window.__pwned=1</script>")
    );
    assert!(text_of(&c, "#last-error").await.contains("<b onmouseover"));
    let injected = c
        .execute(
            "return document.querySelectorAll('main img, main script, main b').length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(injected, json!(0), "no element was made from stored text");
    assert!(!pwned(&c).await, "an injected script ran");

    // A done job's page shows the result its handler acked.
    c.goto(&format!("{base}/#/q/receipts/job/receipt-1"))
        .await
        .unwrap();
    wait_text(&c, "#job-state", "done").await;
    wait_text(&c, "#result", "\"receipt\": \"R-1001\"").await;
    shot(&c, "job-result").await;
    // The queue's done tab lists it with the start of its result.
    c.goto(&format!("{base}/#/q/receipts/done")).await.unwrap();
    wait_text(&c, "#panel td.result", "R-1001").await;
    let head = text_of(&c, "#panel thead").await.to_lowercase();
    assert!(head.contains("result"), "{head}");
    shot(&c, "done-results").await;

    // A pushed job's page lists its delivery attempts.
    let rx = delayq_test_support::receiver::Receiver::start().await;
    let (s, v) = http(
        addr,
        "PUT",
        "/v1/queues/webhooks",
        Some(json!({"delivery": "push"})),
    );
    assert_eq!(s, 200, "{v}");
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/webhooks/jobs",
        Some(
            json!({"id": "invoice-42", "payload": {"invoice": 42}, "max_attempts": 2,
                    "backoff": {"kind": "fixed", "delay_ms": 100},
                    "target": {"url": rx.url("/fail")}}),
        ),
    );
    assert_eq!(s, 201, "{v}");
    let started = Instant::now();
    while http(addr, "GET", "/v1/queues/webhooks/jobs/invoice-42", None).1["state"] != "dead" {
        assert!(started.elapsed() < Duration::from_secs(20), "not dead");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.goto(&format!("{base}/#/q/webhooks/job/invoice-42"))
        .await
        .unwrap();
    wait_text(&c, "#job-target", "POST http://127.0.0.1").await;
    wait_text(&c, "#deliveries", "http_error").await;
    let rows = c
        .find_all(Locator::Css("#deliveries tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "two attempts");
    assert!(text_of(&c, "#deliveries").await.contains("500"));
    shot(&c, "job-push").await;

    // Log out (the page asks for a token again), then sign in with a read token: it browses; every
    // action it may not take is greyed out, saying what it needs. (Signing in stays on the
    // page that asked: the pushed job's.)
    click(&c, Locator::Css("#logout")).await;
    sign_in(&c, "r3ad").await;
    wait_text(&c, "#scope", "read-only token").await;
    wait_text(&c, "#job-state", "dead").await;
    c.goto(&format!("{base}/#/q/orders")).await.unwrap();
    wait_text(&c, "#panel", "order-0").await;
    click(&c, Locator::Css("#settings summary")).await;
    wait_text(&c, "#limits-note", "needs an admin token").await;
    let disabled = |css: &'static str| {
        let c = c.clone();
        async move {
            c.wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"));
            let js = format!("return document.querySelector({css:?}).disabled;");
            c.execute(&js, vec![]).await.unwrap() == json!(true)
        }
    };
    for css in ["#pause", "#set-save", "#set-mif", "#panel .row button"] {
        assert!(disabled(css).await, "{css} is usable with a read token");
    }
    let title = c
        .find(Locator::Css("#pause"))
        .await
        .unwrap()
        .attr("title")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(title.contains("Needs an admin token"), "{title}");
    // Real time: the page's last paint before the screenshot.
    tokio::time::sleep(Duration::from_millis(150)).await;
    shot(&c, "read-only").await;
    // A click on a greyed-out action changes nothing.
    click(&c, Locator::Css("#pause")).await;
    // Real time: a request the click wrongly sent would have landed by then.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        http(addr, "GET", "/v1/queues/orders", None).1["paused"],
        false
    );
    // A job's actions: run now and requeue need admin, cancel and reschedule produce.
    c.goto(&format!("{base}/#/q/orders/job/dead-order-7"))
        .await
        .unwrap();
    wait_text(&c, "#job-state", "scheduled").await;
    for button in ["Run now", "Reschedule", "Cancel"] {
        let js = format!(
            "return [...document.querySelectorAll('.actions button')]\
             .find(b => b.textContent === {button:?}).disabled;"
        );
        assert_eq!(
            c.execute(&js, vec![]).await.unwrap(),
            json!(true),
            "{button}"
        );
    }
    assert!(disabled("#delay").await);
    // An admin token sees no badge and no greyed-out action.
    click(&c, Locator::Css("#logout")).await;
    sign_in(&c, ADMIN).await;
    wait_text(&c, "#job-state", "scheduled").await;
    c.goto(&format!("{base}/#/q/orders")).await.unwrap();
    wait_text(&c, "#pause", "Pause").await;
    assert!(!disabled("#pause").await, "an admin may pause");
    let badge = c
        .execute("return document.getElementById('scope').hidden;", vec![])
        .await
        .unwrap();
    assert_eq!(badge, json!(true));
    c.close().await.unwrap();
}

/// A queue whose jobs carry keys shows its busiest keys — jobs in flight and due per key, the
/// held ones with their hold — and an admin lifts a hold from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_busiest_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(tmp.path());
    let (s, v) = http(
        addr,
        "PUT",
        "/v1/queues/mail",
        Some(json!({"key_max_in_flight": 1})),
    );
    assert_eq!(s, 200, "{v}");
    let jobs: Vec<Value> = (0..5)
        .map(|i| json!({"payload": {"n": i}, "key": "tenant-a"}))
        .chain((0..2).map(|i| json!({"payload": {"n": i}, "key": "tenant-b"})))
        .collect();
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/mail/jobs",
        Some(Value::Array(jobs)),
    );
    assert_eq!(s, 201, "{v}");
    let (_, v) = http(
        addr,
        "POST",
        "/v1/queues/mail/claim",
        Some(json!({"max": 10})),
    );
    assert_eq!(
        v["jobs"].as_array().map(Vec::len),
        Some(2),
        "one per key: {v}"
    );
    let (s, v) = http(
        addr,
        "POST",
        "/v1/queues/mail/keys/tenant-b/pause",
        Some(json!({"for_ms": 600_000})),
    );
    assert_eq!(s, 200, "{v}");

    let (_driver, c) = browser().await;
    c.goto(&format!("http://{addr}/#/q/mail")).await.unwrap();
    sign_in(&c, ADMIN).await;
    wait_text(&c, "#keys", "tenant-a").await;
    let rows = c.find_all(Locator::Css("#keys tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 2);
    let first = rows[0].text().await.unwrap();
    assert!(
        first.contains("tenant-a") && first.contains("1") && first.contains("4"),
        "busiest first, 1 in flight and 4 due: {first}"
    );
    let second = rows[1].text().await.unwrap();
    assert!(
        second.to_lowercase().contains("held, ends in 10 minutes"),
        "{second}"
    );
    shot(&c, "keys").await;
    click(&c, Locator::Css("#settings summary")).await;
    wait_text(&c, "#set-keys", "at most 1 in flight").await;
    click(
        &c,
        Locator::XPath("//details[@id='keys']//button[text()='Resume']"),
    )
    .await;
    wait_text(&c, "#keys", "Hold 1 min").await;
    let v = http(addr, "GET", "/v1/queues/mail/keys", None).1;
    assert!(
        v["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["paused_until"].is_null()),
        "{v}"
    );
    assert!(!pwned(&c).await);
}
