//! Request and response bodies of the API, with their JSON schemas.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use delayq::{Backoff, Due, Job, JobId, JobInfo, NewJob};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorCode};
use crate::push_model::TargetView;

/// A job to enqueue. Give `payload` (any JSON value, stored byte for byte as sent) or
/// `payload_b64` (bytes, base64); `delay_ms` or `run_at` (neither: due now).
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// Job id for idempotent enqueue; generated when absent.
    pub id: Option<String>,
    /// Payload as JSON.
    #[schema(value_type = Object)]
    pub payload: Option<Box<RawValue>>,
    /// Payload as base64 bytes.
    pub payload_b64: Option<String>,
    /// Delay in ms (0 to 10 years).
    pub delay_ms: Option<f64>,
    /// Absolute due time: ms since the epoch (number) or RFC 3339 text; in the past = now.
    #[schema(value_type = Object)]
    pub run_at: Option<serde_json::Value>,
    /// Deliveries before dead-lettering (1-10000, default 10).
    pub max_attempts: Option<u32>,
    /// Retry backoff.
    #[schema(value_type = Object)]
    pub backoff: Option<Backoff>,
    /// Lease length for this job, overriding the consumer's (10 ms - 24 h).
    pub lease_ms: Option<u64>,
    /// Longest one attempt may run (10 ms - 24 h): the library's consumer cancels the
    /// handler then and the attempt fails with `timeout`; HTTP consumers read it from the claim.
    pub timeout_ms: Option<u64>,
    /// A delivery not started by this time (ms since the epoch or RFC 3339) goes to the dead
    /// letters with the error `expired` instead of running late.
    #[schema(value_type = Object)]
    pub expires_at: Option<serde_json::Value>,
    /// Like `expires_at`, as a time after the job's due time (server clock).
    pub expire_after_ms: Option<u64>,
    /// When the id exists: `keep` (default: write nothing, answer `created: false`) or
    /// `replace` (debounce: a scheduled job gets this payload, due time and options; a leased
    /// or dead one is not touched and `state` says which).
    #[schema(value_type = Option<String>)]
    pub on_conflict: Option<delayq::OnConflict>,
    /// Priority among due jobs, 0-9 (default 5; higher first; a due job gains a level for
    /// every minute it waits, so none starves).
    pub priority: Option<u8>,
    /// Keep the job readable as `done` this long after it completes, ms (overrides the
    /// queue's; with `dedupe_ms`).
    pub keep_done_ms: Option<u64>,
    /// Refuse its id again for this long after it completes, ms (overrides the queue's).
    pub dedupe_ms: Option<u64>,
    /// Deliver by HTTP: a pusher (`delayq serve --push`) sends the payload to this target at
    /// the due time (`timeout_ms` is then the dispatch deadline: default 30 s, at most 30 min).
    pub target: Option<TargetView>,
}

impl EnqueueRequest {
    /// Validates the shape and builds the job (limits are checked by the producer).
    pub fn into_job(self) -> Result<NewJob, ApiError> {
        let payload = payload_bytes(self.payload, self.payload_b64)?;
        let schedule = match (self.delay_ms, self.run_at) {
            (Some(_), Some(_)) => {
                return Err(ApiError::new(
                    ErrorCode::InvalidDelay,
                    "give delay_ms or run_at, not both",
                ));
            }
            (Some(ms), None) => Due::delay_ms(ms)?,
            (None, Some(at)) => run_at(&at)?,
            (None, None) => Due::Now,
        };
        let mut job = NewJob::new(payload).due(schedule);
        if let Some(id) = self.id {
            job = job.id(JobId::new(id)?);
        }
        if let Some(n) = self.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(b) = self.backoff {
            job = job.backoff(b);
        }
        if let Some(l) = self.lease_ms {
            job = job.lease(std::time::Duration::from_millis(l));
        }
        if let Some(t) = self.timeout_ms {
            job = job.timeout(std::time::Duration::from_millis(t));
        }
        job.on_conflict = self.on_conflict.unwrap_or_default();
        job.priority = self.priority;
        job.target = self.target.map(Into::into);
        if self.keep_done_ms.is_some() || self.dedupe_ms.is_some() {
            job.retention = Some(delayq::Retention {
                keep_done_ms: self.keep_done_ms.unwrap_or(0),
                dedupe_ms: self.dedupe_ms.unwrap_or(0),
            });
        }
        match (self.expires_at, self.expire_after_ms) {
            (Some(_), Some(_)) => {
                return Err(ApiError::new(
                    ErrorCode::InvalidDeadline,
                    "give expires_at or expire_after_ms, not both",
                ));
            }
            (Some(at), None) => {
                let Due::At(ms) = run_at(&at).map_err(|e| {
                    ApiError::new(
                        ErrorCode::InvalidDeadline,
                        format!("expires_at: {}", e.message),
                    )
                })?
                else {
                    unreachable!("run_at parses to an absolute time")
                };
                job = job.expires(delayq::Expiry::At(ms));
            }
            (None, Some(after)) => {
                job = job.expires(delayq::Expiry::AfterDue(std::time::Duration::from_millis(
                    after,
                )));
            }
            (None, None) => {}
        }
        Ok(job)
    }
}

