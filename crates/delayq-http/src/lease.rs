//! The consumer side: claim (a long poll that returns as soon as a job is due), ack, nack,
//! extend.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use delayq::{
    AckOutcome, Backend, ClaimRequest as Claim, Error, Inspect, JobId, LeaseRef, Nack, NackOutcome,
    QueueName, telemetry,
};
use tokio::time::{Instant, sleep_until};

use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiJson, JobPath, QueuePath};
use crate::model::{AckRequest, ClaimRequest, ClaimResponse, ExtendRequest, NackRequest, Outcome};
use crate::state::AppState;

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
    QueuePath(q): QueuePath,
    ApiJson(req): ApiJson<ClaimRequest>,
) -> Result<Json<ClaimResponse>, ApiError> {
    let max = req.max.unwrap_or(1);
    if !(1..=1000).contains(&max) {
        return Err(ApiError::new(
            "invalid_batch",
            format!("max {max} is outside 1-1000"),
        ));
    }
    let lease = req.lease_ms.map_or(DEFAULT_LEASE, Duration::from_millis);
    delayq::job::validate_lease(lease)?;
    let wait = Duration::from_millis(req.wait_ms.unwrap_or(0));
    if wait > MAX_WAIT {
        return Err(ApiError::new("invalid_batch", "wait_ms is over 60000"));
    }
    st.note(&q);
    let deadline = Instant::now() + wait;
    let backend = st.backend();
    let mut wake = if wait.is_zero() {
        None
    } else {
        backend.wakeups(&q).await.ok()
    };
    let mut shutdown = st.inner.shutdown.clone();
    loop {
        if let Some(w) = wake.as_mut() {
            w.borrow_and_update();
        }
        let batch = backend
            .claim(
                &q,
                Claim {
                    max,
                    lease,
                    acks: Vec::new(),
                },
            )
            .await?;
        if !batch.jobs.is_empty() || Instant::now() >= deadline || *shutdown.borrow() {
            let now = delayq::job::system_now_ms();
            telemetry::count(telemetry::CLAIMED, q.as_str(), batch.jobs.len() as u64);
            for j in &batch.jobs {
                telemetry::lateness(q.as_str(), j.due_at_ms, now);
            }
            return Ok(Json(ClaimResponse {
                jobs: batch.jobs.into_iter().map(Into::into).collect(),
            }));
        }
        // No poll loop: sleep until the next due job, a wake-up, the deadline or shutdown.
        let until = batch
            .next_due_in
            .map_or(deadline, |d| (Instant::now() + d).min(deadline));
        tokio::select! {
            _ = sleep_until(until) => {}
            changed = async {
                match wake.as_mut() {
                    Some(w) => w.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            } => {
                if !changed {
                    wake = None;
                }
            }
            _ = shutdown.changed() => {}
        }
    }
}

/// An answer to a refused lease operation: `not_found` for an unknown job, else `lease_lost`.
async fn lost<B: Backend + Inspect>(st: &AppState<B>, q: &QueueName, id: &JobId) -> ApiError {
    telemetry::count(telemetry::LEASE_LOST, q.as_str(), 1);
    match st.backend().get(q, id).await {
        Ok(None) => ApiError::new("not_found", format!("job {id} not found")),
        _ => ApiError::new(
            "lease_lost",
            format!("the lease token of job {id} is stale or not its own; nothing changed"),
        ),
    }
}

/// Acknowledge a job: it is done and deleted.
#[utoipa::path(
    post, path = "/v1/queues/{q}/jobs/{id}/ack", tag = "consumers",
    params(("q" = String, Path), ("id" = String, Path)),
    request_body = AckRequest,
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn ack<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    JobPath(q, id): JobPath,
    ApiJson(req): ApiJson<AckRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let lease = LeaseRef {
        id: id.clone(),
        token: req.lease_token,
    };
    let out = st.backend().ack(&q, vec![lease]).await?;
    match out.first() {
        Some(AckOutcome::Acked) => {
            telemetry::count(telemetry::ACKED, q.as_str(), 1);
            Ok(Json(Outcome::of(&id, "acked")))
        }
        _ => Err(lost(&st, &q, &id).await),
    }
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
    JobPath(q, id): JobPath,
    ApiJson(req): ApiJson<NackRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let retry_in = req.retry_in_ms.map(Duration::from_millis);
    if let Some(d) = retry_in
        && d > delayq::limits::MAX_DELAY
    {
        return Err(ApiError::new(
            "invalid_delay",
            "retry_in_ms is over 10 years",
        ));
    }
    let nack = Nack {
        error: req.error.unwrap_or_else(|| "nack".into()),
        retry_in,
        dead: req.dead,
    };
    let lease = LeaseRef {
        id: id.clone(),
        token: req.lease_token,
    };
    match st.backend().nack(&q, lease, nack).await {
        Ok(NackOutcome::Retrying { due_at_ms }) => {
            telemetry::count(telemetry::RETRIED, q.as_str(), 1);
            Ok(Json(Outcome {
                due_at: Some(due_at_ms),
                ..Outcome::of(&id, "retrying")
            }))
        }
        Ok(NackOutcome::Dead { .. }) => {
            telemetry::count(telemetry::DEAD, q.as_str(), 1);
            Ok(Json(Outcome::of(&id, "dead")))
        }
        Err(Error::LeaseLost { .. }) => Err(lost(&st, &q, &id).await),
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
    JobPath(q, id): JobPath,
    ApiJson(req): ApiJson<ExtendRequest>,
) -> Result<Json<Outcome>, ApiError> {
    let len = req.lease_ms.map_or(DEFAULT_LEASE, Duration::from_millis);
    let lease = LeaseRef {
        id: id.clone(),
        token: req.lease_token,
    };
    match st.backend().extend(&q, lease, len).await {
        Ok(deadline) => Ok(Json(Outcome {
            lease_deadline: Some(deadline),
            ..Outcome::of(&id, "extended")
        })),
        Err(Error::LeaseLost { .. }) => Err(lost(&st, &q, &id).await),
        Err(e) => Err(e.into()),
    }
}
