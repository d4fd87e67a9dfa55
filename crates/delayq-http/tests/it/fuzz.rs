//! Fuzz of the HTTP surface (proptest over arbitrary input): any body on any endpoint, any
//! path, query string and content type gets an answer below 500 — a typed 4xx or a success —
//! and never a panic (which the server would turn into a 500). `DELAYQ_FUZZ_CASES` sets the
//! number of cases (3,000 in CI; docs/RELIABILITY.md has the long runs).

use axum::Router;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};
use proptest::prelude::*;
use tower::ServiceExt;

const ENDPOINTS: &[(&str, &str)] = &[
    ("POST", "/v1/queues/q/jobs"),
    ("POST", "/v1/queues/q/claim"),
    ("POST", "/v1/queues/q/jobs/a/ack"),
    ("POST", "/v1/queues/q/jobs/a/nack"),
    ("POST", "/v1/queues/q/jobs/a/extend"),
    ("POST", "/v1/queues/q/jobs/a/release"),
    ("PATCH", "/v1/queues/q/jobs/a"),
    ("PUT", "/v1/queues/q"),
    ("DELETE", "/v1/queues/q/jobs/a"),
    ("GET", "/v1/queues/q/dead"),
    ("POST", "/v1/queues/q/dead/a/requeue"),
];

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        // JSON-shaped input reaches the field validation, not just the parser.
        "\\{(\"(id|payload|payload_b64|delay_ms|run_at|max_attempts|backoff|lease_ms|max|wait_ms|lease_token|error|retry_in_ms|dead|shards|undo_attempt)\":(-?[0-9]{1,25}|\"[^\"]{0,20}\"|null|true|\\[\\]|\\{\\}),?){0,5}\\}"
            .prop_map(String::into_bytes),
    ]
}

async fn status(r: &Router, method: &str, uri: &str, ctype: &str, body: Vec<u8>) -> u16 {
    let Ok(req) = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "localhost")
        .header("content-type", ctype)
        .body(axum::body::Body::from(body))
    else {
        return 400; // not even a request: the HTTP layer refuses it before us
    };
    r.clone().oneshot(req).await.unwrap().status().as_u16()
}

#[test]
fn no_input_makes_the_api_fail() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let router = rt.block_on(async {
        let backend = EmbeddedBackend::open(dir.path()).unwrap();
        delayq_http::router(AppState::new(backend, HttpConfig::default(), None))
    });
    let config = ProptestConfig {
        cases: std::env::var("DELAYQ_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        e in 0..ENDPOINTS.len(),
        b in body(),
        ctype in prop_oneof![Just("application/json".to_owned()), Just("text/plain".to_owned()), "[a-z/;= -]{0,30}"],
        suffix in "[a-zA-Z0-9%?&=._~{}/-]{0,30}",
    )| {
        let (method, path) = ENDPOINTS[e];
        let code = rt.block_on(status(&router, method, path, &ctype, b.clone()));
        prop_assert!(code < 500, "{method} {path}: {code} for body {:?}", String::from_utf8_lossy(&b));
        let code = rt.block_on(status(&router, "GET", &format!("/v1/queues/{suffix}"), &ctype, Vec::new()));
        prop_assert!(code < 500, "GET /v1/queues/{suffix}: {code}");
    });
}