/// The payload bytes of a body that gives `payload` (raw JSON, byte for byte) or
/// `payload_b64`: exactly one of them.
pub fn payload_bytes(
    payload: Option<Box<RawValue>>,
    payload_b64: Option<String>,
) -> Result<Vec<u8>, ApiError> {
    match (payload, payload_b64) {
        (Some(raw), None) => Ok(raw.get().as_bytes().to_vec()),
        (None, Some(b)) => B64
            .decode(b.as_bytes())
            .map_err(|e| ApiError::new(ErrorCode::InvalidPayload, format!("payload_b64: {e}"))),
        (Some(_), Some(_)) => Err(ApiError::new(
            ErrorCode::InvalidPayload,
            "give payload or payload_b64, not both",
        )),
        (None, None) => Err(ApiError::new(
            ErrorCode::InvalidPayload,
            "payload or payload_b64 is required",
        )),
    }
}

/// `run_at` as ms since the epoch or RFC 3339 text (`Z` or `±HH:MM`).
pub fn run_at(v: &serde_json::Value) -> Result<Due, ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::InvalidDelay, m);
    match v {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(ms) => Ok(Due::At(ms)),
            None => Err(bad(format!("run_at {n} must be a whole number of ms >= 0"))),
        },
        serde_json::Value::String(s) => delayq::rfc3339::parse_ms(s)
            .map(Due::At)
            .ok_or_else(|| bad(format!("run_at {s:?} is not RFC 3339"))),
        _ => Err(bad("run_at must be a number of ms or RFC 3339 text".into())),
    }
}

