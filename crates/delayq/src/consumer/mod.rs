//! The consumer engine: claims due jobs under fenced leases, runs a [`Handler`] on each with a
//! concurrency limit, acknowledges or fails them, extends long leases, sleeps until the next
//! due time (woken early by the backend), and drains gracefully.
//!
//! One loop owns all state. Acknowledgements of finished jobs ride on the next claim, so with
//! concurrency 1 a job costs one round trip: "ack this, give me the next" — or, with
//! [`ConsumerOptions::prefetch`], a fraction of one: a claim leases jobs beyond the free slots,
//! which wait locally (held) under their lease until a slot frees. Beside a slow claim (a
//! remote server's long poll), and once the oldest pending ack has waited [`ACK_WITHIN`]
//! while held jobs keep the consumer from claiming, acks go on their own, so finished jobs are
//! not left leased (a consumer killed then would see them run again).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::{JoinError, JoinSet};
use tokio::time::{Instant, sleep, sleep_until};

use crate::backend::{Backend, ClaimBatch, ClaimRequest};
use crate::clock::{SharedClock, SystemClock};
use crate::error::Result;
use crate::handler::Handler;
use crate::instrumented::Instrumented;
use crate::job::{Ack, AckOutcome, Job, LeaseRef, NackOutcome, validate_lease};
use crate::name::QueueName;
use crate::otel::TraceMode;

mod acks;
mod attempt;
mod cancels;
mod sources;

use acks::{Acked, ack_finished};
use attempt::{Outcome, process_span, run_job};
use cancels::{Running, RunningJob, WatchTask};

pub use sources::QueueOrder;
use sources::Sources;

/// How a [`Consumer`] runs.
#[derive(Clone)]
pub struct ConsumerOptions {
    /// Handlers running at once.
    pub concurrency: usize,
    /// Lease length for jobs that do not carry their own. Leases of running handlers are
    /// extended every third of it.
    pub lease: Duration,
    /// Most jobs leased per claim.
    pub batch: usize,
    /// On shutdown, how long running handlers may take before they are aborted and their
    /// leases released.
    pub shutdown_grace: Duration,
    /// Longest sleep without asking the backend, a safety net under the wake-up channel.
    /// It is not a polling interval: a consumer is woken when a job becomes due or an earlier
    /// one arrives.
    pub max_idle: Duration,
    /// Local clock for lateness measurements.
    pub clock: SharedClock,
    /// Most due jobs leased beyond the free handler slots and held locally until a slot
    /// frees, so that one claim serves several jobs (and, at concurrency 1, the next jobs are
    /// already here when a handler returns). Fewer when handlers are slow: the held jobs are
    /// at most [`PREFETCH_BUDGET`] of work per slot at the handlers' recent pace (none before a
    /// first job finished, none with handlers slower than the budget), so a consumer never
    /// sits on work another could start. A claim refills the held jobs when they are down to
    /// half. Held jobs keep their lease: one held for a third of its lease is given back (the
    /// attempt not counted), and shutdown gives every held job back at once. 0: lease only
    /// what can start now.
    pub prefetch: usize,
    /// How long a handler whose job was cancelled while it ran may take to stop (its
    /// [`crate::Job::cancellation`] fired) before it is dropped.
    pub cancel_grace: Duration,
    /// Whether an attempt's `process` span is a child of the job's creation context or
    /// links to it (takes effect with an OpenTelemetry layer, feature `otel`).
    pub trace_mode: TraceMode,
}

/// [`ConsumerOptions::prefetch`] by default (docs/BENCHMARKS.md, W2).
pub const DEFAULT_PREFETCH: usize = 64;

/// [`ConsumerOptions::cancel_grace`] by default.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(10);

/// How much work, at the handlers' recent pace, a consumer may hold per handler slot.
pub const PREFETCH_BUDGET: Duration = Duration::from_millis(50);

impl Default for ConsumerOptions {
    fn default() -> Self {
        Self {
            concurrency: 10,
            lease: Duration::from_secs(30),
            batch: 100,
            shutdown_grace: Duration::from_secs(30),
            max_idle: Duration::from_secs(30),
            clock: Arc::new(SystemClock),
            prefetch: DEFAULT_PREFETCH,
            trace_mode: TraceMode::Child,
            cancel_grace: DEFAULT_CANCEL_GRACE,
        }
    }
}

