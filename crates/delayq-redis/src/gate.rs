//! Enqueues of one shard share calls when many come at once: up to [`IN_FLIGHT`] enqueue
//! calls of a shard go out as they come (pipelined on the connection, as before), and the ones
//! that arrive while all of them are out wait for the first to come back, then go out together
//! as one call of the batch script (natural batching, as a database's group commit). A lone
//! producer, or a few, never waits for anything; fifty producers at once pay Redis one script
//! call per batch instead of one per job (a single-job call costs Redis ~13 µs, a job of a
//! batch ~3–5 µs: docs/BENCHMARKS.md, W1).
//!
//! What a caller sees does not change: its jobs stay together and in order inside the shared
//! call, which the script runs atomically, so its batch is still written whole or not at all,
//! and a call repeating an id of an earlier caller waits for the next shared call, so it is
//! answered as two calls one after the other would be (a second enqueue is told the job exists,
//! a second replace replaces it again). An error of the shared call is every sharer's
//! (nothing of theirs was written, or, for a lost answer, maybe all of it: the same outcome a
//! caller of its own call could get). A caller that gives up while its call waits may still
//! have its jobs written, as one whose call was already on the wire would: retry with the same
//! ids to know.

use std::sync::Mutex;

use delayq::limits::MAX_BATCH;
use delayq::{Enqueued, Error, JobId, NewJob, Result};
use tokio::sync::oneshot;

/// Enqueue calls of one shard this process has out before later ones wait and share one.
const IN_FLIGHT: usize = 4;

/// Jobs of one enqueue call and where its answer goes.
struct Waiter {
    jobs: Vec<(JobId, NewJob)>,
    tx: oneshot::Sender<Result<Vec<Enqueued>>>,
}

#[derive(Default)]
struct State {
    /// Calls out now.
    out: usize,
    /// Calls waiting for one to come back, oldest first.
    waiting: Vec<Waiter>,
}

/// One shard's gate.
#[derive(Default)]
pub(crate) struct Gate {
    state: Mutex<State>,
}

/// What [`Gate::enter`] decided.
pub(crate) enum Entry {
    /// Make the call now (and [`Gate::leave`] after it).
    Go(Vec<(JobId, NewJob)>),
    /// Wait here for the answer of a shared call.
    Wait(oneshot::Receiver<Result<Vec<Enqueued>>>),
}

/// Calls that go out together: their jobs in order, and who waits for which of the answers.
pub(crate) struct Shared {
    /// Every sharer's jobs, one after the other.
    pub(crate) jobs: Vec<(JobId, NewJob)>,
    /// The sharers.
    pub(crate) sharers: Sharers,
}

/// Per sharer of a call: how many of its jobs are its own, and where their answers go.
pub(crate) struct Sharers(Vec<(usize, oneshot::Sender<Result<Vec<Enqueued>>>)>);

impl Gate {
    /// A call with `jobs` arrives.
    pub(crate) fn enter(&self, jobs: Vec<(JobId, NewJob)>) -> Entry {
        let mut s = self.state.lock().expect("gate lock");
        if s.out < IN_FLIGHT {
            s.out += 1;
            return Entry::Go(jobs);
        }
        let (tx, rx) = oneshot::channel();
        s.waiting.push(Waiter { jobs, tx });
        Entry::Wait(rx)
    }

    /// A call came back (or was dropped): the calls waiting then, up to [`MAX_BATCH`] jobs,
    /// which the caller must send as one (keeping the call's place), or `None` when none wait
    /// (the place is given up).
    pub(crate) fn leave(&self) -> Option<Shared> {
        let mut s = self.state.lock().expect("gate lock");
        if s.waiting.is_empty() {
            s.out -= 1;
            return None;
        }
        // Waiters in arrival order, up to MAX_BATCH jobs, and up to the first that repeats an
        // id of an earlier one: inside one call the script answers a repeat as "exists" (a
        // batch's rule), where a call of its own after the first would apply it (a replace).
        let mut take = 0;
        let mut total = 0;
        let mut ids = std::collections::HashSet::new();
        for w in &s.waiting {
            if take > 0
                && (total + w.jobs.len() > MAX_BATCH
                    || w.jobs.iter().any(|(id, _)| ids.contains(id.as_str())))
            {
                break;
            }
            ids.extend(w.jobs.iter().map(|(id, _)| id.as_str()));
            total += w.jobs.len();
            take += 1;
        }
        let mut jobs = Vec::with_capacity(total);
        let mut parts = Vec::with_capacity(take);
        for w in s.waiting.drain(..take) {
            parts.push((w.jobs.len(), w.tx));
            jobs.extend(w.jobs);
        }
        Some(Shared {
            jobs,
            sharers: Sharers(parts),
        })
    }
}

impl Sharers {
    /// Hands each sharer its part of the shared call's answer (or the error).
    pub(crate) fn answer(self, out: Result<Vec<Enqueued>>) {
        match out {
            Ok(all) => {
                let mut all = all.into_iter();
                for (n, tx) in self.0 {
                    // (A sharer that gave up is not waiting any more: nothing to tell it.)
                    let _ = tx.send(Ok(all.by_ref().take(n).collect()));
                }
            }
            Err(e) => {
                for (_, tx) in self.0 {
                    let _ = tx.send(Err(copy(&e)));
                }
            }
        }
    }
}

