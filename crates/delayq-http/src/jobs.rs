//! Jobs by id: enqueue (single or batch), get, cancel, reschedule.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq::{Backend, CancelOutcome, Inspect};
use serde_json::value::RawValue;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiJson, ApiQuery, JobPath, QueuePath, parse};
use crate::model::{
    EnqueueRequest, EnqueueResponse, JobView, Outcome, OutcomeKind, RescheduleRequest,
};
use crate::state::AppState;
use delayq_wire::CancelQuery;

/// Enqueue one job (an object) or a batch (an array of objects, stored atomically). A job
/// without an `id` gets one derived from the `Idempotency-Key` header when the request has
/// one (`idem:KEY`; in a batch `idem:KEY:INDEX`), so a retried request stores it once.
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs", tag = "jobs",
    params(
        ("q" = String, Path, description = "queue name"),
        ("Idempotency-Key" = Option<String>, Header, description = "ids for the jobs without one: a retry of the request stores nothing twice"),
    ),
    request_body(content = delayq_wire::schema::EnqueueBodySchema, description = "a job, or an array of jobs"),
    responses(
        (status = 201, description = "created (a batch: at least one created)", body = delayq_wire::schema::EnqueueAnswerSchema),
        (status = 200, description = "the id already existed; nothing written (a batch: none created)", body = delayq_wire::schema::EnqueueAnswerSchema),
        (status = "4XX", body = ErrorBody),
    )
)]
pub async fn enqueue<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    headers: axum::http::HeaderMap,
    QueuePath(q): QueuePath,
    ApiJson(body): ApiJson<Box<RawValue>>,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    st.note(&q);
    let trace = header_trace(&headers);
    let with_trace = |mut job: delayq::NewJob| {
        if job.trace.is_none() {
            job.trace.clone_from(&trace);
        }
        job
    };
    let producer = st.producer(&q);
    let text = body.get();
    if text.starts_with('[') {
        let reqs: Vec<EnqueueRequest> = parse(text)?;
        let jobs = reqs
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let job = r
                    .into_job(&q)
                    .map_err(|e| ApiError::new(e.code, format!("job {i}: {}", e.message)))?;
                keyed(with_trace(job), key.as_deref(), Some(i))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (jobs, named): (Vec<_>, Vec<_>) = jobs.into_iter().unzip();
        let out = producer.enqueue_batch(jobs).await?;
        same_payloads(&producer, key.as_deref(), &out, &named).await?;
        let status = if out.iter().any(|e| e.created) {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        let body: Vec<EnqueueResponse> = out.into_iter().map(view).collect();
        return Ok((status, Json(body)).into_response());
    }
    let (job, named) = keyed(
        with_trace(parse::<EnqueueRequest>(text)?.into_job(&q)?),
        key.as_deref(),
        None,
    )?;
    st.config().check_target(job.target.as_ref())?;
    let e = producer.enqueue(job).await?;
    same_payloads(
        &producer,
        key.as_deref(),
        std::slice::from_ref(&e),
        &[named],
    )
    .await?;
    let status = if e.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view(e))).into_response())
}

/// The request's W3C trace context (`traceparent`, `tracestate`), as a propagator reads it: an
/// invalid one is ignored.
pub(crate) fn header_trace(headers: &axum::http::HeaderMap) -> Option<delayq::TraceContext> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    delayq::TraceContext::from_headers(get("traceparent"), get("tracestate"))
}

/// The request's `Idempotency-Key`, checked.
fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    match v.to_str() {
        Ok(k) if !k.is_empty() && k.len() <= 200 && !k.chars().any(char::is_control) => {
            Ok(Some(k.to_owned()))
        }
        _ => Err(ApiError::new(
            ErrorCode::InvalidJobId,
            "Idempotency-Key must be 1-200 visible ASCII characters",
        )),
    }
}

/// `job` with the id its request's idempotency key gives it, when it has none; then also a
/// copy of the payload that id names, for [`same_payloads`]. A job with its own id is left
/// as it is (and an existing one answers `created: false`, whatever its payload).
fn keyed(
    mut job: delayq::NewJob,
    key: Option<&str>,
    index: Option<usize>,
) -> Result<(delayq::NewJob, Option<Vec<u8>>), ApiError> {
    let mut named = None;
    if let (None, Some(k)) = (&job.id, key) {
        let id = match index {
            Some(i) => format!("idem:{k}:{i}"),
            None => format!("idem:{k}"),
        };
        job.id = Some(delayq::JobId::new(id)?);
        named = Some(job.payload.clone());
    }
    Ok((job, named))
}

