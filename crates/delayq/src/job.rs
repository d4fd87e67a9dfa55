//! The job model: what producers submit ([`NewJob`]), what handlers receive ([`Job`]), and what
//! the admin side reads ([`JobInfo`], [`QueueStats`]).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;
use crate::error::InvalidInput;
use crate::limits::{MAX_ATTEMPTS, MAX_DELAY, MAX_LEASE, MIN_LEASE};
use crate::name::{JobId, JobKey, QueueName};
use crate::target::Target;

/// `max_attempts` of a job that does not set one.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// When a job becomes due (a cron schedule is something else: [`crate::schedule`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Due now.
    Now,
    /// Due after this delay, measured on the backend's clock (the Redis server's `TIME`).
    Delay(Duration),
    /// Due at this absolute time, in milliseconds since the Unix epoch. A time in the past
    /// means "due now".
    At(u64),
}

impl Due {
    /// A delay in milliseconds as received from an untyped source (HTTP, CLI): negative,
    /// not-a-number and over-10-years values are refused.
    pub fn delay_ms(ms: f64) -> Result<Self, InvalidInput> {
        if !ms.is_finite() || ms < 0.0 {
            return Err(InvalidInput::Delay(format!(
                "delay_ms {ms} must be a finite number >= 0"
            )));
        }
        let d = Duration::from_millis(ms as u64);
        let s = Due::Delay(d);
        s.validate(0)?;
        Ok(s)
    }

    /// An absolute time. Times before 1970 are refused.
    pub fn at(t: SystemTime) -> Result<Self, InvalidInput> {
        let ms = t
            .duration_since(UNIX_EPOCH)
            .map_err(|_| InvalidInput::Delay("run_at is before 1970".into()))?
            .as_millis();
        Ok(Due::At(ms as u64))
    }

    /// Checks the 10-year limit; `now_ms` is the caller's clock, only used to bound `At`.
    pub fn validate(&self, now_ms: u64) -> Result<(), InvalidInput> {
        let max = MAX_DELAY.as_millis() as u64;
        match *self {
            Due::Now => Ok(()),
            Due::Delay(d) if d.as_millis() as u64 > max => Err(InvalidInput::Delay(format!(
                "delay of {} ms is over the 10-year limit",
                d.as_millis()
            ))),
            Due::At(t) if t > now_ms.saturating_add(max) => Err(InvalidInput::Delay(format!(
                "run_at {t} ms is more than 10 years away"
            ))),
            _ => Ok(()),
        }
    }
}

/// A job to enqueue. Build it with [`NewJob::new`] or [`NewJob::json`] and the setters.
#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    /// Explicit id for idempotent enqueue; generated when `None`.
    pub id: Option<JobId>,
    /// Opaque payload bytes.
    pub payload: Vec<u8>,
    /// When the job becomes due.
    pub due: Due,
    /// Deliveries before the job is dead-lettered; [`DEFAULT_MAX_ATTEMPTS`] when `None`.
    pub max_attempts: Option<u32>,
    /// Retry backoff; [`Backoff::default`] when `None`.
    pub backoff: Option<Backoff>,
    /// Lease length for this job, overriding the consumer's.
    pub lease: Option<Duration>,
    /// Longest one attempt may run: the handler is cancelled after it and the attempt fails
    /// with `timeout` (lease extension stops there too).
    pub timeout: Option<Duration>,
    /// When the job expires: a delivery not started by then goes to the dead letters with the
    /// error `expired` instead of running late.
    pub expires: Option<Expiry>,
    /// What an enqueue does when the id exists.
    pub on_conflict: OnConflict,
    /// Retention of this job once completed, overriding the queue's (see [`Retention`]).
    pub retention: Option<Retention>,
    /// Priority among due jobs, 0-9 (higher first; [`DEFAULT_PRIORITY`] when `None`).
    pub priority: Option<u8>,
    /// Deliver by HTTP to this target (a pusher runs the job; see [`crate::target`]).
    pub target: Option<Target>,
    /// The trace context of the code that enqueued it, carried to every attempt.
    pub trace: Option<crate::TraceContext>,
    /// Its fairness key (a tenant, a customer, an upstream host): claims share a queue among
    /// the keys with due jobs, and the queue's key limits bound each key (see [`JobKey`]).
    pub key: Option<JobKey>,
    /// The batch it joins. Set by the stores' [`crate::Batches`] calls, which check that the
    /// batch is open; a [`crate::Producer`] refuses a job that sets it.
    pub batch: Option<crate::batch::BatchId>,
    /// The jobs it waits for ([`crate::deps`]): until every one has ended it is
    /// [`JobState::Waiting`].
    pub depends: Option<crate::deps::Dependencies>,
}

