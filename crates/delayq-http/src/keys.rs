//! A queue's keys: hold one key until a time (an upstream's `Retry-After`), lift the hold,
//! list the busiest keys (in flight, due, held) for the console, and every job of one key —
//! listed, cancelled or moved in one call.

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use delayq::{Backend, Inspect, JobKey, KeyHold, QueueName};
use delayq_wire::{
    JobList, JobView, KeyCancelRequest, KeyCancelView, KeyHoldView, KeyJobsQuery, KeyList,
    KeyPauseRequest, KeyQuery, KeyRescheduleRequest, KeyRescheduleView, KeyView,
};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiJson, ApiQuery, QueuePath};
use crate::state::AppState;

/// The `{q}` and `{key}` path segments, validated.
pub struct KeyPath(pub QueueName, pub JobKey);

impl<S: Send + Sync> FromRequestParts<S> for KeyPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (q, key) = crate::extract::queue_and(parts, state, ErrorCode::InvalidKey).await?;
        Ok(KeyPath(q, JobKey::new(key)?))
    }
}

/// Holds one key's due jobs until `until` (ms since the epoch or RFC 3339) or for `for_ms`:
/// the queue's other keys are claimed meanwhile. A second pause replaces the first.
#[utoipa::path(
    post, path = "/v1/queues/{q}/keys/{key}/pause", operation_id = "pause_key", tag = "keys",
    params(("q" = String, Path), ("key" = String, Path)), request_body = KeyPauseRequest,
    responses((status = 200, body = KeyHoldView), (status = "4XX", body = ErrorBody))
)]
pub async fn pause<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    KeyPath(q, key): KeyPath,
    ApiJson(body): ApiJson<KeyPauseRequest>,
) -> Result<Json<KeyHoldView>, ApiError> {
    let hold = body.hold()?;
    let end = st.backend().pause_key(&q, &key, hold).await?;
    Ok(Json(KeyHoldView {
        queue: q.to_string(),
        key: key.to_string(),
        paused_until: end,
    }))
}

/// Lifts a key's hold: its due jobs are claimed again at once.
#[utoipa::path(
    post, path = "/v1/queues/{q}/keys/{key}/resume", operation_id = "resume_key", tag = "keys",
    params(("q" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = KeyHoldView), (status = "4XX", body = ErrorBody))
)]
pub async fn resume<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    KeyPath(q, key): KeyPath,
) -> Result<Json<KeyHoldView>, ApiError> {
    let end = st.backend().pause_key(&q, &key, KeyHold::Lifted).await?;
    Ok(Json(KeyHoldView {
        queue: q.to_string(),
        key: key.to_string(),
        paused_until: end,
    }))
}

/// The busiest keys of a queue: most jobs in flight and due first, then held ones.
#[utoipa::path(
    get, path = "/v1/queues/{q}/keys", operation_id = "list_keys", tag = "keys",
    params(("q" = String, Path), KeyQuery),
    responses((status = 200, body = KeyList), (status = "4XX", body = ErrorBody))
)]
pub async fn list<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiQuery(query): ApiQuery<KeyQuery>,
) -> Result<Json<KeyList>, ApiError> {
    let limit = query.limit.unwrap_or(20);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("limit must be 1-1000, not {limit}"),
        ));
    }
    let keys = st.backend().keys(&q, limit).await?;
    Ok(Json(KeyList {
        queue: q.to_string(),
        keys: keys.into_iter().map(KeyView::from).collect(),
    }))
}

/// A page of one key's jobs, by id: scheduled, due, running (`leased`) and dead ones (or one
/// state of them). Costs the key's jobs, not the queue's.
#[utoipa::path(
    get, path = "/v1/queues/{q}/keys/{key}/jobs", operation_id = "list_key_jobs", tag = "keys",
    params(("q" = String, Path), ("key" = String, Path), KeyJobsQuery),
    responses((status = 200, body = JobList), (status = "4XX", body = ErrorBody))
)]
pub async fn jobs<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    KeyPath(q, key): KeyPath,
    ApiQuery(query): ApiQuery<KeyJobsQuery>,
) -> Result<Json<JobList>, ApiError> {
    let state = match query.state.as_deref() {
        None => None,
        Some(s @ ("scheduled" | "due" | "leased" | "dead")) => {
            Some(s.parse::<delayq::ListState>()?)
        }
        Some(s) => {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("state must be scheduled, due, leased or dead, not {s:?}"),
            ));
        }
    };
    let after = query
        .cursor
        .map(|c| {
            delayq::JobId::new(c)
                .map_err(|e| ApiError::new(ErrorCode::InvalidQuery, format!("cursor: {e}")))
        })
        .transpose()?;
    let req = delayq::KeyJobsRequest {
        state,
        limit: query.limit.unwrap_or(100),
        after,
    };
    req.check()?;
    let page = st.backend().key_jobs(&q, &key, req).await?;
    let now = page.now_ms;
    let jobs = page
        .jobs
        .into_iter()
        .map(|j| {
            let due = delayq::key_jobs::listed_as(&j, now) == Some(delayq::ListState::Due);
            let mut v = JobView::from(j);
            if due {
                v.state = "due".into();
            }
            v
        })
        .collect();
    Ok(Json(JobList {
        jobs,
        next_cursor: page.next.map(|c| c.to_string()),
        by_prefix: None,
    }))
}

/// Cancels every scheduled and due job of one key (with `{"running": true}` its running jobs
/// too); dead and done jobs stay. Atomic per shard.
#[utoipa::path(
    post, path = "/v1/queues/{q}/keys/{key}/cancel", operation_id = "cancel_key", tag = "keys",
    params(("q" = String, Path), ("key" = String, Path)), request_body = KeyCancelRequest,
    responses((status = 200, body = KeyCancelView), (status = "4XX", body = ErrorBody))
)]
pub async fn cancel<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    KeyPath(q, key): KeyPath,
    ApiJson(body): ApiJson<KeyCancelRequest>,
) -> Result<Json<KeyCancelView>, ApiError> {
    let done = st.backend().cancel_key(&q, &key, body.running).await?;
    Ok(Json(KeyCancelView {
        queue: q.to_string(),
        key: key.to_string(),
        cancelled: done.cancelled,
        running: done.running,
    }))
}

/// Moves every scheduled and due job of one key: each by `shift_ms`, or all to `due_at`.
/// Atomic per shard.
#[utoipa::path(
    post, path = "/v1/queues/{q}/keys/{key}/reschedule", operation_id = "reschedule_key",
    tag = "keys", params(("q" = String, Path), ("key" = String, Path)),
    request_body = KeyRescheduleRequest,
    responses((status = 200, body = KeyRescheduleView), (status = "4XX", body = ErrorBody))
)]
pub async fn reschedule<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    KeyPath(q, key): KeyPath,
    ApiJson(body): ApiJson<KeyRescheduleRequest>,
) -> Result<Json<KeyRescheduleView>, ApiError> {
    let to = body.to_move()?;
    let n = st.backend().reschedule_key(&q, &key, to).await?;
    Ok(Json(KeyRescheduleView {
        queue: q.to_string(),
        key: key.to_string(),
        rescheduled: n,
    }))
}
