//! # delayq-http — the HTTP/JSON API of delayq
//!
//! [`router`] builds an axum `Router` over any backend: serve it with [`serve`] (what
//! `delayq serve` does) or mount it in your own axum app. Every error is a JSON body
//! `{"code", "message"}` with a stable code ([`error::ErrorCode`], docs/API.md).
//!
//! Parts: [`state`] (shared state and settings), [`extract`] (extractors that answer with
//! API errors), [`model`] (bodies), [`jobs`], [`lease`], [`queues`], [`console`] (browse,
//! actions, pause, series), [`events`] (live streams), [`budget`] (what one caller may hold), [`schedules`] (periodic jobs), [`depth`] (depth samples), [`ops`] (health, metrics, OpenAPI, the console page),
//! [`auth`] (tokens and scopes), [`error`].

pub mod auth;
pub mod batches;
pub mod budget;
pub mod claims;
mod conns;
pub mod console;
mod console_model;
pub mod depth;
pub mod error;
pub mod events;
pub mod extract;
mod fair;
pub mod flows;
pub mod jobs;
pub mod keys;
pub mod lease;
pub mod model;
pub mod ops;
mod polls;
pub mod push_model;
pub mod queues;
pub mod schedules;
pub mod starting;
pub mod state;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use delayq::{Backend, Batches, Inspect, Schedules};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;

pub use error::{ApiError, ErrorCode};
pub use state::{AppState, Companion, HttpConfig, TargetCheck};

/// Histogram (seconds) of HTTP request latency by method, route and status.
pub const HTTP_LATENCY: &str = "delayq_http_request_duration_seconds";

/// Counter of connections closed as they arrived because their address already held
/// [`HttpConfig::max_short_per_address`] connections outside long-lived requests.
pub const REFUSED_CONNECTIONS: &str = "delayq_http_connections_refused_total";

pub use conns::EVICTED_CONNECTIONS;

#[derive(OpenApi)]
#[openapi(
    info(title = "delayq", description = "Jobs that run at a future time: HTTP/JSON API v1."),
    paths(
        jobs::enqueue, jobs::get, jobs::cancel, jobs::reschedule,
        lease::claim, claims::claim_many, lease::cut_poll, lease::ack, lease::ack_batch, lease::nack, lease::extend, lease::release, lease::cancelled,
        queues::list, queues::stats, queues::configure, queues::dead_list, queues::requeue_one,
        queues::requeue_all, queues::purge, console::list, console::cancel_all, console::run,
        console::dead_delete, console::pause, console::resume, console::series, events::events,
        schedules::put, schedules::get, schedules::delete, schedules::list,
        push_model::deliveries, auth::whoami, keys::pause, keys::resume, keys::list, keys::jobs, keys::cancel, keys::reschedule,
        flows::create,
        batches::create, batches::add, batches::close, batches::get, batches::list,
    ),
    modifiers(&BearerAuth, &Described),
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

/// Every response gets the `description` OpenAPI requires (the handlers' declarations give
/// a status and a body; a standard validator refuses a response without one): what the
/// status means here.
struct Described;

impl utoipa::Modify for Described {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
                &mut item.head,
                &mut item.options,
                &mut item.trace,
            ];
            for op in ops.into_iter().flatten() {
                for (status, r) in &mut op.responses.responses {
                    if let utoipa::openapi::RefOr::T(r) = r
                        && r.description.is_empty()
                    {
                        r.description = status_meaning(status).to_owned();
                    }
                }
            }
        }
    }
}

/// What a response status means in this API.
fn status_meaning(status: &str) -> &'static str {
    match status {
        "200" => "Done: the body says what happened.",
        "201" => "Created: the body describes what was created.",
        "204" => "Done; no body.",
        "401" => "No valid bearer token (`code`: `unauthorized`).",
        "4XX" => "Refused; nothing changed. The body's `code` says why (ErrorBody).",
        "5XX" => "The store failed or is unavailable; the body's `code` says which.",
        _ => "See the body.",
    }
}

/// The OpenAPI 3.1 document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// Installs the Prometheus recorder (with delayq's histogram buckets) for this process and
/// returns the handle `/metrics` renders. Call once.
pub fn install_prometheus() -> Result<PrometheusHandle, String> {
    let http_buckets = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 60.0,
    ];
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(delayq::telemetry::LATENESS.into()),
            delayq::telemetry::LATENESS_BUCKETS,
        )
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(HTTP_LATENCY.into()), &http_buckets))
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(delayq::telemetry::HANDLER.into()),
                &http_buckets,
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(delayq::telemetry::PUSH_RESPONSE.into()),
                delayq::telemetry::PUSH_BUCKETS,
            )
        })
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())
}

