//! A running job's cancellation: the signal a handler watches ([`Cancellation`], carried by
//! every claimed [`crate::Job`]) and what a store reports about leases cancelled while their
//! jobs run (`DELETE …/jobs/{id}?running=true`, [`crate::Backend::cancel_running`]).
//!
//! A store ends a job cancelled at once when asked to cancel it while it runs: its record is
//! gone, its batch counts it cancelled, its lease can no longer be extended, acked or nacked
//! ([`crate::Error::Cancelled`], [`crate::AckOutcome::Cancelled`]). The consumer that holds it
//! learns it from its next extend or from [`crate::Backend::cancelled`], which it asks every
//! [`CHECK_EVERY`] while it runs jobs, and fires the job's [`Cancellation`]; a handler that
//! does not stop within the consumer's `cancel_grace` is dropped.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often a consumer that runs jobs asks its store which of their leases were cancelled:
/// a handler hears of its cancellation within this and one round trip.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);

/// How long after a running job's cancellation its store still answers `cancelled` (rather
/// than `not_found`) to the lease's extend, ack or nack: past the lease's deadline by this.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(3600);

/// A claimed job's cancellation signal: fired when the job is cancelled while it runs (or its
/// consumer learns its lease was cancelled). A handler that can stop early awaits
/// [`Cancellation::cancelled`] beside its work, or checks [`Cancellation::is_cancelled`]
/// between steps; one that never looks is dropped after the consumer's grace.
///
/// Every clone watches the same signal. Two `Cancellation`s compare equal whatever their
/// state: a job's identity is its fields, not its signal.
#[derive(Clone, Debug, Default)]
pub struct Cancellation(CancellationToken);

impl Cancellation {
    /// A signal not yet fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the job was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Completes once the job is cancelled (at once when it already is).
    pub async fn cancelled(&self) {
        self.0.cancelled().await
    }

    /// A tokio-util token cancelled with the job, e.g. to hand to a task the handler spawns
    /// (a child: cancelling it stops only what watches it, not the job).
    pub fn token(&self) -> CancellationToken {
        self.0.child_token()
    }

    /// Fires the signal: only the consumer does, when the store says the lease was cancelled
    /// (a handler that fired it would leave its job unacknowledged).
    pub(crate) fn cancel(&self) {
        self.0.cancel()
    }
}

impl PartialEq for Cancellation {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