/// `priority` of a job that does not set one.
pub const DEFAULT_PRIORITY: u8 = 5;

/// How long a completed job is kept. Both off by default: an acknowledged job's record is
/// deleted at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// Keep the completed job readable (state `done`, with its completion time) and listable
    /// this long, ms (0: not kept).
    #[serde(default)]
    pub keep_done_ms: u64,
    /// For this long after completion, ms, an enqueue of its id creates nothing and answers
    /// `created: false` with the job's state `done` (0: the id is free once done).
    #[serde(default)]
    pub dedupe_ms: u64,
}

impl Retention {
    /// Whether it keeps anything.
    pub fn any(&self) -> bool {
        self.keep_done_ms > 0 || self.dedupe_ms > 0
    }

    /// Checks both against [`crate::limits::MAX_RETENTION`].
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let max = crate::limits::MAX_RETENTION.as_millis() as u64;
        if self.keep_done_ms > max || self.dedupe_ms > max {
            return Err(InvalidInput::Settings(format!(
                "keep_done_ms and dedupe_ms must be at most {max} (30 days)"
            )));
        }
        Ok(())
    }
}

/// What an enqueue does with an id that exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnConflict {
    /// Keep the existing job, write nothing (idempotent enqueue).
    #[default]
    Keep,
    /// Debounce: an existing *scheduled* job gets the new payload, due time and options, and
    /// its created time becomes now (it keeps its attempts), atomically; a leased or dead one
    /// is not touched and the answer says which it is.
    Replace,
}

/// When a job expires (see [`NewJob::expires`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// At this time, ms since the epoch.
    At(u64),
    /// This long after the job's (first) due time, on the store's clock.
    AfterDue(Duration),
}

impl NewJob {
    /// A job with these payload bytes, due now.
    pub fn new(payload: impl Into<Vec<u8>>) -> Self {
        Self {
            id: None,
            payload: payload.into(),
            due: Due::Now,
            max_attempts: None,
            backoff: None,
            lease: None,
            timeout: None,
            expires: None,
            on_conflict: OnConflict::Keep,
            retention: None,
            priority: None,
            target: None,
            trace: None,
            key: None,
            batch: None,
            depends: None,
        }
    }

    /// Makes it wait for `jobs` (each a [`crate::DepRef`]): it becomes due once every one has
    /// ended, at the later of its own due time and that end; a dead or cancelled one sends it
    /// to the dead letters (see [`NewJob::on_dependency_failure`]).
    pub fn depends_on(mut self, jobs: impl IntoIterator<Item = crate::DepRef>) -> Self {
        self.depends.get_or_insert_with(Default::default).on = jobs.into_iter().collect();
        self
    }

    /// What a dead or cancelled dependency does to it (dead-letters it by default).
    pub fn on_dependency_failure(mut self, policy: crate::OnDependencyFailure) -> Self {
        self.depends.get_or_insert_with(Default::default).on_failure = policy;
        self
    }

    /// Its claim carries its dependencies' results ([`crate::DepStatus::result`]).
    pub fn include_dependency_results(mut self, yes: bool) -> Self {
        self.depends
            .get_or_insert_with(Default::default)
            .include_results = yes;
        self
    }

