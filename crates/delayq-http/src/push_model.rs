//! HTTP push over the API: `GET /v1/queues/{q}/jobs/{id}/deliveries`, the requests this server's pusher sent for a job.

use axum::Json;
use axum::extract::State;
use delayq::{Backend, Inspect};
pub use delayq_wire::{Deliveries, DeliveryView, TargetView};

use crate::error::{ApiError, ErrorBody};
use crate::extract::JobPath;
use crate::state::AppState;

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
