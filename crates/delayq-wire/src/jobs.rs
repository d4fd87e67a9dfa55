//! Jobs on the wire: an enqueue and its answer, a stored job, a page of jobs, a reschedule,
//! the outcome of an action on a job, a push target and the deliveries sent to it.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{Enqueued, JobId, JobInfo, JobState, NewJob};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::error::{ErrorCode, Invalid};
use crate::fields::{Carried, JobFacts, RunOptions};
use crate::payload::{
    answer_bytes, due_fields, due_of, payload_bytes, payload_fields, result_bytes, run_at,
};

/// A job to enqueue. Give `payload` (any JSON value, stored byte for byte as sent) or
/// `payload_b64` (bytes, base64); `delay_ms` or `run_at` (neither: due now).
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// Job id for idempotent enqueue; generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Payload as JSON.
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// Payload as base64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
    /// Delay in ms (0 to 10 years).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    /// Absolute due time: ms since the epoch (number) or RFC 3339 text; in the past = now.
    #[schema(value_type = Option<crate::schema::TimeSchema>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<serde_json::Value>,
    /// A delivery not started by this time (ms since the epoch or RFC 3339) goes to the dead
    /// letters with the error `expired` instead of running late.
    #[schema(value_type = Option<crate::schema::TimeSchema>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<serde_json::Value>,
    /// Like `expires_at`, as a time after the job's due time (server clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after_ms: Option<u64>,
    /// When the id exists: `keep` (default: write nothing, answer `created: false`) or
    /// `replace` (debounce: a scheduled job gets this payload, due time and options; a leased
    /// or dead one is not touched and `state` says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_conflict: Option<delayq::OnConflict>,
    /// Priority among due jobs, 0-9 (default 5; higher first; a due job gains a level for
    /// every minute it waits, so none starves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Keep the job readable as `done` this long after it completes, ms (overrides the
    /// queue's; with `dedupe_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_done_ms: Option<u64>,
    /// Refuse its id again for this long after it completes, ms (overrides the queue's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_ms: Option<u64>,
    /// Its key (a tenant, a customer, an upstream host: 1-128 bytes): the queue shares its
    /// claims among the keys with due jobs round-robin, and its `key_max_in_flight` and
    /// `key_rate` bound each key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Jobs this one waits for (1-1,000): ids of the same queue, or `{queue, id}`. Until each
    /// has ended (acked, dead or cancelled; one already gone counts as ended) its state is
    /// `waiting`; then it is due at the later of its own due time and that end.
    #[schema(value_type = Option<Vec<Value>>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<DepSpec>>,
    /// What a dead or cancelled dependency does to it: `dead` (default: dead-lettered, its
    /// `last_error` naming the dependency), `cancel`, or `run` (it runs anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dependency_failure: Option<delayq::OnDependencyFailure>,
    /// Its claim carries `dependencies: [{queue, id, state, result?}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_dependency_results: Option<bool>,
    /// Attempts, lease, timeout.
    #[serde(flatten)]
    pub run: RunOptions,
    /// Push target, trace context.
    #[serde(flatten)]
    pub carried: Carried,
}

/// One dependency as an enqueue names it: a job id of the same queue, or `{queue, id}`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(untagged)]
pub enum DepSpec {
    /// A job of the same queue.
    Id(String),
    /// A job of any queue.
    Ref {
        /// Its queue.
        queue: String,
        /// Its id.
        id: String,
    },
}

impl DepSpec {
    /// The job it names, `queue` standing for a bare id's.
    pub fn resolve(&self, queue: &delayq::QueueName) -> Result<delayq::DepRef, Invalid> {
        Ok(match self {
            DepSpec::Id(id) => delayq::DepRef {
                queue: queue.clone(),
                id: JobId::new(id.clone())?,
            },
            DepSpec::Ref { queue, id } => delayq::DepRef {
                queue: delayq::QueueName::new(queue.clone())?,
                id: JobId::new(id.clone())?,
            },
        })
    }
}