/// An `Idempotency-Key` names one request: reused with another payload, the call is refused
/// (409 `conflict`, as Stripe answers) instead of answering `created: false` and dropping the
/// new payload. Only jobs whose id the key gave (`named`, in `out`'s order) and that existed
/// already are read back — a retry's jobs, concurrently; a first request reads nothing. A job
/// already gone (done, no retention) cannot be compared and reads as the repeat it most
/// likely is.
async fn same_payloads<B: Backend + Inspect>(
    producer: &delayq::Producer<B>,
    key: Option<&str>,
    out: &[delayq::Enqueued],
    named: &[Option<Vec<u8>>],
) -> Result<(), ApiError> {
    let Some(key) = key else {
        return Ok(());
    };
    let existing = out
        .iter()
        .zip(named)
        .filter(|(e, _)| !e.created)
        .filter_map(|(e, sent)| Some((e, sent.as_deref()?)));
    let reads = existing.map(|(e, sent)| async move {
        let stored = producer.get(&e.id).await?;
        Ok::<_, delayq::Error>((e, stored.is_some_and(|s| s.payload != sent)))
    });
    let read = futures_util::future::try_join_all(reads).await?;
    match read.into_iter().find(|(_, differs)| *differs) {
        Some((e, _)) => Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "Idempotency-Key {key:?} was used by an earlier request with another payload \
                 (job {}); use a new key for a new request",
                e.id
            ),
        )),
        None => Ok(()),
    }
}

fn view(e: delayq::Enqueued) -> EnqueueResponse {
    e.into()
}

/// One job in any state.
#[utoipa::path(
    get, path = "/v1/queues/{q}/jobs/{id}", operation_id = "get_job", tag = "jobs",
    params(("q" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = JobView), (status = "4XX", body = ErrorBody))
)]
pub async fn get<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
) -> Result<Json<JobView>, ApiError> {
    match st.producer(&q).get(&id).await? {
        Some(j) => Ok(Json(j.into())),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("job {id} not found"),
        )),
    }
}

/// Cancel a scheduled job. 200 means this call removed it; 409 means a consumer has it or it
/// is dead; 404 means it is gone. With `running=true` a job a worker runs is cancelled too:
/// 202 `cancelling` — it is ended cancelled now, its lease refused from now on (409
/// `cancelled`), and its worker told within a second to stop the handler.
#[utoipa::path(
    delete, path = "/v1/queues/{q}/jobs/{id}", tag = "jobs",
    params(("q" = String, Path), ("id" = String, Path), CancelQuery),
    responses(
        (status = 200, body = Outcome), (status = 202, body = Outcome),
        (status = "4XX", body = ErrorBody)
    )
)]
pub async fn cancel<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
    ApiQuery(query): ApiQuery<CancelQuery>,
) -> Result<(StatusCode, Json<Outcome>), ApiError> {
    let producer = st.producer(&q);
    let out = if query.running {
        producer.cancel_running(&id).await?
    } else {
        producer.cancel(&id).await?
    };
    match out {
        CancelOutcome::Cancelled => {
            st.announce(crate::console::Action::one(&q, OutcomeKind::Cancelled, &id));
            Ok((
                StatusCode::OK,
                Json(Outcome::of(&id, OutcomeKind::Cancelled)),
            ))
        }
        CancelOutcome::Cancelling => {
            st.announce(crate::console::Action::one(
                &q,
                OutcomeKind::Cancelling,
                &id,
            ));
            Ok((
                StatusCode::ACCEPTED,
                Json(Outcome::of(&id, OutcomeKind::Cancelling)),
            ))
        }
        CancelOutcome::Leased => Err(ApiError::new(
            ErrorCode::JobLeased,
            format!("job {id} is running on a consumer; not cancelled (running=true cancels it)"),
        )
        .with_state("leased")),
        CancelOutcome::Dead => Err(ApiError::new(
            ErrorCode::JobDead,
            format!("job {id} is dead-lettered; use the dead-letter tools"),
        )
        .with_state("dead")),
        CancelOutcome::NotFound => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("job {id} not found"),
        )),
    }
}

/// Move a scheduled job to a new time.
#[utoipa::path(
    patch, path = "/v1/queues/{q}/jobs/{id}", tag = "jobs",
    params(("q" = String, Path), ("id" = String, Path)),
    request_body = RescheduleRequest,
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn reschedule<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
    ApiJson(req): ApiJson<RescheduleRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let schedule = req.due()?;
    let due = st.producer(&q).reschedule(&id, schedule).await?;
    st.announce(crate::console::Action::one(
        &q,
        OutcomeKind::Rescheduled,
        &id,
    ));
    Ok(Json(Outcome {
        due_at: Some(due),
        ..Outcome::of(&id, OutcomeKind::Rescheduled)
    }))
}
