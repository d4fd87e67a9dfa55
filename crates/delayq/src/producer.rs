//! [`Producer`]: the validated entry point for putting jobs in and managing them by id.

use std::sync::Arc;

use crate::backend::{Backend, Inspect};
use crate::batch::{BatchAdd, BatchAdded, BatchId, BatchPut, BatchSpec, Batches};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{InvalidInput, Result};
use crate::instrumented::Instrumented;
use crate::job::{CancelOutcome, Due, Enqueued, JobInfo, NewJob};
use crate::limits::{DEFAULT_MAX_PAYLOAD_BYTES, MAX_BATCH};
use crate::name::{JobId, QueueName};

/// Enqueues, cancels, reschedules and looks up jobs of one queue. Cheap to clone.
#[derive(Clone)]
pub struct Producer<B> {
    backend: Instrumented<B>,
    queue: QueueName,
    max_payload: usize,
    clock: SharedClock,
    adopt_trace: bool,
}

impl<B: Backend> Producer<B> {
    /// A producer for `queue` with the default payload limit (1 MiB).
    pub fn new(backend: B, queue: QueueName) -> Self {
        Self::metered(Instrumented::new(backend), queue)
    }

    /// A producer over a backend that is metered already: it records into that backend's
    /// registered counters (a server making a producer per request registers them once).
    pub fn metered(backend: Instrumented<B>, queue: QueueName) -> Self {
        Self {
            backend,
            queue,
            max_payload: DEFAULT_MAX_PAYLOAD_BYTES,
            clock: Arc::new(SystemClock),
            adopt_trace: true,
        }
    }

    /// Sets the largest accepted payload.
    pub fn with_max_payload(mut self, bytes: usize) -> Self {
        self.max_payload = bytes;
        self
    }

    /// Sets the local clock (used only to bound `run_at` to 10 years ahead).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// Whether a job enqueued without a trace context takes the current span's (feature
    /// `otel`: the application's request it is enqueued in); on by default. A server turns it
    /// off: its own request span is no context its caller gave.
    pub fn with_ambient_trace(mut self, adopt: bool) -> Self {
        self.adopt_trace = adopt;
        self
    }

