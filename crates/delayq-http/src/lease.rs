//! The consumer side: claim (a long poll that returns as soon as a job is due), ack, nack,
//! extend.

use std::time::Duration;

use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, State};
use delayq::{
    Ack, AckOutcome, Backend, ClaimRequest as Claim, Inspect, LeaseRef, Nack, NackOutcome,
    QueueName,
};
use tokio::time::Instant;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::{ApiJson, JobPath, QueuePath};
use crate::model::{
    AckBatchRequest, AckBatchResponse, AckRequest, ClaimRequest, ClaimResponse, ExtendRequest,
    NackRequest, Outcome, OutcomeKind, ReleaseRequest,
};
use crate::polls::{Waiting, valid_poll_id};
use crate::state::AppState;
use delayq::JobId;
use delayq_wire::ClaimPoll;
use delayq_wire::{CancelledRequest, CancelledResponse};

/// Most leases one `POST /v1/leases/cancelled` asks about.
pub const MAX_LEASES_ASKED: usize = 1000;

/// Longest long poll.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// Lease up to `max` due jobs, waiting up to `wait_ms` for one to become due.
#[utoipa::path(
    post, path = "/v1/queues/{q}/claim", tag = "consumers",
    params(("q" = String, Path)),
    request_body = ClaimRequest,
    responses((status = 200, body = ClaimResponse), (status = "4XX", body = ErrorBody))
)]
pub async fn claim<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ext: axum::http::Extensions,
    QueuePath(q): QueuePath,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Result<Json<ClaimResponse>, ApiError> {
    let (max, lease, wait, poll_id) = claim_shape(req.poll)?;
    let acks = acks_of(req.acks)?;
    st.note(&q);
    // Each caller may keep only so many polls waiting (they hold a connection and a task).
    let _slot = if wait.is_zero() {
        None
    } else {
        Some(st.long_lived(crate::budget::Kind::LongPoll, &ext)?)
    };
    // Registered before the first claim: a cut that overtakes it still ends the poll.
    let cut = poll_id.as_deref().filter(|_| !wait.is_zero()).map(|id| {
        st.inner
            .cuts
            .watch(&crate::budget::caller_key(&ext), &q, id)
    });
    let deadline = Instant::now() + wait;
    let batch = st.backend().claim(&q, Claim { max, lease, acks }).await?;
    let acks = batch.acks;
    let mut shutdown = st.inner.shutdown.clone();
    if !batch.jobs.is_empty() || wait.is_zero() || *shutdown.borrow() {
        let next_due_in_ms = batch
            .jobs
            .is_empty()
            .then_some(batch.next_due_in)
            .flatten()
            .map(|d| d.as_millis() as u64);
        return Ok(Json(ClaimResponse {
            jobs: batch.jobs.into_iter().map(Into::into).collect(),
            acks,
            next_due_in_ms,
        }));
    }
    // Nothing due: wait with the queue's other polls; its one claim loop serves them all.
    let mut waiting = Waiting::join(&st, &q, max, lease, deadline);
    let jobs = tokio::select! {
        jobs = waiting.jobs() => jobs,
        () = tokio::time::sleep_until(deadline) => waiting.stop(),
        _ = shutdown.changed() => waiting.stop(),
        () = async { cut.as_ref().expect("guarded").cut().await }, if cut.is_some() => waiting.stop(),
    };
    Ok(Json(ClaimResponse {
        jobs: jobs.into_iter().map(Into::into).collect(),
        acks,
        next_due_in_ms: None,
    }))
}

