//! Model-based testing: random sequences of operations run against a backend and against a
//! plain in-memory reference model must give the same observable results.
//!
//! Time is kept out of the comparison: jobs are due now or in an hour, claims take every due
//! job (so order does not matter), and lease expiry happens only in [`Op::Abandon`], which
//! claims with a 20 ms lease, forgets the tokens (a crashed consumer) and sleeps past them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use proptest::prelude::*;

use crate::{
    AckOutcome, Backend, CancelOutcome, ClaimRequest, Error, Inspect, JobId, JobState, LeaseRef,
    Nack, NackOutcome, NewJob, QueueName, Schedule,
};

/// Ids used by the model: few, so operations collide.
const IDS: u8 = 5;
/// `max_attempts` of every job: small, so retries and expiry reach the dead letters.
const MAX_ATTEMPTS: u32 = 2;
const HOUR: Duration = Duration::from_secs(3600);

/// One operation.
#[derive(Clone, Debug)]
pub enum Op {
    /// Enqueue id, due now or in an hour.
    Enqueue(u8, bool),
    /// Claim every due job (30 s lease).
    Claim,
    /// Ack id with its current token, or with a stale one.
    Ack(u8, bool),
    /// Nack id with its current token (retry in an hour, or dead).
    Nack(u8, bool),
    /// Extend id's lease.
    Extend(u8),
    /// Give id's lease back, undoing the attempt.
    Release(u8),
    /// Cancel id.
    Cancel(u8),
    /// Reschedule id to now or in an hour.
    Reschedule(u8, bool),
    /// Requeue dead id.
    Requeue(u8),
    /// Look id up.
    Get(u8),
    /// Claim every due job with a 20 ms lease, forget the tokens, wait for expiry.
    Abandon,
}

/// A strategy of operation sequences.
pub fn ops(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    let id = 0..IDS;
    let op = prop_oneof![
        4 => (id.clone(), any::<bool>()).prop_map(|(i, f)| Op::Enqueue(i, f)),
        3 => Just(Op::Claim),
        3 => (id.clone(), any::<bool>()).prop_map(|(i, s)| Op::Ack(i, s)),
        2 => (id.clone(), any::<bool>()).prop_map(|(i, d)| Op::Nack(i, d)),
        1 => id.clone().prop_map(Op::Extend),
        1 => id.clone().prop_map(Op::Release),
        2 => id.clone().prop_map(Op::Cancel),
        1 => (id.clone(), any::<bool>()).prop_map(|(i, f)| Op::Reschedule(i, f)),
        1 => id.clone().prop_map(Op::Requeue),
        2 => id.clone().prop_map(Op::Get),
        1 => Just(Op::Abandon),
    ];
    proptest::collection::vec(op, 1..max_len)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum S {
    Scheduled { due: bool, attempt: u32 },
    Leased { attempt: u32, expired: bool },
    Dead { attempt: u32 },
}

/// The reference model: a map from id to state.
#[derive(Default, Debug)]
struct Model {
    jobs: BTreeMap<u8, S>,
}

impl Model {
    fn reap(&mut self) {
        for s in self.jobs.values_mut() {
            if let S::Leased {
                attempt,
                expired: true,
            } = *s
            {
                *s = if attempt >= MAX_ATTEMPTS {
                    S::Dead { attempt }
                } else {
                    S::Scheduled { due: true, attempt }
                };
            }
        }
    }

    fn claim(&mut self, expiring: bool) -> BTreeSet<u8> {
        self.reap();
        let mut got = BTreeSet::new();
        for (id, s) in self.jobs.iter_mut() {
            if let S::Scheduled { due: true, attempt } = *s {
                *s = S::Leased {
                    attempt: attempt + 1,
                    expired: expiring,
                };
                got.insert(*id);
            }
        }
        got
    }
}

/// What an operation observed, compared between model and backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Enqueue: created?
    Created(bool),
    /// Claim: ids leased.
    Claimed(BTreeSet<u8>),
    /// Ack.
    Ack(bool),
    /// Nack: Some(dead?) or None when refused.
    Nack(Option<bool>),
    /// Extend / release / requeue: accepted?
    Done(bool),
    /// Cancel.
    Cancel(CancelOutcome),
    /// Reschedule: Ok, or the state that refused it (None = not found).
    Reschedule(Result<(), Option<JobState>>),
    /// Get: state and attempt.
    Get(Option<(JobState, u32)>),
}

