//! The consumer engine: claims due jobs under fenced leases, runs a [`Handler`] on each with a
//! concurrency limit, acknowledges or fails them, extends long leases, sleeps until the next
//! due time (woken early by the backend), and drains gracefully.
//!
//! One loop owns all state. Acknowledgements of finished jobs ride on the next claim, so with
//! concurrency 1 a job costs one round trip: "ack this, give me the next".

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::{JoinError, JoinSet};
use tokio::time::{Instant, sleep, sleep_until};

use crate::backend::{Backend, ClaimRequest, Wakeups};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};
use crate::handler::{Failure, Handler};
use crate::job::{AckOutcome, Job, LeaseRef, Nack, NackOutcome, validate_lease};
use crate::name::QueueName;
use crate::telemetry;

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
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        Self {
            concurrency: 10,
            lease: Duration::from_secs(30),
            batch: 100,
            shutdown_grace: Duration::from_secs(30),
            max_idle: Duration::from_secs(30),
            clock: Arc::new(SystemClock),
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
}

/// Runs a handler over the due jobs of one queue.
pub struct Consumer<B> {
    backend: B,
    queue: QueueName,
    opts: ConsumerOptions,
    counters: telemetry::QueueCounters,
}

/// What a job task reports back to the loop.
enum Outcome {
    Ack(LeaseRef),
    Nacked(NackOutcome),
    LeaseLost,
    Unresolved,
}