/// The API as a router over `state`.
pub fn router<B: Backend + Inspect + Schedules + Batches>(state: AppState<B>) -> Router {
    let max_body = state.inner.config.max_body;
    let timeout = state.inner.config.request_timeout;
    let v1 = Router::new()
        .route("/v1/whoami", get(auth::whoami::<B>))
        .route("/v1/queues", get(queues::list::<B>))
        .route(
            "/v1/queues/{q}",
            get(queues::stats::<B>).put(queues::configure::<B>),
        )
        .route(
            "/v1/queues/{q}/jobs",
            post(jobs::enqueue::<B>)
                .get(console::list::<B>)
                .delete(console::cancel_all::<B>),
        )
        .route("/v1/queues/{q}/jobs/{id}/run", post(console::run::<B>))
        .route(
            "/v1/queues/{q}/jobs/{id}/deliveries",
            get(push_model::deliveries::<B>),
        )
        .route("/v1/queues/{q}/pause", post(console::pause::<B>))
        .route("/v1/queues/{q}/resume", post(console::resume::<B>))
        .route("/v1/queues/{q}/series", get(console::series::<B>))
        .route(
            "/v1/queues/{q}/batches",
            post(batches::create::<B>).get(batches::list::<B>),
        )
        .route("/v1/queues/{q}/batches/{id}", get(batches::get::<B>))
        .route("/v1/queues/{q}/batches/{id}/jobs", post(batches::add::<B>))
        .route(
            "/v1/queues/{q}/batches/{id}/close",
            post(batches::close::<B>),
        )
        .route("/v1/queues/{q}/keys", get(keys::list::<B>))
        .route("/v1/queues/{q}/keys/{key}/pause", post(keys::pause::<B>))
        .route("/v1/queues/{q}/keys/{key}/resume", post(keys::resume::<B>))
        .route("/v1/queues/{q}/keys/{key}/jobs", get(keys::jobs::<B>))
        .route("/v1/flows", post(flows::create::<B>))
        .route("/v1/queues/{q}/keys/{key}/cancel", post(keys::cancel::<B>))
        .route(
            "/v1/queues/{q}/keys/{key}/reschedule",
            post(keys::reschedule::<B>),
        )
        .route("/v1/queues/{q}/events", get(events::events::<B>))
        .route(
            "/v1/queues/{q}/dead/{id}",
            axum::routing::delete(console::dead_delete::<B>),
        )
        .route(
            "/v1/queues/{q}/jobs/{id}",
            get(jobs::get::<B>)
                .delete(jobs::cancel::<B>)
                .patch(jobs::reschedule::<B>),
        )
        .route("/v1/queues/{q}/schedules", get(schedules::list::<B>))
        .route(
            "/v1/queues/{q}/schedules/{name}",
            get(schedules::get::<B>)
                .put(schedules::put::<B>)
                .delete(schedules::delete::<B>),
        )
        .route("/v1/queues/{q}/claim", post(lease::claim::<B>))
        .route("/v1/claim", post(claims::claim_many::<B>))
        .route("/v1/leases/cancelled", post(lease::cancelled::<B>))
        .route("/v1/queues/{q}/acks", post(lease::ack_batch::<B>))
        .route(
            "/v1/queues/{q}/polls/{poll_id}",
            axum::routing::delete(lease::cut_poll::<B>),
        )
        .route("/v1/queues/{q}/jobs/{id}/ack", post(lease::ack::<B>))
        .route("/v1/queues/{q}/jobs/{id}/nack", post(lease::nack::<B>))
        .route("/v1/queues/{q}/jobs/{id}/extend", post(lease::extend::<B>))
        .route(
            "/v1/queues/{q}/jobs/{id}/release",
            post(lease::release::<B>),
        )
        .route(
            "/v1/queues/{q}/dead",
            get(queues::dead_list::<B>).delete(queues::purge::<B>),
        )
        .route(
            "/v1/queues/{q}/dead/requeue",
            post(queues::requeue_all::<B>),
        )
        .route(
            "/v1/queues/{q}/dead/{id}/requeue",
            post(queues::requeue_one::<B>),
        )
        // Once authenticated, a request's body is read within the header timeout.
        .route_layer(middleware::from_fn_with_state(
            conns::BodyRules {
                deadline: state.inner.config.header_timeout,
                max: max_body,
            },
            conns::read_body,
        ))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token::<B>,
        ));
    Router::new()
        .merge(v1)
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz::<B>))
        .route(
            "/metrics",
            get(ops::metrics::<B>).route_layer(middleware::from_fn_with_state(
                state.clone(),
                auth::require_metrics_token::<B>,
            )),
        )
        .route("/openapi.json", get(ops::openapi))
        .route("/", get(ops::console_page))
        .route("/assets/{file}", get(ops::asset))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::browser_guard::<B>,
        ))
        .with_state(state)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn(auth::security_headers))
        .layer(middleware::from_fn(record_latency))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::new(
                ErrorCode::Internal,
                "the server hit a bug handling this request",
            )
            .into_response()
        }))
        .layer(TraceLayer::new_for_http())
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(SetRequestIdLayer::x_request_id(Counter::default()))
        .layer(middleware::from_fn(conns::serving))
}

