//! A queue's keys: hold one key until a time (an upstream's `Retry-After`), lift the hold,
//! and list the busiest keys (in flight, due, held) for the console.

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use delayq::{Backend, Inspect, JobKey, KeyHold, QueueName};
use delayq_wire::{KeyHoldView, KeyList, KeyPauseRequest, KeyQuery, KeyView};

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