/// The answer to one enqueue.
#[derive(Serialize, ToSchema, Debug)]
pub struct EnqueueResponse {
    /// The job's id.
    pub id: String,
    /// Due time, ms since the epoch (server clock); for an existing id, the existing job's.
    pub due_at: u64,
    /// `false` when the id already existed and nothing was written (or it was replaced).
    pub created: bool,
    /// With `on_conflict: "replace"`: the existing scheduled job was replaced (`due_at` is
    /// the new due time).
    pub replaced: bool,
    /// With `on_conflict: "replace"`, when the existing job was not touched: its state
    /// (`leased` or `dead`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// A payload on the way out: `payload` (raw JSON, byte for byte) when the bytes are JSON,
/// else `payload_b64`.
#[derive(Serialize, ToSchema, Debug, Default)]
pub struct PayloadOut {
    /// The payload when it is valid JSON.
    #[schema(value_type = Object)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// The payload bytes in base64 when they are not JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
}

impl PayloadOut {
    /// Chooses the representation of `bytes`: raw JSON only when it reproduces them exactly.
    pub fn new(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        if let Ok(text) = std::str::from_utf8(&bytes)
            && let Ok(raw) = RawValue::from_string(text.to_owned())
            && raw.get().len() == len
        {
            return Self {
                payload: Some(raw),
                payload_b64: None,
            };
        }
        Self {
            payload: None,
            payload_b64: Some(B64.encode(&bytes)),
        }
    }
}

/// A stored job.
#[derive(Serialize, ToSchema, Debug)]
pub struct JobView {
    /// The job's id.
    pub id: String,
    /// `scheduled`, `leased` or `dead`.
    pub state: String,
    /// Deliveries so far.
    pub attempt: u32,
    /// Deliveries allowed.
    pub max_attempts: u32,
    /// Due time, ms since the epoch.
    pub due_at: u64,
    /// Creation time, ms since the epoch.
    pub created_at: u64,
    /// Lease deadline of a leased job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_deadline: Option<u64>,
    /// When a dead job failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<u64>,
    /// When a done job completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    /// Error of the last failed attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Longest one attempt may run, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// When the job expires unstarted, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Priority among due jobs (0-9, default 5).
    pub priority: u8,
    /// Its HTTP push target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetView>,
    /// The payload.
    #[serde(flatten)]
    pub payload: PayloadOut,
}

impl From<JobInfo> for JobView {
    fn from(j: JobInfo) -> Self {
        Self {
            id: j.id.to_string(),
            state: j.state.to_string(),
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            due_at: j.due_at_ms,
            created_at: j.created_at_ms,
            lease_deadline: j.lease_deadline_ms,
            failed_at: j.failed_at_ms,
            completed_at: j.completed_at_ms,
            last_error: j.last_error,
            timeout_ms: j.timeout_ms,
            expires_at: j.expires_at_ms,
            priority: j.priority,
            target: j.target.map(Into::into),
            payload: PayloadOut::new(j.payload),
        }
    }
}

/// A job handed to a consumer.
#[derive(Serialize, ToSchema, Debug)]
pub struct ClaimedJob {
    /// The job's id.
    pub id: String,
    /// Fencing token: give it back with ack, nack and extend.
    pub lease_token: u64,
    /// This delivery's number (1 for the first).
    pub attempt: u32,
    /// Deliveries allowed.
    pub max_attempts: u32,
    /// Due time, ms since the epoch.
    pub due_at: u64,
    /// Creation time, ms since the epoch.
    pub created_at: u64,
    /// When this lease expires, ms since the epoch.
    pub lease_deadline: u64,
    /// Error of the previous attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Longest this attempt may run, ms: stop the work and nack with `timeout` after it (and
    /// stop extending the lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// When the job expires unstarted, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Priority among due jobs (0-9, default 5).
    pub priority: u8,
    /// Its HTTP push target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetView>,
    /// The payload.
    #[serde(flatten)]
    pub payload: PayloadOut,
}

impl From<Job> for ClaimedJob {
    fn from(j: Job) -> Self {
        Self {
            id: j.id.to_string(),
            lease_token: j.lease_token,
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            due_at: j.due_at_ms,
            created_at: j.created_at_ms,
            lease_deadline: j.lease_deadline_ms,
            last_error: j.last_error,
            timeout_ms: j.timeout.map(|t| t.as_millis() as u64),
            expires_at: j.expires_at_ms,
            priority: j.priority,
            target: j.target.map(Into::into),
            payload: PayloadOut::new(j.payload),
        }
    }
}

/// A claim (long poll).
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Most jobs to lease (1-1000, default 1).
    pub max: Option<usize>,
    /// Lease length in ms (default 30000).
    pub lease_ms: Option<u64>,
    /// How long to wait for a due job (0-60000 ms, default 0).
    pub wait_ms: Option<u64>,
    /// Finished jobs to acknowledge before leasing (at most 1000), so a worker acks and
    /// claims in one request; the answer's `acks` says how each went, in order.
    #[serde(default)]
    pub acks: Vec<ClaimAck>,
    /// A name for this long poll (1-64 characters of `[A-Za-z0-9._-]`, unique per client), so
    /// the client can end it early with `DELETE /v1/queues/{q}/polls/{poll_id}`.
    pub poll_id: Option<String>,
}

/// Acks of several jobs at once.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct AckBatchRequest {
    /// The finished jobs (1-1000).
    pub acks: Vec<ClaimAck>,
}

/// How each ack of an [`AckBatchRequest`] went.
#[derive(Serialize, ToSchema, Debug)]
pub struct AckBatchResponse {
    /// Per ack, in order: `acked`, `lease_lost` (another lease, or not leased) or `not_found`.
    pub acks: Vec<&'static str>,
}

/// An ack a claim or an ack batch carries.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ClaimAck {
    /// The job's id.
    pub id: String,
    /// The lease token of its claim.
    pub lease_token: u64,
}

/// Leased jobs.
#[derive(Serialize, ToSchema, Debug)]
pub struct ClaimResponse {
    /// The jobs, in due order; empty when none became due within `wait_ms`.
    pub jobs: Vec<ClaimedJob>,
    /// Per ack of the request, in order: `acked`, `lease_lost` (another lease, or not leased)
    /// or `not_found`; absent when the request carried none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acks: Vec<&'static str>,
}

/// An ack.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
}

/// A release: give a lease back, the job due again at once.
#[derive(Deserialize, ToSchema, Debug)]
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
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
    /// Why the attempt failed (kept as `last_error`).
    pub error: Option<String>,
    /// Retry after this many ms instead of the job's backoff.
    pub retry_in_ms: Option<u64>,
    /// Dead-letter now.
    #[serde(default)]
    pub dead: bool,
}

/// An extension.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// The lease token of the claim.
    pub lease_token: u64,
    /// New lease length from now, ms (default 30000).
    pub lease_ms: Option<u64>,
}