impl EnqueueRequest {
    /// Validates the shape and builds the job of queue `queue` (limits are checked by the
    /// producer; a bare dependency id is a job of `queue`).
    pub fn into_job(self, queue: &delayq::QueueName) -> Result<NewJob, Invalid> {
        let depends = match self.depends_on {
            Some(specs) => Some(delayq::Dependencies {
                on: specs
                    .iter()
                    .map(|d| d.resolve(queue))
                    .collect::<Result<_, _>>()?,
                on_failure: self.on_dependency_failure.unwrap_or_default(),
                include_results: self.include_dependency_results.unwrap_or(false),
            }),
            None if self.on_dependency_failure.is_some()
                || self.include_dependency_results.is_some() =>
            {
                return Err(Invalid::new(
                    ErrorCode::InvalidDependencies,
                    "on_dependency_failure and include_dependency_results go with depends_on",
                ));
            }
            None => None,
        };
        let payload = payload_bytes(self.payload.as_deref(), self.payload_b64.as_deref())?;
        let mut job = NewJob::new(payload).due(due_of(self.delay_ms, self.run_at.as_ref())?);
        if let Some(id) = self.id {
            job = job.id(JobId::new(id)?);
        }
        let run = self.run;
        if let Some(n) = run.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(b) = run.backoff {
            job = job.backoff(b);
        }
        if let Some(l) = run.lease_ms {
            job = job.lease(Duration::from_millis(l));
        }
        if let Some(t) = run.timeout_ms {
            job = job.timeout(Duration::from_millis(t));
        }
        job.on_conflict = self.on_conflict.unwrap_or_default();
        job.priority = self.priority;
        (job.target, job.trace) = self.carried.checked()?;
        job.key = self.key.map(delayq::JobKey::new).transpose()?;
        if self.keep_done_ms.is_some() || self.dedupe_ms.is_some() {
            job.retention = Some(delayq::Retention {
                keep_done_ms: self.keep_done_ms.unwrap_or(0),
                dedupe_ms: self.dedupe_ms.unwrap_or(0),
            });
        }
        match (self.expires_at, self.expire_after_ms) {
            (Some(_), Some(_)) => {
                return Err(Invalid::new(
                    ErrorCode::InvalidDeadline,
                    "give expires_at or expire_after_ms, not both",
                ));
            }
            (Some(at), None) => {
                let at = match run_at(&at) {
                    Ok(delayq::Due::At(ms)) => ms,
                    Ok(_) => unreachable!("run_at parses to an absolute time"),
                    Err(e) => {
                        return Err(Invalid::new(
                            ErrorCode::InvalidDeadline,
                            format!("expires_at: {}", e.message),
                        ));
                    }
                };
                job = job.expires(delayq::Expiry::At(at));
            }
            (None, Some(after)) => {
                job = job.expires(delayq::Expiry::AfterDue(Duration::from_millis(after)));
            }
            (None, None) => {}
        }
        job.depends = depends;
        Ok(job)
    }

    /// The body that enqueues `job` (its payload as it is: JSON when the bytes are JSON).
    pub fn from_job(job: NewJob) -> Self {
        let (payload, payload_b64) = payload_fields(job.payload);
        let (delay_ms, run_at) = due_fields(job.due);
        let (expires_at, expire_after_ms) = match job.expires {
            Some(delayq::Expiry::At(ms)) => (Some(ms.into()), None),
            Some(delayq::Expiry::AfterDue(d)) => (None, Some(d.as_millis() as u64)),
            None => (None, None),
        };
        Self {
            id: job.id.map(|i| i.to_string()),
            payload,
            payload_b64,
            delay_ms,
            run_at,
            expires_at,
            expire_after_ms,
            on_conflict: (job.on_conflict == delayq::OnConflict::Replace)
                .then_some(delayq::OnConflict::Replace),
            priority: job.priority,
            keep_done_ms: job.retention.map(|r| r.keep_done_ms),
            dedupe_ms: job.retention.map(|r| r.dedupe_ms),
            key: job.key.map(String::from),
            run: RunOptions {
                max_attempts: job.max_attempts,
                backoff: job.backoff,
                lease_ms: job.lease.map(|l| l.as_millis() as u64),
                timeout_ms: job.timeout.map(|t| t.as_millis() as u64),
            },
            depends_on: job.depends.as_ref().map(|d| {
                d.on.iter()
                    .map(|r| DepSpec::Ref {
                        queue: r.queue.to_string(),
                        id: r.id.to_string(),
                    })
                    .collect()
            }),
            on_dependency_failure: job.depends.as_ref().map(|d| d.on_failure),
            include_dependency_results: job
                .depends
                .as_ref()
                .map(|d| d.include_results)
                .filter(|r| *r),
            carried: Carried::of(job.target, job.trace.as_ref()),
        }
    }
}