    /// A job whose payload is `value` as JSON.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<Self, InvalidInput> {
        serde_json::to_vec(value)
            .map(Self::new)
            .map_err(|e| InvalidInput::Payload(e.to_string()))
    }

    /// Sets the id (idempotent enqueue).
    pub fn id(mut self, id: JobId) -> Self {
        self.id = Some(id);
        self
    }

    /// Due after `delay` on the backend's clock.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.due = Due::Delay(delay);
        self
    }

    /// Due at an absolute time.
    pub fn run_at(mut self, at: SystemTime) -> Self {
        self.due = Due::at(at).unwrap_or(Due::Now);
        self
    }

    /// Sets when the job becomes due.
    pub fn due(mut self, due: Due) -> Self {
        self.due = due;
        self
    }

    /// Sets how many deliveries the job gets before it is dead-lettered.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Sets the retry backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Sets a lease length for this job that overrides the consumer's.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Sets the longest one attempt may run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the priority among due jobs (0-9, higher first).
    pub fn priority(mut self, p: u8) -> Self {
        self.priority = Some(p);
        self
    }

    /// Sets the job's fairness key (see [`JobKey`]).
    pub fn key(mut self, key: JobKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Sets how long the job is kept once completed (see [`Retention`]).
    pub fn retention(mut self, r: Retention) -> Self {
        self.retention = Some(r);
        self
    }

    /// Replaces a scheduled job with this id instead of keeping it (see [`OnConflict`]).
    pub fn replace(mut self) -> Self {
        self.on_conflict = OnConflict::Replace;
        self
    }

    /// Delivers the job by HTTP to `target` (see [`crate::target`]).
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Carries the trace context `trace` (the enqueuing request's) to every attempt.
    pub fn trace(mut self, trace: crate::TraceContext) -> Self {
        self.trace = Some(trace);
        self
    }

    /// Sets when the job expires unstarted.
    pub fn expires(mut self, expires: Expiry) -> Self {
        self.expires = Some(expires);
        self
    }

    /// The expiry as `(value ms, relative)`: relative values count from the job's creation
    /// time on the store's clock (so that an expiry after a relative due time needs no clock
    /// but the store's), absolute ones from the epoch.
    pub fn expiry_ms(&self) -> Option<(u64, bool)> {
        let to_ms = |d: Duration| d.as_millis().min(u128::from(u64::MAX)) as u64;
        Some(match (self.expires?, self.due) {
            (Expiry::At(t), _) => (t, false),
            (Expiry::AfterDue(a), Due::At(t)) => (t.saturating_add(to_ms(a)), false),
            (Expiry::AfterDue(a), Due::Delay(d)) => (to_ms(d).saturating_add(to_ms(a)), true),
            (Expiry::AfterDue(a), Due::Now) => (to_ms(a), true),
        })
    }

    /// Checks every field against the limits of [`crate::limits`].
    pub fn validate(&self, max_payload: usize, now_ms: u64) -> Result<(), InvalidInput> {
        if self.payload.len() > max_payload {
            return Err(InvalidInput::PayloadTooLarge {
                size: self.payload.len(),
                limit: max_payload,
            });
        }
        self.due.validate(now_ms)?;
        if let Some(n) = self.max_attempts
            && (n == 0 || n > MAX_ATTEMPTS)
        {
            return Err(InvalidInput::MaxAttempts(n.into()));
        }
        if let Some(b) = &self.backoff {
            b.validate()?;
        }
        if let Some(l) = self.lease {
            validate_lease(l)?;
        }
        if let Some(t) = self.timeout
            && (t < crate::limits::MIN_TIMEOUT || t > crate::limits::MAX_TIMEOUT)
        {
            return Err(InvalidInput::Deadline(format!(
                "timeout of {} ms is outside {}-{} ms",
                t.as_millis(),
                crate::limits::MIN_TIMEOUT.as_millis(),
                crate::limits::MAX_TIMEOUT.as_millis()
            )));
        }
        if let Some(r) = self.retention {
            r.validate()?;
        }
        if let Some(p) = self.priority
            && p > crate::limits::MAX_PRIORITY
        {
            return Err(InvalidInput::Priority(p.into()));
        }
        if let Some(t) = &self.target {
            t.validate()?;
            crate::target::validate_dispatch_deadline(self.timeout)?;
        }
        match self.expires {
            Some(Expiry::AfterDue(a)) if a > MAX_DELAY => Err(InvalidInput::Deadline(format!(
                "expire_after of {} ms is over the 10-year limit",
                a.as_millis()
            ))),
            Some(Expiry::At(t)) if t > now_ms.saturating_add(2 * MAX_DELAY.as_millis() as u64) => {
                Err(InvalidInput::Deadline(format!(
                    "expires_at {t} ms is more than 20 years away"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// Checks a lease length against [`MIN_LEASE`] and [`MAX_LEASE`].
pub fn validate_lease(lease: Duration) -> Result<(), InvalidInput> {
    if lease < MIN_LEASE || lease > MAX_LEASE {
        return Err(InvalidInput::Lease(format!(
            "{} ms is outside {}-{} ms",
            lease.as_millis(),
            MIN_LEASE.as_millis(),
            MAX_LEASE.as_millis()
        )));
    }
    Ok(())
}

/// The result of enqueueing one job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    /// The job's id (the given one or a generated one).
    pub id: JobId,
    /// Due time in ms since the epoch, on the backend's clock. For an existing id, the
    /// existing job's due time.
    pub due_at_ms: u64,
    /// `false` when a job with this id already existed and nothing was created.
    pub created: bool,
    /// With [`OnConflict::Replace`]: the existing scheduled job was replaced.
    #[serde(default)]
    pub replaced: bool,
    /// With [`OnConflict::Replace`], when nothing was written: the state of the existing job
    /// that refused it (leased or dead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<JobState>,
}

/// Identifies one lease of one job: the job id and the fencing token of the claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseRef {
    /// The job.
    pub id: JobId,
    /// The fencing token returned by the claim.
    pub token: u64,
}

/// A finished job to acknowledge: its lease, with the result its handler returned if it
/// gave one ([`crate::Completion`]). One type from the handler to the store: an ack rides on
/// a claim or goes in an ack call alike, with or without a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The lease to finish.
    pub lease: LeaseRef,
    /// The result, kept with the job while it is retained as done (at most
    /// [`crate::limits::MAX_RESULT_BYTES`]); `None`: none.
    pub result: Option<Vec<u8>>,
}

impl From<LeaseRef> for Ack {
    fn from(lease: LeaseRef) -> Self {
        Ack {
            lease,
            result: None,
        }
    }
}

impl Ack {
    /// An ack of `lease` keeping `result`.
    pub fn with_result(lease: LeaseRef, result: impl Into<Vec<u8>>) -> Self {
        Ack {
            lease,
            result: Some(result.into()),
        }
    }
}

/// A claimed job, as a handler receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// The job's id, stable across attempts.
    pub id: JobId,
    /// Its queue.
    pub queue: QueueName,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// This delivery's number, 1 for the first.
    pub attempt: u32,
    /// Deliveries allowed before dead-lettering.
    pub max_attempts: u32,
    /// When the job was due (ms since epoch, backend clock).
    pub due_at_ms: u64,
    /// When the job was first enqueued (ms since epoch, backend clock).
    pub created_at_ms: u64,
    /// The fencing token of this lease.
    pub lease_token: u64,
    /// When this lease expires (ms since epoch, backend clock).
    pub lease_deadline_ms: u64,
    /// The lease length granted.
    pub lease: Duration,
    /// The error of the previous attempt, if any.
    pub last_error: Option<String>,
    /// Longest this attempt may run (see [`NewJob::timeout`]).
    pub timeout: Option<Duration>,
    /// When the job expires unstarted (ms since epoch), if it does.
    pub expires_at_ms: Option<u64>,
    /// Its priority (0-9).
    pub priority: u8,
    /// Its HTTP push target, if it carries one.
    pub target: Option<Target>,
    /// The trace context it was enqueued with, if any.
    pub trace: Option<crate::TraceContext>,
    /// Its fairness key, if it carries one.
    pub key: Option<JobKey>,
    /// Fired when the job is cancelled while it runs (see [`crate::cancellation`]).
    pub cancellation: crate::Cancellation,
    /// Its dependencies with how each ended and their results, when it was enqueued with
    /// `include_dependency_results` ([`crate::deps`]); empty otherwise.
    pub dependencies: Vec<crate::deps::DepStatus>,
}

impl Job {
    /// The payload parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, InvalidInput> {
        serde_json::from_slice(&self.payload).map_err(|e| InvalidInput::Payload(e.to_string()))
    }

    /// The lease reference used to ack, nack or extend.
    pub fn lease_ref(&self) -> LeaseRef {
        LeaseRef {
            id: self.id.clone(),
            token: self.lease_token,
        }
    }

    /// The ack of this lease, without a result ([`Ack::with_result`] keeps one).
    pub fn to_ack(&self) -> Ack {
        self.lease_ref().into()
    }
}

/// Where a job is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its due time (or due and not yet claimed).
    Scheduled,
    /// Claimed by a consumer under a lease.
    Leased,
    /// Dead-lettered.
    Dead,
    /// Completed and kept for `keep_done_ms` / `dedupe_ms` (a queue or job setting).
    Done,
    /// Waiting for its dependencies to end ([`crate::deps`]); never claimed meanwhile.
    Waiting,
}

impl JobState {
    /// Every state, in code order.
    pub const ALL: [JobState; 5] = [
        JobState::Scheduled,
        JobState::Leased,
        JobState::Dead,
        JobState::Done,
        JobState::Waiting,
    ];

    /// The state's code in stores (SQL column, Lua replies): 0 scheduled, 1 leased, 2 dead,
    /// 3 done, 4 waiting.
    pub const fn code(self) -> u8 {
        match self {
            JobState::Scheduled => 0,
            JobState::Leased => 1,
            JobState::Dead => 2,
            JobState::Done => 3,
            JobState::Waiting => 4,
        }
    }

    /// The state of a store code; `None` for an unknown code.
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|s| i64::from(s.code()) == code)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobState::Scheduled => "scheduled",
            JobState::Leased => "leased",
            JobState::Dead => "dead",
            JobState::Done => "done",
            JobState::Waiting => "waiting",
        })
    }
}