/// A reschedule.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct RescheduleRequest {
    /// New delay in ms.
    pub delay_ms: Option<f64>,
    /// New absolute time (ms since the epoch or RFC 3339).
    #[schema(value_type = Object)]
    pub run_at: Option<serde_json::Value>,
}

/// Outcome of ack, nack, extend, cancel, reschedule or requeue.
#[derive(Serialize, ToSchema, Debug, Default)]
pub struct Outcome {
    /// The job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `acked`, `retrying`, `dead`, `extended`, `cancelled`, `rescheduled`, `requeued`,
    /// `purged`, `deleted`, `due_now`, `paused`, `resumed`.
    pub outcome: String,
    /// New due time (retrying, rescheduled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_at: Option<u64>,
    /// New lease deadline (extended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_deadline: Option<u64>,
    /// Jobs affected (requeue all, purge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl Outcome {
    /// `outcome` for job `id`, no other field.
    pub fn of(id: &JobId, outcome: &str) -> Self {
        Self {
            id: Some(id.to_string()),
            outcome: outcome.to_owned(),
            ..Self::default()
        }
    }
}

/// Counts of one queue.
#[derive(Serialize, ToSchema, Debug)]
pub struct QueueView {
    /// The queue.
    pub queue: String,
    /// Jobs waiting (due or not).
    pub scheduled: u64,
    /// Scheduled jobs due now.
    pub due: u64,
    /// Scheduled jobs due within the next minute.
    pub due_next_minute: u64,
    /// Jobs under a lease.
    pub leased: u64,
    /// Dead jobs.
    pub dead: u64,
    /// Age of the oldest due job, ms.
    pub oldest_overdue_ms: u64,
    /// Whether the queue is paused (accepts jobs, leases none).
    pub paused: bool,
    /// Due jobs held back right now by the queue's `rate` or `max_in_flight`.
    pub waiting_on_limit: u64,
    /// Completed jobs kept (retention).
    pub done: u64,
    /// The queue's settings (in `GET /v1/queues/{q}` and `PUT`; absent from the list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsView>,
}

/// A queue's settings, as `GET /v1/queues/{q}` shows them.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SettingsView {
    /// Shards: hash slots the queue's jobs spread over (Redis; 1-256, default 1). Changes only
    /// while the queue is empty.
    pub shards: u32,
    /// One-delay lane (Redis): jobs whose due times come in arrival order are kept whole in
    /// a list, ~45 % less memory each. Changes only while the queue is empty.
    #[serde(default)]
    pub lane: bool,
    /// Width of the lane's time windows, ms (0: none): a lane queue's job due more than one
    /// width past its window's start waits whole in that window's list (~40 % less memory).
    #[serde(default)]
    pub lane_window_ms: u32,
    /// Most jobs started per second over all consumers (token bucket); `null`: no limit.
    pub rate: Option<RateView>,
    /// Most jobs leased at once over all consumers; `null`: no limit.
    pub max_in_flight: Option<u32>,
    /// Completed jobs stay readable as `done` this long, ms (0: deleted at once).
    pub keep_done_ms: u64,
    /// A completed job's id is refused this long, ms (0: free once done).
    pub dedupe_ms: u64,
    /// Default HTTP push target of the queue's jobs that carry none; `null`: none.
    pub target: Option<TargetView>,
    /// Who takes the due jobs: `pull` (workers claim them) or `push` (`delayq serve --push`
    /// sends each to its target).
    #[schema(value_type = String, example = "pull")]
    pub delivery: delayq::DeliveryMode,
}

/// A start-rate limit: `per_s` tokens a second, at most `burst` kept; each job started takes
/// one. On a sharded queue each shard keeps its share.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct RateView {
    /// Tokens per second (> 0, may be fractional: 0.5 = a job every 2 s).
    pub per_s: f64,
    /// Most tokens kept (1-1,000,000): jobs that may start at once after a quiet spell.
    pub burst: u32,
}

