//! The queues a [`Consumer`](super::Consumer) serves — one, or several shared by weight or in
//! strict order — and what its loop knows of each: the finished jobs' acks waiting for a call,
//! the wake-up channel, whether the queue may have due jobs now or sleeps until a time; and
//! which queue the next claim asks.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Wakeups;
use crate::name::QueueName;
use crate::wait::{self, RESUBSCRIBE};

/// How a consumer over several queues shares its claims among those with due jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueOrder {
    /// By weight: over many claims each queue with due jobs gets its weight's share of the
    /// jobs (fair queuing on the jobs claimed, so shares interleave rather than come in runs).
    #[default]
    Weighted,
    /// In the order given: a queue is asked only while every queue before it has nothing due.
    Strict,
}

/// One served queue and the loop's knowledge of it.
pub(super) struct Source {
    pub(super) queue: QueueName,
    weight: u32,
    /// Fair queuing: the jobs claimed from this queue divided by its weight (its virtual time);
    /// the queue that may have due jobs and is furthest behind is asked next.
    served: f64,
    /// Leases of finished jobs, acknowledged by the next call on this queue — or on their own
    /// once the first of them has waited [`super::ACK_WITHIN`].
    pub(super) acks: Vec<crate::job::Ack>,
    /// When the oldest pending ack was added (`None`: none pending).
    pub(super) acks_since: Option<Instant>,
    pub(super) wake: Option<Wakeups>,
    /// Whether the queue may have due jobs now (false while it sleeps towards `sleep_until`).
    pub(super) claim_now: bool,
    pub(super) sleep_until: Instant,
}

/// The queues of one run, in the order given.
pub(super) struct Sources {
    pub(super) list: Vec<Source>,
    order: QueueOrder,
    /// The virtual time of the last queue asked: a queue that comes back after a while
    /// without due jobs starts here, not with the credit of the time it had nothing.
    now: f64,
    /// Test clocks' moves (feature `test-clock`): marked before each claim, so a move during
    /// it wakes the next wait.
    pub(super) moves: crate::clock::Moves,
}

impl Sources {
    /// The queues with their weights (each ≥ 1), served in `order`.
    pub(super) fn new(queues: &[(QueueName, u32)], order: QueueOrder) -> Self {
        let now = Instant::now();
        let list = queues
            .iter()
            .map(|(queue, weight)| Source {
                queue: queue.clone(),
                weight: *weight,
                served: 0.0,
                acks: Vec::new(),
                acks_since: None,
                wake: None,
                claim_now: true,
                sleep_until: now,
            })
            .collect();
        Self {
            list,
            order,
            now: 0.0,
            moves: crate::clock::Moves::watch(),
        }
    }

    /// The index of `queue` (a job's queue is always one of them).
    pub(super) fn index(&self, queue: &QueueName) -> usize {
        if self.list.len() == 1 {
            return 0;
        }
        self.list
            .iter()
            .position(|s| &s.queue == queue)
            .unwrap_or_default()
    }

    /// Whether any queue may have due jobs now.
    pub(super) fn any_due(&self) -> bool {
        self.list.iter().any(|s| s.claim_now)
    }

    /// The queue the next claim asks, among those that may have due jobs: the first in strict
    /// order, else by weight.
    pub(super) fn pick(&mut self) -> Option<usize> {
        if self.list.len() == 1 {
            return self.list[0].claim_now.then_some(0);
        }
        // While one queue keeps the consumer busy the loop does not wait, so the others'
        // wake-ups and due times are looked at here: a queue woken or due since is a candidate.
        let now = Instant::now();
        for s in &mut self.list {
            if !s.claim_now
                && (s.sleep_until <= now
                    || s.wake
                        .as_ref()
                        .is_some_and(|w| w.has_changed().unwrap_or(true)))
            {
                s.claim_now = true;
            }
        }
        match self.order {
            QueueOrder::Strict => self.list.iter().position(|s| s.claim_now),
            QueueOrder::Weighted => {
                let now = self.now;
                let mut best: Option<usize> = None;
                for i in 0..self.list.len() {
                    if !self.list[i].claim_now {
                        continue;
                    }
                    let served = self.list[i].served.max(now);
                    self.list[i].served = served;
                    // The furthest behind; the first in the order given on a tie.
                    if best.is_none_or(|b| served < self.list[b].served) {
                        best = Some(i);
                    }
                }
                let b = best?;
                self.now = self.list[b].served;
                Some(b)
            }
        }
    }