/// Counts of one [`Consumer::run`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Jobs claimed.
    pub claimed: u64,
    /// Jobs acknowledged.
    pub acked: u64,
    /// Failed attempts scheduled for retry.
    pub retried: u64,
    /// Jobs dead-lettered by this consumer.
    pub dead: u64,
    /// Acks, nacks or extensions refused because the lease was lost.
    pub lease_lost: u64,
    /// Handlers aborted at the end of the shutdown grace period.
    pub aborted: u64,
    /// Jobs given back without counting the attempt ([`crate::Failure::give_back`]).
    pub given_back: u64,
    /// Claims that leased jobs (round trips for new work).
    pub claims: u64,
    /// Prefetched jobs given back unstarted (held too long, or at shutdown).
    pub released: u64,
    /// Jobs cancelled while their handlers ran (`DELETE …?running=true`).
    pub cancelled: u64,
}

/// Runs a handler over the due jobs of one queue, or of several shared by weight or in strict
/// order ([`Consumer::over`]).
pub struct Consumer<B> {
    backend: Instrumented<B>,
    /// The queues with their weights, in the order given (at least one).
    queues: Vec<(QueueName, u32)>,
    order: QueueOrder,
    opts: ConsumerOptions,
}

impl<B: Backend> Consumer<B> {
    /// A consumer of `queue`; checks the options.
    pub fn new(backend: B, queue: QueueName, opts: ConsumerOptions) -> Result<Self> {
        Self::over(backend, vec![(queue, 1)], QueueOrder::Weighted, opts)
    }

    /// A consumer of several queues sharing its slots: among the queues with due jobs, claims
    /// go by weight ([`QueueOrder::Weighted`]: each queue its weight's share over many claims)
    /// or in the order given ([`QueueOrder::Strict`]: a queue is served only while every one
    /// before it has nothing due). A wake-up of any queue wakes the consumer; each queue's
    /// pause, rate and in-flight limits hold as they do for a consumer of it alone. Refuses
    /// an empty list, a weight of 0 and a queue named twice.
    pub fn over(
        backend: B,
        queues: Vec<(QueueName, u32)>,
        order: QueueOrder,
        opts: ConsumerOptions,
    ) -> Result<Self> {
        validate_lease(opts.lease)?;
        if opts.concurrency == 0 || opts.batch == 0 {
            return Err(
                crate::InvalidInput::Batch("concurrency and batch must be >= 1".into()).into(),
            );
        }
        let bad = |m: String| Err(crate::InvalidInput::Queues(m).into());
        if queues.is_empty() {
            return bad("a consumer serves at least one queue".into());
        }
        for (i, (q, w)) in queues.iter().enumerate() {
            if *w == 0 || *w > MAX_WEIGHT {
                return bad(format!("queue {q}: weight {w} is outside 1-{MAX_WEIGHT}"));
            }
            if queues[..i].iter().any(|(other, _)| other == q) {
                return bad(format!("queue {q} is named twice"));
            }
        }
        Ok(Self {
            backend: Instrumented::with_clock(backend, opts.clock.clone()),
            queues,
            order,
            opts,
        })
    }

    /// Runs until `shutdown` completes, then stops claiming, lets running handlers finish
    /// within [`ConsumerOptions::shutdown_grace`], aborts the rest and releases their leases.
    ///
    /// Backend outages do not end the run: the consumer retries with backoff and resumes.
    pub async fn run<H: Handler>(
        self,
        handler: H,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<RunReport> {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut run = Run::new(self, Arc::new(handler));
        // Told to stop waiting when the shutdown future completes during a claim.
        let backend = run.c.backend.clone();
        loop {
            run.settle_finished();
            run.start_held();
            run.release_held(false).await;
            run.subscribe().await;
            // A claim may wait (a remote server's long poll): the shutdown future is watched
            // beside it, and when it completes the backend stops the wait, so the claim answers
            // at once and the run ends (its jobs are handled or given back by the drain).
            let mut stopping = false;
            let claimed = {
                let claim = run.claim();
                let mut claim = std::pin::pin!(claim);
                tokio::select! {
                    r = &mut claim => r,
                    _ = &mut shutdown => {
                        stopping = true;
                        backend.stop_polling().await;
                        claim.await
                    }
                }
            };
            if stopping {
                break;
            }
            if let Err(retry_in) = claimed {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = sleep(retry_in) => continue,
                }
            }
            // Acks of jobs that finished while the claim was in flight go out before any wait:
            // they may be what frees the slots (max_in_flight) every consumer waits for.
            if run.must_claim() || run.must_flush().is_some() {
                continue;
            }
            tokio::select! {
                _ = &mut shutdown => break,
                () = run.wait() => {}
            }
        }
        Ok(run.drain().await)
    }
}