fn jid(i: u8) -> JobId {
    JobId::new(format!("j{i}")).expect("valid")
}

fn idx(id: &JobId) -> u8 {
    id.as_str()[1..].parse().expect("model id")
}

/// Runs `ops` on `backend` (queue `q`, empty) and on the model; panics at the first
/// difference, naming the step.
pub async fn check<B: Backend + Inspect>(b: B, q: QueueName, ops: Vec<Op>) {
    let mut m = Model::default();
    // Tokens a live consumer holds; tokens of leases abandoned by a "crashed" consumer (still
    // the job's current lease until a claim recovers it); tokens that can never be valid again.
    let mut cur: HashMap<u8, u64> = HashMap::new();
    let mut abandoned: HashMap<u8, u64> = HashMap::new();
    let mut stale: HashMap<u8, u64> = HashMap::new();
    let req = |lease_ms| ClaimRequest {
        max: 100,
        lease: Duration::from_millis(lease_ms),
        acks: vec![],
    };
    for (step, op) in ops.iter().enumerate() {
        let (want, got) = match *op {
            Op::Enqueue(i, far) => {
                let created = !m.jobs.contains_key(&i);
                if created {
                    m.jobs.insert(
                        i,
                        S::Scheduled {
                            due: !far,
                            attempt: 0,
                        },
                    );
                }
                let mut j = NewJob::new(vec![i]).id(jid(i)).max_attempts(MAX_ATTEMPTS);
                if far {
                    j = j.delay(HOUR);
                }
                let e = b.enqueue(&q, vec![j]).await.expect("enqueue");
                (Seen::Created(created), Seen::Created(e[0].created))
            }
            Op::Claim | Op::Abandon => {
                let abandon = matches!(op, Op::Abandon);
                let want = m.claim(abandon);
                // Every claim recovers expired leases first: abandoned tokens go stale.
                stale.extend(abandoned.drain());
                let batch = b
                    .claim(&q, req(if abandon { 20 } else { 30_000 }))
                    .await
                    .expect("claim");
                let mut got = BTreeSet::new();
                for j in batch.jobs {
                    let i = idx(&j.id);
                    got.insert(i);
                    if let Some(old) = cur.insert(i, j.lease_token) {
                        stale.insert(i, old);
                    }
                }
                if abandon {
                    for i in &got {
                        if let Some(t) = cur.remove(i) {
                            abandoned.insert(*i, t);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(60)).await;
                }
                (Seen::Claimed(want), Seen::Claimed(got))
            }
            Op::Ack(i, use_stale) => {
                // A late ack of an expired lease that no claim recovered yet is still the
                // job's current lease and is accepted; after a recovery the token is stale.
                let token = if use_stale {
                    abandoned.get(&i).or(stale.get(&i))
                } else {
                    cur.get(&i)
                }
                .copied()
                .unwrap_or(999_999);
                let ok = if use_stale {
                    abandoned.contains_key(&i)
                } else {
                    cur.contains_key(&i)
                        && matches!(m.jobs.get(&i), Some(S::Leased { expired: false, .. }))
                };
                if ok {
                    m.jobs.remove(&i);
                    abandoned.remove(&i);
                }
                let out = b
                    .ack(&q, vec![LeaseRef { id: jid(i), token }])
                    .await
                    .expect("ack");
                if out[0] == AckOutcome::Acked {
                    cur.remove(&i);
                }
                (Seen::Ack(ok), Seen::Ack(out[0] == AckOutcome::Acked))
            }
            Op::Nack(i, dead) => {
                let token = cur.get(&i).copied().unwrap_or(999_999);
                let want = match (cur.contains_key(&i), m.jobs.get(&i).copied()) {
                    (
                        true,
                        Some(S::Leased {
                            attempt,
                            expired: false,
                        }),
                    ) => {
                        let d = dead || attempt >= MAX_ATTEMPTS;
                        m.jobs.insert(
                            i,
                            if d {
                                S::Dead { attempt }
                            } else {
                                S::Scheduled {
                                    due: false,
                                    attempt,
                                }
                            },
                        );
                        Some(d)
                    }
                    _ => None,
                };
                let nack = Nack {
                    error: "x".into(),
                    retry_in: Some(HOUR),
                    dead,
                };
                let got = match b.nack(&q, LeaseRef { id: jid(i), token }, nack).await {
                    Ok(NackOutcome::Dead { .. }) => Some(true),
                    Ok(NackOutcome::Retrying { .. }) => Some(false),
                    Err(Error::LeaseLost { .. }) => None,
                    Err(e) => panic!("nack: {e}"),
                };
                if got.is_some() {
                    cur.remove(&i);
                }
                (Seen::Nack(want), Seen::Nack(got))
            }
            Op::Extend(i) => {
                let token = cur.get(&i).copied().unwrap_or(999_999);
                let want = cur.contains_key(&i)
                    && matches!(m.jobs.get(&i), Some(S::Leased { expired: false, .. }));
                let got = match b
                    .extend(&q, LeaseRef { id: jid(i), token }, Duration::from_secs(30))
                    .await
                {
                    Ok(_) => true,
                    Err(Error::LeaseLost { .. }) => false,
                    Err(e) => panic!("extend: {e}"),
                };
                (Seen::Done(want), Seen::Done(got))
            }
            Op::Release(i) => {
                let token = cur.get(&i).copied().unwrap_or(999_999);
                let want = cur.contains_key(&i)
                    && matches!(m.jobs.get(&i), Some(S::Leased { expired: false, .. }));
                if let (true, Some(S::Leased { attempt, .. })) = (want, m.jobs.get(&i).copied()) {
                    m.jobs.insert(
                        i,
                        S::Scheduled {
                            due: true,
                            attempt: attempt - 1,
                        },
                    );
                }
                b.release(&q, vec![LeaseRef { id: jid(i), token }], true)
                    .await
                    .expect("release");
                let info = b.get(&q, &jid(i)).await.expect("get");
                let got = want && matches!(info.map(|j| j.state), Some(JobState::Scheduled));
                if want {
                    cur.remove(&i);
                }
                (Seen::Done(want), Seen::Done(got))
            }
            Op::Cancel(i) => {
                let want = match m.jobs.get(&i).copied() {
                    Some(S::Scheduled { .. }) => {
                        m.jobs.remove(&i);
                        CancelOutcome::Cancelled
                    }
                    Some(S::Leased { .. }) => CancelOutcome::Leased,
                    Some(S::Dead { .. }) => CancelOutcome::Dead,
                    None => CancelOutcome::NotFound,
                };
                (
                    Seen::Cancel(want),
                    Seen::Cancel(b.cancel(&q, &jid(i)).await.expect("cancel")),
                )
            }
            Op::Reschedule(i, far) => {
                let want = match m.jobs.get(&i).copied() {
                    Some(S::Scheduled { attempt, .. }) => {
                        m.jobs.insert(i, S::Scheduled { due: !far, attempt });
                        Ok(())
                    }
                    Some(S::Leased { .. }) => Err(Some(JobState::Leased)),
                    Some(S::Dead { .. }) => Err(Some(JobState::Dead)),
                    None => Err(None),
                };
                let s = if far {
                    Schedule::Delay(HOUR)
                } else {
                    Schedule::Now
                };
                let got = match b.reschedule(&q, &jid(i), s).await {
                    Ok(_) => Ok(()),
                    Err(Error::WrongState { state, .. }) => Err(Some(state)),
                    Err(Error::NotFound { .. }) => Err(None),
                    Err(e) => panic!("reschedule: {e}"),
                };
                (Seen::Reschedule(want), Seen::Reschedule(got))
            }
            Op::Requeue(i) => {
                let want = matches!(m.jobs.get(&i), Some(S::Dead { .. }));
                if want {
                    m.jobs.insert(
                        i,
                        S::Scheduled {
                            due: true,
                            attempt: 0,
                        },
                    );
                }
                let got = b.dead_requeue(&q, &jid(i)).await.is_ok();
                (Seen::Done(want), Seen::Done(got))
            }
            Op::Get(i) => {
                let want = m.jobs.get(&i).map(|s| match *s {
                    S::Scheduled { attempt, .. } => (JobState::Scheduled, attempt),
                    S::Leased { attempt, .. } => (JobState::Leased, attempt),
                    S::Dead { attempt } => (JobState::Dead, attempt),
                });
                let got = b
                    .get(&q, &jid(i))
                    .await
                    .expect("get")
                    .map(|j| (j.state, j.attempt));
                (Seen::Get(want), Seen::Get(got))
            }
        };
        assert_eq!(
            got, want,
            "step {step}: {op:?} differs from the model\nops: {ops:?}"
        );
    }
}
