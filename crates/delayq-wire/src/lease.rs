//! Consumers on the wire: a claim (long poll) and the jobs it leases, acks (alone, in a batch
//! or riding on a claim), nacks, extensions and releases.

use std::time::Duration;

use delayq::{Ack, AckOutcome, Job, JobId, LeaseRef, QueueName};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::error::Invalid;
use crate::fields::{Carried, ClaimPoll, JobFacts};
use crate::jobs::JobView;
use crate::payload::payload_fields;

/// A job handed to a consumer.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ClaimedJob {
    /// The job's id.
    pub id: String,
    /// Fencing token: give it back with ack, nack and extend.
    pub lease_token: u64,
    /// When this lease expires, ms since the epoch.
    pub lease_deadline: u64,
    /// This delivery's number, times, limits, key.
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
    /// The job's queue, in the answer of a claim over several queues (`POST /v1/claim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// A job enqueued with `include_dependency_results`: each dependency, how it ended and
    /// its result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<crate::jobs::DepView>,
}

impl ClaimedJob {
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

impl From<Job> for ClaimedJob {
    fn from(j: Job) -> Self {
        let (payload, payload_b64) = payload_fields(j.payload);
        Self {
            id: j.id.to_string(),
            lease_token: j.lease_token,
            lease_deadline: j.lease_deadline_ms,
            facts: JobFacts {
                attempt: j.attempt,
                max_attempts: j.max_attempts,
                due_at: j.due_at_ms,
                created_at: j.created_at_ms,
                last_error: j.last_error,
                timeout_ms: j.timeout.map(|t| t.as_millis() as u64),
                expires_at: j.expires_at_ms,
                priority: j.priority,
                key: j.key.map(String::from),
            },
            carried: Carried::of(j.target, j.trace.as_ref()),
            payload,
            payload_b64,
            queue: None,
            dependencies: j
                .dependencies
                .into_iter()
                .map(crate::jobs::DepView::from)
                .collect(),
        }
    }
}

impl ClaimedJob {
    /// The core's job, leased from `queue` for `lease`: read as the stored job it is
    /// ([`JobView`] into `JobInfo`), then claimed ([`delayq::JobInfo::into_job`]).
    pub fn into_job(self, queue: &QueueName, lease: Duration) -> Result<Job, Invalid> {
        let view = JobView {
            id: self.id,
            state: "leased".into(),
            lease_deadline: Some(self.lease_deadline),
            failed_at: None,
            completed_at: None,
            facts: self.facts,
            carried: self.carried,
            payload: self.payload,
            payload_b64: self.payload_b64,
            result: None,
            result_b64: None,
            dependencies: self.dependencies,
            dependents: Vec::new(),
            tier: None,
        };
        let info = delayq::JobInfo::try_from(view)?;
        Ok(info.into_job(queue.clone(), self.lease_token, lease))
    }
}

/// A claim (long poll).
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Most jobs, lease, wait, the poll's name.
    #[serde(flatten)]
    pub poll: ClaimPoll,
    /// Finished jobs to acknowledge before leasing (at most 1000), so a worker acks and
    /// claims in one request; the answer's `acks` says how each went, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acks: Vec<ClaimAck>,
}

/// One queue of a claim over several, with its weight.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct QueueClaim {
    /// The queue.
    pub name: String,
    /// Its share among the queues with due jobs (1-1000, default 1); ignored with `strict`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

/// A finished job of a claim over several queues, named with its queue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct QueueAck {
    /// The job's queue.
    pub queue: String,
    /// The job's id.
    pub id: String,
    /// The lease token of its claim.
    pub lease_token: u64,
    /// The handler's result, kept with the job while it is retained as done (its queue's or its
    /// own `keep_done_ms`) and answered by `GET …/jobs/{id}`: any JSON value, kept byte for
    /// byte (at most 65,535 bytes).
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// The result as base64 bytes, instead of `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_b64: Option<String>,
}

/// `POST /v1/claim`: lease due jobs from several queues — by weight among those with due jobs,
/// or in the order given with `strict` — waiting up to `wait_ms` on all of them at once.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ClaimManyRequest {
    /// The queues (1-32, each once).
    pub queues: Vec<QueueClaim>,
    /// Serve the queues in the order given: a queue only while every one before it has
    /// nothing due.
    #[serde(default)]
    pub strict: bool,
    /// Most jobs, lease, wait (on all the queues at once), the poll's name.
    #[serde(flatten)]
    pub poll: ClaimPoll,
    /// Finished jobs to acknowledge first, each with its queue (at most 1000); the answer's
    /// `acks` says how each went, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acks: Vec<QueueAck>,
}

