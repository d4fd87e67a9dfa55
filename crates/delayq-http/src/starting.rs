//! The server before its store is reachable ([`while_starting`]): it listens at once, so an
//! orchestrator sees it alive (`/healthz` 200) but not ready (`/readyz` 503 with the reason),
//! and every other request is answered 503 `unavailable` with `Retry-After` instead of hanging.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Request;
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::error::{ApiError, ErrorCode};

/// Why the store is not reachable yet, as the last attempt found (shown by `/readyz`).
pub type Reason = Arc<Mutex<String>>;

/// Answers requests on `listener` as a starting server until `ready` completes (its output
/// is returned) or `shutdown` does (`None`). Connections accepted meanwhile are closed after
/// one answer, so clients come back to the ready server.
pub async fn while_starting<T>(
    listener: &tokio::net::TcpListener,
    reason: Reason,
    ready: impl Future<Output = T>,
    shutdown: impl Future<Output = ()>,
) -> Option<T> {
    let mut ready = std::pin::pin!(ready);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            out = &mut ready => return Some(out),
            () = &mut shutdown => return None,
            r = listener.accept() => {
                let Ok((stream, _)) = r else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let reason = reason.clone();
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let reason = reason.lock().map(|r| r.clone()).unwrap_or_default();
                    async move { Ok::<_, std::convert::Infallible>(answer(req.uri().path(), &reason)) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(10))
                        .keep_alive(false)
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        }
    }
}

fn answer(path: &str, reason: &str) -> Response {
    if path == "/healthz" {
        return axum::Json(crate::ops::health_body()).into_response();
    }
    let what = if path == "/readyz" {
        "not ready"
    } else {
        "starting"
    };
    ApiError::new(
        ErrorCode::Unavailable,
        format!("{what}: the store is not reachable yet ({reason}); retry"),
    )
    .retry_after(1)
    .into_response()
}