/// Everything known about a stored job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job's id.
    pub id: JobId,
    /// Its state.
    pub state: JobState,
    /// Deliveries so far.
    pub attempt: u32,
    /// Deliveries allowed.
    pub max_attempts: u32,
    /// Due time (ms since epoch); for a leased job, the due time of the current delivery.
    pub due_at_ms: u64,
    /// Creation time (ms since epoch).
    pub created_at_ms: u64,
    /// Lease deadline of a leased job.
    pub lease_deadline_ms: Option<u64>,
    /// When a dead job failed for the last time.
    pub failed_at_ms: Option<u64>,
    /// When a done job completed.
    #[serde(default)]
    pub completed_at_ms: Option<u64>,
    /// The error of the last failed attempt.
    pub last_error: Option<String>,
    /// Longest one attempt may run, in ms.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// When the job expires unstarted (ms since epoch), if it does.
    #[serde(default)]
    pub expires_at_ms: Option<u64>,
    /// Its priority (0-9).
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Its HTTP push target, if it carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// The trace context it was enqueued with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::TraceContext>,
    /// Its fairness key, if it carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<JobKey>,
    /// The payload bytes.
    #[serde(skip)]
    pub payload: Vec<u8>,
    /// The result its handler returned with the ack ([`crate::Completion::result`]): only on a
    /// job kept as done.
    #[serde(skip)]
    pub result: Option<Vec<u8>>,
    /// A job enqueued with dependencies: each, with how it stands (read by `get`; empty in
    /// listings and for a job without any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<crate::deps::DepStatus>,
    /// The jobs waiting for this one (read by `get`, while it has not ended; empty in
    /// listings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<crate::deps::DepRef>,
    /// Kept in the cold tier (PostgreSQL beside the store, for a far due time) rather than in
    /// the store itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cold: bool,
}

