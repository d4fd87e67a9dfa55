//! [`Faulty`]: a backend wrapper that fails one chosen call, before it reaches the store
//! (nothing happened) or after (it happened, but the caller hears an error) — the "did it
//! happen?" case every client of a remote store must survive. redb's countdown-failing
//! backend is the model.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Due, Enqueued, Error, Found,
    Inspect, JobId, JobInfo, JobKey, JobPage, KeyHold, LeaseRef, ListRequest, ListState, Nack,
    NackOutcome, NewJob, QueueName, QueueSeries, QueueSettings, QueueStats, Result, Wakeups,
};

/// Where an injected fault strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// The call fails without reaching the store: nothing changed.
    Before,
    /// The call reaches the store and takes effect, then the caller gets an error.
    After,
}

/// The fault a [`Faulty`] injected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injected {
    /// The method that failed.
    pub method: &'static str,
    /// Before or after the store.
    pub point: FaultPoint,
}

#[derive(Default)]
struct Plan {
    calls: AtomicU64,
    /// 1-based number of the call to fail, 0 = none.
    fail_at: AtomicU64,
    point: Mutex<Option<FaultPoint>>,
    injected: Mutex<Option<Injected>>,
}

/// Wraps a backend and fails the Nth call of any [`Backend`] or [`Inspect`] method (counted
/// together from 1) with [`Error::Unavailable`]. Clones share the plan.
#[derive(Clone)]
pub struct Faulty<B> {
    inner: B,
    plan: Arc<Plan>,
}

impl<B> Faulty<B> {
    /// A wrapper that injects nothing until [`Faulty::fail_call`].
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            plan: Arc::default(),
        }
    }

    /// Fails call number `n` (counted from 1 over the wrapper's life) at `point`.
    pub fn fail_call(&self, n: u64, point: FaultPoint) {
        *self.plan.point.lock().expect("plan") = Some(point);
        self.plan.fail_at.store(n, Ordering::SeqCst);
    }

    /// The wrapped backend, for calls that must not count towards the plan.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The fault injected since the last call of this method, if any.
    pub fn take_injected(&self) -> Option<Injected> {
        self.plan.injected.lock().expect("plan").take()
    }

    fn strike(&self, method: &'static str) -> Option<FaultPoint> {
        let n = self.plan.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n != self.plan.fail_at.load(Ordering::SeqCst) {
            return None;
        }
        let point = (*self.plan.point.lock().expect("plan"))?;
        *self.plan.injected.lock().expect("plan") = Some(Injected { method, point });
        Some(point)
    }

    async fn run<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let fault = || Error::Unavailable(format!("injected fault in {method}"));
        match self.strike(method) {
            Some(FaultPoint::Before) => Err(fault()),
            Some(FaultPoint::After) => {
                let _ = call.await;
                Err(fault())
            }
            None => call.await,
        }
    }
}

impl<B: Backend> Backend for Faulty<B> {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        self.run("enqueue", self.inner.enqueue(queue, jobs)).await
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        self.run("claim", self.inner.claim(queue, req)).await
    }

    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        self.run("ack", self.inner.ack(queue, acks)).await
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        self.run("nack", self.inner.nack(queue, lease, nack)).await
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        self.run("extend", self.inner.extend(queue, lease, len))
            .await
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        self.run("release", self.inner.release(queue, leases, undo))
            .await
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        self.run("cancel", self.inner.cancel(queue, id)).await
    }

    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        self.run("cancel_running", self.inner.cancel_running(queue, id))
            .await
    }

    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        self.run("cancelled", self.inner.cancelled(queue, leases))
            .await
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, schedule: Due) -> Result<u64> {
        self.run("reschedule", self.inner.reschedule(queue, id, schedule))
            .await
    }

    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        self.inner.wakeups(queue).await
    }
}

impl<B: Inspect> Inspect for Faulty<B> {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        self.run("get", self.inner.get(queue, id)).await
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.run("queues", self.inner.queues()).await
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        self.run("stats", self.inner.stats(queue)).await
    }

    async fn list(&self, queue: &QueueName, page: ListRequest) -> Result<JobPage> {
        self.run("list", self.inner.list(queue, page)).await
    }

    async fn search(&self, queue: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        self.run("search", self.inner.search(queue, prefix, limit))
            .await
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.run("dead_requeue", self.inner.dead_requeue(queue, id))
            .await
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        self.run("dead_requeue_all", self.inner.dead_requeue_all(queue))
            .await
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        self.run("dead_purge", self.inner.dead_purge(queue)).await
    }

    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.run("dead_delete", self.inner.dead_delete(queue, id))
            .await
    }

    async fn cancel_all(&self, queue: &QueueName, state: ListState) -> Result<u64> {
        self.run("cancel_all", self.inner.cancel_all(queue, state))
            .await
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        self.run("set_paused", self.inner.set_paused(queue, paused))
            .await
    }

    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        self.run("series", self.inner.series(queue)).await
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        self.run("settings", self.inner.settings(queue)).await
    }

    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        self.run("push_queues", self.inner.push_queues()).await
    }

    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        self.run("configure", self.inner.configure(queue, s)).await
    }

    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        self.run("pause_key", self.inner.pause_key(q, key, hold))
            .await
    }

    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<delayq::KeyStats>> {
        self.run("keys", self.inner.keys(queue, limit)).await
    }

    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: delayq::KeyJobsRequest,
    ) -> Result<delayq::KeyJobsPage> {
        self.run("key_jobs", self.inner.key_jobs(q, key, req)).await
    }

    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<delayq::KeyCancelled> {
        self.run("cancel_key", self.inner.cancel_key(q, key, running))
            .await
    }

    async fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: delayq::KeyMove,
    ) -> Result<u64> {
        self.run("reschedule_key", self.inner.reschedule_key(q, key, to))
            .await
    }
}
