//! The two traits every store implements: the hot-path [`Backend`] and the admin [`Inspect`].
//! Both speak domain types only; no connection, key or SQL leaks through them.
//!
//! Every method is one atomic transition on the store (one Lua script on Redis). Times are the
//! store's clock; relative delays are turned into due times by the store, never by the caller.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Result;
use crate::job::{
    Ack, AckOutcome, CancelOutcome, Due, Enqueued, Job, JobInfo, LeaseRef, Nack, NackOutcome,
    NewJob, QueueStats,
};
use crate::key_jobs::{KeyCancelled, KeyJobsPage, KeyJobsRequest, KeyMove};
use crate::keyed::{KeyHold, KeyStats};
use crate::listing::{Found, JobPage, ListRequest, ListState};
use crate::name::{JobId, JobKey, QueueName};
use crate::series::QueueSeries;
use crate::settings::QueueSettings;

/// A claim: acknowledge `acks` and lease up to `max` due jobs, in one atomic step.
#[derive(Clone, Debug)]
pub struct ClaimRequest {
    /// Most jobs to lease (0 only acknowledges).
    pub max: usize,
    /// Lease length for jobs that do not carry their own.
    pub lease: Duration,
    /// Finished jobs to acknowledge first, each with its result if it has one.
    pub acks: Vec<Ack>,
}

/// What a claim returned.
#[derive(Clone, Debug, Default)]
pub struct ClaimBatch {
    /// The leased jobs, in due order.
    pub jobs: Vec<Job>,
    /// One outcome per entry of [`ClaimRequest::acks`], in order.
    pub acks: Vec<AckOutcome>,
    /// Time from now (store clock) until the next scheduled job is due or the next lease
    /// expires; `None` when the queue holds neither.
    pub next_due_in: Option<Duration>,
}

/// A claim over several queues in one call ([`Backend::claim_over`]): acknowledge `acks`, each
/// in its queue, then lease up to `max` due jobs from `queues` — shared by weight among those
/// with due jobs, or in the order given — waiting on all of them at once when none has any.
#[derive(Clone, Debug)]
pub struct ClaimOverRequest {
    /// The queues with their weights, in the order given.
    pub queues: Vec<(QueueName, u32)>,
    /// By weight, or strictly in order.
    pub order: crate::QueueOrder,
    /// Most jobs to lease (0 only acknowledges).
    pub max: usize,
    /// Lease length for jobs that do not carry their own.
    pub lease: Duration,
    /// Finished jobs to acknowledge first, each with its queue.
    pub acks: Vec<(QueueName, Ack)>,
}

/// A counter that a backend bumps whenever a queue may have gained an earlier due job (an
/// enqueue, retry or reschedule ahead of the head) or after it lost and regained its
/// notification channel. Consumers wait on `changed()` instead of polling.
pub type Wakeups = watch::Receiver<u64>;