/// Fails `sharers` and every call waiting at `gate` after them, and gives the place back.
pub(crate) fn fail_all(gate: &Gate, sharers: Sharers) {
    let gone = || Error::Unavailable("enqueue: the runtime stopped".into());
    sharers.answer(Err(gone()));
    while let Some(more) = gate.leave() {
        more.sharers.answer(Err(gone()));
    }
}

/// The same error again, for each caller of a shared call.
fn copy(e: &Error) -> Error {
    match e {
        Error::Unavailable(m) => Error::Unavailable(m.clone()),
        Error::StoreFull(m) => Error::StoreFull(m.clone()),
        Error::Conflict(m) => Error::Conflict(m.clone()),
        Error::Invalid(i) => Error::Invalid(i.clone()),
        other => Error::Backend(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(prefix: &str, n: usize) -> Vec<(JobId, NewJob)> {
        (0..n)
            .map(|i| {
                let id = JobId::new(format!("{prefix}{i}")).unwrap();
                (id, NewJob::new(vec![]))
            })
            .collect()
    }

    /// A gate with all its places out.
    fn full() -> Gate {
        let g = Gate::default();
        for _ in 0..IN_FLIGHT {
            assert!(matches!(g.enter(jobs("a", 1)), Entry::Go(_)));
        }
        g
    }

    #[test]
    fn calls_go_at_once_until_all_places_are_out_then_wait_and_leave_together() {
        let g = Gate::default();
        for i in 0..IN_FLIGHT {
            assert!(matches!(g.enter(jobs(&format!("a{i}-"), 1)), Entry::Go(_)));
        }
        let mut rx = vec![];
        for p in ["b", "c", "d"] {
            match g.enter(jobs(p, 2)) {
                Entry::Wait(r) => rx.push(r),
                Entry::Go(_) => panic!("all places are out"),
            }
        }
        let shared = g.leave().expect("three wait");
        let ids: Vec<&str> = shared.jobs.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(
            ids,
            ["b0", "b1", "c0", "c1", "d0", "d1"],
            "in arrival order"
        );
        let answer = shared
            .jobs
            .iter()
            .map(|(id, _)| Enqueued {
                id: id.clone(),
                created: true,
                due_at_ms: 0,
                replaced: false,
                existing: None,
            })
            .collect();
        shared.sharers.answer(Ok(answer));
        for (r, p) in rx.into_iter().zip(["b", "c", "d"]) {
            let got = r.blocking_recv().unwrap().unwrap();
            let ids: Vec<String> = got.iter().map(|e| e.id.as_str().to_owned()).collect();
            assert_eq!(ids, [format!("{p}0"), format!("{p}1")], "each its own part");
        }
        // The shared call kept its place; once nothing waits, places are given up one by one.
        for _ in 0..IN_FLIGHT {
            assert!(g.leave().is_none());
        }
        assert!(matches!(g.enter(jobs("e", 1)), Entry::Go(_)));
    }

    #[test]
    fn a_call_repeating_an_id_waits_for_the_next_shared_call() {
        let g = full();
        for p in ["b", "c", "b", "d"] {
            assert!(matches!(g.enter(jobs(p, 2)), Entry::Wait(_)));
        }
        let ids = |s: Shared| -> Vec<String> {
            s.jobs
                .iter()
                .map(|(id, _)| id.as_str().to_owned())
                .collect()
        };
        assert_eq!(ids(g.leave().unwrap()), ["b0", "b1", "c0", "c1"]);
        assert_eq!(
            ids(g.leave().unwrap()),
            ["b0", "b1", "d0", "d1"],
            "in order, after"
        );
    }

    /// A task sending shared calls that is dropped (its runtime stopping) fails what it holds
    /// and what waits after it, and gives its place back.
    #[test]
    fn a_dropped_sender_fails_its_calls_and_gives_its_place_back() {
        let g = full();
        let Entry::Wait(first) = g.enter(jobs("b", 1)) else {
            panic!("all places are out")
        };
        let held = g.leave().expect("b waits");
        let Entry::Wait(second) = g.enter(jobs("c", 1)) else {
            panic!("all places are still out")
        };
        fail_all(&g, held.sharers);
        for rx in [first, second] {
            let e = rx.blocking_recv().unwrap().unwrap_err();
            assert!(matches!(e, Error::Unavailable(_)), "{e}");
        }
        assert!(
            matches!(g.enter(jobs("d", 1)), Entry::Go(_)),
            "its place is free"
        );
        assert!(
            matches!(g.enter(jobs("e", 1)), Entry::Wait(_)),
            "and only its"
        );
    }

    #[test]
    fn a_shared_call_holds_at_most_a_batch_and_its_error_is_every_sharers() {
        let g = full();
        let mut rx = vec![];
        for p in ["b", "c"] {
            if let Entry::Wait(r) = g.enter(jobs(p, MAX_BATCH / 2 + 1)) {
                rx.push(r);
            }
        }
        let first = g.leave().unwrap();
        assert_eq!(
            first.jobs.len(),
            MAX_BATCH / 2 + 1,
            "c does not fit beside b"
        );
        first.sharers.answer(Err(Error::Unavailable("lost".into())));
        let second = g.leave().unwrap();
        assert_eq!(second.jobs[0].0.as_str(), "c0");
        let e = rx.remove(0).blocking_recv().unwrap().unwrap_err();
        assert!(matches!(e, Error::Unavailable(m) if m == "lost"));
    }
}
