//! Batches over HTTP: create one with its jobs and callbacks, add jobs to an open one, close
//! it, read it, list those not done (see `delayq::batch`). The callbacks are enqueued by the
//! store once every job has ended (on Redis by the server's sweep).

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use delayq::{Backend, BatchId, Batches, Inspect, QueueName};
use delayq_wire::{
    BatchAddedView, BatchJobsRequest, BatchList, BatchQuery, BatchRequest, BatchView,
    EnqueueResponse, batches::jobs_of,
};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiJson, ApiQuery, QueuePath, queue_and};
use crate::state::AppState;

/// The `{q}` and `{id}` path segments, validated.
pub struct BatchPath(pub QueueName, pub BatchId);

impl<S: Send + Sync> FromRequestParts<S> for BatchPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (q, id) = queue_and(parts, state, ErrorCode::InvalidBatchId).await?;
        Ok(BatchPath(q, BatchId::new(id)?))
    }
}

fn missing(q: &QueueName, id: &BatchId) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no batch {id} in queue {q}"))
}

/// The jobs of a request, with the request's trace context and each target checked.
fn jobs<B: Backend + Inspect>(
    st: &AppState<B>,
    headers: &axum::http::HeaderMap,
    q: &QueueName,
    reqs: Vec<delayq_wire::EnqueueRequest>,
) -> Result<Vec<delayq::NewJob>, ApiError> {
    let trace = crate::jobs::header_trace(headers);
    let mut jobs = jobs_of(q, reqs)?;
    for j in &mut jobs {
        if j.trace.is_none() {
            j.trace.clone_from(&trace);
        }
        st.config().check_target(j.target.as_ref())?;
    }
    Ok(jobs)
}

async fn view<B: Backend + Inspect + Batches>(
    st: &AppState<B>,
    q: &QueueName,
    id: &BatchId,
) -> Result<BatchView, ApiError> {
    let info = st
        .backend()
        .batch(q, id)
        .await?
        .ok_or_else(|| missing(q, id))?;
    Ok(BatchView::of(q.as_str(), info))
}

/// Creates a batch with its jobs and callbacks (closed unless `open`; an open batch of that
/// id gains the jobs instead). 201 with the batch and what each job's enqueue did.
#[utoipa::path(
    post, path = "/v1/queues/{q}/batches", operation_id = "create_batch", tag = "batches",
    params(("q" = String, Path)), request_body = BatchRequest,
    responses((status = 201, body = BatchAddedView), (status = "4XX", body = ErrorBody))
)]
pub async fn create<B: Backend + Inspect + Batches>(
    State(st): State<AppState<B>>,
    headers: axum::http::HeaderMap,
    QueuePath(q): QueuePath,
    ApiJson(mut body): ApiJson<BatchRequest>,
) -> Result<(StatusCode, Json<BatchAddedView>), ApiError> {
    let id = body.id.take().map(BatchId::new).transpose()?;
    let spec = body.spec()?;
    let jobs = jobs(&st, &headers, &q, std::mem::take(&mut body.jobs))?;
    let added = st
        .producer(&q)
        .create_batch(id, spec, jobs, body.open)
        .await?;
    let batch = view(&st, &q, &added.id).await?;
    let jobs = added.jobs.into_iter().map(EnqueueResponse::from).collect();
    Ok((StatusCode::CREATED, Json(BatchAddedView { batch, jobs })))
}

/// Adds jobs to an open batch (409 `conflict` once it is closed), closing it after them when
/// `close`.
#[utoipa::path(
    post, path = "/v1/queues/{q}/batches/{id}/jobs", operation_id = "add_to_batch", tag = "batches",
    params(("q" = String, Path), ("id" = String, Path)), request_body = BatchJobsRequest,
    responses((status = 200, body = BatchAddedView), (status = "4XX", body = ErrorBody))
)]
pub async fn add<B: Backend + Inspect + Batches>(
    State(st): State<AppState<B>>,
    headers: axum::http::HeaderMap,
    BatchPath(q, id): BatchPath,
    ApiJson(body): ApiJson<BatchJobsRequest>,
) -> Result<Json<BatchAddedView>, ApiError> {
    let jobs = jobs(&st, &headers, &q, body.jobs)?;
    let added = st
        .producer(&q)
        .add_to_batch(&id, jobs, body.close)
        .await?
        .ok_or_else(|| missing(&q, &id))?;
    let batch = view(&st, &q, &id).await?;
    let jobs = added.jobs.into_iter().map(EnqueueResponse::from).collect();
    Ok(Json(BatchAddedView { batch, jobs }))
}

/// Closes a batch: no job joins it any more; it is done when its last job ends (at once when
/// they all have).
#[utoipa::path(
    post, path = "/v1/queues/{q}/batches/{id}/close", operation_id = "close_batch", tag = "batches",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = BatchView), (status = "4XX", body = ErrorBody))
)]
pub async fn close<B: Backend + Inspect + Batches>(
    State(st): State<AppState<B>>,
    BatchPath(q, id): BatchPath,
) -> Result<Json<BatchView>, ApiError> {
    let info = st
        .backend()
        .close_batch(&q, &id)
        .await?
        .ok_or_else(|| missing(&q, &id))?;
    Ok(Json(BatchView::of(q.as_str(), info)))
}

/// One batch: its state and counts.
#[utoipa::path(
    get, path = "/v1/queues/{q}/batches/{id}", operation_id = "get_batch", tag = "batches",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = BatchView), (status = "4XX", body = ErrorBody))
)]
pub async fn get<B: Backend + Inspect + Batches>(
    State(st): State<AppState<B>>,
    BatchPath(q, id): BatchPath,
) -> Result<Json<BatchView>, ApiError> {
    Ok(Json(view(&st, &q, &id).await?))
}

/// The batches of a queue that are not done, oldest first.
#[utoipa::path(
    get, path = "/v1/queues/{q}/batches", operation_id = "list_batches", tag = "batches",
    params(("q" = String, Path), BatchQuery),
    responses((status = 200, body = BatchList), (status = "4XX", body = ErrorBody))
)]
pub async fn list<B: Backend + Inspect + Batches>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiQuery(query): ApiQuery<BatchQuery>,
) -> Result<Json<BatchList>, ApiError> {
    let limit = query.limit.unwrap_or(20);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("limit must be 1-1000, not {limit}"),
        ));
    }
    let batches = st.backend().open_batches(&q, limit).await?;
    Ok(Json(BatchList {
        queue: q.to_string(),
        batches: batches
            .into_iter()
            .map(|i| BatchView::of(q.as_str(), i))
            .collect(),
    }))
}
