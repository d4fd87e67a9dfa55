//! Waiting long polls: one claim loop per queue serves every poll waiting on it, so a job that
//! becomes due costs one claim however many polls wait (a loop per poll would run one claim
//! script per waiting poll on every wake-up). A poll first claims on its own; if nothing is
//! due it joins its queue's waiters, and the loop — started by the first waiter, ended when
//! none is left — claims for them in arrival order and hands each its jobs. A poll that names
//! itself (`poll_id`) can be cut short by its client — the same token, or the same address
//! without tokens ([`Cuts`]): a worker shutting down does not wait out its long poll.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Backend, ClaimRequest, Inspect, Job, QueueName};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::state::AppState;

/// Most jobs one claim of the loop asks for (the HTTP claim's own limit).
const MAX_CLAIM: usize = 1000;
/// Pause after a failed claim (the store is unreachable; waiters time out on their own).
const AFTER_ERROR: Duration = Duration::from_millis(200);

/// How long a cut is kept for a poll that has not arrived (a client's cut may overtake its own
/// claim) or has already answered.
const CUT_TTL: Duration = Duration::from_secs(120);
/// Most cuts kept at once; past it, a cut for a poll not waiting is not stored.
const MAX_CUTS: usize = 10_000;

/// Long polls their clients may cut short, by queue and `poll_id`: each has a [`Notify`]
/// whose permit ends the poll, stored by whichever comes first — the poll or the cut.
#[derive(Default)]
pub(crate) struct Cuts {
    map: Mutex<HashMap<PollKey, (Arc<Notify>, Instant)>>,
}

/// A poll's caller (its token; its address without tokens: `budget::caller_key`), queue and
/// `poll_id`: a poll is cut only by its own caller.
type PollKey = (String, QueueName, String);

impl Cuts {
    /// The notify of `caller`'s poll `id` on `queue`, made if new (`None` when full and new).
    fn entry(&self, caller: &str, queue: &QueueName, id: &str) -> Option<Arc<Notify>> {
        let mut m = self.map.lock().expect("cuts lock");
        let key = (caller.to_owned(), queue.clone(), id.to_owned());
        if let Some((n, _)) = m.get(&key) {
            return Some(n.clone());
        }
        let now = Instant::now();
        if m.len() >= MAX_CUTS {
            m.retain(|_, (_, at)| now.duration_since(*at) < CUT_TTL);
            if m.len() >= MAX_CUTS {
                return None;
            }
        }
        let n = Arc::new(Notify::new());
        m.insert(key, (n.clone(), now));
        Some(n)
    }

    /// Cuts `caller`'s poll `id` on `queue` short: it answers now with what it holds, or at
    /// once if it arrives within [`CUT_TTL`]. Another caller's poll of the same id is not
    /// touched.
    pub(crate) fn cut(&self, caller: &str, queue: &QueueName, id: &str) {
        if let Some(n) = self.entry(caller, queue, id) {
            n.notify_one();
        }
    }

    /// Registers `caller`'s poll that may be cut, until the guard drops.
    pub(crate) fn watch<'a>(&'a self, caller: &str, queue: &QueueName, id: &str) -> CutGuard<'a> {
        CutGuard {
            cuts: self,
            key: (caller.to_owned(), queue.clone(), id.to_owned()),
            notify: self.entry(caller, queue, id),
        }
    }
}

/// A poll registered with [`Cuts`]; dropping it forgets the poll.
pub(crate) struct CutGuard<'a> {
    cuts: &'a Cuts,
    key: PollKey,
    notify: Option<Arc<Notify>>,
}

impl CutGuard<'_> {
    /// Completes when the client cuts the poll (never for a poll without a notify).
    pub(crate) async fn cut(&self) {
        match &self.notify {
            Some(n) => n.notified().await,
            None => std::future::pending().await,
        }
    }
}

impl Drop for CutGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.cuts.map.lock() {
            m.remove(&self.key);
        }
    }
}

/// Whether `id` is a valid `poll_id`: 1-64 characters of `[A-Za-z0-9._-]`.
pub(crate) fn valid_poll_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The waiting polls of every queue.
#[derive(Default)]
pub(crate) struct Polls {
    queues: Mutex<HashMap<QueueName, VecDeque<Waiter>>>,
}

struct Waiter {
    max: usize,
    lease: Duration,
    until: Instant,
    tx: oneshot::Sender<Vec<Job>>,
}

impl Polls {
    /// Long polls waiting now, all queues.
    pub(crate) fn waiting(&self) -> usize {
        self.queues
            .lock()
            .map_or(0, |m| m.values().map(VecDeque::len).sum())
    }
}

/// A poll waiting for jobs. Dropped before it got them (deadline, shutdown, client gone), it
/// gives back any jobs handed to it meanwhile, without counting an attempt.
pub(crate) struct Waiting<B: Backend + Inspect> {
    rx: oneshot::Receiver<Vec<Job>>,
    st: AppState<B>,
    queue: QueueName,
}