impl<B: Backend> Consumer<B> {
    /// A consumer of `queue`; checks the options.
    pub fn new(backend: B, queue: QueueName, opts: ConsumerOptions) -> Result<Self> {
        validate_lease(opts.lease)?;
        if opts.concurrency == 0 || opts.batch == 0 {
            return Err(
                crate::InvalidInput::Batch("concurrency and batch must be >= 1".into()).into(),
            );
        }
        let counters = telemetry::QueueCounters::new(queue.as_str());
        Ok(Self {
            backend,
            queue,
            opts,
            counters,
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
        let handler = Arc::new(handler);
        let mut shutdown = std::pin::pin!(shutdown);
        let mut report = RunReport::default();
        let mut tasks: JoinSet<Outcome> = JoinSet::new();
        let mut running: HashMap<tokio::task::Id, LeaseRef> = HashMap::new();
        let mut acks: Vec<LeaseRef> = Vec::new();
        let mut wake: Option<Wakeups> = None;
        let mut claim_now = true;
        let mut sleep_deadline = Instant::now();
        let mut retry_delay = Duration::from_millis(50);
        let q = self.queue.to_string();

        loop {
            while let Some(res) = tasks.try_join_next_with_id() {
                self.settle(res, &mut running, &mut acks, &mut report);
            }
            if wake.is_none() {
                match self.backend.wakeups(&self.queue).await {
                    Ok(w) => wake = Some(w),
                    Err(e) => tracing::warn!(queue = %q, error = %e, "wake-up channel unavailable"),
                }
            }
            let free = self.opts.concurrency - tasks.len();
            let claim = claim_now && free > 0;
            if claim || !acks.is_empty() {
                if let Some(w) = wake.as_mut() {
                    w.borrow_and_update();
                }
                let max = if claim { free.min(self.opts.batch) } else { 0 };
                let req = ClaimRequest {
                    max,
                    lease: self.opts.lease,
                    acks: std::mem::take(&mut acks),
                };
                let sent = req.acks.clone();
                match self.backend.claim(&self.queue, req).await {
                    Ok(batch) => {
                        retry_delay = Duration::from_millis(50);
                        self.count_acks(&batch.acks, &mut report);
                        let got = batch.jobs.len();
                        report.claimed += got as u64;
                        self.counters.claimed.increment(got as u64);
                        for job in batch.jobs {
                            let lease = job.lease_ref();
                            let handle = tasks.spawn(run_job(
                                handler.clone(),
                                self.backend.clone(),
                                self.opts.clock.clone(),
                                job,
                            ));
                            running.insert(handle.id(), lease);
                        }
                        if claim {
                            claim_now = got == max;
                            let idle = batch
                                .next_due_in
                                .unwrap_or(self.opts.max_idle)
                                .min(self.opts.max_idle);
                            sleep_deadline = Instant::now() + idle;
                        }
                    }
                    Err(e) => {
                        acks = sent;
                        tracing::warn!(queue = %q, error = %e, retry_in = ?retry_delay, "claim failed");
                        tokio::select! {
                            _ = &mut shutdown => break,
                            _ = sleep(retry_delay) => {}
                        }
                        retry_delay = (retry_delay * 2).min(Duration::from_secs(2));
                        continue;
                    }
                }
            }
            let must_claim = claim_now && tasks.len() < self.opts.concurrency;
            if must_claim {
                continue;
            }
            tokio::select! {
                _ = &mut shutdown => break,
                Some(res) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    self.settle(res, &mut running, &mut acks, &mut report);
                    claim_now = true;
                }
                changed = wait_wake(&mut wake) => {
                    if !changed {
                        wake = None;
                    }
                    claim_now = true;
                }
                _ = precise_sleep_until(sleep_deadline), if !claim_now => claim_now = true,
            }
        }
        self.drain(tasks, running, acks, &mut report).await;
        Ok(report)
    }

    /// Shutdown: wait for running handlers within the grace period, abort the rest, flush
    /// acknowledgements and release the aborted jobs' leases.
    async fn drain(
        &self,
        mut tasks: JoinSet<Outcome>,
        mut running: HashMap<tokio::task::Id, LeaseRef>,
        mut acks: Vec<LeaseRef>,
        report: &mut RunReport,
    ) {
        let deadline = Instant::now() + self.opts.shutdown_grace;
        loop {
            tokio::select! {
                res = tasks.join_next_with_id() => match res {
                    Some(res) => self.settle(res, &mut running, &mut acks, report),
                    None => break,
                },
                _ = sleep_until(deadline) => break,
            }
        }
        tasks.abort_all();
        while let Some(res) = tasks.join_next_with_id().await {
            self.settle(res, &mut running, &mut acks, report);
        }
        for attempt in 0..5 {
            if acks.is_empty() {
                break;
            }
            match self.backend.ack(&self.queue, acks.clone()).await {
                Ok(out) => {
                    self.count_acks(&out, report);
                    acks.clear();
                }
                Err(e) => {
                    tracing::warn!(error = %e, attempt, "final ack failed");
                    sleep(Duration::from_millis(100 << attempt)).await;
                }
            }
        }
        let aborted: Vec<LeaseRef> = running.into_values().collect();
        if !aborted.is_empty() {
            report.aborted += aborted.len() as u64;
            if let Err(e) = self.backend.release(&self.queue, aborted, false).await {
                tracing::warn!(error = %e, "releasing aborted jobs failed; their leases will expire");
            }
        }
    }

    fn settle(
        &self,
        res: std::result::Result<(tokio::task::Id, Outcome), JoinError>,
        running: &mut HashMap<tokio::task::Id, LeaseRef>,
        acks: &mut Vec<LeaseRef>,
        report: &mut RunReport,
    ) {
        match res {
            Ok((id, outcome)) => {
                running.remove(&id);
                match outcome {
                    Outcome::Ack(lease) => acks.push(lease),
                    Outcome::Nacked(NackOutcome::Retrying { .. }) => {
                        report.retried += 1;
                        self.counters.retried.increment(1);
                    }
                    Outcome::Nacked(NackOutcome::Dead { .. }) => {
                        report.dead += 1;
                        self.counters.dead.increment(1);
                    }
                    Outcome::LeaseLost => {
                        report.lease_lost += 1;
                        self.counters.lease_lost.increment(1);
                    }
                    Outcome::Unresolved => {}
                }
            }
            // Aborted at the end of the grace period: the lease stays in `running` and is
            // released by `drain`.
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                // run_job catches handler panics; reaching here is a bug in the engine. The
                // lease expires and the job is delivered again.
                running.remove(&e.id());
                tracing::error!(error = %e, "job task failed");
            }
        }
    }

