//! Hearing that running jobs were cancelled (`DELETE …/jobs/{id}?running=true`): the leases a
//! consumer's handlers hold, asked about every [`CHECK_EVERY`] while any runs — one
//! [`Backend::cancelled`] call per queue, in a task of its own so that a claim waiting in a
//! long poll does not delay it — and each cancelled job's [`Cancellation`] fired.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::cancellation::{CHECK_EVERY, Cancellation};
use crate::job::{Job, LeaseRef};
use crate::name::{JobId, QueueName};

/// The running jobs' leases and signals, by queue.
type Running = HashMap<QueueName, HashMap<JobId, (u64, Cancellation)>>;

/// What the watch knows of the running jobs; the loop adds a job as it starts and removes it
/// as it settles.
#[derive(Clone, Default)]
pub(super) struct Watched(Arc<Mutex<Running>>);

impl Watched {
    /// A job that starts now.
    pub(super) fn add(&self, job: &Job) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(job.queue.clone())
            .or_default()
            .insert(job.id.clone(), (job.lease_token, job.cancellation.clone()));
    }

    /// A job that settled (or was aborted).
    pub(super) fn remove(&self, queue: &QueueName, lease: &LeaseRef) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = m.get_mut(queue) {
            if q.get(&lease.id).is_some_and(|(t, _)| *t == lease.token) {
                q.remove(&lease.id);
            }
            if q.is_empty() {
                m.remove(queue);
            }
        }
    }

    /// The leases to ask about, by queue (those not cancelled yet).
    fn snapshot(&self) -> Vec<(QueueName, Vec<LeaseRef>)> {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .map(|(q, jobs)| {
                let leases = jobs
                    .iter()
                    .filter(|(_, (_, c))| !c.is_cancelled())
                    .map(|(id, (token, _))| LeaseRef {
                        id: id.clone(),
                        token: *token,
                    })
                    .collect();
                (q.clone(), leases)
            })
            .collect()
    }

    /// Fires the signals of `ids`, jobs of `queue`.
    fn fire(&self, queue: &QueueName, ids: &[JobId]) {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for id in ids {
            if let Some((_, c)) = m.get(queue).and_then(|q| q.get(id)) {
                tracing::info!(queue = %queue, id = %id, "job cancelled while it runs; asking its handler to stop");
                c.cancel();
            }
        }
    }

    /// Starts the task that asks `backend` every [`CHECK_EVERY`]; stopped when the returned
    /// guard drops.
    pub(super) fn spawn<B: Backend + Clone + 'static>(&self, backend: B) -> WatchTask {
        let watched = self.clone();
        WatchTask(tokio::spawn(async move {
            loop {
                tokio::time::sleep(CHECK_EVERY).await;
                for (queue, leases) in watched.snapshot() {
                    if leases.is_empty() {
                        continue;
                    }
                    match backend.cancelled(&queue, leases).await {
                        Ok(ids) => watched.fire(&queue, &ids),
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
