//! Operations endpoints: health, readiness, Prometheus metrics (store-wide counts and series
//! refreshed on each scrape), the OpenAPI document and the console page with its assets
//! (embedded in the binary: no build step, no CDN).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use delayq::{Backend, Inspect, QueueName};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// What `/healthz` reports about the running build.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Build {
    /// The release, e.g. `0.1.0`.
    pub version: String,
    /// The git commit it was built from (`unknown` outside a checkout).
    pub commit: String,
    /// The build date, `YYYY-MM-DD` (UTC).
    pub built: String,
}

static BUILD: std::sync::OnceLock<Build> = std::sync::OnceLock::new();

/// Sets the build `/healthz` reports (the binary's; the first call wins).
pub fn set_build(b: Build) {
    let _ = BUILD.set(b);
}

/// The `/healthz` answer: `{"status":"ok","version","commit","built"}`.
pub fn health_body() -> serde_json::Value {
    let b = BUILD.get_or_init(|| Build {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: "unknown".to_owned(),
        built: "unknown".to_owned(),
    });
    serde_json::json!({"status": "ok", "version": b.version, "commit": b.commit, "built": b.built})
}

/// Liveness: the process answers, with its version.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(health_body())
}

/// Readiness: the backend answers (200 `ready`). A companion's problem (PostgreSQL
/// unreachable) is said on a second line, still 200: the server works without it.
pub async fn readyz<B: Backend + Inspect>(State(st): State<AppState<B>>) -> Response {
    let probe = QueueName::new("readyz-probe").expect("valid name");
    match st.backend().stats(&probe).await {
        Ok(_) => {
            let degraded =
                st.inner.companion.get().and_then(|(name, problem)| {
                    problem().map(|p| format!("degraded: {name}: {p}\n"))
                });
            (
                StatusCode::OK,
                format!("ready\n{}", degraded.unwrap_or_default()),
            )
                .into_response()
        }
        Err(e) => ApiError::new(ErrorCode::Unavailable, e.to_string()).into_response(),
    }
}

/// Prometheus text format; queue gauges are refreshed from the backend on each scrape.
pub async fn metrics<B: Backend + Inspect>(State(st): State<AppState<B>>) -> Response {
    let Some(handle) = st.inner.prometheus.as_ref() else {
        return ApiError::new(ErrorCode::NoRoute, "metrics are not enabled on this server")
            .into_response();
    };
    for q in st.known_queues().await {
        if let Ok(s) = st.backend().stats(&q).await {
            let l = [("queue", q.to_string())];
            metrics::gauge!("delayq_scheduled", &l).set(s.scheduled as f64);
            metrics::gauge!("delayq_due", &l).set(s.due as f64);
            metrics::gauge!("delayq_due_next_minute", &l).set(s.due_next_minute as f64);
            metrics::gauge!("delayq_leased", &l).set(s.leased as f64);
            metrics::gauge!("delayq_dead", &l).set(s.dead as f64);
            metrics::gauge!("delayq_oldest_overdue_seconds", &l)
                .set(s.oldest_overdue_ms as f64 / 1000.0);
            metrics::gauge!("delayq_paused", &l).set(if s.paused { 1.0 } else { 0.0 });
            metrics::gauge!("delayq_waiting_on_limit", &l).set(s.waiting_on_limit as f64);
            metrics::gauge!("delayq_done", &l).set(s.done as f64);
        }
        if let Ok(series) = st.backend().series(&q).await {
            export_series(&q, &series);
        }
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
        .into_response()
}

/// Store-wide counts (every process's work, from the series the store keeps) and the lateness
/// percentiles of the last five minutes.
fn export_series(q: &QueueName, s: &delayq::QueueSeries) {
    let t = &s.totals;
    for (event, n) in [
        ("enqueued", t.enqueued),
        ("started", t.started),
        ("completed", t.completed),
        ("retried", t.retried),
        ("dead", t.dead),
    ] {
        let l = [("queue", q.to_string()), ("event", event.to_owned())];
        metrics::counter!("delayq_queue_jobs_total", &l).absolute(n);
    }
    let now = delayq::job::system_now_ms();
    let mut recent = delayq::Counts::default();
    for i in &s.intervals {
        if i.start_ms + 5 * 60_000 > now {
            recent.add(&i.counts);
        }
    }
    for (name, quantile) in [
        ("delayq_queue_lateness_p50_seconds", 0.5),
        ("delayq_queue_lateness_p99_seconds", 0.99),
    ] {
        let v = recent.lateness_quantile(quantile).unwrap_or(0.0) / 1000.0;
        metrics::gauge!(name, &[("queue", q.to_string())]).set(v);
    }
}

/// The OpenAPI 3.1 document, generated from the handlers and models.
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(crate::openapi())
}

/// The console: one page (its script and style are served from `/assets/`).
pub async fn console_page() -> Response {
    (
        [(header::CACHE_CONTROL, "no-cache")],
        Html(include_str!("../assets/console.html")),
    )
        .into_response()
}

/// The console's script and style sheet.
pub async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "console.js" => (
            include_str!("../assets/console.js"),
            "text/javascript; charset=utf-8",
        ),
        "console_keys.js" => (
            include_str!("../assets/console_keys.js"),
            "text/javascript; charset=utf-8",
        ),
        "console_deps.js" => (
            include_str!("../assets/console_deps.js"),
            "text/javascript; charset=utf-8",
        ),
        "console.css" => (
            include_str!("../assets/console.css"),
            "text/css; charset=utf-8",
        ),
        _ => {
            return ApiError::new(ErrorCode::NoRoute, "no such asset").into_response();
        }
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
