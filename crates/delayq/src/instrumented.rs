//! [`Instrumented`]: a backend wrapper that records every metric of `telemetry` in one place —
//! jobs enqueued (new and existing), claimed (with their lateness), acked, retried, dead,
//! cancelled, and refusals for a lost lease — whoever calls the backend: the producer, the
//! consumer engine or the HTTP server. Each of those wraps the backend it is given once.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::backend::{Backend, ClaimBatch, ClaimRequest, Inspect, Wakeups};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::job::{
    Ack, AckOutcome, CancelOutcome, Due, Enqueued, JobInfo, LeaseRef, Nack, NackOutcome, NewJob,
    QueueStats,
};
use crate::listing::{Found, JobPage, ListRequest, ListState};
use crate::name::{JobId, QueueName};
use crate::series::QueueSeries;
use crate::settings::QueueSettings;
use crate::telemetry::QueueCounters;
use crate::{JobKey, KeyHold};

/// Wraps a backend and meters what passes through it. Cheap to clone; clones share the
/// registered counters. Without an installed `metrics` recorder it records nothing.
#[derive(Clone)]
pub struct Instrumented<B> {
    inner: B,
    clock: SharedClock,
    counters: Arc<RwLock<HashMap<QueueName, Arc<QueueCounters>>>>,
}

impl<B> Instrumented<B> {
    /// Meters `inner`; lateness is measured on this host's clock.
    pub fn new(inner: B) -> Self {
        Self::with_clock(inner, Arc::new(SystemClock))
    }

    /// Meters `inner`, measuring lateness on `clock`.
    pub fn with_clock(inner: B, clock: SharedClock) -> Self {
        Self {
            inner,
            clock,
            counters: Arc::default(),
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The counters of `queue`, registered once.
    fn of(&self, queue: &QueueName) -> Arc<QueueCounters> {
        if let Some(c) = self
            .counters
            .read()
            .ok()
            .and_then(|m| m.get(queue).cloned())
        {
            return c;
        }
        let c = Arc::new(QueueCounters::new(queue.as_str()));
        match self.counters.write() {
            Ok(mut m) => m.entry(queue.clone()).or_insert(c).clone(),
            Err(_) => c,
        }
    }
}

/// Adds the outcomes of acks to `c`: acked, or refused (lease lost or no such job).
fn count_acks(c: &QueueCounters, outcomes: &[AckOutcome]) {
    let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count() as u64;
    c.acked.increment(acked);
    c.lease_lost.increment(outcomes.len() as u64 - acked);
}

/// Counts a lease operation refused because the lease was lost or the job is gone.
fn count_refusal<T>(c: &QueueCounters, r: &Result<T>) {
    if matches!(r, Err(Error::LeaseLost { .. } | Error::NotFound { .. })) {
        c.lease_lost.increment(1);
    }
}

impl<B: Backend> Backend for Instrumented<B> {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let out = self.inner.enqueue(queue, jobs).await?;
        let created = out.iter().filter(|e| e.created).count() as u64;
        let c = self.of(queue);
        c.enqueued.increment(created);
        c.enqueue_existing.increment(out.len() as u64 - created);
        Ok(out)
    }

    fn claims_over_queues(&self) -> bool {
        self.inner.claims_over_queues()
    }

    async fn claim_over(&self, req: crate::ClaimOverRequest) -> Result<ClaimBatch> {
        let queues: Vec<QueueName> = req.acks.iter().map(|(q, _)| q.clone()).collect();
        let batch = self.inner.claim_over(req).await?;
        for (q, o) in queues.iter().zip(&batch.acks) {
            count_acks(&self.of(q), std::slice::from_ref(o));
        }
        let now = self.clock.now_ms();
        for j in &batch.jobs {
            let c = self.of(&j.queue);
            c.claimed.increment(1);
            c.record_lateness(j.due_at_ms, now);
        }
        Ok(batch)
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        let batch = self.inner.claim(queue, req).await?;
        let c = self.of(queue);
        count_acks(&c, &batch.acks);
        if !batch.jobs.is_empty() {
            c.claimed.increment(batch.jobs.len() as u64);
            let now = self.clock.now_ms();
            for j in &batch.jobs {
                c.record_lateness(j.due_at_ms, now);
            }
        }
        Ok(batch)
    }

    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        let out = self.inner.ack(queue, acks).await?;
        count_acks(&self.of(queue), &out);
        Ok(out)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let out = self.inner.nack(queue, lease, nack).await;
        let c = self.of(queue);
        count_refusal(&c, &out);
        match &out {
            Ok(NackOutcome::Retrying { .. }) => c.retried.increment(1),
            Ok(NackOutcome::Dead { .. }) => c.dead.increment(1),
            Err(_) => {}
        }
        out
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        let out = self.inner.extend(queue, lease, len).await;
        count_refusal(&self.of(queue), &out);
        out
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        self.inner.release(queue, leases, undo).await
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let out = self.inner.cancel(queue, id).await?;
        if out == CancelOutcome::Cancelled {
            self.of(queue).cancelled.increment(1);
        }
        Ok(out)
    }

    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let out = self.inner.cancel_running(queue, id).await?;
        if matches!(out, CancelOutcome::Cancelled | CancelOutcome::Cancelling) {
            self.of(queue).cancelled.increment(1);
        }
        Ok(out)
    }

    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        self.inner.cancelled(queue, leases).await
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, schedule: Due) -> Result<u64> {
        self.inner.reschedule(queue, id, schedule).await
    }

    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        self.inner.wakeups(queue).await
    }

    async fn stop_polling(&self) {
        self.inner.stop_polling().await;
    }
}