/// The answer to one enqueue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct EnqueueResponse {
    /// The job's id.
    pub id: String,
    /// Due time, ms since the epoch (server clock); for an existing id, the existing job's.
    pub due_at: u64,
    /// `false` when the id already existed and nothing was written (or it was replaced).
    pub created: bool,
    /// With `on_conflict: "replace"`: the existing scheduled job was replaced (`due_at` is
    /// the new due time).
    #[serde(default)]
    #[schema(required = true)]
    pub replaced: bool,
    /// With `on_conflict: "replace"`, when the existing job was not touched: its state
    /// (`leased` or `dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
}

impl From<Enqueued> for EnqueueResponse {
    fn from(e: Enqueued) -> Self {
        Self {
            id: e.id.to_string(),
            due_at: e.due_at_ms,
            created: e.created,
            replaced: e.replaced,
            state: e.existing,
        }
    }
}

impl TryFrom<EnqueueResponse> for Enqueued {
    type Error = Invalid;

    fn try_from(e: EnqueueResponse) -> Result<Self, Invalid> {
        Ok(Self {
            id: JobId::new(e.id)?,
            due_at_ms: e.due_at,
            created: e.created,
            replaced: e.replaced,
            existing: e.state,
        })
    }
}

/// A stored job.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct JobView {
    /// The job's id.
    pub id: String,
    /// `scheduled`, `leased`, `dead` or `done` (a listing of due jobs says `due`).
    #[schema(value_type = crate::schema::ListedStateSchema)]
    pub state: String,
    /// Lease deadline of a leased job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_deadline: Option<u64>,
    /// When a dead job failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    /// When a done job completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    /// Attempts, times, limits, key.
    #[serde(flatten)]
    pub facts: JobFacts,
    /// Push target and trace context.
    #[serde(flatten)]
    pub carried: Carried,
    /// The payload when it is valid JSON (byte for byte).
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// The payload bytes in base64 when they are not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
    /// A done job's result, as its handler acked it, when it is valid JSON (byte for byte).
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// The result bytes in base64 when they are not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_b64: Option<String>,
    /// A job enqueued with `depends_on`: each dependency with how it stands (until the job
    /// ends).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<DepView>,
    /// The jobs waiting for this one (until it ends).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<JobRefView>,
    /// `cold` when the job is kept in the cold tier (PostgreSQL beside the store, for a far
    /// due time; it moves into the store before it is due); absent: in the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// A job named by its queue and id.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct JobRefView {
    /// Its queue.
    pub queue: String,
    /// Its id.
    pub id: String,
}

/// One dependency of a job: how it stands, and — in the claim of a job enqueued with
/// `include_dependency_results` — its result.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct DepView {
    /// Its queue.
    pub queue: String,
    /// Its id.
    pub id: String,
    /// `pending`, `done`, `dead` or `cancelled`.
    pub state: delayq::DepOutcome,
    /// Its result when it is JSON.
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// Its result bytes in base64 when they are not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_b64: Option<String>,
}

impl From<delayq::DepStatus> for DepView {
    fn from(d: delayq::DepStatus) -> Self {
        let (result, result_b64) = d.result.map_or((None, None), payload_fields);
        Self {
            queue: d.dep.queue.to_string(),
            id: d.dep.id.to_string(),
            state: d.state,
            result,
            result_b64,
        }
    }
}

impl TryFrom<DepView> for delayq::DepStatus {
    type Error = Invalid;

    fn try_from(d: DepView) -> Result<Self, Invalid> {
        Ok(Self {
            dep: delayq::DepRef {
                queue: delayq::QueueName::new(d.queue)?,
                id: JobId::new(d.id)?,
            },
            state: d.state,
            result: result_bytes(d.result.as_deref(), d.result_b64.as_deref())?,
        })
    }
}

impl JobView {
    /// Its payload read as `T` (a payload that is not JSON — `payload_b64` — fails).
    pub fn payload_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match &self.payload {
            Some(raw) => serde_json::from_str(raw.get()),
            None => Err(serde::de::Error::custom(
                "the payload is not JSON (payload_b64)",
            )),
        }
    }
}