/// End a waiting long poll now (one that named itself with `poll_id`): it answers with the
/// jobs it holds, usually none. A cut for a poll that has not arrived yet ends it as soon as
/// it does (within 2 minutes). A worker shutting down does this instead of waiting out its poll.
#[utoipa::path(
    delete, path = "/v1/queues/{q}/polls/{poll_id}", tag = "consumers",
    params(("q" = String, Path), ("poll_id" = String, Path)),
    responses((status = 204), (status = "4XX", body = ErrorBody))
)]
pub async fn cut_poll<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ext: axum::http::Extensions,
    axum::extract::Path((q, id)): axum::extract::Path<(String, String)>,
) -> Result<axum::http::StatusCode, ApiError> {
    let q = QueueName::new(q)?;
    let id = checked_poll_id(id)?;
    st.inner.cuts.cut(&crate::budget::caller_key(&ext), &q, &id);
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// A claim's `max` (1-1000, default 1), lease (default 30 s, checked), wait (0-60 s) and
/// `poll_id` (checked), or the error that refuses it: the same rules for one queue's claim and
/// a claim over several.
pub(crate) fn claim_shape(
    poll: ClaimPoll,
) -> Result<(usize, Duration, Duration, Option<String>), ApiError> {
    let ClaimPoll {
        max,
        lease_ms,
        wait_ms,
        poll_id,
    } = poll;
    let max = max.unwrap_or(1);
    if !(1..=1000).contains(&max) {
        return Err(ApiError::new(
            ErrorCode::InvalidBatch,
            format!("max {max} is outside 1-1000"),
        ));
    }
    let lease = lease_ms.map_or(DEFAULT_LEASE, Duration::from_millis);
    delayq::job::validate_lease(lease)?;
    let wait = Duration::from_millis(wait_ms.unwrap_or(0));
    if wait > MAX_WAIT {
        return Err(ApiError::new(
            ErrorCode::InvalidBatch,
            "wait_ms is over 60000",
        ));
    }
    let poll_id = poll_id.map(checked_poll_id).transpose()?;
    Ok((max, lease, wait, poll_id))
}

/// `id` if it is a valid `poll_id`, else `invalid_poll_id`.
pub(crate) fn checked_poll_id(id: String) -> Result<String, ApiError> {
    if valid_poll_id(&id) {
        Ok(id)
    } else {
        Err(ApiError::new(
            ErrorCode::InvalidPollId,
            "poll_id must be 1-64 characters of [A-Za-z0-9._-]",
        ))
    }
}

/// Most acks one claim or ack batch carries.
pub(crate) const MAX_ACKS: usize = 1000;

/// The acks of a request, checked: more than [`MAX_ACKS`], a bad id or a bad result refuses
/// the request (before any ack is applied).
pub(crate) fn acks_of<A>(acks: Vec<A>) -> Result<Vec<Ack>, ApiError>
where
    Ack: TryFrom<A, Error = delayq_wire::Invalid>,
{
    if acks.len() > MAX_ACKS {
        return Err(ApiError::new(
            ErrorCode::InvalidBatch,
            format!("{} acks is over {MAX_ACKS}", acks.len()),
        ));
    }
    Ok(acks
        .into_iter()
        .map(Ack::try_from)
        .collect::<Result<_, _>>()?)
}

/// Acknowledge several jobs in one request (a worker's finished jobs when it has no claim to
/// carry them): each is done and deleted if its lease is current; answered in order.
#[utoipa::path(
    post, path = "/v1/queues/{q}/acks", tag = "consumers",
    params(("q" = String, Path)),
    request_body = AckBatchRequest,
    responses((status = 200, body = AckBatchResponse), (status = "4XX", body = ErrorBody))
)]
pub async fn ack_batch<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    QueuePath(q): QueuePath,
    ApiJson(req): ApiJson<AckBatchRequest>,
) -> Result<Json<AckBatchResponse>, ApiError> {
    if req.acks.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidBatch,
            "acks is empty (1-1000)",
        ));
    }
    let acks = st.backend().ack(&q, acks_of(req.acks)?).await?;
    Ok(Json(AckBatchResponse { acks }))
}

/// A request about one lease of the job its path names (ack, nack, extend, release): the
/// queue, the lease (the path's job with the body's `lease_token`) and the body — the one
/// skeleton of those handlers.
pub struct LeaseCall<T>(pub QueueName, pub LeaseRef, pub T);

/// A body that names a lease by its token.
pub trait LeaseBody: serde::de::DeserializeOwned {
    /// The lease's fencing token.
    fn lease_token(&self) -> u64;
}

macro_rules! lease_bodies {
    ($($t:ty),*) => {
        $(impl LeaseBody for $t {
            fn lease_token(&self) -> u64 {
                self.lease_token
            }
        })*
    };
}
lease_bodies!(AckRequest, ReleaseRequest, NackRequest, ExtendRequest);

impl<S: Send + Sync, T: LeaseBody> FromRequest<S> for LeaseCall<T> {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let (mut parts, body) = req.into_parts();
        let JobPath(q, id) = JobPath::from_request_parts(&mut parts, state).await?;
        let req = axum::extract::Request::from_parts(parts, body);
        let ApiJson(body) = ApiJson::<T>::from_request(req, state).await?;
        let lease = LeaseRef {
            id,
            token: body.lease_token(),
        };
        Ok(LeaseCall(q, lease, body))
    }
}