impl<B: Inspect> Inspect for Instrumented<B> {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        self.inner.get(queue, id).await
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.inner.queues().await
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        self.inner.stats(queue).await
    }

    async fn list(&self, queue: &QueueName, page: ListRequest) -> Result<JobPage> {
        self.inner.list(queue, page).await
    }

    async fn search(&self, queue: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        self.inner.search(queue, prefix, limit).await
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.inner.dead_requeue(queue, id).await
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        self.inner.dead_requeue_all(queue).await
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        self.inner.dead_purge(queue).await
    }

    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.inner.dead_delete(queue, id).await
    }

    async fn cancel_all(&self, queue: &QueueName, state: ListState) -> Result<u64> {
        self.inner.cancel_all(queue, state).await
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        self.inner.set_paused(queue, paused).await
    }

    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        self.inner.series(queue).await
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        self.inner.settings(queue).await
    }

    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        self.inner.push_queues().await
    }

    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        self.inner.configure(queue, s).await
    }

    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        self.inner.pause_key(q, key, hold).await
    }

    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<crate::KeyStats>> {
        self.inner.keys(queue, limit).await
    }

    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: crate::KeyJobsRequest,
    ) -> Result<crate::KeyJobsPage> {
        self.inner.key_jobs(q, key, req).await
    }

    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<crate::KeyCancelled> {
        self.inner.cancel_key(q, key, running).await
    }

    async fn reschedule_key(&self, q: &QueueName, key: &JobKey, to: crate::KeyMove) -> Result<u64> {
        self.inner.reschedule_key(q, key, to).await
    }
}

impl<B: crate::schedule::Schedules> crate::schedule::Schedules for Instrumented<B> {
    async fn put_schedule(&self, queue: &QueueName, info: crate::ScheduleInfo) -> Result<()> {
        self.inner.put_schedule(queue, info).await
    }

    async fn schedules(&self, queue: &QueueName) -> Result<Vec<crate::ScheduleInfo>> {
        self.inner.schedules(queue).await
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        self.inner.delete_schedule(queue, name).await
    }

    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        self.inner.scheduled_queues().await
    }

    async fn clock_ms(&self) -> Result<u64> {
        self.inner.clock_ms().await
    }

    async fn fire(&self, queue: &QueueName, name: &str, f: crate::Firing) -> Result<bool> {
        self.inner.fire(queue, name, f).await
    }
}

impl<B: crate::batch::Batches> crate::batch::Batches for Instrumented<B> {
    async fn put_batch(
        &self,
        queue: &QueueName,
        put: crate::BatchPut,
    ) -> Result<crate::batch::BatchAdded> {
        self.inner.put_batch(queue, put).await
    }

    async fn add_to_batch(
        &self,
        queue: &QueueName,
        add: crate::BatchAdd,
    ) -> Result<Option<crate::batch::BatchAdded>> {
        self.inner.add_to_batch(queue, add).await
    }

    async fn close_batch(
        &self,
        queue: &QueueName,
        id: &crate::BatchId,
    ) -> Result<Option<crate::BatchInfo>> {
        self.inner.close_batch(queue, id).await
    }

    async fn batch(
        &self,
        queue: &QueueName,
        id: &crate::BatchId,
    ) -> Result<Option<crate::BatchInfo>> {
        self.inner.batch(queue, id).await
    }

    async fn open_batches(&self, queue: &QueueName, limit: usize) -> Result<Vec<crate::BatchInfo>> {
        self.inner.open_batches(queue, limit).await
    }

    async fn finish_batches(&self, thorough: bool) -> Result<usize> {
        self.inner.finish_batches(thorough).await
    }
}