/// The largest weight a queue of [`Consumer::over`] may have.
pub const MAX_WEIGHT: u32 = 1000;

/// The state of one [`Consumer::run`], and its steps: settle finished jobs, subscribe to
/// wake-ups, claim (acknowledging finished jobs on the way), wait, drain.
struct Run<B, H> {
    c: Consumer<B>,
    handler: Arc<H>,
    report: RunReport,
    /// Running job tasks (what they report, how long they ran); each has its lease in
    /// `running` until it settles.
    tasks: JoinSet<(Outcome, Duration)>,
    /// Handler time, smoothed over the recent jobs (none finished yet: `None`).
    pace: Option<Duration>,
    /// Prefetched jobs waiting for a slot, with when they were leased.
    held: VecDeque<(Job, Instant)>,
    /// Held jobs went stale (handlers slower than a third of a lease): prefetch nothing more
    /// until a running job finishes.
    prefetch_paused: bool,
    /// Each running job's queue (index in `src`), lease and cancellation signal (read by the
    /// watch that asks which were cancelled).
    running: Running,
    /// The served queues: pending acks, wake-ups, which may have due jobs.
    src: Sources,
    retry_delay: Duration,
    /// The task that asks which running jobs were cancelled.
    _watch: WatchTask,
}

/// An ack call beside a slow claim: it answers with the queue, what was acknowledged and what
/// must go again (see [`ack_finished`]).
type AckCall = futures::future::BoxFuture<'static, (usize, Acked)>;

const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(2);
/// Beside a claim in flight longer than this, finished jobs' acks go on their own (a Redis or
/// embedded claim takes well under it; a remote server's long poll far longer).
const SLOW_CLAIM: Duration = Duration::from_millis(20);
/// Longest a finished job's ack waits for a claim to carry it while prefetched jobs keep the
/// consumer busy: past it the acks go on their own, so a killed consumer's finished jobs are
/// not run again (they would be, leased, once the lease expired).
pub const ACK_WITHIN: Duration = Duration::from_millis(20);

impl<B: Backend, H: Handler> Run<B, H> {
    fn new(c: Consumer<B>, handler: Arc<H>) -> Self {
        let running = Running::default();
        let names = c.queues.iter().map(|(q, _)| q.clone()).collect();
        Self {
            _watch: running.watch(c.backend.clone(), names),
            running: running.clone(),
            src: Sources::new(&c.queues, c.order),
            c,
            handler,
            report: RunReport::default(),
            tasks: JoinSet::new(),
            pace: None,
            held: VecDeque::new(),
            prefetch_paused: false,
            retry_delay: FIRST_RETRY,
        }
    }

    fn free(&self) -> usize {
        self.c.opts.concurrency - self.tasks.len()
    }

    /// How many jobs a claim should lease: the free slots plus the prefetch, less what is
    /// held.
    fn want(&self) -> usize {
        (self.free() + self.prefetch()).saturating_sub(self.held.len())
    }

    /// How many jobs may be held now: the option, bounded by [`PREFETCH_BUDGET`] of work per
    /// slot at the recent handler pace.
    fn prefetch(&self) -> usize {
        let max = self.c.opts.prefetch;
        if self.prefetch_paused || max == 0 {
            return 0;
        }
        match self.pace {
            None => 0,
            Some(d) if d.is_zero() => max,
            Some(d) => {
                let budget = PREFETCH_BUDGET.as_nanos() * self.c.opts.concurrency as u128;
                max.min((budget / d.as_nanos()) as usize)
            }
        }
    }

    /// The queue whose pending acks go out on their own now: nothing held is left to start
    /// (about to wait), many are pending, or the oldest has waited [`ACK_WITHIN`]; otherwise
    /// they ride on the next claim of their queue that leases.
    fn must_flush(&self) -> Option<usize> {
        self.src.must_flush(self.held.is_empty(), self.c.opts.batch)
    }

