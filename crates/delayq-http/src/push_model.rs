//! HTTP push over the API: the target a job or a queue carries ([`TargetView`]) and
//! `GET /v1/queues/{q}/jobs/{id}/deliveries`, the requests this server's pusher sent for a job.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use delayq::{Backend, Inspect};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::JobPath;
use crate::state::AppState;

/// Where a pusher delivers a job: the payload is the request body, sent at the due time and
/// signed (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`).
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TargetView {
    /// `https://` or `http://` URL (addresses on loopback, private, link-local and metadata
    /// networks are refused unless the server allows private targets).
    pub url: String,
    /// `POST` (default), `PUT`, `PATCH`, `DELETE`, `GET`, `HEAD` or `OPTIONS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Extra request headers (e.g. `authorization`); `webhook-*`, `delayq-*`, `host` and
    /// framing headers are reserved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl From<TargetView> for delayq::Target {
    fn from(t: TargetView) -> Self {
        Self {
            url: t.url,
            method: t.method.unwrap_or_else(|| "POST".into()),
            headers: t.headers,
        }
    }
}

impl From<delayq::Target> for TargetView {
    fn from(t: delayq::Target) -> Self {
        Self {
            url: t.url,
            method: Some(t.method),
            headers: t.headers,
        }
    }
}

/// One request a pusher sent for a job.
#[derive(Serialize, ToSchema, Debug)]
pub struct DeliveryView {
    /// The job's attempt number.
    pub attempt: u32,
    /// When it was sent, ms since the epoch.
    pub at: u64,
    /// Time to the response or the failure, ms.
    pub duration_ms: u64,
    /// Response status, when one came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `delivered`, `throttled`, `http_error`, `timeout`, `connect_error`, `refused` or
    /// `invalid`.
    pub outcome: String,
    /// The error stored for a failed request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The requests of one job.
#[derive(Serialize, ToSchema, Debug)]
pub struct Deliveries {
    /// Oldest first; at most the latest 20.
    pub deliveries: Vec<DeliveryView>,
    /// Whether this server runs a pusher (without one the list is always empty).
    pub pusher: bool,
}

/// The HTTP requests this server's pusher sent for a job (a bounded in-memory window: other
/// processes' requests and those before a restart are not listed).
#[utoipa::path(
    get, path = "/v1/queues/{q}/jobs/{id}/deliveries", tag = "jobs",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Deliveries), (status = "4XX", body = ErrorBody))
)]
pub async fn deliveries<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
) -> Result<Json<Deliveries>, ApiError> {
    let log = st.inner.deliveries.get();
    let deliveries = log
        .map(|l| l.of(&q, &id))
        .unwrap_or_default()
        .into_iter()
        .map(|d| DeliveryView {
            attempt: d.attempt,
            at: d.at_ms,
            duration_ms: d.duration_ms,
            status: d.status,
            outcome: d.outcome,
            error: d.error,
        })
        .collect();
    Ok(Json(Deliveries {
        deliveries,
        pusher: log.is_some(),
    }))
}
