//! Model-based testing: random sequences of operations run against a backend and against a
//! plain in-memory reference model must give the same observable results, and the same
//! counts (`stats`) after every step.
//!
//! Time is kept out of the comparison: jobs are due now or in an hour, claims take every due
//! job (so order does not matter), and lease expiry happens only in [`Op::Abandon`], which
//! claims with a 20 ms lease, forgets the tokens (a crashed consumer) and lets time pass
//! (advancing a [`delayq::TestClock`] where the store reads one, sleeping otherwise).
//!
//! A case may also fail one backend call through [`Faulty`], before or after it reaches the
//! store: the model then keeps or undoes the operation accordingly and the run goes on, so
//! every later observation checks that an unknown outcome left the store consistent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use proptest::prelude::*;

use super::Time;
use super::faulty::{FaultPoint, Faulty};
use delayq::{
    AckOutcome, Backend, CancelOutcome, ClaimRequest, Due, Error, Inspect, JobId, JobState,
    LeaseRef, ListState, Nack, NackOutcome, NewJob, QueueName,
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
    /// Cancel every due job (true) or every job due later (false).
    CancelAll(bool),
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
        1 => any::<bool>().prop_map(Op::CancelAll),
    ];
    proptest::collection::vec(op, 1..max_len)
}

/// One case: operations and, perhaps, a fault (the 1-based backend call that fails, and
/// where).
pub fn cases(max_len: usize) -> impl Strategy<Value = (Vec<Op>, Option<(u64, FaultPoint)>)> {
    let point = prop_oneof![Just(FaultPoint::Before), Just(FaultPoint::After)];
    (
        ops(max_len),
        proptest::option::weighted(0.5, (1..max_len as u64, point)),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum S {
    Scheduled { due: bool, attempt: u32 },
    Leased { attempt: u32, expired: bool },
    Dead { attempt: u32 },
}

/// The reference model: a map from id to state.
#[derive(Default, Debug, Clone)]
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

    /// What `stats` must count: scheduled (due later), due (due now), leased (expired leases too,
    /// until a claim recovers them), dead.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let mut c = (0, 0, 0, 0);
        for s in self.jobs.values() {
            match s {
                // `scheduled` counts the jobs due later, `due` the ones due now.
                S::Scheduled { due, .. } => {
                    c.0 += u64::from(!*due);
                    c.1 += u64::from(*due);
                }
                S::Leased { .. } => c.2 += 1,
                S::Dead { .. } => c.3 += 1,
            }
        }
        c
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
    Ack(AckOutcome),
    /// Nack: dead?, or the refusal.
    Nack(Result<bool, Refused>),
    /// Extend: accepted, or the refusal.
    Extend(Result<(), Refused>),
    /// Release / requeue: accepted?
    Done(bool),
    /// Cancel.
    Cancel(CancelOutcome),
    /// Reschedule: Ok, or the state that refused it (None = not found).
    Reschedule(Result<(), Option<JobState>>),
    /// Get: state and attempt.
    Get(Option<(JobState, u32)>),
    /// Cancel all: how many.
    Count(u64),
}

/// Why a lease operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The job exists; the token is not its lease.
    LeaseLost,
    /// No such job.
    NotFound,
}

fn jid(i: u8) -> JobId {
    JobId::new(format!("j{i}")).expect("valid")
}

fn idx(id: &JobId) -> u8 {
    id.as_str()[1..].parse().expect("model id")
}

fn refusal<T>(r: Result<T, Error>, what: &str) -> Result<Result<T, Refused>, Error> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(Error::LeaseLost { .. }) => Ok(Err(Refused::LeaseLost)),
        Err(Error::NotFound { .. }) => Ok(Err(Refused::NotFound)),
        Err(e @ Error::Unavailable(_)) => Err(e),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// The model and the tokens a test consumer holds, cloned before each step so that a fault