/// The hot path: enqueue, claim, ack, nack, extend, release, cancel, reschedule.
pub trait Backend: Clone + Send + Sync + 'static {
    /// Enqueues a batch atomically per queue. Jobs without an id get a generated one. A job
    /// whose id exists is not written and is reported with `created: false`. Inputs must
    /// already be validated (the [`crate::Producer`] does it).
    fn enqueue(
        &self,
        queue: &QueueName,
        jobs: Vec<NewJob>,
    ) -> impl Future<Output = Result<Vec<Enqueued>>> + Send;

    /// Acknowledges `req.acks`, moves expired leases back to scheduled (or to dead when their
    /// attempts are used up), then leases up to `req.max` due jobs.
    fn claim(
        &self,
        queue: &QueueName,
        req: ClaimRequest,
    ) -> impl Future<Output = Result<ClaimBatch>> + Send;

    /// Whether [`Backend::claim_over`] claims over several queues in one call. A `delayq
    /// serve` does (`POST /v1/claim`: one long poll over all the queues), and a consumer of
    /// several queues then makes one call for all of them; a store whose consumers are woken
    /// by [`Backend::wakeups`] claims queue by queue and answers `false` (the default).
    fn claims_over_queues(&self) -> bool {
        false
    }

    /// One claim over several queues (see [`ClaimOverRequest`]): each job names its queue,
    /// the acks' outcomes come in order. Called only when [`Backend::claims_over_queues`]
    /// says so; the default refuses.
    fn claim_over(&self, req: ClaimOverRequest) -> impl Future<Output = Result<ClaimBatch>> + Send {
        let _ = req;
        async {
            Err(crate::Error::Backend(
                "this store claims one queue at a time".into(),
            ))
        }
    }

    /// Acknowledges finished jobs, each keeping its result (at most
    /// [`crate::limits::MAX_RESULT_BYTES`]; more refuses the call, nothing changed) with the
    /// job while it is retained as done; a job without a retention is deleted. Stale tokens
    /// come back as [`AckOutcome::LeaseLost`]; one outcome per ack, in order.
    fn ack(
        &self,
        queue: &QueueName,
        acks: Vec<Ack>,
    ) -> impl Future<Output = Result<Vec<AckOutcome>>> + Send;

    /// Fails one attempt: retry by backoff (or `retry_in`), or dead-letter when attempts are
    /// used up or `dead` is set. A stale token gives [`crate::Error::LeaseLost`].
    fn nack(
        &self,
        queue: &QueueName,
        lease: LeaseRef,
        nack: Nack,
    ) -> impl Future<Output = Result<NackOutcome>> + Send;

    /// Extends a lease to `lease` from now; returns the new deadline (ms since epoch).
    fn extend(
        &self,
        queue: &QueueName,
        lease: LeaseRef,
        lease_len: Duration,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Gives leases back without counting them as attempts when `undo_attempt` is set (jobs
    /// claimed but never started); the jobs are due again at once. Stale tokens are ignored.
    fn release(
        &self,
        queue: &QueueName,
        leases: Vec<LeaseRef>,
        undo_attempt: bool,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Removes a scheduled job; reports what it found.
    fn cancel(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> impl Future<Output = Result<CancelOutcome>> + Send;

    /// Cancels a job whatever it is doing: a scheduled one as [`Backend::cancel`] does, a
    /// leased one ended cancelled at once ([`CancelOutcome::Cancelling`]: its record gone, its
    /// batch told, its lease refused from now on with [`crate::Error::Cancelled`]) — its
    /// consumer hears of it from [`Backend::cancelled`] or its next extend (see
    /// [`crate::cancellation`]).
    fn cancel_running(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> impl Future<Output = Result<CancelOutcome>> + Send;

    /// For each of `leases`, in order: whether it was cancelled while its job ran
    /// ([`Backend::cancel_running`]), as far as the store still remembers
    /// ([`crate::cancellation::REMEMBERED_FOR`] past the lease's deadline). A lease of the same
    /// job under another token was not.
    fn cancelled(
        &self,
        queue: &QueueName,
        leases: Vec<LeaseRef>,
    ) -> impl Future<Output = Result<Vec<bool>>> + Send;

    /// Moves a scheduled job to a new due time; returns it (ms since epoch).
    fn reschedule(
        &self,
        queue: &QueueName,
        id: &JobId,
        schedule: Due,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Wake-ups for consumers of `queue`; returns once the notification channel is live.
    fn wakeups(&self, queue: &QueueName) -> impl Future<Output = Result<Wakeups>> + Send;

    /// Stops waiting in claims: a claim in flight that waits (a remote server's long poll)
    /// answers now, and later claims do not wait. A consumer calls it when its shutdown
    /// future completes during a claim. The default does nothing: a store whose claims never
    /// wait (consumers are woken by [`Backend::wakeups`]).
    fn stop_polling(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// The admin side: read state and manage dead letters.
pub trait Inspect: Clone + Send + Sync + 'static {
    /// One job, in any state; `None` when it does not exist.
    fn get(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> impl Future<Output = Result<Option<JobInfo>>> + Send;

    /// Every queue that holds jobs, sorted by name.
    fn queues(&self) -> impl Future<Output = Result<Vec<QueueName>>> + Send;

    /// Counts of one queue.
    fn stats(&self, queue: &QueueName) -> impl Future<Output = Result<QueueStats>> + Send;

    /// A page of the jobs in `page.state`, in listing order (see [`crate::listing`]), at most
    /// `page.limit` (1–[`crate::listing::MAX_PAGE`]) starting strictly after `page.after`.
    fn list(
        &self,
        queue: &QueueName,
        page: ListRequest,
    ) -> impl Future<Output = Result<JobPage>> + Send;

    /// Jobs whose id starts with `prefix`, any state, at most `limit`, by id — where the store
    /// can search by prefix cheaply; otherwise the job whose id is exactly `prefix`.
    fn search(
        &self,
        queue: &QueueName,
        prefix: &str,
        limit: usize,
    ) -> impl Future<Output = Result<Found>> + Send;

    /// Puts one dead job back, due now, with its attempts reset.
    fn dead_requeue(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Puts every dead job back; returns how many.
    fn dead_requeue_all(&self, queue: &QueueName) -> impl Future<Output = Result<u64>> + Send;

    /// Deletes every dead job; returns how many.
    fn dead_purge(&self, queue: &QueueName) -> impl Future<Output = Result<u64>> + Send;

    /// Deletes one dead job. Another state gives [`crate::Error::WrongState`].
    fn dead_delete(&self, queue: &QueueName, id: &JobId)
    -> impl Future<Output = Result<()>> + Send;

    /// Cancels every waiting job of `state` ([`ListState::Scheduled`] or [`ListState::Due`]);
    /// returns how many. Each store step is atomic, the whole is not: jobs that arrive
    /// meanwhile may stay.
    fn cancel_all(
        &self,
        queue: &QueueName,
        state: ListState,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Pauses (`true`) or resumes a queue. A paused queue accepts jobs, leases none and still
    /// recovers expired leases; resuming wakes its consumers. Kept in the store, so every
    /// consumer of every process obeys it.
    fn set_paused(
        &self,
        queue: &QueueName,
        paused: bool,
    ) -> impl Future<Output = Result<()>> + Send;

    /// The queue's throughput and lateness over the last hour, and totals.
    fn series(&self, queue: &QueueName) -> impl Future<Output = Result<QueueSeries>> + Send;

    /// Queues delivered by HTTP push: those with a default target in their settings and those
    /// a job carrying a target was enqueued into (see [`crate::target`]).
    fn push_queues(&self) -> impl Future<Output = Result<Vec<QueueName>>> + Send;

    /// The queue's stored settings (the defaults when none were stored).
    fn settings(&self, queue: &QueueName) -> impl Future<Output = Result<QueueSettings>> + Send;

    /// Stores the queue's settings and returns them. Changing the shard count of a queue that
    /// holds jobs is refused with [`crate::Error::Conflict`]; a store without shards refuses
    /// more than one with [`crate::InvalidInput::Settings`].
    fn configure(
        &self,
        queue: &QueueName,
        settings: QueueSettings,
    ) -> impl Future<Output = Result<QueueSettings>> + Send;

    /// Holds `key`'s due jobs in queue `q` (or lifts the hold: [`KeyHold::Lifted`]); the
    /// other keys' jobs are claimed meanwhile. Returns the hold's end (ms since the epoch;
    /// `None`: no hold).
    fn pause_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        hold: KeyHold,
    ) -> impl Future<Output = Result<Option<u64>>> + Send;

    /// The keys of `queue` with jobs in flight, due or held, busiest first, at most `limit`.
    fn keys(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<KeyStats>>> + Send;

    /// A page of `key`'s jobs in queue `q`, by id (see [`crate::key_jobs`]): cost in
    /// proportion to the key's jobs, not the queue's.
    fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: KeyJobsRequest,
    ) -> impl Future<Output = Result<KeyJobsPage>> + Send;

    /// Cancels every scheduled and due job of `key` in queue `q` — with `running` its leased
    /// ones too, each as [`Backend::cancel_running`] does. Atomic per shard; dead and done jobs
    /// stay.
    fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> impl Future<Output = Result<KeyCancelled>> + Send;

    /// Moves every scheduled and due job of `key` in queue `q` (see [`KeyMove`]); returns how
    /// many moved. Atomic per shard; leased, dead and done jobs stay.
    fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: KeyMove,
    ) -> impl Future<Output = Result<u64>> + Send;
}

/// Acknowledges finished jobs of several queues, one [`Backend::ack`] call per queue (a
/// claim over several queues that a store answers queue by queue); the outcomes in the order
/// given.
pub async fn ack_each<B: Backend>(
    backend: &B,
    acks: Vec<(QueueName, Ack)>,
) -> Result<Vec<AckOutcome>> {
    per_queue(acks, |q, a| async move { backend.ack(&q, a).await }).await
}

/// [`Backend::cancelled`] over leases of several queues, one call per queue; the answers in
/// the order given.
pub async fn cancelled_each<B: Backend>(
    backend: &B,
    leases: Vec<(QueueName, LeaseRef)>,
) -> Result<Vec<bool>> {
    per_queue(leases, |q, l| async move { backend.cancelled(&q, l).await }).await
}

/// Calls `call` once per queue with that queue's items (the queues in the order they first
/// appear) and puts its answers, one per item, back in the order the items were given.
async fn per_queue<T, R, F, Fut>(items: Vec<(QueueName, T)>, mut call: F) -> Result<Vec<R>>
where
    F: FnMut(QueueName, Vec<T>) -> Fut,
    Fut: Future<Output = Result<Vec<R>>>,
{
    let n = items.len();
    let mut groups: Vec<(QueueName, Vec<usize>, Vec<T>)> = Vec::new();
    for (i, (q, item)) in items.into_iter().enumerate() {
        match groups.iter_mut().find(|(g, _, _)| *g == q) {
            Some((_, pos, mine)) => {
                pos.push(i);
                mine.push(item);
            }
            None => groups.push((q, vec![i], vec![item])),
        }
    }
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(n).collect();
    for (q, pos, mine) in groups {
        for (p, r) in pos.into_iter().zip(call(q, mine).await?) {
            out[p] = Some(r);
        }
    }
    out.into_iter()
        .map(|r| {
            r.ok_or_else(|| crate::Error::Backend("a store answered fewer items than given".into()))
        })
        .collect()
}

/// Jobs of `state` from position `offset`, at most `limit`, walking the cursor listing: the
/// offset-paged dead-letter list of the API and the CLI.
pub async fn skip_take<B: Inspect>(
    b: &B,
    queue: &QueueName,
    state: ListState,
    offset: usize,
    limit: usize,
) -> Result<Vec<JobInfo>> {
    let mut out = Vec::new();
    let (mut skip, mut after) = (offset, None);
    while out.len() < limit {
        let want = (skip + limit - out.len()).min(crate::listing::MAX_PAGE);
        let page = b.list(queue, ListRequest::new(state, want, after)).await?;
        let dropped = skip.min(page.jobs.len());
        skip -= dropped;
        out.extend(page.jobs.into_iter().skip(dropped));
        after = page.next;
        if after.is_none() {
            break;
        }
    }
    out.truncate(limit);
    Ok(out)
}
