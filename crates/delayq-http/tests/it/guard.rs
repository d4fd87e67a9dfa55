//! Who may call the API: without tokens only this machine (`Host`) and no cross-site browser
//! request that changes state (`Origin`); with tokens, the `Bearer` scheme in any case; and the
//! security headers on every response.

use axum::Router;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};
use tower::ServiceExt;

fn router(config: HttpConfig) -> (Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    (
        delayq_http::router(AppState::new(backend, config, None)),
        dir,
    )
}

async fn send(
    r: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> axum::response::Response {
    let mut req = axum::http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    r.clone()
        .oneshot(req.body(axum::body::Body::empty()).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn without_tokens_only_this_machine_and_no_cross_site_writes() {
    let (r, _d) = router(HttpConfig {
        loopback_hosts_only: true,
        ..HttpConfig::default()
    });
    for host in [
        "localhost:7070",
        "127.0.0.1:7070",
        "[::1]:7070",
        "localhost",
    ] {
        let resp = send(&r, "GET", "/v1/queues", &[("host", host)]).await;
        assert_eq!(resp.status(), 200, "{host}");
    }
    for host in ["evil.example", "evil.example:7070", "10.0.0.5:7070", ""] {
        let resp = send(&r, "GET", "/v1/queues", &[("host", host)]).await;
        assert_eq!(resp.status(), 403, "DNS rebinding through Host {host:?}");
    }
    let requeue = "/v1/queues/orders/dead/requeue";
    let cross = send(
        &r,
        "POST",
        requeue,
        &[
            ("host", "localhost:7070"),
            ("origin", "https://evil.example"),
        ],
    )
    .await;
    assert_eq!(cross.status(), 403, "a page elsewhere cannot requeue");
    let same = send(
        &r,
        "POST",
        requeue,
        &[
            ("host", "localhost:7070"),
            ("origin", "http://localhost:7070"),
        ],
    )
    .await;
    assert_eq!(same.status(), 200);
    let cli = send(&r, "POST", requeue, &[("host", "localhost:7070")]).await;
    assert_eq!(cli.status(), 200, "non-browser clients send no Origin");
    // Reading is not a write: a cross-site GET is the browser's same-origin policy's business.
    let read = send(
        &r,
        "GET",
        "/v1/queues",
        &[("host", "localhost"), ("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(read.status(), 200);
}

#[tokio::test]
async fn tokens_accept_the_bearer_scheme_in_any_case_and_headers_are_set() {
    let (r, _d) = router(HttpConfig {
        tokens: vec![delayq_http::auth::Token::all("t0ken")],
        ..HttpConfig::default()
    });
    let accepted = ["Bearer t0ken", "bearer t0ken", "BEARER t0ken"].map(|a| (a, 200));
    let refused = ["Bearer wrong", "Basic t0ken", "t0ken"].map(|a| (a, 401));
    for (auth, want) in accepted.into_iter().chain(refused) {
        let headers = [("host", "x"), ("authorization", auth)];
        let resp = send(&r, "GET", "/v1/queues", &headers).await;
        assert_eq!(resp.status(), want, "{auth}");
    }
    // With tokens, Host and Origin are not the guard: the token is.
    let resp = send(
        &r,
        "POST",
        "/v1/queues/q/dead/requeue",
        &[
            ("host", "evil.example"),
            ("origin", "https://evil.example"),
            ("authorization", "Bearer t0ken"),
        ],
    )
    .await;
    assert_eq!(resp.status(), 200);
    for path in ["/", "/v1/queues", "/healthz"] {
        let resp = send(
            &r,
            "GET",
            path,
            &[("host", "x"), ("authorization", "Bearer t0ken")],
        )
        .await;
        let h = resp.headers();
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_may_keep_only_so_many_long_polls_waiting() {
    let (r, _d) = router(HttpConfig {
        max_long_polls: 2,
        ..HttpConfig::default()
    });
    let poll = |r: Router, wait: u64| async move {
        let req = axum::http::Request::builder()
            .method("POST")
            .uri("/v1/queues/q/claim")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(format!(
                r#"{{"max":1,"wait_ms":{wait}}}"#
            )))
            .unwrap();
        r.oneshot(req).await.unwrap().status().as_u16()
    };
    let a = tokio::spawn(poll(r.clone(), 1500));
    let b = tokio::spawn(poll(r.clone(), 1500));
    // Real time: both polls reach their wait (a bare router: no count of waiting polls here).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        poll(r.clone(), 1000).await,
        429,
        "a third waiting poll is refused"
    );
    assert_eq!(
        poll(r.clone(), 0).await,
        200,
        "a claim without wait is not a long poll"
    );
    assert_eq!((a.await.unwrap(), b.await.unwrap()), (200, 200));
    assert_eq!(
        poll(r.clone(), 10).await,
        200,
        "slots are given back when polls answer"
    );
}