/// `POST /v1/leases/cancelled`: which of these leases were cancelled while their jobs ran
/// (`DELETE …/jobs/{id}?running=true`). A worker asks about the jobs it runs every half second
/// and stops the handlers of those answered.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct CancelledRequest {
    /// The leases the worker holds (at most 1000).
    pub leases: Vec<LeaseOf>,
}

/// A lease, named with its queue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LeaseOf {
    /// The job's queue.
    pub queue: String,
    /// The job's id.
    pub id: String,
    /// The lease token of its claim.
    pub lease_token: u64,
}

/// The answer of `POST /v1/leases/cancelled`.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
pub struct CancelledResponse {
    /// The leases asked about that were cancelled, in the order asked.
    pub cancelled: Vec<LeaseOf>,
}

/// Acks of several jobs at once.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct AckBatchRequest {
    /// The finished jobs (1-1000).
    pub acks: Vec<ClaimAck>,
}

/// How each ack of an [`AckBatchRequest`] went.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct AckBatchResponse {
    /// Per ack, in order: `acked`, `lease_lost` (another lease, or not leased), `cancelled`
    /// (cancelled while it ran) or `not_found`.
    pub acks: Vec<AckOutcome>,
}

/// An ack a claim or an ack batch carries.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ClaimAck {
    /// The job's id.
    pub id: String,
    /// The lease token of its claim.
    pub lease_token: u64,
    /// The handler's result, kept with the job while it is retained as done (its queue's or its
    /// own `keep_done_ms`) and answered by `GET …/jobs/{id}`: any JSON value, kept byte for
    /// byte (at most 65,535 bytes).
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// The result as base64 bytes, instead of `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_b64: Option<String>,
}

/// The ack of `a` (its result as `result` when the bytes are JSON, else `result_b64`).
impl From<&Ack> for ClaimAck {
    fn from(a: &Ack) -> Self {
        let (result, result_b64) = a.result.clone().map_or((None, None), payload_fields);
        Self {
            id: a.lease.id.to_string(),
            lease_token: a.lease.token,
            result,
            result_b64,
        }
    }
}

/// The ack it carries: a bad id or result refuses it.
impl TryFrom<ClaimAck> for Ack {
    type Error = Invalid;

    fn try_from(a: ClaimAck) -> Result<Self, Invalid> {
        Ok(Self {
            result: crate::payload::result_bytes(a.result.as_deref(), a.result_b64.as_deref())?,
            lease: LeaseRef {
                id: JobId::new(a.id)?,
                token: a.lease_token,
            },
        })
    }
}

impl QueueAck {
    /// The ack of `a`, in `queue`.
    pub fn of(queue: &QueueName, a: &Ack) -> Self {
        let ClaimAck {
            id,
            lease_token,
            result,
            result_b64,
        } = a.into();
        Self {
            queue: queue.to_string(),
            id,
            lease_token,
            result,
            result_b64,
        }
    }

    /// Its queue (unchecked) and the ack it carries.
    pub fn split(self) -> (String, ClaimAck) {
        let ack = ClaimAck {
            id: self.id,
            lease_token: self.lease_token,
            result: self.result,
            result_b64: self.result_b64,
        };
        (self.queue, ack)
    }
}

/// Leased jobs.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ClaimResponse {
    /// The jobs, in due order; empty when none became due within `wait_ms`.
    pub jobs: Vec<ClaimedJob>,
    /// Per ack of the request, in order: `acked`, `lease_lost` (another lease, or not leased)
    /// or `not_found`; absent when the request carried none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acks: Vec<AckOutcome>,
    /// When the answer holds no job and did not wait: in how many ms the queue's next job is
    /// due (or its rate or in-flight limit lets one start), so a worker that does not long-poll
    /// knows when to claim again; absent when nothing is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_due_in_ms: Option<u64>,
}

/// An ack.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
    /// The handler's result, kept with the job while it is retained as done (its queue's or its
    /// own `keep_done_ms`) and answered by `GET …/jobs/{id}`: any JSON value, kept byte for
    /// byte (at most 65,535 bytes).
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// The result as base64 bytes, instead of `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_b64: Option<String>,
}

/// A release: give a lease back, the job due again at once.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
    /// Do not count the attempt (the job never started); default true.
    #[serde(default = "yes")]
    pub undo_attempt: bool,
}

fn yes() -> bool {
    true
}

/// A nack.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
    /// Why the attempt failed (kept as `last_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Retry after this many ms instead of the job's backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// Dead-letter now.
    #[serde(default)]
    pub dead: bool,
}

/// An extension.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
    /// New lease length from now, ms (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}