    /// Takes queue `i`'s pending acks (for a call that carries them).
    fn take_acks(&mut self, i: usize) -> Vec<Ack> {
        let s = &mut self.src.list[i];
        s.acks_since = None;
        std::mem::take(&mut s.acks)
    }

    /// Whether due jobs may be waiting and this consumer wants some: a free slot with nothing
    /// held, or held jobs down to half the prefetch. Claim again at once.
    fn must_claim(&self) -> bool {
        self.src.any_due() && self.want() > 0 && self.held.len() <= self.prefetch() / 2
    }

    /// Starts held jobs while slots are free.
    fn start_held(&mut self) {
        while self.free() > 0 {
            let Some((job, _)) = self.held.pop_front() else {
                break;
            };
            self.spawn(job);
        }
    }

    fn spawn(&mut self, job: Job) {
        use tracing::Instrument;
        let lease = job.lease_ref();
        let i = self.src.index(&job.queue);
        let span = process_span(&job, self.c.opts.trace_mode);
        let cancellation = job.cancellation.clone();
        let grace = self.c.opts.cancel_grace;
        let task = run_job(self.handler.clone(), self.c.backend.clone(), job, grace)
            .instrument(span.clone());
        let handle = self.tasks.spawn(async move {
            let started = Instant::now();
            let outcome = task.await;
            span.record("delayq.outcome", outcome.name());
            if !matches!(outcome, Outcome::Ack(..)) {
                span.record("error.type", outcome.name());
                span.record("otel.status_code", "ERROR");
            }
            (outcome, started.elapsed())
        });
        self.running.lock().insert(
            handle.id(),
            RunningJob {
                queue: i,
                lease,
                cancellation,
            },
        );
    }

    /// When the first held job will have waited a third of its lease.
    fn next_stale(&self) -> Option<Instant> {
        self.held.iter().map(|(j, at)| *at + j.lease / 3).min()
    }

    /// Gives back held jobs that waited a third of their lease (all of them with `all`),
    /// without counting the attempt: due again at once, for this or another consumer.
    async fn release_held(&mut self, all: bool) {
        let now = Instant::now();
        // Called every turn of the loop: nothing to do unless one is stale.
        if !all && self.next_stale().is_none_or(|t| t > now) {
            return;
        }
        let (stale, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(j, at)| all || *at + j.lease / 3 <= now);
        self.held = keep.into();
        if stale.is_empty() {
            return;
        }
        self.report.released += stale.len() as u64;
        self.prefetch_paused = true;
        for s in &self.src.list {
            let leases: Vec<LeaseRef> = stale
                .iter()
                .filter(|(j, _)| self.src.list.len() == 1 || j.queue == s.queue)
                .map(|(j, _)| j.lease_ref())
                .collect();
            if leases.is_empty() {
                continue;
            }
            if let Err(e) = self.c.backend.release(&s.queue, leases, true).await {
                tracing::warn!(queue = %s.queue, error = %e, "releasing held jobs failed; their leases will expire");
            }
        }
    }

    /// Settles every job task that has finished.
    fn settle_finished(&mut self) {
        while let Some(res) = self.tasks.try_join_next_with_id() {
            self.settle(res);
        }
    }

    /// Subscribes to wake-ups when not subscribed (after a start or a lost channel).
    async fn subscribe(&mut self) {
        for s in &mut self.src.list {
            if s.wake.is_none() {
                match self.c.backend.wakeups(&s.queue).await {
                    Ok(w) => s.wake = Some(w),
                    Err(e) => {
                        tracing::warn!(queue = %s.queue, error = %e, "wake-up channel unavailable")
                    }
                }
            }
        }
    }

