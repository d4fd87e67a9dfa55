//! One attempt of a job, as a task of the consumer's loop: the `process {queue}` span it runs
//! in, the handler (panics caught, the job's timeout kept), its lease extended while it runs,
//! the nack of a failure — and the [`Outcome`] it reports back.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::{Instant, sleep, sleep_until};

use crate::backend::Backend;
use crate::error::Error;
use crate::handler::{Failure, Handler};
use crate::job::{Job, LeaseRef, Nack, NackOutcome};
use crate::otel::TraceMode;
use crate::telemetry;

/// What a job task reports back to the loop.
pub(super) enum Outcome {
    /// Done: the lease, with the handler's result if any, goes with the queue's next call.
    Ack(LeaseRef, Option<Vec<u8>>),
    Nacked(NackOutcome),
    LeaseLost,
    GivenBack,
    /// The job was cancelled while it ran: nothing to ack or nack.
    Cancelled,
    Unresolved,
}

impl Outcome {
    /// How the attempt settled, as its span records it.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Outcome::Ack(..) => "acked",
            Outcome::Nacked(NackOutcome::Retrying { .. }) => "retrying",
            Outcome::Nacked(NackOutcome::Dead { .. }) => "dead",
            Outcome::LeaseLost => "lease_lost",
            Outcome::GivenBack => "given_back",
            Outcome::Cancelled => "cancelled",
            Outcome::Unresolved => "unresolved",
        }
    }
}