/// A field that may be given as `null` (remove) or a value (set), or left out (keep).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The body of `PUT /v1/queues/{q}`: any subset of the settings; a field not given keeps its
/// stored value.
#[derive(Deserialize, ToSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// Shards (Redis; 1-256). Changes only while the queue is empty.
    pub shards: Option<u32>,
    /// One-delay lane (Redis): keep jobs whose due times come in arrival order — every job of
    /// a queue with one delay — whole in a list (~45 % less memory each). Changes only while
    /// the queue is empty.
    pub lane: Option<bool>,
    /// Width of the lane's time windows, ms (0: none; 100-60,000): a job of a lane queue
    /// due more than one width past its window's start is kept whole in that window (~40 %
    /// less memory) until one width before the window starts. Turning the lane on without it
    /// gives 10,000 when the queue has none. Changes only while the queue is empty.
    pub lane_window_ms: Option<u32>,
    /// Start-rate limit; `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<RateView>)]
    pub rate: Option<Option<RateView>>,
    /// Most jobs leased at once (1-1,000,000); `null` removes the limit.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<u32>)]
    pub max_in_flight: Option<Option<u32>>,
    /// Keep completed jobs readable as `done` this long, ms (0: off; at most 30 days).
    pub keep_done_ms: Option<u64>,
    /// Refuse a completed job's id this long, ms (0: off; at most 30 days).
    pub dedupe_ms: Option<u64>,
    /// Default push target of the queue's jobs that carry none (the queue is then delivered
    /// by `delayq serve --push`); `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<TargetView>)]
    pub target: Option<Option<TargetView>>,
    /// `pull` (workers claim the jobs; a job with a target is refused) or `push` (pushers
    /// deliver them; a job without a target is refused unless the queue has a default one).
    /// Not given: as it is — except that giving a pull queue a default `target` makes it
    /// `push`.
    #[schema(value_type = Option<String>, example = "push")]
    pub delivery: Option<delayq::DeliveryMode>,
}

impl SettingsPatch {
    /// The settings after this patch of `current`.
    pub fn apply(&self, current: delayq::QueueSettings) -> delayq::QueueSettings {
        let mut s = delayq::QueueSettings {
            shards: self.shards.unwrap_or(current.shards),
            rate: self.rate.map_or(current.rate, |r| {
                r.map(|r| delayq::Rate {
                    per_s: r.per_s,
                    burst: r.burst,
                })
            }),
            max_in_flight: self.max_in_flight.unwrap_or(current.max_in_flight),
            retention: delayq::Retention {
                keep_done_ms: self.keep_done_ms.unwrap_or(current.retention.keep_done_ms),
                dedupe_ms: self.dedupe_ms.unwrap_or(current.retention.dedupe_ms),
            },
            ..current
        };
        if let Some(t) = &self.target {
            s.set_target(t.clone().map(Into::into));
        }
        if let Some(d) = self.delivery {
            s.delivery = d;
        }
        s.set_lane(self.lane, self.lane_window_ms);
        s
    }
}

impl QueueView {
    /// From stats.
    pub fn new(queue: &str, s: delayq::QueueStats) -> Self {
        Self {
            queue: queue.to_owned(),
            scheduled: s.scheduled,
            due: s.due,
            due_next_minute: s.due_next_minute,
            leased: s.leased,
            dead: s.dead,
            oldest_overdue_ms: s.oldest_overdue_ms,
            paused: s.paused,
            waiting_on_limit: s.waiting_on_limit,
            done: s.done,
            settings: None,
        }
    }

    /// With the queue's settings.
    pub fn with_settings(mut self, s: &delayq::QueueSettings) -> Self {
        self.settings = Some(SettingsView {
            shards: s.shards,
            lane: s.lane,
            lane_window_ms: s.lane_window_ms,
            rate: s.rate.map(|r| RateView {
                per_s: r.per_s,
                burst: r.burst,
            }),
            max_in_flight: s.max_in_flight,
            keep_done_ms: s.retention.keep_done_ms,
            dedupe_ms: s.retention.dedupe_ms,
            target: s.target.clone().map(Into::into),
            delivery: s.delivery,
        });
        self
    }
}

/// Paging of the dead-letter list.
#[derive(Deserialize, utoipa::IntoParams, Debug)]
#[serde(deny_unknown_fields)]
pub struct Page {
    /// Skip this many (default 0).
    pub offset: Option<usize>,
    /// At most this many (1-1000, default 100).
    pub limit: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_out_is_byte_exact() {
        let p = PayloadOut::new(br#"{"a": 1.50, "b":[1,2]}"#.to_vec());
        assert_eq!(p.payload.unwrap().get(), r#"{"a": 1.50, "b":[1,2]}"#);
        let p = PayloadOut::new(vec![0xff, 0, 1]);
        assert_eq!(p.payload_b64.as_deref(), Some("/wAB"));
        let p = PayloadOut::new(b"not json".to_vec());
        assert_eq!(p.payload_b64.as_deref(), Some("bm90IGpzb24="));
        let p = PayloadOut::new(b" 1".to_vec());
        assert_eq!(
            p.payload_b64.as_deref(),
            Some("IDE="),
            "whitespace would be lost as JSON"
        );
    }
}
