//! Batches over HTTP: `POST /v1/queues/{q}/batches` (create, with jobs and callbacks),
//! `POST …/batches/{id}/jobs` (add to an open batch), `POST …/batches/{id}/close`,
//! `GET …/batches/{id}` and `GET …/batches` (those not done).

use delayq::batch::{BatchInfo, BatchSpec, BatchState, Callback};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ErrorCode, Invalid};
use crate::jobs::{EnqueueRequest, EnqueueResponse};

/// A callback: the job enqueued once when the batch is done.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CallbackBody {
    /// The queue it goes to.
    pub queue: String,
    /// Its payload, a JSON object; the callback adds `batch: {id, total, succeeded, dead,
    /// cancelled[, results]}` to it.
    #[schema(value_type = Object)]
    #[serde(default = "empty_object")]
    pub payload: serde_json::Value,
    /// Due this long after the batch is done, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl CallbackBody {
    /// The core's callback.
    pub fn into_callback(self) -> Result<Callback, Invalid> {
        Ok(Callback {
            queue: delayq::QueueName::new(self.queue)?,
            payload: self.payload,
            delay_ms: self.delay_ms.unwrap_or(0),
        })
    }
}

impl From<Callback> for CallbackBody {
    fn from(c: Callback) -> Self {
        Self {
            queue: c.queue.to_string(),
            payload: c.payload,
            delay_ms: (c.delay_ms > 0).then_some(c.delay_ms),
        }
    }
}

/// Creates a batch of jobs (`id` generated when absent). It is closed by this call unless
/// `open`; an open batch of that id gains the jobs instead.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The batch's id (1-241 bytes); generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its jobs (0-10,000), each as `POST /v1/queues/{q}/jobs` takes one.
    #[serde(default)]
    pub jobs: Vec<EnqueueRequest>,
    /// Enqueued when every job has ended (acked, dead or cancelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_complete: Option<CallbackBody>,
    /// Enqueued when every job has ended and none is dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<CallbackBody>,
    /// Keep the batch open: jobs may be added (`POST …/batches/{id}/jobs`) until it is closed.
    #[serde(default)]
    pub open: bool,
    /// The callbacks carry the jobs' results (at most 1,000 and 1 MiB).
    #[serde(default)]
    pub include_results: bool,
}

impl BatchRequest {
    /// Its callbacks.
    pub fn spec(&mut self) -> Result<BatchSpec, Invalid> {
        Ok(BatchSpec {
            on_complete: self
                .on_complete
                .take()
                .map(CallbackBody::into_callback)
                .transpose()?,
            on_success: self
                .on_success
                .take()
                .map(CallbackBody::into_callback)
                .transpose()?,
            include_results: self.include_results,
        })
    }
}

/// Jobs to add to an open batch.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct BatchJobsRequest {
    /// The jobs (1-10,000).
    pub jobs: Vec<EnqueueRequest>,
    /// Close the batch after them.
    #[serde(default)]
    pub close: bool,
}

/// The jobs of `reqs` (of queue `queue`) as core jobs, each error naming its job.
pub fn jobs_of(
    queue: &delayq::QueueName,
    reqs: Vec<EnqueueRequest>,
) -> Result<Vec<delayq::NewJob>, Invalid> {
    reqs.into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.into_job(queue)
                .map_err(|e| Invalid::new(e.code, format!("job {i}: {}", e.message)))
        })
        .collect()
}

/// A batch: its state and how its jobs stand.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
pub struct BatchView {
    /// Its id.
    pub id: String,
    /// The queue of its jobs.
    pub queue: String,
    /// `open` (jobs may join), `closed` (waiting for its jobs), `done` (callbacks enqueued) or
    /// `callback_failed` (every job ended but its callbacks could not be enqueued: see
    /// `callback_error`; tried again with a backoff).
    #[schema(value_type = crate::schema::BatchStateSchema)]
    pub state: String,
    /// Jobs that joined.
    pub total: u64,
    /// Jobs not ended yet.
    pub pending: u64,
    /// Jobs acknowledged.
    pub succeeded: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
    /// Created, ms since the epoch (server clock).
    pub created_at_ms: u64,
    /// Done, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_at_ms: Option<u64>,
    /// Its `on_complete` callback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_complete: Option<CallbackBody>,
    /// Its `on_success` callback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<CallbackBody>,
    /// Whether the callbacks carry the jobs' results.
    #[serde(default)]
    pub include_results: bool,
    /// Why its callbacks could not be enqueued (state `callback_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_error: Option<String>,
    /// Failed tries of its callbacks (state `callback_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_attempts: Option<u32>,
    /// Their next try, ms since the epoch (state `callback_failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_next_try_at_ms: Option<u64>,
}

impl BatchView {
    /// The view of batch `i` of `queue`.
    pub fn of(queue: &str, i: BatchInfo) -> Self {
        let c = i.counts;
        Self {
            id: i.id.to_string(),
            queue: queue.to_owned(),
            state: i.state.as_str().to_owned(),
            total: c.total(),
            pending: c.pending,
            succeeded: c.succeeded,
            dead: c.dead,
            cancelled: c.cancelled,
            created_at_ms: i.created_ms,
            done_at_ms: i.done_ms,
            on_complete: i.spec.on_complete.map(CallbackBody::from),
            on_success: i.spec.on_success.map(CallbackBody::from),
            include_results: i.spec.include_results,
            callback_error: i.callback_failure.as_ref().map(|f| f.reason.clone()),
            callback_attempts: i.callback_failure.as_ref().map(|f| f.attempts),
            callback_next_try_at_ms: i.callback_failure.as_ref().map(|f| f.next_try_ms),
        }
    }

    /// The core's batch info (a client reads a server's answer).
    pub fn into_info(self) -> Result<BatchInfo, Invalid> {
        let Some(state) = BatchState::parse(&self.state) else {
            return Err(Invalid::new(
                ErrorCode::InvalidBody,
                format!("batch state {:?}", self.state),
            ));
        };
        Ok(BatchInfo {
            id: delayq::BatchId::new(self.id)?,
            state,
            counts: delayq::batch::BatchCounts {
                pending: self.pending,
                succeeded: self.succeeded,
                dead: self.dead,
                cancelled: self.cancelled,
            },
            created_ms: self.created_at_ms,
            done_ms: self.done_at_ms,
            spec: BatchSpec {
                on_complete: self
                    .on_complete
                    .map(CallbackBody::into_callback)
                    .transpose()?,
                on_success: self
                    .on_success
                    .map(CallbackBody::into_callback)
                    .transpose()?,
                include_results: self.include_results,
            },
            callback_failure: self
                .callback_error
                .map(|reason| delayq::batch::CallbackFailure {
                    reason,
                    attempts: self.callback_attempts.unwrap_or(0),
                    next_try_ms: self.callback_next_try_at_ms.unwrap_or(0),
                }),
        })
    }
}

/// What a create or add call did: the batch, and per job what its enqueue did.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct BatchAddedView {
    /// The batch after the call.
    pub batch: BatchView,
    /// Per job, in order (`created: false`: the id existed, the job did not join).
    pub jobs: Vec<EnqueueResponse>,
}

/// The batches of a queue not done yet, oldest first.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct BatchList {
    /// The queue.
    pub queue: String,
    /// Its batches.
    pub batches: Vec<BatchView>,
}

/// `GET /v1/queues/{q}/batches` parameters.
#[derive(Deserialize, IntoParams, Debug, Default)]
#[into_params(parameter_in = Query)]
pub struct BatchQuery {
    /// Most batches (1-1000, default 20).
    pub limit: Option<usize>,
}
