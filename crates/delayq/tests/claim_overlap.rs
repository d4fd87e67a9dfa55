//! The consumer engine beside a claim in flight: held jobs start (any claim), and finished
//! jobs' acks go on their own (only beside a slow one, or when the consumer would otherwise
//! wait with them) — checked against an in-memory backend
//! of due jobs whose claim takes a fixed time, on a paused clock (no store thread: virtual time
//! moves only when every task waits, so a claim lasts exactly what it sleeps).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Consumer, ConsumerOptions,
    Due, Enqueued, Error, Job, JobId, LeaseRef, Nack, NackOutcome, NewJob, QueueName, Wakeups,
};
use tokio::sync::watch;
use tokio::time::{Instant, sleep};

/// Due jobs in memory; a claim applies its acks, leases, then takes `claim_takes` to answer.
#[derive(Clone)]
struct Memory {
    claim_takes: Duration,
    due: Arc<Mutex<VecDeque<JobId>>>,
    leased: Arc<Mutex<HashMap<JobId, u64>>>,
    next_token: Arc<AtomicU32>,
    /// Each claim's (start, end), virtual time.
    claims: Arc<Mutex<Vec<(Instant, Instant)>>>,
    lone_acks: Arc<AtomicU32>,
    /// Every ack call of its own fails (acks then go only with claims).
    fail_lone_acks: bool,
    acked: Arc<AtomicU32>,
    wake: Arc<watch::Sender<u64>>,
}

impl Memory {
    fn new(jobs: usize, claim_takes: Duration) -> Self {
        let due = (0..jobs)
            .map(|i| JobId::new(format!("j{i}")).unwrap())
            .collect();
        Self {
            claim_takes,
            due: Arc::new(Mutex::new(due)),
            leased: Arc::default(),
            next_token: Arc::default(),
            claims: Arc::default(),
            lone_acks: Arc::default(),
            fail_lone_acks: false,
            acked: Arc::default(),
            wake: Arc::new(watch::channel(0).0),
        }
    }

    fn ack_all(&self, acks: &[Ack]) -> Vec<AckOutcome> {
        let mut leased = self.leased.lock().unwrap();
        acks.iter()
            .map(|a| &a.lease)
            .map(|l| match leased.get(&l.id) {
                Some(t) if *t == l.token => {
                    leased.remove(&l.id);
                    self.acked.fetch_add(1, Ordering::SeqCst);
                    AckOutcome::Acked
                }
                Some(_) => AckOutcome::LeaseLost,
                None => AckOutcome::NotFound,
            })
            .collect()
    }
}

fn q() -> QueueName {
    QueueName::new("overlap").unwrap()
}

fn unsupported<T>() -> delayq::Result<T> {
    Err(Error::Unavailable("not in this test backend".into()))
}

impl Backend for Memory {
    async fn enqueue(&self, _: &QueueName, _: Vec<NewJob>) -> delayq::Result<Vec<Enqueued>> {
        unsupported()
    }
    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> delayq::Result<ClaimBatch> {
        let start = Instant::now();
        let acks = self.ack_all(&req.acks);
        let mut jobs = Vec::new();
        {
            let mut due = self.due.lock().unwrap();
            let mut leased = self.leased.lock().unwrap();
            while jobs.len() < req.max {
                let Some(id) = due.pop_front() else { break };
                let token = u64::from(self.next_token.fetch_add(1, Ordering::SeqCst)) + 1;
                leased.insert(id.clone(), token);
                jobs.push(Job {
                    id,
                    queue: queue.clone(),
                    payload: b"x".to_vec(),
                    attempt: 1,
                    max_attempts: 10,
                    due_at_ms: 0,
                    created_at_ms: 0,
                    lease_token: token,
                    lease_deadline_ms: u64::MAX,
                    lease: req.lease,
                    last_error: None,
                    timeout: None,
                    expires_at_ms: None,
                    priority: 5,
                    target: None,
                    trace: None,
                    key: None,
                    cancellation: Default::default(),
                    dependencies: Vec::new(),
                });
            }
        }
        sleep(self.claim_takes).await;
        self.claims.lock().unwrap().push((start, Instant::now()));
        Ok(ClaimBatch {
            jobs,
            acks,
            next_due_in: None,
        })
    }
    async fn ack(&self, _: &QueueName, leases: Vec<Ack>) -> delayq::Result<Vec<AckOutcome>> {
        let n = self.lone_acks.fetch_add(1, Ordering::SeqCst);
        if self.fail_lone_acks {
            if n > 1000 {
                // A retry loop: let virtual time move so the test ends and reports it.
                sleep(Duration::from_millis(1)).await;
            }
            return Err(Error::Unavailable("ack lost".into()));
        }
        Ok(self.ack_all(&leases))
    }
    async fn nack(&self, _: &QueueName, _: LeaseRef, _: Nack) -> delayq::Result<NackOutcome> {
        unsupported()
    }
    async fn extend(&self, _: &QueueName, _: LeaseRef, _: Duration) -> delayq::Result<u64> {
        Ok(u64::MAX)
    }
    async fn release(&self, _: &QueueName, _: Vec<LeaseRef>, _: bool) -> delayq::Result<()> {
        Ok(())
    }
    async fn cancel(&self, _: &QueueName, _: &JobId) -> delayq::Result<CancelOutcome> {
        unsupported()
    }
    async fn cancel_running(&self, _: &QueueName, _: &JobId) -> delayq::Result<CancelOutcome> {
        unsupported()
    }
    async fn cancelled(&self, _: &QueueName, l: Vec<LeaseRef>) -> delayq::Result<Vec<bool>> {
        Ok(vec![false; l.len()])
    }
    async fn reschedule(&self, _: &QueueName, _: &JobId, _: Due) -> delayq::Result<u64> {
        unsupported()
    }
    async fn wakeups(&self, _: &QueueName) -> delayq::Result<Wakeups> {
        Ok(self.wake.subscribe())
    }
}