    /// One claim: acknowledges finished jobs and leases as many due jobs as there are free
    /// slots, starting a task for each. `Err(retry_in)` when the backend failed (the acks are
    /// kept for the next try).
    async fn claim(&mut self) -> std::result::Result<(), Duration> {
        if self.src.list.len() > 1 && self.c.backend.claims_over_queues() {
            return self.claim_over().await;
        }
        // The queue asked: one that may have due jobs (by weight or order) when this consumer
        // wants jobs, else one whose acks must go out.
        let picked = if self.must_claim() {
            self.src.pick()
        } else {
            None
        };
        let lease_jobs = picked.is_some();
        let Some(i) = picked.or_else(|| self.must_flush()) else {
            return Ok(());
        };
        // A wake-up is taken as seen only by a claim that leases: an ack-only flush may itself
        // make jobs due (a dependent released by its dependency's ack) and must not swallow
        // the wake-up that says so.
        if lease_jobs && let Some(w) = self.src.list[i].wake.as_mut() {
            w.borrow_and_update();
        }
        self.src.moves.mark();
        let max = if lease_jobs {
            self.want().min(self.c.opts.batch)
        } else {
            0
        };
        // The pending acks (with their results) ride on the claim.
        let req = ClaimRequest {
            max,
            lease: self.c.opts.lease,
            acks: self.take_acks(i),
        };
        let sent = req.acks.clone();
        let (backend, queue) = (self.c.backend.clone(), self.src.list[i].queue.clone());
        let result = self
            .beside(async move { backend.claim(&queue, req).await })
            .await;
        match result {
            Ok(batch) => {
                self.claimed(&batch, max);
                if lease_jobs {
                    // A full batch means more may be due; otherwise sleep towards the next.
                    self.src.claimed(
                        i,
                        max,
                        batch.jobs.len(),
                        batch.next_due_in,
                        self.c.opts.max_idle,
                    );
                }
                self.start_jobs(batch.jobs);
                Ok(())
            }
            Err(e) => {
                self.ack_again(i, sent);
                Err(self.claim_failed(&self.src.list[i].queue.to_string(), &e))
            }
        }
    }

    /// One claim over all the queues, for a store that waits on all of them in one call
    /// ([`Backend::claims_over_queues`]: a `delayq serve`, whose `POST /v1/claim` shares by
    /// weight or strict order and long-polls them at once): every queue's pending acks ride
    /// on it.
    async fn claim_over(&mut self) -> std::result::Result<(), Duration> {
        let lease_jobs = self.must_claim();
        if !lease_jobs && self.must_flush().is_none() {
            return Ok(());
        }
        let max = if lease_jobs {
            self.want().min(self.c.opts.batch)
        } else {
            0
        };
        let mut acks = Vec::new();
        for i in 0..self.src.list.len() {
            let q = self.src.list[i].queue.clone();
            acks.extend(self.take_acks(i).into_iter().map(|a| (q.clone(), a)));
        }
        let req = crate::ClaimOverRequest {
            queues: self.c.queues.clone(),
            order: self.c.order,
            max,
            lease: self.c.opts.lease,
            acks: acks.clone(),
        };
        let backend = self.c.backend.clone();
        let result = self
            .beside(async move { backend.claim_over(req).await })
            .await;
        match result {
            Ok(batch) => {
                self.claimed(&batch, max);
                if lease_jobs {
                    // The server chose among the queues: they share what the answer says.
                    let got = batch.jobs.len();
                    for i in 0..self.src.list.len() {
                        self.src
                            .claimed(i, max, got, batch.next_due_in, self.c.opts.max_idle);
                    }
                }
                self.start_jobs(batch.jobs);
                Ok(())
            }
            Err(e) => {
                for (q, a) in acks {
                    let i = self.src.index(&q);
                    self.ack_again(i, vec![a]);
                }
                Err(self.claim_failed("(several)", &e))
            }
        }
    }

    /// Counts what a claim answered.
    fn claimed(&mut self, batch: &ClaimBatch, max: usize) {
        self.retry_delay = FIRST_RETRY;
        self.count_acks(&batch.acks);
        self.report.claimed += batch.jobs.len() as u64;
        if max > 0 {
            self.report.claims += 1;
        }
    }

    /// Starts the jobs a claim leased while slots are free, and holds the rest.
    fn start_jobs(&mut self, jobs: Vec<Job>) {
        let now = Instant::now();
        for job in jobs {
            if self.free() > 0 {
                self.spawn(job);
            } else {
                self.held.push_back((job, now));
            }
        }
    }

    /// Logs a failed claim; how long to wait before the next try (backing off).
    fn claim_failed(&mut self, queue: &str, e: &crate::Error) -> Duration {
        let retry_in = self.retry_delay;
        tracing::warn!(queue, error = %e, ?retry_in, "claim failed");
        self.retry_delay = (retry_in * 2).min(LAST_RETRY);
        retry_in
    }