impl From<JobInfo> for JobView {
    fn from(j: JobInfo) -> Self {
        let (payload, payload_b64) = payload_fields(j.payload);
        let (result, result_b64) = j.result.map_or((None, None), payload_fields);
        Self {
            id: j.id.to_string(),
            state: j.state.to_string(),
            lease_deadline: j.lease_deadline_ms,
            failed_at: j.failed_at_ms,
            completed_at: j.completed_at_ms,
            facts: JobFacts {
                attempt: j.attempt,
                max_attempts: j.max_attempts,
                due_at: j.due_at_ms,
                created_at: j.created_at_ms,
                last_error: j.last_error,
                timeout_ms: j.timeout_ms,
                expires_at: j.expires_at_ms,
                priority: j.priority,
                key: j.key.map(String::from),
            },
            carried: Carried::of(j.target, j.trace.as_ref()),
            payload,
            payload_b64,
            result,
            result_b64,
            dependencies: j.dependencies.into_iter().map(DepView::from).collect(),
            dependents: j
                .dependents
                .into_iter()
                .map(|d| JobRefView {
                    queue: d.queue.to_string(),
                    id: d.id.to_string(),
                })
                .collect(),
            tier: j.cold.then(|| "cold".to_owned()),
        }
    }
}

impl TryFrom<JobView> for JobInfo {
    type Error = Invalid;

    fn try_from(j: JobView) -> Result<Self, Invalid> {
        let state = match j.state.as_str() {
            "scheduled" | "due" => JobState::Scheduled,
            "leased" => JobState::Leased,
            "dead" => JobState::Dead,
            "done" => JobState::Done,
            "waiting" => JobState::Waiting,
            other => {
                return Err(Invalid::new(
                    ErrorCode::InvalidBody,
                    format!("job state {other:?}"),
                ));
            }
        };
        let f = j.facts;
        let (target, trace) = j.carried.read();
        Ok(Self {
            payload: answer_bytes(j.payload.as_deref(), j.payload_b64.as_deref())?,
            result: result_bytes(j.result.as_deref(), j.result_b64.as_deref())?,
            id: JobId::new(j.id)?,
            state,
            attempt: f.attempt,
            max_attempts: f.max_attempts,
            due_at_ms: f.due_at,
            created_at_ms: f.created_at,
            lease_deadline_ms: j.lease_deadline,
            failed_at_ms: j.failed_at,
            completed_at_ms: j.completed_at,
            last_error: f.last_error,
            timeout_ms: f.timeout_ms,
            expires_at_ms: f.expires_at,
            priority: f.priority,
            target,
            trace,
            key: f.key.map(delayq::JobKey::new).transpose()?,
            dependencies: j
                .dependencies
                .into_iter()
                .map(delayq::DepStatus::try_from)
                .collect::<Result<_, _>>()?,
            dependents: j
                .dependents
                .into_iter()
                .map(|d| {
                    Ok::<_, Invalid>(delayq::DepRef {
                        queue: delayq::QueueName::new(d.queue)?,
                        id: JobId::new(d.id)?,
                    })
                })
                .collect::<Result<_, _>>()?,
            cold: j.tier.as_deref() == Some("cold"),
        })
    }
}

/// A page of jobs.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct JobList {
    /// The jobs, ordered by due time (leased: lease deadline; dead: failure time; a search:
    /// id).
    pub jobs: Vec<JobView>,
    /// Pass as `cursor` for the next page; `null` at the end.
    #[serde(default)]
    pub next_cursor: Option<String>,
    /// For a search: whether the store searched by prefix (`false`: exact id only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_prefix: Option<bool>,
}

/// Query of `GET /v1/queues/{q}/jobs`.
#[derive(Serialize, Deserialize, utoipa::IntoParams, Debug, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `scheduled` (due later), `due` (due now, waiting), `leased` or `dead`; required unless
    /// `id_prefix` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// At most this many (1-1000, default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Jobs whose id starts with this (any state), where the store can search by prefix
    /// (embedded); on Redis the job with exactly this id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_prefix: Option<String>,
}

/// Query of `DELETE /v1/queues/{q}/jobs`.
#[derive(Serialize, Deserialize, utoipa::IntoParams, Debug)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StateQuery {
    /// `scheduled` (every job due later) or `due` (every job due now, waiting).
    pub state: String,
}

/// `DELETE /v1/queues/{q}/jobs/{id}` options.
#[derive(Serialize, Deserialize, utoipa::IntoParams, Debug, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CancelQuery {
    /// Cancel the job even while a worker runs it: answered 202 `cancelling`, its lease
    /// refused from now on (409 `cancelled`) and its worker told within a second to stop the
    /// handler. Without it a running job answers 409 `job_leased`.
    #[serde(default)]
    pub running: bool,
}

