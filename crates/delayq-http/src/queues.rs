//! Queues: list with counts, one queue's counts, and the dead-letter tools.

use axum::Json;
use axum::extract::State;
use delayq::{Backend, Inspect, ListState};

use crate::console::{Action, bulk_done};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiJson, ApiQuery, JobPath, QueuePath};
use crate::model::{JobView, Outcome, OutcomeKind, Page, QueueView, SettingsPatch};
use crate::state::AppState;

/// Every queue that holds jobs, with its counts.
#[utoipa::path(
    get, path = "/v1/queues", operation_id = "list_queues", tag = "queues",
    responses((status = 200, body = [QueueView]), (status = "4XX", body = ErrorBody))
)]
pub async fn list<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
) -> Result<Json<Vec<QueueView>>, ApiError> {
    let mut out = Vec::new();
    for q in st.backend().queues().await? {
        let s = st.backend().stats(&q).await?;
        out.push(QueueView::new(q.as_str(), s));
    }
    Ok(Json(out))
}

/// Counts of one queue: depth, due now, due in the next minute, leased, dead, oldest overdue.
#[utoipa::path(
    get, path = "/v1/queues/{q}", tag = "queues",
    params(("q" = String, Path)),
    responses((status = 200, body = QueueView), (status = "4XX", body = ErrorBody))
)]
pub async fn stats<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Result<Json<QueueView>, ApiError> {
    st.note(&q);
    let s = st.backend().stats(&q).await?;
    let settings = st.backend().settings(&q).await?;
    Ok(Json(QueueView::new(q.as_str(), s).with_settings(&settings)))
}

/// Creates a queue or changes its settings (any subset: fields not given keep their values);
/// answers like `GET`. A shard change of a queue that holds jobs is refused (409 `conflict`).
#[utoipa::path(
    put, path = "/v1/queues/{q}", tag = "queues",
    params(("q" = String, Path)), request_body = SettingsPatch,
    responses((status = 200, body = QueueView), (status = "4XX", body = ErrorBody))
)]
pub async fn configure<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiJson(body): ApiJson<SettingsPatch>,
) -> Result<Json<QueueView>, ApiError> {
    let current = st.backend().settings(&q).await?;
    let wanted = body.apply(current);
    if body.target.is_some() {
        st.config().check_target(wanted.target.as_ref())?;
    }
    let settings = st.backend().configure(&q, wanted).await?;
    let s = st.backend().stats(&q).await?;
    Ok(Json(QueueView::new(q.as_str(), s).with_settings(&settings)))
}

/// Dead jobs, oldest failure first.
#[utoipa::path(
    get, path = "/v1/queues/{q}/dead", tag = "dead letters",
    params(("q" = String, Path), Page),
    responses((status = 200, body = [JobView]), (status = "4XX", body = ErrorBody))
)]
pub async fn dead_list<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiQuery(page): ApiQuery<Page>,
) -> Result<Json<Vec<JobView>>, ApiError> {
    let limit = page.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "limit must be 1-1000",
        ));
    }
    // Offset paging over the cursor listing (GET …/jobs?state=dead pages by cursor).
    let offset = page.offset.unwrap_or(0);
    let jobs = delayq::backend::skip_take(st.backend(), &q, ListState::Dead, offset, limit).await?;
    Ok(Json(jobs.into_iter().map(JobView::from).collect()))
}

/// Put one dead job back, due now, attempts reset.
#[utoipa::path(
    post, path = "/v1/queues/{q}/dead/{id}/requeue", tag = "dead letters",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn requeue_one<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
) -> Result<Json<Outcome>, ApiError> {
    st.backend().dead_requeue(&q, &id).await?;
    st.announce(Action::one(&q, OutcomeKind::Requeued, &id));
    Ok(Json(Outcome::of(&id, OutcomeKind::Requeued)))
}

/// Put every dead job back.
#[utoipa::path(
    post, path = "/v1/queues/{q}/dead/requeue", tag = "dead letters",
    params(("q" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn requeue_all<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Result<Json<Outcome>, ApiError> {
    let n = st.backend().dead_requeue_all(&q).await?;
    Ok(bulk_done(&st, &q, OutcomeKind::Requeued, n))
}

/// Delete every dead job.
#[utoipa::path(
    delete, path = "/v1/queues/{q}/dead", tag = "dead letters",
    params(("q" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn purge<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Result<Json<Outcome>, ApiError> {
    let n = st.backend().dead_purge(&q).await?;
    Ok(bulk_done(&st, &q, OutcomeKind::Purged, n))
}