    /// Runs a claim `call` while the jobs it does not wait for go on: finished jobs settle,
    /// held ones start and — once it is slow — pending acks go on their own.
    async fn beside<T>(&mut self, call: impl Future<Output = T>) -> T {
        let mut call = std::pin::pin!(call);
        // A claim in flight does not idle the slots: finished jobs settle and held ones start
        // beside it (W2 ran 6-40 % faster at every concurrency, with fewer commands per job;
        // their acks ride on the next claim). A slow claim (a remote server's long poll, a
        // slow network) must not keep finished jobs leased until it returns either: past
        // SLOW_CLAIM their acks go on their own (one ack call in flight at a time; those
        // finishing meanwhile go with the next).
        let mut slow = std::pin::pin!(sleep(SLOW_CLAIM));
        let mut is_slow = false;
        let mut acking: Option<AckCall> = None;
        // After a failed ack call the acks wait for the next claim (no retry loop meanwhile).
        let mut ack_failed = false;
        let result = loop {
            tokio::select! {
                r = &mut call => break r,
                () = &mut slow, if !is_slow => {
                    is_slow = true;
                    acking = self.ack_alone();
                }
                Some(res) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    self.settle(res);
                    self.start_held();
                    if is_slow && acking.is_none() && !ack_failed {
                        acking = self.ack_alone();
                    }
                }
                (j, acked) = async { acking.as_mut().expect("guarded").await }, if acking.is_some() => {
                    ack_failed = !self.acked_alone(j, acked);
                    acking = if ack_failed { None } else { self.ack_alone() };
                }
            }
        };
        if let Some(call) = acking {
            let (j, acked) = call.await;
            self.acked_alone(j, acked);
        }
        result
    }

    /// An ack call of the pending acks on their own, beside a slow claim (`None` when there
    /// are none).
    fn ack_alone(&mut self) -> Option<AckCall> {
        let i = self.src.list.iter().position(|s| !s.acks.is_empty())?;
        let finished = self.take_acks(i);
        let (backend, queue) = (self.c.backend.clone(), self.src.list[i].queue.clone());
        Some(Box::pin(async move {
            (i, ack_finished(&backend, &queue, finished).await)
        }))
    }

    /// Counts what an ack call of queue `i` answered; what failed goes again with the next
    /// call. Whether it all went through.
    fn acked_alone(&mut self, i: usize, acked: Acked) -> bool {
        self.count_acks(&acked.outcomes);
        match acked.error {
            None => true,
            Some(e) => {
                tracing::warn!(queue = %self.src.list[i].queue, error = %e, "ack failed; retried with the next call");
                self.ack_again(i, acked.again);
                false
            }
        }
    }

    /// The acks of a failed call (a claim's or an ack call's) go again with the next call,
    /// before those of jobs that finished meanwhile.
    fn ack_again(&mut self, i: usize, acks: Vec<Ack>) {
        let s = &mut self.src.list[i];
        let meanwhile = std::mem::replace(&mut s.acks, acks);
        s.acks.extend(meanwhile);
        if !s.acks.is_empty() {
            // (Not due at once: a failed call is retried with the next claim, not in a loop.)
            s.acks_since.get_or_insert_with(Instant::now);
        }
    }

    /// Waits for a job to finish, a wake-up, or the next due time; then claims again.
    async fn wait(&mut self) {
        // No free slot (claim_now): only a finished job or a wake-up matters, so no timer is
        // set — at concurrency 1 that is every job.
        let deadline = self.src.deadline();
        let stale = self.next_stale();
        let acks_due = self.src.acks_due();
        tokio::select! {
            // A finished job frees a slot: claim for it (with its ack) unless held jobs are
            // there to fill it — a queue drained by a partial claim is not asked again for
            // each held job that finishes; the next due time or a wake-up asks.
            Some(res) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                let i = self.settle(res);
                if self.held.is_empty() {
                    // The finished job's queue may have more (the one that freed the slot).
                    if let Some(i) = i {
                        self.src.list[i].claim_now = true;
                    }
                }
            }
            _ = sleep_until(stale.unwrap_or_else(Instant::now)), if stale.is_some() => {}
            // Finished jobs' acks waited long enough for a claim: the loop sends them.
            _ = sleep_until(acks_due.unwrap_or_else(Instant::now)), if acks_due.is_some() => {}
            () = self.src.wait(deadline) => {}
        }
    }

    /// Shutdown: wait for running handlers within the grace period, abort the rest, flush
    /// acknowledgements and release the aborted jobs' leases.
    async fn drain(mut self) -> RunReport {
        self.release_held(true).await;
        let deadline = Instant::now() + self.c.opts.shutdown_grace;
        loop {
            tokio::select! {
                res = self.tasks.join_next_with_id() => match res {
                    Some(res) => {
                        self.settle(res);
                    }
                    None => break,
                },
                _ = sleep_until(deadline) => break,
            }
        }
        self.tasks.abort_all();
        while let Some(res) = self.tasks.join_next_with_id().await {
            self.settle(res);
        }
        for i in 0..self.src.list.len() {
            for attempt in 0..5 {
                let s = &mut self.src.list[i];
                if s.acks.is_empty() {
                    break;
                }
                let finished = std::mem::take(&mut s.acks);
                let acked = ack_finished(&self.c.backend, &s.queue, finished).await;
                self.count_acks(&acked.outcomes);
                self.src.list[i].acks = acked.again;
                if let Some(e) = acked.error {
                    tracing::warn!(error = %e, attempt, "final ack failed");
                    sleep(Duration::from_millis(100 << attempt)).await;
                }
            }
        }
        let aborted: Vec<(usize, LeaseRef)> = std::mem::take(&mut *self.running.lock())
            .into_values()
            .map(|r| (r.queue, r.lease))
            .collect();
        self.report.aborted += aborted.len() as u64;
        for (i, s) in self.src.list.iter().enumerate() {
            let leases: Vec<LeaseRef> = aborted
                .iter()
                .filter(|(q, _)| *q == i)
                .map(|(_, l)| l.clone())
                .collect();
            if leases.is_empty() {
                continue;
            }
            if let Err(e) = self.c.backend.release(&s.queue, leases, false).await {
                tracing::warn!(queue = %s.queue, error = %e, "releasing aborted jobs failed; their leases will expire");
            }
        }
        self.report
    }

    /// Counts a finished job task; answers its queue (index), `None` for an aborted task.
    fn settle(
        &mut self,
        res: std::result::Result<(tokio::task::Id, (Outcome, Duration)), JoinError>,
    ) -> Option<usize> {
        match res {
            Ok((id, (outcome, took))) => {
                let i = self.running.lock().remove(&id).map_or(0, |r| r.queue);
                self.prefetch_paused = false;
                // Smoothed over roughly the last 8 jobs.
                self.pace = Some(self.pace.map_or(took, |p| (p * 7 + took) / 8));
                match outcome {
                    Outcome::Ack(lease, result) => {
                        let s = &mut self.src.list[i];
                        if s.acks.is_empty() {
                            s.acks_since = Some(Instant::now());
                        }
                        s.acks.push(Ack { lease, result });
                    }
                    Outcome::Nacked(NackOutcome::Retrying { .. }) => self.report.retried += 1,
                    Outcome::Nacked(NackOutcome::Dead { .. }) => self.report.dead += 1,
                    Outcome::LeaseLost => self.report.lease_lost += 1,
                    Outcome::GivenBack => self.report.given_back += 1,
                    Outcome::Cancelled => self.report.cancelled += 1,
                    Outcome::Unresolved => {}
                }
                Some(i)
            }
            // Aborted at the end of the grace period: the lease stays in `running` and is
            // released by `drain`.
            Err(e) if e.is_cancelled() => None,
            Err(e) => {
                // run_job catches handler panics; reaching here is a bug in the engine. The
                // lease expires and the job is delivered again.
                let i = self.running.lock().remove(&e.id()).map(|r| r.queue);
                tracing::error!(error = %e, "job task failed");
                i
            }
        }
    }

    fn count_acks(&mut self, outcomes: &[AckOutcome]) {
        let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count() as u64;
        let cancelled = outcomes
            .iter()
            .filter(|o| **o == AckOutcome::Cancelled)
            .count() as u64;
        let lost = outcomes.len() as u64 - acked - cancelled;
        self.report.acked += acked;
        self.report.cancelled += cancelled;
        self.report.lease_lost += lost;
        if lost > 0 {
            tracing::warn!(lost, "acks refused: lease lost");
        }
    }
}