/// before the store can undo the step.
#[derive(Clone, Default)]
struct World {
    m: Model,
    /// Tokens a live consumer holds.
    cur: HashMap<u8, u64>,
    /// Tokens of leases abandoned by a "crashed" consumer: still the job's current lease
    /// until a claim recovers it.
    abandoned: HashMap<u8, u64>,
    /// Tokens that can never be valid again.
    stale: HashMap<u8, u64>,
}

impl World {
    fn refusal(&self, i: u8) -> Refused {
        if self.m.jobs.contains_key(&i) {
            Refused::LeaseLost
        } else {
            Refused::NotFound
        }
    }

    /// Whether a live consumer holds `i`'s current, unexpired lease.
    fn holds(&self, i: u8) -> bool {
        self.cur.contains_key(&i)
            && matches!(self.m.jobs.get(&i), Some(S::Leased { expired: false, .. }))
    }

    fn token(&self, i: u8) -> u64 {
        self.cur.get(&i).copied().unwrap_or(999_999)
    }
}

/// Runs `ops` on `b` (queue `q`, empty) and on the model; panics at the first difference,
/// naming the step. A call failed by `b`'s plan is taken as happened (after) or not (before);
/// the step's observation is then skipped.
pub async fn check<B: Backend + Inspect>(b: Faulty<B>, t: &Time, q: QueueName, ops: Vec<Op>) {
    let mut w = World::default();
    let req = |lease_ms| ClaimRequest {
        max: 100,
        lease: Duration::from_millis(lease_ms),
        acks: vec![],
    };
    for (step, op) in ops.iter().enumerate() {
        let before = w.clone();
        let (want, got): (Seen, Result<Seen, Error>) = match *op {
            Op::Enqueue(i, far) => {
                let created = !w.m.jobs.contains_key(&i);
                if created {
                    let s = S::Scheduled {
                        due: !far,
                        attempt: 0,
                    };
                    w.m.jobs.insert(i, s);
                }
                let mut j = NewJob::new(vec![i]).id(jid(i)).max_attempts(MAX_ATTEMPTS);
                if far {
                    j = j.delay(HOUR);
                }
                let got = b.enqueue(&q, vec![j]).await;
                (
                    Seen::Created(created),
                    got.map(|e| Seen::Created(e[0].created)),
                )
            }
            Op::Claim | Op::Abandon => {
                let abandon = matches!(op, Op::Abandon);
                let want = w.m.claim(abandon);
                // Every claim recovers expired leases first: abandoned tokens go stale, and
                // so do the old tokens of jobs leased again.
                let drained: Vec<_> = w.abandoned.drain().collect();
                w.stale.extend(drained);
                for i in &want {
                    if let Some(old) = w.cur.remove(i) {
                        w.stale.insert(*i, old);
                    }
                }
                let lease = if abandon { 20 } else { 30_000 };
                let got = b.claim(&q, req(lease)).await.map(|batch| {
                    let mut got = BTreeSet::new();
                    for j in batch.jobs {
                        let i = idx(&j.id);
                        got.insert(i);
                        if abandon {
                            w.abandoned.insert(i, j.lease_token);
                        } else {
                            w.cur.insert(i, j.lease_token);
                        }
                    }
                    Seen::Claimed(got)
                });
                if abandon {
                    t.pass(Duration::from_millis(60)).await;
                }
                (Seen::Claimed(want), got)
            }
            Op::Ack(i, use_stale) => {
                // A late ack of an expired lease that no claim recovered yet is still the
                // job's current lease and is accepted; after a recovery the token is stale.
                let token = if use_stale {
                    w.abandoned.get(&i).or(w.stale.get(&i)).copied()
                } else {
                    w.cur.get(&i).copied()
                }
                .unwrap_or(999_999);
                let ok = if use_stale {
                    w.abandoned.contains_key(&i)
                } else {
                    w.holds(i)
                };
                let want = if ok {
                    AckOutcome::Acked
                } else if w.m.jobs.contains_key(&i) {
                    AckOutcome::LeaseLost
                } else {
                    AckOutcome::NotFound
                };
                if ok {
                    w.m.jobs.remove(&i);
                    w.abandoned.remove(&i);
                    if !use_stale {
                        w.cur.remove(&i);
                    }
                }
                let got = b
                    .ack(&q, vec![delayq::Ack::from(LeaseRef { id: jid(i), token })])
                    .await;
                (Seen::Ack(want), got.map(|o| Seen::Ack(o[0])))
            }
            Op::Nack(i, dead) => {
                let token = w.token(i);
                let want = match (w.holds(i), w.m.jobs.get(&i).copied()) {
                    (true, Some(S::Leased { attempt, .. })) => {
                        let d = dead || attempt >= MAX_ATTEMPTS;
                        let s = if d {
                            S::Dead { attempt }
                        } else {
                            S::Scheduled {
                                due: false,
                                attempt,
                            }
                        };
                        w.m.jobs.insert(i, s);
                        w.cur.remove(&i);
                        Ok(d)
                    }
                    _ => Err(w.refusal(i)),
                };
                let nack = Nack {
                    error: "x".into(),
                    retry_in: Some(HOUR),
                    dead,
                };
                let got = refusal(
                    b.nack(&q, LeaseRef { id: jid(i), token }, nack).await,
                    "nack",
                );
                let got = got.map(|r| Seen::Nack(r.map(|o| matches!(o, NackOutcome::Dead { .. }))));
                (Seen::Nack(want), got)
            }
            Op::Extend(i) => {
                let want = if w.holds(i) {
                    Ok(())
                } else {
                    Err(w.refusal(i))
                };
                let lease = LeaseRef {
                    id: jid(i),
                    token: w.token(i),
                };
                let got = b.extend(&q, lease, Duration::from_secs(30)).await;
                let got = refusal(got, "extend").map(|r| Seen::Extend(r.map(|_| ())));
                (Seen::Extend(want), got)
            }
            Op::Release(i) => {
                let token = w.token(i);
                let want = w.holds(i);
                if let (true, Some(S::Leased { attempt, .. })) = (want, w.m.jobs.get(&i).copied()) {
                    let s = S::Scheduled {
                        due: true,
                        attempt: attempt - 1,
                    };
                    w.m.jobs.insert(i, s);
                    w.cur.remove(&i);
                }
                let got = match b
                    .release(&q, vec![LeaseRef { id: jid(i), token }], true)
                    .await
                {
                    Ok(()) => b.get(&q, &jid(i)).await.map(|info| {
                        Seen::Done(
                            want && matches!(info.map(|j| j.state), Some(JobState::Scheduled)),
                        )
                    }),
                    Err(e) => Err(e),
                };
                (Seen::Done(want), got)
            }
            Op::Cancel(i) => {
                let want = match w.m.jobs.get(&i).copied() {
                    Some(S::Scheduled { .. }) => {
                        w.m.jobs.remove(&i);
                        CancelOutcome::Cancelled
                    }
                    Some(S::Leased { .. }) => CancelOutcome::Leased,
                    Some(S::Dead { .. }) => CancelOutcome::Dead,
                    None => CancelOutcome::NotFound,
                };
                (
                    Seen::Cancel(want),
                    b.cancel(&q, &jid(i)).await.map(Seen::Cancel),
                )
            }
            Op::Reschedule(i, far) => {
                let want = match w.m.jobs.get(&i).copied() {
                    Some(S::Scheduled { attempt, .. }) => {
                        w.m.jobs.insert(i, S::Scheduled { due: !far, attempt });
                        Ok(())
                    }
                    Some(S::Leased { .. }) => Err(Some(JobState::Leased)),
                    Some(S::Dead { .. }) => Err(Some(JobState::Dead)),
                    None => Err(None),
                };
                let s = if far { Due::Delay(HOUR) } else { Due::Now };
                let got = match b.reschedule(&q, &jid(i), s).await {
                    Ok(_) => Ok(Seen::Reschedule(Ok(()))),
                    Err(Error::WrongState { state, .. }) => Ok(Seen::Reschedule(Err(Some(state)))),
                    Err(Error::NotFound { .. }) => Ok(Seen::Reschedule(Err(None))),
                    Err(e @ Error::Unavailable(_)) => Err(e),
                    Err(e) => panic!("reschedule: {e}"),
                };
                (Seen::Reschedule(want), got)
            }
            Op::Requeue(i) => {
                let want = matches!(w.m.jobs.get(&i), Some(S::Dead { .. }));
                if want {
                    let s = S::Scheduled {
                        due: true,
                        attempt: 0,
                    };
                    w.m.jobs.insert(i, s);
                }
                let got = match b.dead_requeue(&q, &jid(i)).await {
                    Ok(()) => Ok(Seen::Done(true)),
                    Err(e @ Error::Unavailable(_)) => Err(e),
                    Err(_) => Ok(Seen::Done(false)),
                };
                (Seen::Done(want), got)
            }
            Op::Get(i) => {
                let want = w.m.jobs.get(&i).map(|s| match *s {
                    S::Scheduled { attempt, .. } => (JobState::Scheduled, attempt),
                    S::Leased { attempt, .. } => (JobState::Leased, attempt),
                    S::Dead { attempt } => (JobState::Dead, attempt),
                });
                let got = b.get(&q, &jid(i)).await;
                (
                    Seen::Get(want),
                    got.map(|j| Seen::Get(j.map(|j| (j.state, j.attempt)))),
                )
            }
            Op::CancelAll(due) => {
                let gone: Vec<u8> =
                    w.m.jobs
                        .iter()
                        .filter(|(_, s)| matches!(s, S::Scheduled { due: d, .. } if *d == due))
                        .map(|(i, _)| *i)
                        .collect();
                for i in &gone {
                    w.m.jobs.remove(i);
                }
                let state = if due {
                    ListState::Due
                } else {
                    ListState::Scheduled
                };
                (
                    Seen::Count(gone.len() as u64),
                    b.cancel_all(&q, state).await.map(Seen::Count),
                )
            }
        };
        match got {
            Ok(got) => assert_eq!(
                got, want,
                "step {step}: {op:?} differs from the model\nops: {ops:?}"
            ),
            Err(e) => match b.take_injected() {
                // Nothing reached the store: undo the step in the model. A fault in the
                // read-only `get` that follows a release leaves the release done.
                Some(f) if f.point == FaultPoint::Before && f.method != "get" => w = before,
                // The call happened; its answer is lost. Claimed jobs are leased under tokens
                // nobody knows (the model marks them so: their old tokens are stale).
                Some(_) => {}
                None => panic!("step {step}: {op:?}: {e}\nops: {ops:?}"),
            },
        }
        // The counts agree after every step, whatever its outcome (read past the fault plan).
        let st = b.inner().stats(&q).await.expect("stats");
        assert_eq!(
            (st.scheduled, st.due, st.leased, st.dead),
            w.m.counts(),
            "step {step}: {op:?}: stats (scheduled, due, leased, dead) differ from the model\nops: {ops:?}"
        );
    }
}

/// Runs the model check for the backend `setup` gives: `cases` random cases (64 unless
/// `PROPTEST_CASES` says otherwise) from a fixed seed (`PROPTEST_RNG_SEED` explores others),
/// each on a fresh queue, every other one with an injected fault. The runtime, the store and
/// its guard live for this call only, so nothing outlives the test.
pub fn run<G, B, F, Fut>(setup: F)
where
    B: Backend + Inspect,
    F: FnOnce() -> Fut,
    Fut: Future<Output = (G, B, Time)>,
{
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (_guard, backend, time) = rt.block_on(setup());
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let config = Config {
        cases: env("PROPTEST_CASES").unwrap_or(64) as u32,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(0x00de_1a70)),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let n = std::sync::atomic::AtomicU64::new(0);
    let result = runner.run(&cases(40), |(ops, fault)| {
        let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let q = QueueName::new(format!("model{n}")).expect("valid");
        let b = Faulty::new(backend.clone());
        if let Some((call, point)) = fault {
            b.fail_call(call, point);
        }
        rt.block_on(check(b, &time, q, ops));
        Ok(())
    });
    drop(rt);
    if let Err(e) = result {
        panic!("{e}");
    }
}