/// The span one attempt runs in, named and attributed by the OpenTelemetry messaging
/// conventions (`process {queue}`, kind consumer): the queue, the job id, the attempt, its due
/// time and lateness (start − due, ms), the job's trace (`trace_id`, `traceparent`: a handler
/// with an OpenTelemetry layer can make it the span's parent) and, once settled, its outcome.
/// Built only when a subscriber wants INFO spans of this crate; free otherwise.
pub(super) fn process_span(job: &Job, mode: TraceMode) -> tracing::Span {
    let span = tracing::info_span!(
        "process",
        otel.name = %format_args!("process {}", job.queue),
        otel.kind = "consumer",
        messaging.system = "delayq",
        messaging.operation.name = "process",
        messaging.operation.type = "process",
        messaging.destination.name = %job.queue,
        messaging.message.id = %job.id,
        delayq.attempt = job.attempt,
        delayq.due_at = job.due_at_ms,
        delayq.lateness_ms = crate::job::system_now_ms().saturating_sub(job.due_at_ms),
        trace_id = tracing::field::Empty,
        traceparent = tracing::field::Empty,
        delayq.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    crate::otel::relate(&span, job.trace.as_ref(), mode);
    if let Some(t) = &job.trace {
        span.record("trace_id", t.trace_id());
        span.record("traceparent", t.traceparent());
    }
    span
}

/// Runs one job: the handler (panics caught), lease extension while it runs, and the nack of a
/// failure. Acks (with the handler's result) are returned to the loop, which batches them onto
/// the next call of the job's queue. A job cancelled while it runs (its signal fired by the
/// watch, or its extend answered `cancelled`) gives its handler `grace` to stop, then drops it;
/// it is neither acked nor nacked (its store ended it already).
pub(super) async fn run_job<B: Backend, H: Handler>(
    handler: Arc<H>,
    backend: B,
    job: Job,
    grace: Duration,
) -> Outcome {
    let queue = job.queue.clone();
    let lease = job.lease_ref();
    let lease_len = job.lease;
    let cancel = job.cancellation.clone();
    let mut stop_by: Option<Instant> = None;
    let started = Instant::now();
    // The job's timeout: the handler's future is dropped there, and leases are not extended
    // past it.
    let timeout_at = job.timeout.map(|t| started + t);
    let mut fut = std::pin::pin!(AssertUnwindSafe(handler.handle(job)).catch_unwind());
    let period = (lease_len / 3).max(Duration::from_millis(5));
    let mut next_extend = Instant::now() + period;
    let mut lost = false;
    let result = loop {
        let extend_at = match timeout_at {
            _ if stop_by.is_some() => None,
            Some(t) if next_extend >= t => None,
            _ => Some(next_extend),
        };
        // The handler first: one that finishes at once (most jobs) settles the attempt before
        // any timer or the cancellation signal is registered — they cost such a job nothing.
        tokio::select! {
            biased;
            r = &mut fut => break r,
            () = cancel.cancelled(), if stop_by.is_none() => {
                stop_by = Some(Instant::now() + grace);
            }
            _ = sleep_until(stop_by.unwrap_or(started)), if stop_by.is_some() => {
                tracing::warn!(queue = %queue, id = %lease.id, grace_ms = grace.as_millis() as u64, "cancelled handler did not stop within its grace; dropped");
                return Outcome::Cancelled;
            }
            _ = sleep_until(timeout_at.unwrap_or(started)), if timeout_at.is_some() => {
                let ms = job_timeout_ms(timeout_at, started);
                tracing::warn!(queue = %queue, id = %lease.id, timeout_ms = ms, "handler timed out");
                break Ok(Err(Failure::retry(format!("timeout: the handler ran past {ms} ms"))));
            }
            _ = sleep_until(extend_at.unwrap_or(started)), if extend_at.is_some() => {
                next_extend = Instant::now() + period;
                match backend.extend(&queue, lease.clone(), lease_len).await {
                    Ok(_) => {}
                    Err(Error::Cancelled { .. }) => cancel.cancel(),
                    Err(Error::LeaseLost { .. }) => {
                        if !lost {
                            tracing::warn!(queue = %queue, id = %lease.id, "lease lost while the handler runs");
                        }
                        lost = true;
                    }
                    Err(e) => tracing::warn!(queue = %queue, id = %lease.id, error = %e, "lease extension failed"),
                }
            }
        }
    };
    metrics::histogram!(telemetry::HANDLER, "queue" => queue.to_string())
        .record(started.elapsed().as_secs_f64());
    if cancel.is_cancelled() {
        return Outcome::Cancelled;
    }
    let failure = match result {
        Ok(Ok(done)) => match done.into_result() {
            None => return Outcome::Ack(lease, None),
            Some(r) => match crate::limits::check_result(&r) {
                Ok(()) => return Outcome::Ack(lease, Some(r)),
                Err(too_large) => Failure::dead(too_large),
            },
        },
        Ok(Err(f)) => f,
        Err(panic) => Failure::retry(format!("handler panicked: {}", panic_message(&panic))),
    };
    if failure.is_give_back() {
        tracing::warn!(queue = %queue, id = %lease.id, error = failure.message(), "job given back");
        return match backend.release(&queue, vec![lease.clone()], true).await {
            Ok(()) => Outcome::GivenBack,
            Err(e) => {
                tracing::warn!(queue = %queue, id = %lease.id, error = %e, "give back failed");
                Outcome::Unresolved
            }
        };
    }
    let nack = Nack {
        error: failure.message().to_owned(),
        retry_in: failure.retry_delay(),
        dead: failure.is_dead(),
    };
    let mut delay = Duration::from_millis(50);
    for _ in 0..6 {
        match backend.nack(&queue, lease.clone(), nack.clone()).await {
            Ok(o) => return Outcome::Nacked(o),
            Err(Error::LeaseLost { .. }) => return Outcome::LeaseLost,
            Err(Error::Cancelled { .. }) => return Outcome::Cancelled,
            Err(e) if e.is_retryable() => {
                tracing::warn!(queue = %queue, id = %lease.id, error = %e, "nack failed, retrying");
                sleep(delay).await;
                delay *= 2;
            }
            Err(e) => {
                tracing::error!(queue = %queue, id = %lease.id, error = %e, "nack failed");
                break;
            }
        }
    }
    // The lease will expire and the job be delivered again.
    Outcome::Unresolved
}

fn job_timeout_ms(timeout_at: Option<Instant>, started: Instant) -> u128 {
    timeout_at.map_or(0, |t| (t - started).as_millis())
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
