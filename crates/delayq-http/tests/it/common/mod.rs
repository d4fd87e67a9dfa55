//! What the HTTP tests that need no token share: one request through the router.

use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

/// One request (JSON body when given) through `router`; (status, JSON body or `null`).
pub(crate) async fn call(
    router: &Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    call_as(router, method, path, "", body).await
}

/// [`call`] with `token` as the bearer token (none when empty).
pub(crate) async fn call_as(
    router: &Router,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    if !token.is_empty() {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let resp = router
        .clone()
        .oneshot(req.body(axum::body::Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    crate::schema_check::check(method, path, status, &String::from_utf8_lossy(&bytes));
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The ids of a page of jobs or a claim's answer (`jobs`), in order.
pub(crate) fn ids(v: &Value) -> Vec<String> {
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}
