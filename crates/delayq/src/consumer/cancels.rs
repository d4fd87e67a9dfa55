//! Hearing that running jobs were cancelled (`DELETE …/jobs/{id}?running=true`): the leases a
//! consumer's handlers hold, asked about every [`CHECK_EVERY`] while any runs — one
//! [`Backend::cancelled`] call per queue, in a task of its own so that a claim waiting in a
//! long poll does not delay it — and each cancelled job's [`Cancellation`] fired.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::cancellation::{CHECK_EVERY, Cancellation};
use crate::job::LeaseRef;
use crate::name::QueueName;

/// A running job: its queue (index among the consumer's queues), its lease and its signal.
pub(super) struct RunningJob {
    pub queue: usize,
    pub lease: LeaseRef,
    pub cancellation: Cancellation,
}

/// The running jobs by task: the one record of each, kept by the loop (added as a job starts,
/// removed as it settles) and read by the watch.
#[derive(Clone, Default)]
pub(super) struct Running(Arc<Mutex<HashMap<tokio::task::Id, RunningJob>>>);

impl Running {
    /// The map, locked (held for a map operation, never across an await).
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<tokio::task::Id, RunningJob>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The leases to ask about and their signals, by queue (the jobs not cancelled yet).
    fn snapshot(&self, queues: usize) -> Vec<(Vec<LeaseRef>, Vec<Cancellation>)> {
        let mut by = vec![(Vec::new(), Vec::new()); queues];
        for r in self.lock().values() {
            if !r.cancellation.is_cancelled() {
                by[r.queue].0.push(r.lease.clone());
                by[r.queue].1.push(r.cancellation.clone());
            }
        }
        by
    }

    /// Starts the task that asks `backend` every [`CHECK_EVERY`] about the jobs of `queues`;
    /// stopped when the returned guard drops.
    pub(super) fn watch<B: Backend + Clone + 'static>(
        &self,
        backend: B,
        queues: Vec<QueueName>,
    ) -> WatchTask {
        let running = self.clone();
        WatchTask(tokio::spawn(async move {
            loop {
                tokio::time::sleep(CHECK_EVERY).await;
                for (i, (leases, signals)) in running.snapshot(queues.len()).into_iter().enumerate()
                {
                    if leases.is_empty() {
                        continue;
                    }
                    let queue = &queues[i];
                    let ids: Vec<_> = leases.iter().map(|l| l.id.clone()).collect();
                    match backend.cancelled(queue, leases).await {
                        Ok(found) => {
                            for ((id, signal), _) in
                                ids.iter().zip(signals).zip(found).filter(|(_, f)| *f)
                            {
                                tracing::info!(queue = %queue, id = %id, "job cancelled while it runs; asking its handler to stop");
                                signal.cancel();
                            }
                        }
                        Err(e) => {
                            tracing::debug!(queue = %queue, error = %e, "asking for cancelled leases failed")
                        }
                    }
                }
            }
        }))
    }
}

/// The watch task; aborted when dropped (the run ended).
pub(super) struct WatchTask(JoinHandle<()>);

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}