impl JobInfo {
    /// The job as a handler receives it, leased from `queue` under `lease_token` for `lease`
    /// until [`JobInfo::lease_deadline_ms`]: the one mapping of a stored job to a claimed one
    /// (each store reads its record into a `JobInfo`, then this).
    pub fn into_job(self, queue: QueueName, lease_token: u64, lease: Duration) -> Job {
        Job {
            id: self.id,
            queue,
            payload: self.payload,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            due_at_ms: self.due_at_ms,
            created_at_ms: self.created_at_ms,
            lease_token,
            lease_deadline_ms: self.lease_deadline_ms.unwrap_or_default(),
            lease,
            last_error: self.last_error,
            timeout: self.timeout_ms.map(Duration::from_millis),
            expires_at_ms: self.expires_at_ms,
            priority: self.priority,
            target: self.target,
            trace: self.trace,
            key: self.key,
            cancellation: crate::Cancellation::new(),
            dependencies: self.dependencies,
        }
    }
}

/// What a cancel found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// The job was scheduled and is now removed: the caller won the race.
    Cancelled,
    /// A consumer holds the job right now; it was not cancelled (a plain cancel).
    Leased,
    /// A consumer held the job: it is now ended cancelled and its consumer will be told
    /// ([`crate::Backend::cancel_running`]).
    Cancelling,
    /// The job is dead-lettered; it was not touched (use the dead-letter tools).
    Dead,
    /// No such job: never enqueued, already done, or already cancelled.
    NotFound,
}

