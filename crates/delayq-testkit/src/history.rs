//! The history checker of the chaos suite, in the spirit of Jepsen's total-queue checker:
//! producers record `invoke` / `ok` / `fail` / `unknown` per enqueue (an error or timeout is
//! `unknown`, never assumed lost or done), [`Recording`] records every lease handed out (start)
//! and every ack with its token and outcome, tests record faults and their healing; after a
//! final drain [`History::check`] reports what was lost, unexpected, duplicated, recovered,
//! early, and stale acks accepted.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Due, Enqueued, JobId,
    LeaseRef, Nack, NackOutcome, NewJob, QueueName, Result, Wakeups,
};

/// One recorded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// An enqueue of `id` was sent.
    Invoke(String),
    /// It was acknowledged.
    Ok(String),
    /// It was refused (nothing written).
    Fail(String),
    /// Its outcome is unknown (error or timeout after sending).
    Unknown(String),
    /// A lease on `id` with `token` was handed out at `at_ms` (store clock); the job was due
    /// at `due_ms`.
    Start {
        /// Job id.
        id: String,
        /// The consumer (its [`Recording`]'s label).
        by: usize,
        /// Lease token.
        token: u64,
        /// Store time of the claim, ms.
        at_ms: u64,
        /// Due time, ms.
        due_ms: u64,
    },
    /// An ack of `id` with `token` came back `accepted` or not.
    Ack {
        /// Job id.
        id: String,
        /// The consumer (its [`Recording`]'s label).
        by: usize,
        /// Lease token.
        token: u64,
        /// Whether the store accepted it.
        accepted: bool,
        /// The store no longer has the job: an earlier ack of this lease took effect but its
        /// answer was lost (a timeout), and the consumer sent it again.
        gone: bool,
    },
    /// An ack of this lease is being sent. Until an [`Event::Ack`] answers it, its outcome is
    /// unknown (the call may fail, or its sender be killed, after the store applied it).
    AckUnknown {
        /// Job id.
        id: String,
        /// Lease token.
        token: u64,
    },
    /// A final read found the job gone from the store (after the drain).
    Gone(String),
    /// A fault began.
    Fault(String),
    /// From here until [`Event::Fault`] of the same name, acknowledged writes are not yet
    /// durable and that fault may lose them (the fsync window of `appendfsync everysec` before
    /// a power cut, the replication lag before a failover without `--wait-replicas`):
    /// enqueues acknowledged in the window and never completed count as
    /// [`Report::lost_unsynced`], not [`Report::lost`].
    Unsynced(String),
    /// A consumer was stopped for good (killed); it is not expected to recover.
    Retired(usize),
    /// Every fault is healed.
    Healed,
}

/// A shared, append-only history (wall-clock ordered).
#[derive(Clone, Default)]
pub struct History {
    events: Arc<Mutex<Vec<(Instant, Event)>>>,
}

/// What [`History::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Acknowledged enqueues never completed (outside any [`Event::Unsynced`] window).
    pub lost: Vec<String>,
    /// Acknowledged enqueues never completed, acknowledged inside an [`Event::Unsynced`]
    /// window before the fault that lost them (allowed by that store's durability).
    pub lost_unsynced: Vec<String>,
    /// Of those, the ones whose current lease had an ack of unknown outcome: a final read
    /// (see [`Event::Gone`]) tells whether they were done.
    pub ack_unknown: Vec<String>,
    /// Jobs delivered that were never enqueued (or whose enqueue was refused).
    pub unexpected: Vec<String>,
    /// Jobs delivered more than once (at-least-once allows it after faults).
    pub duplicated: usize,
    /// Enqueues of unknown outcome that were delivered.
    pub recovered: usize,
    /// Enqueues of unknown outcome never delivered (allowed: they may not have happened).
    pub unknown_absent: usize,
    /// Deliveries before the job's due time (store clock).
    pub early: usize,
    /// Acks accepted with a token that was not the job's latest lease.
    pub stale_acks_accepted: usize,
    /// Completed jobs.
    pub completed: usize,
    /// For each fault, the time from it to the first completion after it.
    pub recovery: Vec<(String, Option<Duration>)>,
    /// For each fault, the time from it until every consumer running then (and not killed
    /// since) had completed a job again; `None` if one never did.
    pub consumer_recovery: Vec<(String, Option<Duration>)>,
}