/// Runs 200 jobs of 1 ms through a consumer with `concurrency` slots and the default prefetch
/// on a backend whose claim takes `claim_takes`; returns how many jobs started while a claim
/// was in flight (strictly inside it: a job spawned as a claim starts or ends starts at the
/// same virtual instant) and how many ack calls went on their own.
async fn drain(concurrency: usize, claim_takes: Duration) -> (usize, u32) {
    drain_on(Memory::new(200, claim_takes), concurrency).await
}

async fn drain_on(b: Memory, concurrency: usize) -> (usize, u32) {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let seen = starts.clone();
    let opts = ConsumerOptions {
        concurrency,
        ..Default::default()
    };
    let consumer = Consumer::new(b.clone(), q(), opts).unwrap();
    let (stop, mut stopped) = watch::channel(false);
    let run = tokio::spawn(consumer.run(
        move |_job: Job| {
            seen.lock().unwrap().push(Instant::now());
            async {
                sleep(Duration::from_millis(1)).await;
                Ok::<(), delayq::Failure>(())
            }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    for _ in 0..10_000 {
        if b.acked.load(Ordering::SeqCst) == 200 {
            break;
        }
        sleep(Duration::from_millis(10)).await;
    }
    stop.send(true).unwrap();
    let r = run.await.unwrap().unwrap();
    assert_eq!((r.claimed, r.acked), (200, 200), "{r:?}");
    let claims = b.claims.lock().unwrap();
    let beside = starts
        .lock()
        .unwrap()
        .iter()
        .filter(|t| claims.iter().any(|(s, e)| s < *t && *t < e))
        .count();
    (beside, b.lone_acks.load(Ordering::SeqCst))
}

/// Held jobs start beside a quick claim — the slots do not idle through its round trip — and
/// their acks still ride on claims.
#[tokio::test(start_paused = true)]
async fn held_jobs_start_beside_a_quick_claim() {
    for concurrency in [1, 4, 8] {
        let (beside, lone) = drain(concurrency, Duration::from_millis(5)).await;
        assert!(
            beside > 0,
            "concurrency {concurrency}: no job started beside a 5-ms claim"
        );
        assert_eq!(lone, 0, "concurrency {concurrency}: ack calls of their own");
    }
}

/// Beside a slow claim (past the 20-ms mark) every consumer starts held jobs, and the acks of
/// jobs finished meanwhile go on their own instead of waiting for the claim.
#[tokio::test(start_paused = true)]
async fn every_consumer_starts_held_jobs_beside_a_slow_claim() {
    for concurrency in [1, 8] {
        let (beside, lone) = drain(concurrency, Duration::from_millis(100)).await;
        assert!(
            beside > 0,
            "concurrency {concurrency}: none beside a 100-ms claim"
        );
        assert!(
            lone > 0,
            "concurrency {concurrency}: no ack went on its own"
        );
    }
}

/// An ack call beside a slow claim that fails is not retried until the claim returns: its
/// acks go with the next claim (at most one failed call per claim, no retry loop).
#[tokio::test(start_paused = true)]
async fn a_failed_ack_beside_a_slow_claim_waits_for_the_next_claim() {
    let b = Memory {
        fail_lone_acks: true,
        ..Memory::new(200, Duration::from_millis(100))
    };
    let (_, lone) = drain_on(b.clone(), 1).await;
    let claims = b.claims.lock().unwrap().len() as u32;
    assert!(
        lone <= claims,
        "{lone} failed ack calls beside {claims} claims"
    );
}

/// A job that finishes while a claim is in flight is acknowledged as soon as that claim
/// returns, even when the claim brought nothing and the consumer is about to wait: its lease
/// may be what holds the queue's `max_in_flight` slots every consumer waits for. Here a
/// wake-up starts a claim beside the running job, the job ends during it, the claim finds
/// nothing due — and the ack goes out at once, not at the end of the idle wait (30 s).
#[tokio::test(start_paused = true)]
async fn an_ack_of_a_job_finished_during_a_claim_goes_out_before_the_wait() {
    let b = Memory::new(1, Duration::from_millis(5));
    let opts = ConsumerOptions {
        concurrency: 2,
        ..Default::default()
    };
    let consumer = Consumer::new(b.clone(), q(), opts).unwrap();
    let (stop, mut stopped) = watch::channel(false);
    let t0 = Instant::now();
    let run = tokio::spawn(consumer.run(
        |_job: Job| async {
            sleep(Duration::from_millis(3)).await;
            Ok::<(), delayq::Failure>(())
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    // The first claim (0–5 ms) leases the job, which runs 5–8 ms; a wake-up at 6 ms starts a
    // claim (6–11 ms) that the job's end falls inside.
    sleep(Duration::from_millis(6)).await;
    b.wake.send_modify(|n| *n += 1);
    while b.acked.load(Ordering::SeqCst) == 0 {
        sleep(Duration::from_millis(1)).await;
    }
    let acked_after = t0.elapsed();
    stop.send(true).unwrap();
    let r = run.await.unwrap().unwrap();
    assert_eq!((r.claimed, r.acked), (1, 1), "{r:?}");
    let claims = b.claims.lock().unwrap().clone();
    assert!(
        claims
            .iter()
            .any(|(s, e)| s.duration_since(t0) <= Duration::from_millis(8)
                && e.duration_since(t0) > Duration::from_millis(8)),
        "no claim was in flight when the job ended: {claims:?}"
    );
    assert!(
        acked_after < Duration::from_millis(100),
        "acknowledged {acked_after:?} after the start"
    );
}