/// What a nack did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum NackOutcome {
    /// The job will be delivered again.
    Retrying {
        /// When (ms since epoch).
        due_at_ms: u64,
    },
    /// The job was dead-lettered.
    Dead {
        /// When (ms since epoch).
        failed_at_ms: u64,
    },
}

/// A negative acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// Why the attempt failed (stored as the job's `last_error`, truncated to 1 KiB).
    pub error: String,
    /// Retry after this delay instead of the job's backoff.
    pub retry_in: Option<Duration>,
    /// Dead-letter now, whatever attempts are left.
    pub dead: bool,
}

impl Nack {
    /// A failed attempt retried by the job's backoff policy.
    pub fn error(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            retry_in: None,
            dead: false,
        }
    }
}

/// What an ack did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AckOutcome {
    /// The job is done and its record deleted.
    Acked,
    /// The job exists but the token is not its current lease; nothing changed.
    LeaseLost,
    /// No such job (already done, cancelled, or never enqueued); nothing changed.
    NotFound,
    /// The job was cancelled while it ran (`DELETE …?running=true`); nothing changed.
    Cancelled,
}

impl AckOutcome {
    /// Every outcome.
    pub const ALL: [AckOutcome; 4] = [
        Self::Acked,
        Self::LeaseLost,
        Self::NotFound,
        Self::Cancelled,
    ];

    /// Its name on the wire (the HTTP claim's `acks` answer).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Acked => "acked",
            Self::LeaseLost => "lease_lost",
            Self::NotFound => "not_found",
            Self::Cancelled => "cancelled",
        }
    }

    /// The outcome named `s` ([`Self::as_str`]).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

/// Counts of one queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Jobs waiting for a due time still to come (the due ones are [`QueueStats::due`]): what
    /// a listing of the `scheduled` state shows.
    pub scheduled: u64,
    /// Scheduled jobs that are due now.
    pub due: u64,
    /// Scheduled jobs due within the next minute (not yet due).
    pub due_next_minute: u64,
    /// Jobs under a lease.
    pub leased: u64,
    /// Dead-lettered jobs.
    pub dead: u64,
    /// How long the oldest due job has been waiting, in ms (0 when none is due).
    pub oldest_overdue_ms: u64,
    /// Whether the queue is paused (it accepts jobs but leases none).
    #[serde(default)]
    pub paused: bool,
    /// Due jobs held back right now by the queue's rate or `max_in_flight` limit (0 without
    /// limits).
    #[serde(default)]
    pub waiting_on_limit: u64,
    /// Completed jobs kept (retention).
    #[serde(default)]
    pub done: u64,
    /// Jobs in state waiting: waiting for their dependencies to end ([`crate::deps`]).
    #[serde(default)]
    pub awaiting: u64,
}

impl QueueStats {
    /// Every job waiting for a consumer, due or not: [`QueueStats::scheduled`] plus
    /// [`QueueStats::due`].
    pub fn waiting(&self) -> u64 {
        self.scheduled + self.due
    }
}

fn default_priority() -> u8 {
    DEFAULT_PRIORITY
}

/// Milliseconds since the Unix epoch on this host's clock.
pub fn system_now_ms() -> u64 {
    crate::clock::system_now_us() / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_ms_rejects_bad_numbers() {
        assert!(Due::delay_ms(-1.0).is_err());
        assert!(Due::delay_ms(f64::NAN).is_err());
        assert!(Due::delay_ms(f64::INFINITY).is_err());
        assert!(Due::delay_ms(11.0 * 365.0 * 86_400_000.0).is_err());
        assert_eq!(
            Due::delay_ms(250.0).unwrap(),
            Due::Delay(Duration::from_millis(250))
        );
    }

    #[test]
    fn new_job_validation() {
        let ok = NewJob::new(vec![0u8; 10]);
        assert!(ok.validate(10, 0).is_ok());
        assert!(matches!(
            ok.validate(9, 0),
            Err(InvalidInput::PayloadTooLarge { size: 10, limit: 9 })
        ));
        assert!(NewJob::new("x").max_attempts(0).validate(10, 0).is_err());
        assert!(
            NewJob::new("x")
                .lease(Duration::from_millis(1))
                .validate(10, 0)
                .is_err()
        );
        let far = Due::At(11 * 365 * 86_400_000);
        assert!(NewJob::new("x").due(far).validate(10, 0).is_err());
        assert!(NewJob::new("x").due(Due::At(1)).validate(10, 0).is_ok());
    }
}