impl History {
    /// Records one event now.
    pub fn record(&self, e: Event) {
        self.events
            .lock()
            .expect("history lock")
            .push((Instant::now(), e));
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<(Instant, Event)> {
        self.events.lock().expect("history lock").clone()
    }

    /// Checks the whole history; call after the final drain.
    pub fn check(&self) -> Report {
        let events = self.events();
        let mut acked_enqueue = HashSet::new();
        let mut unknown = HashSet::new();
        let mut invoked = HashSet::new();
        let mut starts: HashMap<String, usize> = HashMap::new();
        let mut latest_token: HashMap<String, u64> = HashMap::new();
        let mut completed = HashSet::new();
        let mut ack_unknown = HashSet::new();
        let mut r = Report::default();
        for (_, e) in &events {
            match e {
                Event::Invoke(id) => {
                    invoked.insert(id.clone());
                }
                Event::Ok(id) => {
                    acked_enqueue.insert(id.clone());
                }
                Event::Unknown(id) => {
                    unknown.insert(id.clone());
                }
                Event::Start {
                    id,
                    token,
                    at_ms,
                    due_ms,
                    ..
                } => {
                    *starts.entry(id.clone()).or_default() += 1;
                    latest_token.insert(id.clone(), *token);
                    if at_ms < due_ms {
                        r.early += 1;
                    }
                }
                Event::Ack {
                    id,
                    token,
                    accepted,
                    gone,
                    ..
                } => {
                    let current = latest_token.get(id) == Some(token);
                    if *accepted {
                        if !current {
                            r.stale_acks_accepted += 1;
                        }
                        completed.insert(id.clone());
                    } else if *gone && current {
                        completed.insert(id.clone());
                    }
                }
                Event::AckUnknown { id, token } => {
                    if latest_token.get(id) == Some(token) {
                        ack_unknown.insert(id.clone());
                    }
                }
                Event::Gone(id) => {
                    if ack_unknown.contains(id) {
                        completed.insert(id.clone());
                    }
                }
                Event::Fail(_)
                | Event::Fault(_)
                | Event::Unsynced(_)
                | Event::Retired(_)
                | Event::Healed => {}
            }
        }
        let unknown: HashSet<String> = unknown.difference(&acked_enqueue).cloned().collect();
        let never_done: Vec<String> = acked_enqueue.difference(&completed).cloned().collect();
        let unsynced = unsynced_acks(&events);
        (r.lost_unsynced, r.lost) = never_done.into_iter().partition(|id| unsynced.contains(id));
        r.lost.sort();
        r.lost_unsynced.sort();
        r.ack_unknown = r
            .lost
            .iter()
            .filter(|id| ack_unknown.contains(*id))
            .cloned()
            .collect();
        r.unexpected = starts
            .keys()
            .filter(|id| !acked_enqueue.contains(*id) && !unknown.contains(*id))
            .cloned()
            .collect();
        r.unexpected.sort();
        r.duplicated = starts.values().filter(|n| **n > 1).count();
        r.recovered = unknown.iter().filter(|id| starts.contains_key(*id)).count();
        r.unknown_absent = unknown.len() - r.recovered;
        r.completed = completed.len();
        // When each lease was handed out: a completion shows recovery from a fault only if
        // its job was claimed after the fault (not an ack already on its way).
        let mut started: HashMap<(&str, u64), Instant> = HashMap::new();
        for (t, e) in &events {
            if let Event::Start { id, token, .. } = e {
                started.insert((id.as_str(), *token), *t);
            }
        }
        let fresh = |e: &Event, at: Instant| match e {
            Event::Ack {
                id,
                token,
                accepted: true,
                ..
            } => started.get(&(id.as_str(), *token)).is_some_and(|s| *s > at),
            _ => false,
        };
        for (i, (at, e)) in events.iter().enumerate() {
            if let Event::Fault(name) = e {
                let first = events[i..]
                    .iter()
                    .find_map(|(t, e)| fresh(e, *at).then(|| t.duration_since(*at)));
                r.recovery.push((name.clone(), first));
                r.consumer_recovery
                    .push((name.clone(), every_consumer_back(&events, i, &fresh)));
            }
        }
        let _ = invoked;
        r
    }
}

/// Ids whose enqueue was acknowledged inside an [`Event::Unsynced`] window.
fn unsynced_acks(events: &[(Instant, Event)]) -> HashSet<String> {
    let mut open: HashSet<&str> = HashSet::new();
    let mut ids = HashSet::new();
    for (_, e) in events {
        match e {
            Event::Unsynced(name) => {
                open.insert(name);
            }
            Event::Fault(name) => {
                open.remove(name.as_str());
            }
            Event::Ok(id) if !open.is_empty() => {
                ids.insert(id.clone());
            }
            _ => {}
        }
    }
    ids
}

/// Time from the fault at `events[i]` until every consumer running then (not retired before
/// completing again) completed a job claimed after the fault (`fresh`); `None` if one never
/// did.
fn every_consumer_back(
    events: &[(Instant, Event)],
    i: usize,
    fresh: &impl Fn(&Event, Instant) -> bool,
) -> Option<Duration> {
    let at = events[i].0;
    let mut running = HashSet::new();
    for (_, e) in &events[..i] {
        match e {
            Event::Start { by, .. } => {
                running.insert(*by);
            }
            Event::Retired(by) => {
                running.remove(by);
            }
            _ => {}
        }
    }
    let mut slowest = Duration::ZERO;
    for c in running {
        let back = events[i..].iter().find_map(|(t, e)| match e {
            Event::Ack { by, .. } if *by == c && fresh(e, at) => Some(Some(t.duration_since(at))),
            Event::Retired(by) if *by == c => Some(None),
            _ => None,
        });
        match back {
            Some(Some(d)) => slowest = slowest.max(d),
            Some(None) => {} // killed before it completed again
            None => return None,
        }
    }
    Some(slowest)
}

/// Wraps a backend and records every lease it hands out and every ack's outcome into a
/// [`History`] (claims carry acks too). Other calls pass through.
#[derive(Clone)]
pub struct Recording<B> {
    inner: B,
    history: History,
    by: usize,
}

impl<B> Recording<B> {
    /// Records `inner`'s leases and acks into `history` (as consumer 0).
    pub fn new(inner: B, history: History) -> Self {
        Self::labelled(inner, history, 0)
    }

