//! The console's API: browse jobs by state (stable cursors) or by id, act on one job or in
//! bulk, pause and resume, and the series. Every action answers `{"outcome": …}` and is
//! announced on the queue's event stream (`events.rs`).

use axum::Json;
use axum::extract::State;
use delayq::{Backend, Cursor, Due, Inspect, ListState, QueueName};

pub use crate::console_model::{Action, CountsView, JobList, ListQuery, SeriesView, StateQuery};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiQuery, JobPath, QueuePath};
use crate::model::{JobView, Outcome, OutcomeKind};
use crate::state::AppState;

fn state_of(s: &str) -> Result<ListState, ApiError> {
    s.parse().map_err(|e: delayq::InvalidInput| e.into())
}

/// Jobs of one state, a page at a time; or a search by id prefix.
#[utoipa::path(
    get, path = "/v1/queues/{q}/jobs", operation_id = "list_jobs", tag = "console",
    params(("q" = String, Path), ListQuery),
    responses((status = 200, body = JobList), (status = "4XX", body = ErrorBody))
)]
pub async fn list<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<JobList>, ApiError> {
    let limit = query.limit.unwrap_or(100);
    delayq::listing::check_limit(limit)?;
    if let Some(prefix) = query.id_prefix {
        if query.state.is_some() || query.cursor.is_some() {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                "id_prefix searches every state, without a cursor: give it alone (with limit)",
            ));
        }
        if prefix.is_empty() || prefix.len() > delayq::limits::MAX_ID_BYTES {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                "id_prefix must be 1-256 bytes",
            ));
        }
        let found = st.backend().search(&q, &prefix, limit).await?;
        return Ok(Json(JobList {
            jobs: found.jobs.into_iter().map(JobView::from).collect(),
            next_cursor: None,
            by_prefix: Some(found.by_prefix),
        }));
    }
    let Some(state) = query.state else {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "state is required: scheduled, due, leased or dead (or search with id_prefix)",
        ));
    };
    let state = state_of(&state)?;
    let after = query
        .cursor
        .map(|c| c.parse::<Cursor>())
        .transpose()
        .map_err(ApiError::from)?;
    let page = st
        .backend()
        .list(&q, delayq::ListRequest::new(state, limit, after))
        .await?;
    let mut jobs: Vec<JobView> = page.jobs.into_iter().map(JobView::from).collect();
    if state == ListState::Due {
        for j in &mut jobs {
            j.state = "due".into();
        }
    }
    Ok(Json(JobList {
        jobs,
        next_cursor: page.next.map(|c| c.to_string()),
        by_prefix: None,
    }))
}

/// Cancel every scheduled job (due later), or every due job, of a queue.
#[utoipa::path(
    delete, path = "/v1/queues/{q}/jobs", tag = "console",
    params(("q" = String, Path), StateQuery),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn cancel_all<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiQuery(query): ApiQuery<StateQuery>,
) -> Result<Json<Outcome>, ApiError> {
    let state = state_of(&query.state)?;
    let n = st.backend().cancel_all(&q, state).await?;
    Ok(bulk_done(&st, &q, OutcomeKind::Cancelled, n))
}

/// Announces a bulk action on the event stream and answers `{"outcome", "count"}`.
pub(crate) fn bulk_done<B: Backend + Inspect>(
    st: &AppState<B>,
    q: &QueueName,
    outcome: OutcomeKind,
    count: u64,
) -> Json<Outcome> {
    st.announce(Action::bulk(q, outcome, count));
    Json(Outcome {
        count: Some(count),
        ..Outcome::new(outcome)
    })
}

/// Run a scheduled job now: it becomes due at once (409 when it is leased or dead).
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs/{id}/run", tag = "console",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn run<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
) -> Result<Json<Outcome>, ApiError> {
    let due = st.producer(&q).reschedule(&id, Due::Now).await?;
    st.announce(Action::one(&q, OutcomeKind::DueNow, &id));
    Ok(Json(Outcome {
        due_at: Some(due),
        ..Outcome::of(&id, OutcomeKind::DueNow)
    }))
}

/// Delete one dead job (409 `job_not_dead` with its state when it is not dead).
#[utoipa::path(
    delete, path = "/v1/queues/{q}/dead/{id}", tag = "dead letters",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn dead_delete<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
) -> Result<Json<Outcome>, ApiError> {
    st.backend().dead_delete(&q, &id).await?;
    st.announce(Action::one(&q, OutcomeKind::Deleted, &id));
    Ok(Json(Outcome::of(&id, OutcomeKind::Deleted)))
}

async fn set_paused<B: Backend + Inspect>(
    st: &AppState<B>,
    q: &QueueName,
    paused: bool,
) -> Result<Json<Outcome>, ApiError> {
    st.note(q);
    st.backend().set_paused(q, paused).await?;
    let word = if paused {
        OutcomeKind::Paused
    } else {
        OutcomeKind::Resumed
    };
    st.announce(Action::queue(q, word));
    Ok(Json(Outcome::new(word)))
}

/// Pause a queue: it accepts jobs and leases none (expired leases are still recovered).
#[utoipa::path(
    post, path = "/v1/queues/{q}/pause", operation_id = "pause_queue", tag = "console",
    params(("q" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn pause<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Result<Json<Outcome>, ApiError> {
    set_paused(&st, &q, true).await
}

/// Resume a paused queue; its consumers wake at once.
#[utoipa::path(
    post, path = "/v1/queues/{q}/resume", operation_id = "resume_queue", tag = "console",
    params(("q" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn resume<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Result<Json<Outcome>, ApiError> {
    set_paused(&st, &q, false).await
}

/// Throughput and lateness per 10-s interval over the last hour, and totals.
#[utoipa::path(
    get, path = "/v1/queues/{q}/series", tag = "console",
    params(("q" = String, Path)),
    responses((status = 200, body = SeriesView), (status = "4XX", body = ErrorBody))
)]
pub async fn series<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Result<Json<SeriesView>, ApiError> {
    st.note(&q);
    let s = st.backend().series(&q).await?;
    let mut view = SeriesView::new(&s, delayq::job::system_now_ms());
    view.depth = st.inner.depths.of(&q);
    Ok(Json(view))
}
