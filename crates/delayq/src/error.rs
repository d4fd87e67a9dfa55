//! The core error type. Variants are grouped by what the caller can do: fix the input
//! ([`Error::Invalid`]), accept the outcome ([`Error::LeaseLost`], [`Error::NotFound`],
//! [`Error::WrongState`]), or retry later ([`Error::Unavailable`]).

use crate::job::JobState;
use crate::name::JobId;

/// Input that delayq refuses. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidInput {
    /// The queue name is not 1–128 characters of `[A-Za-z0-9._-]`.
    #[error("invalid queue name {0}")]
    QueueName(String),
    /// The job id is empty, too long or has control characters.
    #[error("invalid job id: {0}")]
    JobId(String),
    /// The payload is over the configured limit.
    #[error("payload of {size} bytes is over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Size of the payload.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A delay or run-at time is negative, not a number, or too far away.
    #[error("invalid delay: {0}")]
    Delay(String),
    /// `max_attempts` is 0 or too large.
    #[error("invalid max_attempts {0}: must be 1-{max}", max = crate::limits::MAX_ATTEMPTS)]
    MaxAttempts(u64),
    /// A backoff policy is out of range.
    #[error("invalid backoff: {0}")]
    Backoff(String),
    /// A lease length is out of range.
    #[error("invalid lease: {0}")]
    Lease(String),
    /// A priority over 9.
    #[error("invalid priority {0}: must be 0-{max}", max = crate::limits::MAX_PRIORITY)]
    Priority(u64),
    /// A schedule's name, cron expression, time zone or interval is invalid.
    #[error("invalid schedule: {0}")]
    Schedule(String),
    /// An HTTP push target's URL, method or headers are invalid.
    #[error("invalid target: {0}")]
    Target(String),
    /// A job's target does not fit its queue's delivery: a target on a pull queue, or none
    /// on a push queue without a default target.
    #[error("{0}")]
    Delivery(String),
    /// A job timeout or expiry is out of range.
    #[error("invalid deadline: {0}")]
    Deadline(String),
    /// A batch is empty or too large.
    #[error("invalid batch: {0}")]
    Batch(String),
    /// A consumer's list of queues is empty, names a queue twice or has a weight out of range.
    #[error("invalid queue list: {0}")]
    Queues(String),
    /// A batch id is empty, too long or has control characters.
    #[error("invalid batch id: {0}")]
    BatchId(String),
    /// A job key is empty, longer than 128 bytes or has control characters.
    #[error("invalid key: {0}")]
    Key(String),
    /// A payload could not be serialized or deserialized.
    #[error("invalid payload: {0}")]
    Payload(String),
    /// Queue settings are out of range.
    #[error("invalid queue settings: {0}")]
    Settings(String),
    /// A listing or search parameter (state, cursor, limit, prefix) is out of range.
    #[error("invalid query: {0}")]
    Query(String),
    /// A handler's result is over [`crate::limits::MAX_RESULT_BYTES`].
    #[error("result of {0} bytes is over the limit of {max} bytes", max = crate::limits::MAX_RESULT_BYTES)]
    ResultTooLarge(usize),
    /// A W3C trace context (`traceparent`, `tracestate`) is malformed.
    #[error("invalid trace context: {0}")]
    Trace(String),
    /// A job's dependencies are empty, too many, named twice or name the job itself
    /// ([`crate::deps`]).
    #[error("invalid dependencies: {0}")]
    Dependencies(String),
    /// A flow ([`crate::flow`]) with a bad job, an id twice, a cycle, or a dependency neither
    /// in the flow nor in the store; the message names the job.
    #[error("invalid flow: {0}")]
    Flow(String),
}

/// Errors of the core library and of every backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input was refused; nothing was written.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// The lease token is stale: the lease expired and the job moved on. Nothing was changed.
    #[error("lease lost for job {id}: the lease expired or the token is not the current one")]
    LeaseLost {
        /// The job.
        id: JobId,
    },
    /// The job was cancelled while it ran (`DELETE …?running=true`): its lease can no longer
    /// be extended, acked or nacked. Nothing was changed; the handler should stop.
    #[error("job {id} was cancelled while it ran")]
    Cancelled {
        /// The job.
        id: JobId,
    },
    /// No job with this id exists (it was never enqueued, or it was acknowledged or cancelled).
    #[error("job {id} not found")]
    NotFound {
        /// The job.
        id: JobId,
    },
    /// The job exists but is not in a state that allows the operation.
    #[error("job {id} is {state}, not {expected}")]
    WrongState {
        /// The job.
        id: JobId,
        /// Its current state.
        state: JobState,
        /// The state the operation needs.
        expected: JobState,
    },
    /// The backend could not be reached or timed out; the operation may or may not have
    /// happened. Retrying is safe for enqueue with an explicit id, ack, cancel and claim.
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// The backend answered with something unexpected (a bug or an incompatible server).
    #[error("backend error: {0}")]
    Backend(String),
    /// The store is full (Redis at `maxmemory` with `noeviction`): nothing was written. Free
    /// memory or raise the limit, then retry.
    #[error("store full: {0}")]
    StoreFull(String),
    /// The change conflicts with the store's current state (e.g. changing the shard count of
    /// a queue that holds jobs). Nothing was changed.
    #[error("conflict: {0}")]
    Conflict(String),
}

impl Error {
    /// Whether retrying the same call later can succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::StoreFull(_))
    }
}

/// Result alias of the core crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