impl<B: Backend + Inspect> Waiting<B> {
    /// Joins `queue`'s waiters: up to `max` jobs leased for `lease`, wanted until `until`.
    pub(crate) fn join(
        st: &AppState<B>,
        queue: &QueueName,
        max: usize,
        lease: Duration,
        until: Instant,
    ) -> Self {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut m = st.inner.polls.queues.lock().expect("polls lock");
            let start = !m.contains_key(queue);
            m.entry(queue.clone()).or_default().push_back(Waiter {
                max,
                lease,
                until,
                tx,
            });
            start
        };
        if start {
            tokio::spawn(run(st.clone(), queue.clone()));
        }
        Self {
            rx,
            st: st.clone(),
            queue: queue.clone(),
        }
    }

    /// The jobs handed to this poll (empty if the loop ended without serving it).
    pub(crate) async fn jobs(&mut self) -> Vec<Job> {
        (&mut self.rx).await.unwrap_or_default()
    }

    /// Stops waiting; returns the jobs handed over before that.
    pub(crate) fn stop(&mut self) -> Vec<Job> {
        self.rx.close();
        self.rx.try_recv().unwrap_or_default()
    }
}

impl<B: Backend + Inspect> Drop for Waiting<B> {
    fn drop(&mut self) {
        let jobs = self.stop();
        give_back(&self.st, &self.queue, jobs);
    }
}

/// Releases jobs leased for a poll that is gone (not an attempt: they never started).
fn give_back<B: Backend + Inspect>(st: &AppState<B>, queue: &QueueName, jobs: Vec<Job>) {
    if jobs.is_empty() {
        return;
    }
    let (st, queue) = (st.clone(), queue.clone());
    tokio::spawn(async move {
        let leases = jobs.iter().map(Job::lease_ref).collect();
        if let Err(e) = st.backend().release(&queue, leases, true).await {
            tracing::warn!(queue = %queue, error = %e, "could not give back jobs of a poll that left; they come back when their lease ends");
        }
    });
}

/// The claim loop of one queue.
async fn run<B: Backend + Inspect>(st: AppState<B>, q: QueueName) {
    let backend = st.backend().clone();
    let mut wake = backend.wakeups(&q).await.ok();
    let mut moves = delayq::clock::Moves::watch();
    let mut shutdown = st.inner.shutdown.clone();
    loop {
        if let Some(w) = wake.as_mut() {
            w.borrow_and_update();
        }
        moves.mark();
        let next_due = serve(&st, &q).await;
        // Sleep until the next due job, a wake-up, or the last waiter's deadline.
        let last = {
            let mut m = st.inner.polls.queues.lock().expect("polls lock");
            let waiters = m.entry(q.clone()).or_default();
            waiters.retain(|w| !w.tx.is_closed());
            if waiters.is_empty() || *shutdown.borrow() {
                m.remove(&q);
                return;
            }
            waiters.iter().map(|w| w.until).max().expect("not empty")
        };
        let until = next_due.map_or(last, |d| (Instant::now() + d).min(last));
        tokio::select! {
            _ = delayq::wait::until_due_or_woken(Some(until), &mut wake, &mut moves) => {}
            _ = shutdown.changed() => {}
        }
        if wake.is_none() {
            wake = backend.wakeups(&q).await.ok();
        }
    }
}

/// Claims for the waiters, in arrival order, until a claim finds fewer due jobs than asked
/// (or no one waits); returns when the next job is due, as the last claim saw it.
async fn serve<B: Backend + Inspect>(st: &AppState<B>, q: &QueueName) -> Option<Duration> {
    loop {
        // The first waiter's lease, and what every waiter with that lease wants.
        let (lease, want) = {
            let mut m = st.inner.polls.queues.lock().expect("polls lock");
            let waiters = m.get_mut(q)?;
            waiters.retain(|w| !w.tx.is_closed());
            let lease = waiters.front()?.lease;
            let want: usize = waiters
                .iter()
                .filter(|w| w.lease == lease)
                .map(|w| w.max)
                .sum();
            (lease, want.min(MAX_CLAIM))
        };
        let req = ClaimRequest {
            max: want,
            lease,
            acks: Vec::new(),
        };
        let batch = match st.backend().claim(q, req).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(queue = %q, error = %e, "long-poll claim failed");
                return Some(AFTER_ERROR);
            }
        };
        let got = batch.jobs.len();
        let mut jobs: VecDeque<Job> = batch.jobs.into();
        let mut left = Vec::new();
        {
            let mut m = st.inner.polls.queues.lock().expect("polls lock");
            let waiters = m.entry(q.clone()).or_default();
            let mut rest = VecDeque::with_capacity(waiters.len());
            for w in waiters.drain(..) {
                if w.lease != lease || jobs.is_empty() {
                    rest.push_back(w);
                    continue;
                }
                let mine: Vec<Job> = jobs.drain(..w.max.min(jobs.len())).collect();
                if let Err(back) = w.tx.send(mine) {
                    left.extend(back);
                }
            }
            *waiters = rest;
        }
        left.extend(jobs);
        give_back(st, q, left);
        if got < want {
            return batch.next_due_in;
        }
    }
}
