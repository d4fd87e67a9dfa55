//! A consumer's finished jobs on their way out without a claim: one ack call of a queue's
//! pending acks (each with its handler's result, if any), and what to send again when it
//! failed. Acks that ride on a claim go in the claim as they are.

use crate::backend::Backend;
use crate::error::Error;
use crate::job::{Ack, AckOutcome};
use crate::name::QueueName;

/// What an ack call of finished jobs did: the outcomes when it went through, else the acks
/// to go again and the failure.
pub(super) struct Acked {
    pub(super) outcomes: Vec<AckOutcome>,
    pub(super) again: Vec<Ack>,
    pub(super) error: Option<Error>,
}

/// Acknowledges finished jobs of `queue` in one ack call, without a claim.
pub(super) async fn ack_finished<B: Backend>(
    backend: &B,
    queue: &QueueName,
    finished: Vec<Ack>,
) -> Acked {
    match backend.ack(queue, finished.clone()).await {
        Ok(outcomes) => Acked {
            outcomes,
            again: Vec::new(),
            error: None,
        },
        Err(e) => Acked {
            outcomes: Vec::new(),
            again: finished,
            error: Some(e),
        },
    }
}