async fn no_route() -> ApiError {
    ApiError::new(ErrorCode::NoRoute, "no such endpoint; see /openapi.json")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this endpoint does not take this method",
    )
}

/// Each request's latency histogram and its SERVER span (OpenTelemetry HTTP server
/// conventions: named by the method and route template, never the raw path; the parent is the
/// request's `traceparent`, so an enqueue's `send` span and its jobs join the caller's trace).
async fn record_latency(req: Request, next: Next) -> Response {
    use tracing::Instrument;
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().to_string();
    let started = Instant::now();
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        delayq::otel::relate(
            &span,
            jobs::header_trace(req.headers()).as_ref(),
            delayq::TraceMode::Child,
        );
    }
    let resp = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", resp.status().as_u16());
    if resp.status().is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    let labels = [
        ("method", method),
        ("route", route),
        ("status", resp.status().as_u16().to_string()),
    ];
    metrics::histogram!(HTTP_LATENCY, &labels).record(started.elapsed().as_secs_f64());
    resp
}

/// Request ids: a process-unique counter (`x-request-id`, kept when the client sends one).
#[derive(Clone, Default)]
struct Counter(Arc<AtomicU64>);

impl MakeRequestId for Counter {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        HeaderValue::from_str(&format!("dq-{n}"))
            .ok()
            .map(RequestId::new)
    }
}

/// Serves `router(state)` on `listener` until `shutdown` completes, then stops accepting,
/// ends pending long polls and finishes requests in flight.
///
/// Connections are HTTP/1.1 with a header-read timeout ([`HttpConfig::header_timeout`]: a
/// half-sent request or an idle connection is closed; a request body gets as long), at most
/// [`HttpConfig::max_connections`] open at once — when full, the oldest connection not
/// serving a request is closed for a new one (`conns.rs`) — and at most
/// [`HttpConfig::max_short_per_address`] per client address outside long-lived requests;
/// long-lived requests have budgets of their own (`budget.rs`), so slow, idle or streaming
/// clients cannot exhaust the process's file descriptors and lock well-behaved clients out.
pub async fn serve<B: Backend + Inspect + Schedules + Batches>(
    listener: tokio::net::TcpListener,
    state: AppState<B>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let app = router(state.clone());
    tokio::spawn(depth::sample(state.clone()));
    // Batches whose jobs have all ended are finished here too (on Redis by this sweep; the
    // embedded store finishes each in the step that ends its last job).
    let sweeper = tokio::spawn(delayq::batch::BatchSweeper::new(state.backend().clone()).run());
    let _sweeping = AbortOnDrop(sweeper);
    let config = &state.inner.config;
    let pool = conns::Pool::new(
        config.max_connections,
        config.max_short_per_address,
        state.inner.short_conns.clone(),
    );
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and friends: wait for connections to close instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // A place among the open connections: at once, or by closing the oldest that is not
        // serving a request (its address's place is taken in the connection's own task).
        let (place, mut evicted) = tokio::select! {
            p = pool.enter(peer.ip()) => p,
            () = &mut shutdown => break,
        };
        let pool = pool.clone();
        let _ = stream.set_nodelay(true);
        let addr = budget::ClientAddr(peer.ip());
        let app = app.clone();
        let header_timeout = config.header_timeout;
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // Its address's place: an address whose every short connection serves a request
            // has this one closed at once (the others' keep being accepted).
            let Some(track) = pool.admit(&place).await else {
                return;
            };
            let place = Arc::new(place);
            let (conn_track, conn_place) = (track.clone(), place.clone());
            let tagged = tower::ServiceExt::map_request(
                app,
                move |mut req: axum::http::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(addr);
                    req.extensions_mut().insert(conn_track.clone());
                    req.extensions_mut().insert(conn_place.clone());
                    req
                },
            );
            let service = hyper_util::service::TowerToHyperService::new(tagged);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                // Request line and headers beyond 64 KiB: 431, connection closed.
                .max_header_size(64 * 1024)
                .serve_connection(TokioIo::new(stream), service);
            let conn = watcher.watch(conn);
            tokio::select! {
                _ = conn => {}
                // Evicted to make room: dropping the connection closes it.
                Ok(()) = &mut evicted => {}
            }
            track.closed();
            drop(place);
        });
    }
    state.begin_shutdown();
    graceful.shutdown().await;
    Ok(())
}

/// Aborts a background task when dropped (the server's batch sweep ends with `serve`).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