    fn count_acks(&self, outcomes: &[AckOutcome], report: &mut RunReport) {
        let acked = outcomes.iter().filter(|o| **o == AckOutcome::Acked).count() as u64;
        let lost = outcomes.len() as u64 - acked;
        report.acked += acked;
        report.lease_lost += lost;
        self.counters.acked.increment(acked);
        if lost > 0 {
            tracing::warn!(queue = %self.queue, lost, "acks refused: lease lost");
            self.counters.lease_lost.increment(lost);
        }
    }
}

/// Sleeps until `deadline` with sub-millisecond precision: the timer wheel (1 ms ticks,
/// rounded up) covers all but the last stretch, which yields in a loop. A consumer thus starts
/// a job within a round trip of its due time instead of up to two timer ticks after it.
async fn precise_sleep_until(deadline: Instant) {
    const SPIN: Duration = Duration::from_micros(1500);
    if let Some(coarse) = deadline.checked_sub(SPIN)
        && coarse > Instant::now()
    {
        sleep_until(coarse).await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}

/// Waits for a wake-up; `false` when the channel is gone (the caller resubscribes).
async fn wait_wake(wake: &mut Option<Wakeups>) -> bool {
    match wake {
        Some(w) => w.changed().await.is_ok(),
        None => {
            sleep(Duration::from_millis(500)).await;
            false
        }
    }
}

/// Runs one job: the handler (panics caught), lease extension while it runs, and the nack of a
/// failure. Acks are returned to the loop, which batches them onto the next claim.
async fn run_job<B: Backend, H: Handler>(
    handler: Arc<H>,
    backend: B,
    clock: SharedClock,
    job: Job,
) -> Outcome {
    let queue = job.queue.clone();
    let lease = job.lease_ref();
    let lease_len = job.lease;
    telemetry::lateness(queue.as_str(), job.due_at_ms, clock.now_ms());
    let started = Instant::now();
    let mut fut = std::pin::pin!(AssertUnwindSafe(handler.handle(job)).catch_unwind());
    let period = (lease_len / 3).max(Duration::from_millis(5));
    let mut next_extend = Instant::now() + period;
    let mut lost = false;
    let result = loop {
        tokio::select! {
            r = &mut fut => break r,
            _ = sleep_until(next_extend) => {
                next_extend = Instant::now() + period;
                match backend.extend(&queue, lease.clone(), lease_len).await {
                    Ok(_) => {}
                    Err(Error::LeaseLost { .. }) => {
                        if !lost {
                            tracing::warn!(queue = %queue, id = %lease.id, "lease lost while the handler runs");
                        }
                        lost = true;
                    }
                    Err(e) => tracing::warn!(queue = %queue, id = %lease.id, error = %e, "lease extension failed"),
                }
            }
        }
    };
    metrics::histogram!(telemetry::HANDLER, "queue" => queue.to_string())
        .record(started.elapsed().as_secs_f64());
    let failure = match result {
        Ok(Ok(())) => return Outcome::Ack(lease),
        Ok(Err(f)) => f,
        Err(panic) => Failure::retry(format!("handler panicked: {}", panic_message(&panic))),
    };
    let nack = Nack {
        error: failure.message().to_owned(),
        retry_in: failure.retry_delay(),
        dead: failure.is_dead(),
    };
    let mut delay = Duration::from_millis(50);
    for _ in 0..6 {
        match backend.nack(&queue, lease.clone(), nack.clone()).await {
            Ok(o) => return Outcome::Nacked(o),
            Err(Error::LeaseLost { .. }) => return Outcome::LeaseLost,
            Err(e) if e.is_retryable() => {
                tracing::warn!(queue = %queue, id = %lease.id, error = %e, "nack failed, retrying");
                sleep(delay).await;
                delay *= 2;
            }
            Err(e) => {
                tracing::error!(queue = %queue, id = %lease.id, error = %e, "nack failed");
                break;
            }
        }
    }
    // The lease will expire and the job be delivered again.
    Outcome::Unresolved
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
