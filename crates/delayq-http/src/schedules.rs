//! Periodic schedules over HTTP: `PUT / GET / DELETE /v1/queues/{q}/schedules/{name}` and
//! `GET /v1/queues/{q}/schedules` (see `delayq::schedule`). The server's ticker fires them.

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use delayq::schedule::{self, Schedules};
use delayq::{Backend, Inspect, QueueName};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiJson, queue_and};
use crate::model::{Outcome, OutcomeKind};
use crate::state::AppState;
pub use delayq_wire::{ScheduleBody, ScheduleList, ScheduleView};

/// The `{q}` and `{name}` path segments, validated.
pub struct SchedulePath(pub QueueName, pub String);

impl<S: Send + Sync> FromRequestParts<S> for SchedulePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (q, name) = queue_and(parts, state, ErrorCode::InvalidSchedule).await?;
        schedule::check_name(&name)?;
        Ok(SchedulePath(q, name))
    }
}

fn missing(q: &QueueName, name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no schedule {name} in queue {q}"),
    )
}

/// Creates or changes a schedule. A change of its timing takes effect from now; a change of
/// anything else keeps the next fire and applies from it.
#[utoipa::path(
    put, path = "/v1/queues/{q}/schedules/{name}", operation_id = "put_schedule", tag = "schedules",
    params(("q" = String, Path), ("name" = String, Path)), request_body = ScheduleBody,
    responses((status = 200, body = ScheduleView), (status = "4XX", body = ErrorBody))
)]
pub async fn put<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    headers: axum::http::HeaderMap,
    SchedulePath(q, name): SchedulePath,
    ApiJson(body): ApiJson<ScheduleBody>,
) -> Result<Json<ScheduleView>, ApiError> {
    let mut spec = body.into_spec()?;
    if spec.trace.is_none() {
        spec.trace = crate::jobs::header_trace(&headers);
    }
    st.config().check_target(spec.target.as_ref())?;
    // The first fire is planned on the store's clock, as the ticker plans the others.
    let now = st.backend().clock_ms().await?;
    let info = schedule::put(st.backend(), &q, &name, spec, st.config().max_payload, now).await?;
    Ok(Json(info.into()))
}

/// One schedule with its next fire.
#[utoipa::path(
    get, path = "/v1/queues/{q}/schedules/{name}", operation_id = "get_schedule", tag = "schedules",
    params(("q" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = ScheduleView), (status = "4XX", body = ErrorBody))
)]
pub async fn get<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    SchedulePath(q, name): SchedulePath,
) -> Result<Json<ScheduleView>, ApiError> {
    match st.backend().schedule(&q, &name).await? {
        Some(i) => Ok(Json(i.into())),
        None => Err(missing(&q, &name)),
    }
}

/// Deletes a schedule (jobs it already enqueued stay).
#[utoipa::path(
    delete, path = "/v1/queues/{q}/schedules/{name}", operation_id = "delete_schedule", tag = "schedules",
    params(("q" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn delete<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    SchedulePath(q, name): SchedulePath,
) -> Result<Json<Outcome>, ApiError> {
    if st.backend().delete_schedule(&q, &name).await? {
        Ok(Json(Outcome::new(OutcomeKind::Deleted)))
    } else {
        Err(missing(&q, &name))
    }
}

/// The queue's schedules, by name, with their next fires.
#[utoipa::path(
    get, path = "/v1/queues/{q}/schedules", operation_id = "list_schedules", tag = "schedules",
    params(("q" = String, Path)),
    responses((status = 200, body = ScheduleList), (status = "4XX", body = ErrorBody))
)]
pub async fn list<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    crate::extract::QueuePath(q): crate::extract::QueuePath,
) -> Result<Json<ScheduleList>, ApiError> {
    let schedules = st.backend().schedules(&q).await?;
    Ok(Json(ScheduleList {
        schedules: schedules.into_iter().map(Into::into).collect(),
    }))
}
