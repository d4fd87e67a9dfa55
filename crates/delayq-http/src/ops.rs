//! Operations endpoints: health, readiness, Prometheus metrics, the OpenAPI document and the
//! dashboard.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use delayq::{Backend, Inspect, QueueName};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Liveness: the process answers.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Readiness: the backend answers.
pub async fn readyz<B: Backend + Inspect>(State(st): State<AppState<B>>) -> Response {
    let probe = QueueName::new("readyz-probe").expect("valid name");
    match st.backend().stats(&probe).await {
        Ok(_) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => ApiError::new(ErrorCode::Unavailable, e.to_string()).into_response(),
    }
}

/// Prometheus text format; queue gauges are refreshed from the backend on each scrape.
pub async fn metrics<B: Backend + Inspect>(State(st): State<AppState<B>>) -> Response {
    let Some(handle) = st.inner.prometheus.as_ref() else {
        return ApiError::new(ErrorCode::NoRoute, "metrics are not enabled on this server")
            .into_response();
    };
    let mut queues: std::collections::BTreeSet<QueueName> =
        st.inner.seen.lock().map(|s| s.clone()).unwrap_or_default();
    if let Ok(listed) = st.backend().queues().await {
        queues.extend(listed);
    }
    for q in queues {
        if let Ok(s) = st.backend().stats(&q).await {
            let l = [("queue", q.to_string())];
            metrics::gauge!("delayq_scheduled", &l).set(s.scheduled as f64);
            metrics::gauge!("delayq_due", &l).set(s.due as f64);
            metrics::gauge!("delayq_due_next_minute", &l).set(s.due_next_minute as f64);
            metrics::gauge!("delayq_leased", &l).set(s.leased as f64);
            metrics::gauge!("delayq_dead", &l).set(s.dead as f64);
            metrics::gauge!("delayq_oldest_overdue_seconds", &l)
                .set(s.oldest_overdue_ms as f64 / 1000.0);
        }
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
        .into_response()
}

/// The OpenAPI 3.1 document, generated from the handlers and models.
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(crate::openapi())
}

/// The dashboard: one page that reads `/v1/queues`.
pub async fn dashboard() -> Html<&'static str> {
    Html(include_str!("dashboard.html"))
}