    /// The queue.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        self.backend.inner()
    }

    /// Enqueues one job. With an id that already exists nothing is created and the result
    /// says `created: false`, so retrying after a timeout is safe.
    pub async fn enqueue(&self, job: NewJob) -> Result<Enqueued> {
        let mut out = self.enqueue_batch(vec![job]).await?;
        out.pop()
            .ok_or_else(|| crate::Error::Backend("enqueue returned no result".into()))
    }

    /// Enqueues a batch in one atomic step per queue (one round trip on Redis). All jobs are
    /// validated first: one invalid job refuses the whole batch and nothing is written.
    pub async fn enqueue_batch(&self, mut jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        if jobs.is_empty() {
            return Err(InvalidInput::Batch(format!("0 jobs: a batch holds 1-{MAX_BATCH}")).into());
        }
        self.prepare(&mut jobs)?;
        // A job's dependencies of the same batch go first (`deps::batch_order`).
        let order = crate::deps::batch_order(&self.queue, &jobs)?;
        if let Some(order) = &order {
            let mut slots: Vec<Option<NewJob>> = jobs.into_iter().map(Some).collect();
            jobs = order.iter().filter_map(|&i| slots[i].take()).collect();
        }
        use tracing::Instrument;
        let span = crate::otel::send(&self.queue, &mut jobs, self.adopt_trace);
        let out = self
            .backend
            .enqueue(&self.queue, jobs)
            .instrument(span)
            .await?;
        let Some(order) = order else {
            return Ok(out);
        };
        let mut back: Vec<Option<Enqueued>> = vec![None; out.len()];
        for (e, i) in out.into_iter().zip(order) {
            back[i] = Some(e);
        }
        Ok(back.into_iter().flatten().collect())
    }

    /// Validates up to [`MAX_BATCH`] jobs and gives those without an id one (placed by its
    /// key when it has one).
    fn prepare(&self, jobs: &mut [NewJob]) -> Result<()> {
        if jobs.len() > MAX_BATCH {
            return Err(InvalidInput::Batch(format!(
                "{} jobs: a batch holds 1-{MAX_BATCH}",
                jobs.len()
            ))
            .into());
        }
        let now = self.clock.now_ms();
        for job in jobs.iter_mut() {
            job.validate(self.max_payload, now)?;
            if job.batch.is_some() {
                return Err(InvalidInput::Batch(
                    "a job joins a batch through the batch calls, not by setting its batch".into(),
                )
                .into());
            }
            match &job.id {
                Some(id) if crate::batch::is_callback_id(id) => {
                    return Err(InvalidInput::JobId(format!(
                        "{:?} is reserved: ids batch-<id>-complete and batch-<id>-success \
                         belong to the callbacks of batch <id>",
                        id.as_str()
                    ))
                    .into());
                }
                Some(_) => {}
                None => {
                    job.id = Some(match &job.key {
                        Some(k) => JobId::generate_for(k),
                        None => JobId::generate(),
                    });
                }
            }
            if let Some(d) = &job.depends {
                d.check(&self.queue, job.id.as_ref())?;
            }
        }
        Ok(())
    }

    /// Cancels a scheduled job. [`CancelOutcome::Cancelled`] means this call removed it; any
    /// other outcome means a consumer has it, it is dead, or it is gone.
    pub async fn cancel(&self, id: &JobId) -> Result<CancelOutcome> {
        self.backend.cancel(&self.queue, id).await
    }

    /// Cancels a job even while a consumer runs it ([`Backend::cancel_running`]):
    /// [`CancelOutcome::Cancelling`] when it ran (it is ended cancelled, its consumer told).
    pub async fn cancel_running(&self, id: &JobId) -> Result<CancelOutcome> {
        self.backend.cancel_running(&self.queue, id).await
    }

    /// Moves a scheduled job to a new due time; returns the new due time (ms since epoch).
    pub async fn reschedule(&self, id: &JobId, schedule: Due) -> Result<u64> {
        schedule.validate(self.clock.now_ms())?;
        self.backend.reschedule(&self.queue, id, schedule).await
    }
}

impl<B: Backend + Inspect> Producer<B> {
    /// Looks a job up by id.
    pub async fn get(&self, id: &JobId) -> Result<Option<JobInfo>> {
        Inspect::get(&self.backend, &self.queue, id).await
    }
}

impl<B: Backend + Batches> Producer<B> {
    /// Creates batch `id` (generated when `None`) with `jobs` (0 to [`MAX_BATCH`]) and `spec`'s
    /// callbacks, closed unless `open`; an open batch of that id gains the jobs instead (see
    /// [`Batches::put_batch`]).
    pub async fn create_batch(
        &self,
        id: Option<BatchId>,
        spec: BatchSpec,
        mut jobs: Vec<NewJob>,
        open: bool,
    ) -> Result<BatchAdded> {
        spec.validate(self.max_payload)?;
        self.prepare(&mut jobs)?;
        let put = BatchPut {
            id,
            spec,
            jobs,
            open,
        };
        self.backend.put_batch(&self.queue, put).await
    }

    /// Adds `jobs` to the open batch `id`, then closes it when `close` (see
    /// [`Batches::add_to_batch`]).
    pub async fn add_to_batch(
        &self,
        id: &BatchId,
        mut jobs: Vec<NewJob>,
        close: bool,
    ) -> Result<Option<BatchAdded>> {
        self.prepare(&mut jobs)?;
        let add = BatchAdd {
            id: id.clone(),
            jobs,
            close,
        };
        self.backend.add_to_batch(&self.queue, add).await
    }
}
