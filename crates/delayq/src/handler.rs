//! What a consumer runs for each job: the [`Handler`] trait, the [`Completion`] a handler
//! returns when the job is done (optionally with a result kept with the job) and the
//! [`Failure`] it returns to say how the attempt failed.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::job::Job;

/// A failed attempt, as a handler reports it.
///
/// Any error that implements `Display` converts into a `Failure` with `?` (a retry by the
/// job's backoff). [`Failure::dead`] dead-letters at once and [`Failure::retry_in`] picks the
/// retry delay. `Failure` deliberately does not implement `Display` itself, which is what lets
/// that blanket conversion exist; read the message with [`Failure::message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    message: String,
    retry_in: Option<Duration>,
    dead: bool,
    give_back: bool,
}

impl Failure {
    /// A failure retried by the job's backoff policy.
    pub fn retry(message: impl fmt::Display) -> Self {
        Self {
            message: message.to_string(),
            retry_in: None,
            dead: false,
            give_back: false,
        }
    }

    /// A failure retried after `delay`.
    pub fn retry_in(message: impl fmt::Display, delay: Duration) -> Self {
        Self {
            retry_in: Some(delay),
            ..Self::retry(message)
        }
    }

    /// A permanent failure: dead-letter now, whatever attempts are left.
    pub fn dead(message: impl fmt::Display) -> Self {
        Self {
            dead: true,
            ..Self::retry(message)
        }
    }

    /// Not the job's failure but the consumer's (a handler that cannot run at all, e.g. a
    /// missing program): the lease is given back, the job due again at once, and the attempt
    /// is not counted.
    pub fn give_back(message: impl fmt::Display) -> Self {
        Self {
            give_back: true,
            ..Self::retry(message)
        }
    }

    /// Whether the job is given back without counting the attempt.
    pub fn is_give_back(&self) -> bool {
        self.give_back
    }

    /// The message stored as the job's `last_error`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The explicit retry delay, if any.
    pub fn retry_delay(&self) -> Option<Duration> {
        self.retry_in
    }

    /// Whether the handler asked for dead-lettering.
    pub fn is_dead(&self) -> bool {
        self.dead
    }
}

impl<E: fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::retry(e)
    }
}

/// A finished job, as a handler reports it: `Ok(())` converts into one without a result;
/// [`Completion::result`] keeps bytes with the job (at most
/// [`crate::limits::MAX_RESULT_BYTES`]) for as long as the job is kept as done (its queue's or
/// its own `keep_done_ms`), where [`crate::Inspect::get`] and `GET …/jobs/{id}` return them.
/// A job without a retention is deleted on its ack, and its result with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    result: Option<Vec<u8>>,
}

impl Completion {
    /// Done, with `result` kept with the job.
    pub fn result(result: impl Into<Vec<u8>>) -> Self {
        Self {
            result: Some(result.into()),
        }
    }

    /// Done, with `value` as JSON kept with the job.
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Self, Failure> {
        serde_json::to_vec(value)
            .map(Self::result)
            .map_err(|e| Failure::retry(format!("result not serializable: {e}")))
    }

    /// The result, if the handler gave one.
    pub fn result_bytes(&self) -> Option<&[u8]> {
        self.result.as_deref()
    }

    /// The result, taken.
    pub fn into_result(self) -> Option<Vec<u8>> {
        self.result
    }
}

impl From<()> for Completion {
    fn from((): ()) -> Self {
        Self::default()
    }
}

/// Runs one job. `Ok` acknowledges it; `Err` fails the attempt. A panic counts as a failure.
///
/// Any `Fn(Job) -> impl Future<Output = Result<R, E>>` with `R: Into<Completion>` (`()` or a
/// [`Completion`]) and `E: Into<Failure>` is a handler.
pub trait Handler: Send + Sync + 'static {
    /// Handles one delivery of `job`.
    fn handle(&self, job: Job) -> impl Future<Output = Result<Completion, Failure>> + Send;
}

impl<F, Fut, R, E> Handler for F
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, E>> + Send,
    R: Into<Completion>,
    E: Into<Failure>,
{
    fn handle(&self, job: Job) -> impl Future<Output = Result<Completion, Failure>> + Send {
        let fut = self(job);
        async move { fut.await.map(Into::into).map_err(Into::into) }
    }
}