    /// When the loop must look again without a wake-up: the earliest sleeping queue's time;
    /// `None` while some queue may have due jobs (the loop waits only for a free slot then).
    pub(super) fn deadline(&self) -> Option<Instant> {
        if self.any_due() {
            return None;
        }
        self.list.iter().map(|s| s.sleep_until).min()
    }

    /// The first queue with pending acks that must go out on their own now (`held_empty`:
    /// nothing held is left to start; `batch`: the claim size).
    pub(super) fn must_flush(&self, held_empty: bool, batch: usize) -> Option<usize> {
        let now = Instant::now();
        self.list.iter().position(|s| {
            !s.acks.is_empty()
                && (held_empty
                    || s.acks.len() >= batch
                    || s.acks_since.is_some_and(|t| t + super::ACK_WITHIN <= now))
        })
    }

    /// When the oldest pending ack of any queue must go out at the latest.
    pub(super) fn acks_due(&self) -> Option<Instant> {
        self.list
            .iter()
            .filter_map(|s| s.acks_since)
            .min()
            .map(|t| t + super::ACK_WITHIN)
    }

    /// Waits until `deadline` or a wake-up of any queue, and marks the queues that may have
    /// due jobs now. Cancel-safe.
    pub(super) async fn wait(&mut self, deadline: Option<Instant>) {
        if self.list.len() == 1 {
            let s = &mut self.list[0];
            wait::until_due_or_woken(deadline, &mut s.wake, &mut self.moves).await;
            s.claim_now = true;
            return;
        }
        // Several queues: the first wake-up of any, or the deadline (capped while a queue has
        // no channel, so it is subscribed again).
        let unsubscribed = self.list.iter().any(|s| s.wake.is_none());
        let give_up = unsubscribed.then(|| Instant::now() + RESUBSCRIBE);
        let until = match (deadline, give_up) {
            (Some(d), Some(g)) => Some(d.min(g)),
            (d, g) => d.or(g),
        };
        let woke = {
            let changes: Vec<_> = self
                .list
                .iter_mut()
                .enumerate()
                .filter_map(|(i, s)| {
                    s.wake
                        .as_mut()
                        .map(|w| Box::pin(async move { (i, w.changed().await.is_ok()) }))
                })
                .collect();
            let due = async {
                match until {
                    Some(d) => wait::precise_sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            // A test clock's move reads like the deadline: every queue due by now claims.
            let moved = self.moves.moved();
            if changes.is_empty() {
                tokio::select! {
                    () = due => None,
                    () = moved => None,
                }
            } else {
                tokio::select! {
                    () = due => None,
                    () = moved => None,
                    ((i, open), _, _) = futures::future::select_all(changes) => Some((i, open)),
                }
            }
        };
        match woke {
            Some((i, open)) => {
                let s = &mut self.list[i];
                if !open {
                    s.wake = None;
                }
                s.claim_now = true;
            }
            None => {
                let now = Instant::now();
                for s in &mut self.list {
                    if s.sleep_until <= now || s.wake.is_none() {
                        s.claim_now = true;
                    }
                }
            }
        }
    }

    /// What a claim on queue `i` that asked for `max` and got `got` says: a full batch means
    /// more may be due; otherwise the queue sleeps towards its next due time (at most `idle`).
    pub(super) fn claimed(
        &mut self,
        i: usize,
        max: usize,
        got: usize,
        next: Option<Duration>,
        idle: Duration,
    ) {
        let s = &mut self.list[i];
        s.served += got as f64 / f64::from(s.weight);
        s.claim_now = got == max;
        s.sleep_until = Instant::now() + next.unwrap_or(idle).min(idle);
    }
}