    /// The same, the events labelled as consumer `by`.
    pub fn labelled(inner: B, history: History, by: usize) -> Self {
        Self { inner, history, by }
    }

    fn unknown(&self, acks: &[Ack]) {
        for l in acks.iter().map(|a| &a.lease) {
            self.history.record(Event::AckUnknown {
                id: l.id.to_string(),
                token: l.token,
            });
        }
    }

    fn acks(&self, acks: &[Ack], outcomes: &[AckOutcome]) {
        for (l, o) in acks.iter().map(|a| &a.lease).zip(outcomes) {
            self.history.record(Event::Ack {
                id: l.id.to_string(),
                by: self.by,
                token: l.token,
                accepted: *o == AckOutcome::Acked,
                gone: *o == AckOutcome::NotFound,
            });
        }
    }
}

impl<B: Backend> Backend for Recording<B> {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        self.inner.enqueue(queue, jobs).await
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        let acks = req.acks.clone();
        self.unknown(&acks);
        let b = self.inner.claim(queue, req).await?;
        self.acks(&acks, &b.acks);
        for j in &b.jobs {
            self.history.record(Event::Start {
                id: j.id.to_string(),
                by: self.by,
                token: j.lease_token,
                at_ms: j
                    .lease_deadline_ms
                    .saturating_sub(j.lease.as_millis() as u64),
                due_ms: j.due_at_ms,
            });
        }
        Ok(b)
    }

    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        self.unknown(&acks);
        let out = self.inner.ack(queue, acks.clone()).await?;
        self.acks(&acks, &out);
        Ok(out)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        self.inner.nack(queue, lease, nack).await
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        self.inner.extend(queue, lease, len).await
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        self.inner.release(queue, leases, undo).await
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        self.inner.cancel(queue, id).await
    }

    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        self.inner.cancel_running(queue, id).await
    }

    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        self.inner.cancelled(queue, leases).await
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, s: Due) -> Result<u64> {
        self.inner.reschedule(queue, id, s).await
    }

    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        self.inner.wakeups(queue).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(id: &str, token: u64, at_ms: u64, due_ms: u64) -> Event {
        Event::Start {
            id: id.into(),
            by: 0,
            token,
            at_ms,
            due_ms,
        }
    }

    fn ack(id: &str, token: u64, accepted: bool) -> Event {
        Event::Ack {
            id: id.into(),
            by: 0,
            token,
            accepted,
            gone: false,
        }
    }

    /// The checker finds each kind of anomaly it reports (so a clean report means something).
    #[test]
    fn the_checker_finds_every_anomaly() {
        let h = History::default();
        for e in [
            Event::Ok("done".into()),
            start("done", 1, 10, 10),
            ack("done", 1, true),
            Event::Ok("lost".into()),
            Event::Unknown("maybe".into()),
            start("maybe", 2, 10, 10),
            ack("maybe", 2, true),
            Event::Unknown("never".into()),
            start("ghost", 3, 10, 10),
            Event::Ok("twice".into()),
            start("twice", 4, 10, 10),
            start("twice", 5, 20, 10),
            ack("twice", 4, true),
            Event::Ok("early".into()),
            start("early", 6, 9, 10),
            ack("early", 6, true),
            // An ack whose answer was lost, resent: the job is gone, so it was done.
            Event::Ok("resent".into()),
            start("resent", 7, 10, 10),
            Event::Ack {
                id: "resent".into(),
                by: 0,
                token: 7,
                accepted: false,
                gone: true,
            },
            // An ack whose call failed, never resent: only a final read can tell.
            Event::Ok("unsure".into()),
            start("unsure", 8, 10, 10),
            Event::AckUnknown {
                id: "unsure".into(),
                token: 8,
            },
        ] {
            h.record(e);
        }
        let r = h.check();
        assert_eq!(r.lost, vec!["lost".to_owned(), "unsure".to_owned()]);
        assert_eq!(r.ack_unknown, vec!["unsure".to_owned()]);
        h.record(Event::Gone("unsure".into()));
        h.record(Event::Gone("lost".into())); // gone, but no ack was ever sent: still lost
        let r = h.check();
        assert_eq!(r.lost, vec!["lost".to_owned()]);
        assert_eq!(r.unexpected, vec!["ghost".to_owned()]);
        assert_eq!(r.duplicated, 1);
        assert_eq!(r.recovered, 1);
        assert_eq!(r.unknown_absent, 1);
        assert_eq!(r.early, 1);
        assert_eq!(
            r.stale_acks_accepted, 1,
            "token 4 after lease 5 was handed out"
        );
        assert_eq!(r.completed, 6);
    }

    /// Losses are attributed to an unsynced window only when the enqueue was acknowledged
    /// inside it; a consumer that never completes again after a fault is reported.
    #[test]
    fn unsynced_windows_and_consumer_recovery() {
        let h = History::default();
        h.record(Event::Ok("before".into()));
        h.record(start("x", 1, 10, 10));
        h.record(Event::Unsynced("cut".into()));
        h.record(Event::Ok("inside".into()));
        h.record(Event::Fault("cut".into()));
        h.record(Event::Ok("after".into()));
        h.record(ack("x", 1, true));
        let r = h.check();
        assert_eq!(r.lost, vec!["after".to_owned(), "before".to_owned()]);
        assert_eq!(r.lost_unsynced, vec!["inside".to_owned()]);
        assert_eq!(
            r.recovery[0].1, None,
            "x was claimed before the fault: no proof"
        );
        h.record(start("y", 2, 10, 10));
        h.record(ack("y", 2, true));
        let r = h.check();
        assert!(
            r.recovery[0].1.is_some(),
            "y was claimed and done after the fault"
        );
        assert!(r.consumer_recovery[0].1.is_some(), "consumer 0 completed y");

        let h = History::default();
        h.record(start("a", 1, 10, 10));
        h.record(Event::Start {
            id: "b".into(),
            by: 1,
            token: 2,
            at_ms: 10,
            due_ms: 10,
        });
        h.record(Event::Fault("stall".into()));
        h.record(start("c", 3, 10, 10));
        h.record(ack("c", 3, true));
        assert_eq!(
            h.check().consumer_recovery[0].1,
            None,
            "consumer 1 never came back"
        );
        h.record(Event::Retired(1));
        assert!(
            h.check().consumer_recovery[0].1.is_some(),
            "a killed consumer is not waited for"
        );
    }
}
