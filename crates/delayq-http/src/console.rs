//! The console's API: browse jobs by state (stable cursors) or by id, act on one job or in
//! bulk, pause and resume, the series, and the live event stream (Server-Sent Events). Every
//! action answers `{"outcome": …}` and is announced on the queue's event stream.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use delayq::{Backend, Cursor, Inspect, ListState, QueueName, Schedule};
use futures_util::Stream;

pub use crate::console_model::{Action, CountsView, JobList, ListQuery, SeriesView, StateQuery};
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiQuery, JobPath, QueuePath};
use crate::model::{JobView, Outcome, QueueView};
use crate::state::AppState;

/// How often the event stream looks at the queue's counts (it sends them when they changed).
const STATS_EVERY: Duration = Duration::from_secs(1);

fn state_of(s: &str) -> Result<ListState, ApiError> {
    s.parse().map_err(|e: delayq::InvalidInput| e.into())
}

/// Jobs of one state, a page at a time; or a search by id prefix.
#[utoipa::path(
    get, path = "/v1/queues/{q}/jobs", tag = "console",
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
    let page = st.backend().list(&q, state, limit, after).await?;
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
    Ok(bulk_done(&st, &q, "cancelled", n))
}

/// Announces a bulk action on the event stream and answers `{"outcome", "count"}`.
pub(crate) fn bulk_done<B: Backend + Inspect>(
    st: &AppState<B>,
    q: &QueueName,
    outcome: &str,
    count: u64,
) -> Json<Outcome> {
    st.announce(Action::bulk(q, outcome, count));
    Json(Outcome {
        outcome: outcome.into(),
        count: Some(count),
        ..Outcome::default()
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
    let due = st.producer(&q).reschedule(&id, Schedule::Now).await?;
    st.announce(Action::one(&q, "due_now", &id));
    Ok(Json(Outcome {
        due_at: Some(due),
        ..Outcome::of(&id, "due_now")
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
    st.announce(Action::one(&q, "deleted", &id));
    Ok(Json(Outcome::of(&id, "deleted")))
}

async fn set_paused<B: Backend + Inspect>(
    st: &AppState<B>,
    q: &QueueName,
    paused: bool,
) -> Result<Json<Outcome>, ApiError> {
    st.note(q);
    st.backend().set_paused(q, paused).await?;
    let word = if paused { "paused" } else { "resumed" };
    st.announce(Action::queue(q, word));
    Ok(Json(Outcome {
        outcome: word.into(),
        ..Outcome::default()
    }))
}

/// Pause a queue: it accepts jobs and leases none (expired leases are still recovered).
#[utoipa::path(
    post, path = "/v1/queues/{q}/pause", tag = "console",
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
    post, path = "/v1/queues/{q}/resume", tag = "console",
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
    let s = st.backend().series(&q).await?;
    let mut view = SeriesView::new(&s, delayq::job::system_now_ms());
    view.depth = st.inner.depths.of(&q);
    Ok(Json(view))
}

struct Events<B> {
    st: AppState<B>,
    q: QueueName,
    actions: tokio::sync::broadcast::Receiver<Action>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    tick: tokio::time::Interval,
    last: Option<String>,
}

/// Live updates as Server-Sent Events: `stats` (the queue's counts, as `GET /v1/queues/{q}`,
/// sent when they change, at most once a second) and `action` (an action taken through this
/// server). Ends when the server shuts down.
#[utoipa::path(
    get, path = "/v1/queues/{q}/events", tag = "console",
    params(("q" = String, Path)),
    responses((status = 200, description = "text/event-stream"), (status = "4XX", body = ErrorBody))
)]
pub async fn events<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut tick = tokio::time::interval(STATS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = Events {
        actions: st.inner.actions.subscribe(),
        shutdown: st.inner.shutdown.clone(),
        st,
        q,
        tick,
        last: None,
    };
    let stream = futures_util::stream::unfold(start, |mut s| async move {
        loop {
            if *s.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = s.shutdown.changed() => return None,
                a = s.actions.recv() => match a {
                    Ok(a) if a.queue == s.q.as_str() => {
                        let ev = Event::default().event("action").json_data(&a).ok()?;
                        return Some((Ok(ev), s));
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                },
                _ = s.tick.tick() => {
                    let ev = match s.st.backend().stats(&s.q).await {
                        Ok(stats) => {
                            let text = serde_json::to_string(&QueueView::new(s.q.as_str(), stats))
                                .ok()?;
                            if s.last.as_ref() == Some(&text) {
                                continue;
                            }
                            s.last = Some(text.clone());
                            Event::default().event("stats").data(text)
                        }
                        Err(e) => Event::default().event("unavailable").data(e.to_string()),
                    };
                    return Some((Ok(ev), s));
                }
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