/// Paging of the dead-letter list.
#[derive(Serialize, Deserialize, utoipa::IntoParams, Debug, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// Skip this many (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// At most this many (1-1000, default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// A reschedule.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct RescheduleRequest {
    /// New delay in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    /// New absolute time (ms since the epoch or RFC 3339).
    #[schema(value_type = Option<crate::schema::TimeSchema>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<serde_json::Value>,
}

impl RescheduleRequest {
    /// The new due time: exactly one of the two fields.
    pub fn due(&self) -> Result<delayq::Due, Invalid> {
        if self.delay_ms.is_none() && self.run_at.is_none() {
            return Err(Invalid::new(
                ErrorCode::InvalidDelay,
                "give exactly one of delay_ms and run_at",
            ));
        }
        due_of(self.delay_ms, self.run_at.as_ref())
    }

    /// The body that moves a job to `due`.
    pub fn new(due: delayq::Due) -> Self {
        let (delay_ms, run_at) = due_fields(due);
        Self {
            delay_ms: delay_ms.or(run_at.is_none().then_some(0.0)),
            run_at,
        }
    }
}

/// What an action did.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// The job was acknowledged (and removed, or kept as `done`).
    Acked,
    /// The failed attempt will be retried at `due_at`.
    Retrying,
    /// The job was dead-lettered.
    Dead,
    /// The lease was extended to `lease_deadline`.
    Extended,
    /// The lease was given back; the job is due again.
    Released,
    /// The job was cancelled.
    Cancelled,
    /// The job was running: it is ended cancelled, its lease refused from now on, and its
    /// worker is told to stop its handler (`DELETE …?running=true`, answered 202).
    Cancelling,
    /// The job is due at `due_at` now.
    Rescheduled,
    /// Dead jobs were put back (`count` of them, or the one `id`).
    Requeued,
    /// Dead jobs were deleted (`count`).
    Purged,
    /// One job or schedule was deleted.
    Deleted,
    /// The job was made due now.
    DueNow,
    /// The queue was paused.
    Paused,
    /// The queue was resumed.
    Resumed,
}

/// Outcome of ack, nack, extend, cancel, reschedule or requeue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What happened.
    pub outcome: OutcomeKind,
    /// New due time (retrying, rescheduled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<u64>,
    /// New lease deadline (extended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_deadline: Option<u64>,
    /// When the job failed (dead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    /// Jobs affected (requeue all, purge, cancel by state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl Outcome {
    /// `outcome`, no other field.
    pub fn new(outcome: OutcomeKind) -> Self {
        Self {
            id: None,
            outcome,
            due_at: None,
            lease_deadline: None,
            failed_at: None,
            count: None,
        }
    }

    /// `outcome` for job `id`, no other field.
    pub fn of(id: &JobId, outcome: OutcomeKind) -> Self {
        Self {
            id: Some(id.to_string()),
            ..Self::new(outcome)
        }
    }
}

/// Where a pusher delivers a job: the payload is the request body, sent at the due time and
/// signed (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`).
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TargetView {
    /// `https://` or `http://` URL (addresses on loopback, private, link-local and metadata
    /// networks are refused unless the server allows private targets).
    pub url: String,
    /// `POST` (default), `PUT`, `PATCH`, `DELETE`, `GET`, `HEAD` or `OPTIONS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Extra request headers (e.g. `authorization`); `webhook-*`, `delayq-*`, `host` and
    /// framing headers are reserved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl From<TargetView> for delayq::Target {
    fn from(t: TargetView) -> Self {
        Self {
            url: t.url,
            method: t.method.unwrap_or_else(|| "POST".into()),
            headers: t.headers,
        }
    }
}

impl From<delayq::Target> for TargetView {
    fn from(t: delayq::Target) -> Self {
        Self {
            url: t.url,
            method: Some(t.method),
            headers: t.headers,
        }
    }
}

/// One request a pusher sent for a job.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct DeliveryView {
    /// The job's attempt number.
    pub attempt: u32,
    /// When it was sent, ms since the epoch.
    pub at: u64,
    /// Time to the response or the failure, ms.
    pub duration_ms: u64,
    /// Response status, when one came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `delivered`, `throttled`, `http_error`, `timeout`, `connect_error`, `refused` or
    /// `invalid`.
    pub outcome: String,
    /// The error stored for a failed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The requests of one job.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct Deliveries {
    /// Oldest first; at most the latest 20.
    pub deliveries: Vec<DeliveryView>,
    /// Whether this server runs a pusher (without one the list is always empty).
    pub pusher: bool,
}
