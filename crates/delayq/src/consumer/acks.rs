//! A consumer's finished jobs on their way out: each lease with its handler's result, split
//! into the plain acks that ride on claims and the acks with results that go in a call of
//! their own, and the ack calls made without a claim.

use crate::backend::Backend;
use crate::error::Error;
use crate::job::{AckOutcome, LeaseRef};
use crate::name::QueueName;

/// A finished job's lease, with its handler's result if it gave one.
pub(crate) type Finished = (LeaseRef, Option<Vec<u8>>);

/// What an ack call of finished jobs did: the outcomes of the acks that went through, the
/// finished jobs whose call failed (to go again), and that failure.
pub(super) struct Acked {
    pub(super) outcomes: Vec<AckOutcome>,
    pub(super) again: Vec<Finished>,
    pub(super) error: Option<Error>,
}

/// Splits finished jobs into plain acks (which ride on claims) and acks with results.
pub(super) fn split_finished(finished: Vec<Finished>) -> (Vec<LeaseRef>, Vec<(LeaseRef, Vec<u8>)>) {
    let mut plain = Vec::new();
    let mut results = Vec::new();
    for (lease, result) in finished {
        match result {
            Some(r) => results.push((lease, r)),
            None => plain.push(lease),
        }
    }
    (plain, results)
}

/// Acknowledges finished jobs of `queue` without a claim: the plain ones in one ack call, those
/// with results in one [`Backend::ack_results`] call.
pub(super) async fn ack_finished<B: Backend>(
    backend: &B,
    queue: &QueueName,
    finished: Vec<Finished>,
) -> Acked {
    let (plain, results) = split_finished(finished);
    let mut done = Acked {
        outcomes: Vec::new(),
        again: Vec::new(),
        error: None,
    };
    if !results.is_empty() {
        match backend.ack_results(queue, results.clone()).await {
            Ok(out) => done.outcomes.extend(out),
            Err(e) => {
                done.again
                    .extend(results.into_iter().map(|(l, r)| (l, Some(r))));
                done.error = Some(e);
            }
        }
    }
    if !plain.is_empty() {
        match backend.ack(queue, plain.clone()).await {
            Ok(out) => done.outcomes.extend(out),
            Err(e) => {
                done.again.extend(plain.into_iter().map(|l| (l, None)));
                done.error = Some(e);
            }
        }
    }
    done
}