/// Acknowledge a job: it is done and deleted — or kept as done, with the `result` it carries,
/// when its queue or the job says to keep done jobs (`keep_done_ms`).
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs/{id}/ack", tag = "consumers",
    params(("q" = String, Path), ("id" = String, Path)),
    request_body = AckRequest,
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn ack<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    LeaseCall(q, lease, req): LeaseCall<AckRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let result =
        delayq_wire::payload::result_bytes(req.result.as_deref(), req.result_b64.as_deref())?;
    let id = lease.id.clone();
    let out = st.backend().ack(&q, vec![Ack { lease, result }]).await?;
    match out.first() {
        Some(AckOutcome::Acked) => Ok(Json(Outcome::of(&id, OutcomeKind::Acked))),
        Some(AckOutcome::NotFound) => Err(delayq::Error::NotFound { id }.into()),
        Some(AckOutcome::Cancelled) => Err(delayq::Error::Cancelled { id }.into()),
        _ => Err(delayq::Error::LeaseLost { id }.into()),
    }
}

/// Give a lease back (a job claimed but not run, e.g. at shutdown): due again at once, its
/// attempt not counted unless `undo_attempt` is false. A stale token changes nothing.
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs/{id}/release", tag = "consumers",
    params(("q" = String, Path), ("id" = String, Path)),
    request_body = ReleaseRequest,
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn release<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    LeaseCall(q, lease, req): LeaseCall<ReleaseRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let id = lease.id.clone();
    st.backend()
        .release(&q, vec![lease], req.undo_attempt)
        .await?;
    Ok(Json(Outcome::of(&id, OutcomeKind::Released)))
}

/// Fail an attempt: retry by the job's backoff, after `retry_in_ms`, or dead-letter.
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs/{id}/nack", tag = "consumers",
    params(("q" = String, Path), ("id" = String, Path)),
    request_body = NackRequest,
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn nack<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    LeaseCall(q, lease, req): LeaseCall<NackRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let retry_in = req.retry_in_ms.map(Duration::from_millis);
    if let Some(d) = retry_in
        && d > delayq::limits::MAX_DELAY
    {
        return Err(ApiError::new(
            ErrorCode::InvalidDelay,
            "retry_in_ms is over 10 years",
        ));
    }
    let nack = Nack {
        error: req.error.unwrap_or_else(|| "nack".into()),
        retry_in,
        dead: req.dead,
    };
    let id = lease.id.clone();
    match st.backend().nack(&q, lease, nack).await {
        Ok(NackOutcome::Retrying { due_at_ms }) => Ok(Json(Outcome {
            due_at: Some(due_at_ms),
            ..Outcome::of(&id, OutcomeKind::Retrying)
        })),
        Ok(NackOutcome::Dead { .. }) => Ok(Json(Outcome::of(&id, OutcomeKind::Dead))),
        Err(e) => Err(e.into()),
    }
}

/// Extend a lease to `lease_ms` from now.
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs/{id}/extend", tag = "consumers",
    params(("q" = String, Path), ("id" = String, Path)),
    request_body = ExtendRequest,
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn extend<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    LeaseCall(q, lease, req): LeaseCall<ExtendRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let len = req.lease_ms.map_or(DEFAULT_LEASE, Duration::from_millis);
    let id = lease.id.clone();
    match st.backend().extend(&q, lease, len).await {
        Ok(deadline) => Ok(Json(Outcome {
            lease_deadline: Some(deadline),
            ..Outcome::of(&id, OutcomeKind::Extended)
        })),
        Err(e) => Err(e.into()),
    }
}

/// Which of a worker's leases were cancelled while their jobs ran (`DELETE …?running=true`):
/// a worker asks about the jobs it runs every half second and stops those answered. Leases of
/// several queues in one call (one store call per queue).
#[utoipa::path(
    post, path = "/v1/leases/cancelled", tag = "consumers",
    request_body = CancelledRequest,
    responses((status = 200, body = CancelledResponse), (status = "4XX", body = ErrorBody))
)]
pub async fn cancelled<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ApiJson(req): ApiJson<CancelledRequest>,
) -> Result<Json<CancelledResponse>, ApiError> {
    if req.leases.len() > MAX_LEASES_ASKED {
        return Err(ApiError::new(
            ErrorCode::InvalidBatch,
            format!(
                "leases holds {} (at most {})",
                req.leases.len(),
                MAX_LEASES_ASKED
            ),
        ));
    }
    let asked = req
        .leases
        .iter()
        .map(|l| {
            let lease = LeaseRef {
                id: JobId::new(&l.id)?,
                token: l.lease_token,
            };
            Ok((QueueName::new(&l.queue)?, lease))
        })
        .collect::<Result<Vec<_>, delayq::InvalidInput>>()?;
    let found = delayq::backend::cancelled_each(st.backend(), asked).await?;
    let cancelled = req
        .leases
        .into_iter()
        .zip(found)
        .filter_map(|(l, cancelled)| cancelled.then_some(l))
        .collect();
    Ok(Json(CancelledResponse { cancelled }))
}
