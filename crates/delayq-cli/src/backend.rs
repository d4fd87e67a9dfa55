//! [`AnyBackend`]: the backend chosen at run time — Redis when a URL is configured, a running
//! `delayq serve` when one owns the embedded store (or `--server` names one), else the
//! embedded store — behind the same two traits.

use std::time::Duration;

use delayq::{
    AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Due, Enqueued, Found, Inspect,
    JobId, JobInfo, JobKey, JobPage, KeyHold, LeaseRef, ListRequest, ListState, Nack, NackOutcome,
    NewJob, QueueName, QueueSeries, QueueSettings, QueueStats, Result, Wakeups,
};
use delayq::{BatchAdd, BatchPut, Firing, ScheduleInfo, Schedules};
use delayq_embedded::EmbeddedBackend;
use delayq_redis::RedisBackend;

use crate::remote::RemoteBackend;

/// Redis, the embedded store, or a running `delayq serve` reached over HTTP.
#[derive(Clone)]
pub(crate) enum AnyBackend {
    /// A Redis server.
    Redis(RedisBackend),
    /// The embedded store in a local directory.
    Embedded(EmbeddedBackend),
    /// A `delayq serve` (which owns the store), over its HTTP API.
    Remote(RemoteBackend),
}

macro_rules! delegate {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::Redis($b) => $e,
            AnyBackend::Embedded($b) => $e,
            AnyBackend::Remote($b) => $e,
        }
    };
}

impl Backend for AnyBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        delegate!(self, b => b.enqueue(queue, jobs).await)
    }
    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        delegate!(self, b => b.claim(queue, req).await)
    }
    fn claims_over_queues(&self) -> bool {
        delegate!(self, b => b.claims_over_queues())
    }
    async fn claim_over(&self, req: delayq::ClaimOverRequest) -> Result<ClaimBatch> {
        delegate!(self, b => b.claim_over(req).await)
    }
    async fn ack(&self, queue: &QueueName, acks: Vec<delayq::Ack>) -> Result<Vec<AckOutcome>> {
        delegate!(self, b => b.ack(queue, acks).await)
    }
    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        delegate!(self, b => b.nack(queue, lease, nack).await)
    }
    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        delegate!(self, b => b.extend(queue, lease, len).await)
    }
    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        delegate!(self, b => b.release(queue, leases, undo).await)
    }
    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        delegate!(self, b => b.cancel(queue, id).await)
    }
    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        delegate!(self, b => b.cancel_running(queue, id).await)
    }
    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        delegate!(self, b => b.cancelled(queue, leases).await)
    }
    async fn reschedule(&self, queue: &QueueName, id: &JobId, s: Due) -> Result<u64> {
        delegate!(self, b => b.reschedule(queue, id, s).await)
    }
    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        delegate!(self, b => b.wakeups(queue).await)
    }
    async fn stop_polling(&self) {
        delegate!(self, b => b.stop_polling().await)
    }
}

impl Inspect for AnyBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        delegate!(self, b => b.get(queue, id).await)
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        delegate!(self, b => b.queues().await)
    }
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        delegate!(self, b => b.stats(queue).await)
    }
    async fn list(&self, q: &QueueName, page: ListRequest) -> Result<JobPage> {
        delegate!(self, b => b.list(q, page.clone()).await)
    }
    async fn search(&self, q: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        delegate!(self, b => b.search(q, prefix, limit).await)
    }
    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        delegate!(self, b => b.dead_requeue(queue, id).await)
    }
    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        delegate!(self, b => b.dead_requeue_all(queue).await)
    }
    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        delegate!(self, b => b.dead_purge(queue).await)
    }
    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        delegate!(self, b => b.dead_delete(queue, id).await)
    }
    async fn cancel_all(&self, queue: &QueueName, state: ListState) -> Result<u64> {
        delegate!(self, b => b.cancel_all(queue, state).await)
    }
    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        delegate!(self, b => b.set_paused(queue, paused).await)
    }
    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        delegate!(self, b => b.series(queue).await)
    }
    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        delegate!(self, b => b.settings(queue).await)
    }
    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        delegate!(self, b => b.push_queues().await)
    }
    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        delegate!(self, b => b.configure(queue, s.clone()).await)
    }
    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        delegate!(self, b => b.pause_key(q, key, hold).await)
    }
    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<delayq::KeyStats>> {
        delegate!(self, b => b.keys(queue, limit).await)
    }
    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: delayq::KeyJobsRequest,
    ) -> Result<delayq::KeyJobsPage> {
        delegate!(self, b => b.key_jobs(q, key, req.clone()).await)
    }
    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<delayq::KeyCancelled> {
        delegate!(self, b => b.cancel_key(q, key, running).await)
    }
    async fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: delayq::KeyMove,
    ) -> Result<u64> {
        delegate!(self, b => b.reschedule_key(q, key, to).await)
    }
}

impl Schedules for AnyBackend {
    async fn put_schedule(&self, queue: &QueueName, info: ScheduleInfo) -> Result<()> {
        delegate!(self, b => b.put_schedule(queue, info).await)
    }
    async fn schedules(&self, queue: &QueueName) -> Result<Vec<ScheduleInfo>> {
        delegate!(self, b => b.schedules(queue).await)
    }
    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        delegate!(self, b => b.delete_schedule(queue, name).await)
    }
    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        delegate!(self, b => b.scheduled_queues().await)
    }
    async fn clock_ms(&self) -> Result<u64> {
        delegate!(self, b => b.clock_ms().await)
    }
    async fn fire(&self, queue: &QueueName, name: &str, f: Firing) -> Result<bool> {
        delegate!(self, b => b.fire(queue, name, f).await)
    }
}

impl delayq::Batches for AnyBackend {
    async fn put_batch(
        &self,
        queue: &QueueName,
        put: BatchPut,
    ) -> Result<delayq::batch::BatchAdded> {
        delegate!(self, b => b.put_batch(queue, put).await)
    }
    async fn add_to_batch(
        &self,
        queue: &QueueName,
        add: BatchAdd,
    ) -> Result<Option<delayq::batch::BatchAdded>> {
        delegate!(self, b => b.add_to_batch(queue, add).await)
    }
    async fn close_batch(
        &self,
        queue: &QueueName,
        id: &delayq::BatchId,
    ) -> Result<Option<delayq::BatchInfo>> {
        delegate!(self, b => b.close_batch(queue, id).await)
    }
    async fn batch(
        &self,
        queue: &QueueName,
        id: &delayq::BatchId,
    ) -> Result<Option<delayq::BatchInfo>> {
        delegate!(self, b => b.batch(queue, id).await)
    }
    async fn open_batches(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> Result<Vec<delayq::BatchInfo>> {
        delegate!(self, b => b.open_batches(queue, limit).await)
    }
    async fn finish_batches(&self, thorough: bool) -> Result<usize> {
        delegate!(self, b => b.finish_batches(thorough).await)
    }
}
