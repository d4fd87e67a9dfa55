//! Errors on the wire: every error body is `{"code", "message"}` ([`ErrorBody`]) with a stable
//! [`ErrorCode`]; the table of codes and statuses lives here (docs/API.md lists it, a test keeps
//! the two in step). [`Invalid`] is a request refused by the shape checks of this crate.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Declares [`ErrorCode`] from one table: variant, wire code, HTTP status, meaning.
macro_rules! error_codes {
    ($($variant:ident = $code:literal, $status:literal, $meaning:literal;)*) => {
        /// Every error code of the API, with its status and meaning (docs/API.md lists them in
        /// this order; a test keeps the two in step).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(#[doc = $meaning] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in the order of docs/API.md.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The stable wire code (`"invalid_json"`, …).
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            /// The HTTP status it is answered with.
            pub const fn status(self) -> u16 {
                match self { $(ErrorCode::$variant => $status,)* }
            }

            /// What the code means, for docs.
            pub const fn meaning(self) -> &'static str {
                match self { $(ErrorCode::$variant => $meaning,)* }
            }

            /// The code of a wire string; `None` for a code this version does not know (a
            /// newer server's).
            pub fn parse(code: &str) -> Option<Self> {
                match code { $($code => Some(ErrorCode::$variant),)* _ => None }
            }
        }
    };
}

error_codes! {
    InvalidJson = "invalid_json", 400, "the body is not valid JSON (or is truncated)";
    InvalidBody = "invalid_body", 400, "the JSON does not match the request schema (wrong type, missing or unknown field)";
    InvalidQueueName = "invalid_queue_name", 400, "queue name outside [A-Za-z0-9._-]{1,128}";
    InvalidJobId = "invalid_job_id", 400, "job id empty, over 256 bytes, or with control characters";
    InvalidPayload = "invalid_payload", 400, "payload missing, both payload and payload_b64 given, or bad base64";
    InvalidDelay = "invalid_delay", 400, "delay_ms negative, not a number or over 10 years; run_at malformed or too far; both given";
    InvalidMaxAttempts = "invalid_max_attempts", 400, "max_attempts outside 1-10000";
    InvalidBackoff = "invalid_backoff", 400, "backoff out of range (base > cap or cap over 30 days)";
    InvalidLease = "invalid_lease", 400, "lease_ms outside 10 ms - 24 h";
    InvalidBatch = "invalid_batch", 400, "a batch that is empty or over 10,000 jobs; claim max outside 1-1000; wait_ms over 60 s; acks empty (an ack batch) or over 1,000";
    InvalidQuery = "invalid_query", 400, "query parameters that do not parse";
    InvalidSettings = "invalid_settings", 400, "queue settings out of range (shards outside 1-256, or more than 1 on the embedded store; rate.per_s not > 0, rate.burst or max_in_flight outside 1-1,000,000 or under the shard count)";
    InvalidPriority = "invalid_priority", 400, "priority over 9";
    InvalidKey = "invalid_key", 400, "key empty, over 128 bytes, or with control characters";
    InvalidBatchId = "invalid_batch_id", 400, "a batch id empty, over 241 bytes, or with control characters";
    InvalidDependencies = "invalid_dependencies", 400, "depends_on empty, over 1,000 jobs, naming a job twice or the job itself, or an entry that is neither an id nor {queue, id}";
    InvalidFlow = "invalid_flow", 400, "a flow (POST /v1/flows) with a cycle, a dependency on a job neither in the flow nor in the store, an id twice, a job without an id, or a bad job (the message names it); nothing was written";
    InvalidSchedule = "invalid_schedule", 400, "a schedule name outside [A-Za-z0-9._-]{1,128}, a cron expression that does not parse, an unknown time zone, every_ms under 1,000, both or neither of cron and every_ms, or catch_up other than none, one, all";
    InvalidDeadline = "invalid_deadline", 400, "timeout_ms outside 10 ms - 24 h (30 min for a job with a push target), expire_after_ms over 10 years, expires_at malformed or too far, or both expiry forms given";
    InvalidTrace = "invalid_trace", 400, "a job's traceparent is not a W3C trace context (00-<32 hex>-<16 hex>-<2 hex>, lower case, ids not all zero), or its tracestate is over 512 bytes or not printable ASCII (invalid traceparent and tracestate headers are ignored instead, as W3C propagators do)";
    InvalidPollId = "invalid_poll_id", 400, "a long poll's poll_id outside [A-Za-z0-9._-]{1,64}";
    InvalidTarget = "invalid_target", 400, "a push target's url is not an absolute http(s) URL with a host (no credentials, no fragment), its method is not POST, PUT, PATCH, DELETE, GET, HEAD or OPTIONS, or a header is invalid or reserved (host, content-length, webhook-*, delayq-*, ...)";
    DeliveryMismatch = "delivery_mismatch", 400, "a job with a target on a pull queue, or a job without one on a push queue without a default target (the queue's `delivery` setting decides; nothing was written)";
    Unauthorized = "unauthorized", 401, "missing or wrong bearer token";
    Forbidden = "forbidden", 403, "the token's scope does not allow this (read: browse and stats; produce: enqueue, cancel, reschedule, batches; consume: claim, ack, nack, extend, release, which leases were cancelled; admin: everything); without tokens: a Host that is not this machine, or a state-changing browser request from another site";
    NotFound = "not_found", 404, "no such job (never enqueued, done, or cancelled), no such schedule, or no such batch";
    NoRoute = "no_route", 404, "no such endpoint";
    MethodNotAllowed = "method_not_allowed", 405, "the endpoint exists but not with this method";
    LeaseLost = "lease_lost", 409, "the lease token is stale or belongs to another lease; nothing changed";
    Cancelled = "cancelled", 409, "the job was cancelled while it ran (`DELETE …?running=true`): its lease can no longer be extended, acked or nacked; stop the handler";
    JobLeased = "job_leased", 409, "the job is leased by a consumer (cancel, reschedule or run now refused); the body's `state` says so";
    JobDead = "job_dead", 409, "the job is dead-lettered (cancel, reschedule or run now refused); the body's `state` says so";
    JobNotDead = "job_not_dead", 409, "requeue or delete of a dead job that is not dead (the body's `state` says where it is)";
    Conflict = "conflict", 409, "the change conflicts with the queue's state (e.g. a shard count change while it holds jobs, jobs added to a closed batch); nothing changed";
    PayloadTooLarge = "payload_too_large", 413, "a job payload over the configured limit";
    ResultTooLarge = "result_too_large", 413, "an ack's result over 65,535 bytes";
    BodyTooLarge = "body_too_large", 413, "a request body over the configured limit";
    RequestTimeout = "request_timeout", 408, "the request body did not arrive within the header timeout (10 s by default); the connection is closed";
    UnsupportedMediaType = "unsupported_media_type", 415, "a body without Content-Type: application/json";
    TooManyLongPolls = "too_many_long_polls", 429, "this caller (its token; its address without tokens) or the whole server already has the maximum of long polls waiting; `Retry-After` says when to try again";
    TooManyStreams = "too_many_streams", 429, "this caller (its token; its address without tokens) or the whole server already has the maximum of event streams open; `Retry-After` says when to try again";
    Internal = "internal", 500, "a bug: please report it";
    StoreFull = "store_full", 507, "the store is full (Redis maxmemory with noeviction); nothing was written; retry after memory is freed. While full, what needs no memory still works: an enqueue of an id that exists answers 200 `created: false`, leases are extended, acks and cancels go through";
    Unavailable = "unavailable", 503, "the backend cannot be reached; retry";
}

impl ErrorCode {
    /// Whether the same request may succeed when sent again unchanged: the server was
    /// unreachable or full, or a budget was spent (429). Every enqueue carries its id, so a
    /// retried enqueue cannot run a job twice.
    pub const fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::Unavailable
                | ErrorCode::StoreFull
                | ErrorCode::TooManyLongPolls
                | ErrorCode::TooManyStreams
                | ErrorCode::RequestTimeout
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body of every error.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    /// Stable machine-readable code (see docs/API.md); [`ErrorCode::parse`] reads it.
    #[schema(schema_with = crate::schema::error_code)]
    pub code: String,
    /// Readable explanation.
    pub message: String,
    /// The job's current state, when an action found it in another one (409).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<delayq::JobState>)]
    pub state: Option<String>,
}

/// A request body this crate refused while turning it into the core's types: the code it is
/// answered with and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Invalid {
    /// The error code (`invalid_delay`, …).
    pub code: ErrorCode,
    /// Readable explanation.
    pub message: String,
}

impl Invalid {
    /// A refusal with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<delayq::InvalidInput> for Invalid {
    fn from(e: delayq::InvalidInput) -> Self {
        Invalid::new(ErrorCode::of_input(&e), e.to_string())
    }
}

impl ErrorCode {
    /// The code a core error is answered with (`internal` for one that is a bug or a backend
    /// failure the API has no code for).
    pub fn of_error(e: &delayq::Error) -> Self {
        use delayq::{Error as E, JobState};
        match e {
            E::Invalid(i) => Self::of_input(i),
            E::LeaseLost { .. } => ErrorCode::LeaseLost,
            E::Cancelled { .. } => ErrorCode::Cancelled,
            E::NotFound { .. } => ErrorCode::NotFound,
            E::WrongState {
                state, expected, ..
            } => match (state, expected) {
                (_, JobState::Dead) => ErrorCode::JobNotDead,
                (JobState::Leased, _) => ErrorCode::JobLeased,
                (JobState::Dead, _) => ErrorCode::JobDead,
                _ => ErrorCode::NotFound,
            },
            E::Unavailable(_) => ErrorCode::Unavailable,
            E::Conflict(_) => ErrorCode::Conflict,
            E::StoreFull(_) => ErrorCode::StoreFull,
            _ => ErrorCode::Internal,
        }
    }

    /// The code of an input the core refused.
    pub fn of_input(e: &delayq::InvalidInput) -> Self {
        use delayq::InvalidInput as I;
        match e {
            I::QueueName(_) => ErrorCode::InvalidQueueName,
            I::JobId(_) => ErrorCode::InvalidJobId,
            I::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            I::ResultTooLarge(_) => ErrorCode::ResultTooLarge,
            I::Delay(_) => ErrorCode::InvalidDelay,
            I::MaxAttempts(_) => ErrorCode::InvalidMaxAttempts,
            I::Backoff(_) => ErrorCode::InvalidBackoff,
            I::Lease(_) => ErrorCode::InvalidLease,
            I::Batch(_) => ErrorCode::InvalidBatch,
            I::Payload(_) => ErrorCode::InvalidPayload,
            I::Settings(_) => ErrorCode::InvalidSettings,
            I::Deadline(_) => ErrorCode::InvalidDeadline,
            I::Target(_) => ErrorCode::InvalidTarget,
            I::Delivery(_) => ErrorCode::DeliveryMismatch,
            I::Schedule(_) => ErrorCode::InvalidSchedule,
            I::Priority(_) => ErrorCode::InvalidPriority,
            I::Query(_) => ErrorCode::InvalidQuery,
            I::Trace(_) => ErrorCode::InvalidTrace,
            I::Key(_) => ErrorCode::InvalidKey,
            I::BatchId(_) => ErrorCode::InvalidBatchId,
            I::Dependencies(_) => ErrorCode::InvalidDependencies,
            I::Flow(_) => ErrorCode::InvalidFlow,
            _ => ErrorCode::InvalidBody,
        }
    }
}

impl ErrorCode {
    /// The core's input error for this code with the server's `message` — the inverse of
    /// [`ErrorCode::of_input`] — or `None` for a code that is not about input.
    pub fn to_input(self, message: &str) -> Option<delayq::InvalidInput> {
        use delayq::InvalidInput as I;
        // The server's message starts with the core error's own words; keep the reason only.
        let reason = |prefix: &str| message.strip_prefix(prefix).unwrap_or(message).to_owned();
        Some(match self {
            ErrorCode::InvalidQueueName => I::QueueName(reason("invalid queue name ")),
            ErrorCode::InvalidJobId => I::JobId(reason("invalid job id: ")),
            ErrorCode::InvalidDelay => I::Delay(reason("invalid delay: ")),
            ErrorCode::InvalidBackoff => I::Backoff(reason("invalid backoff: ")),
            ErrorCode::InvalidLease => I::Lease(reason("invalid lease: ")),
            ErrorCode::InvalidBatch => I::Batch(reason("invalid batch: ")),
            ErrorCode::InvalidSettings => I::Settings(reason("invalid queue settings: ")),
            ErrorCode::InvalidSchedule => I::Schedule(reason("invalid schedule: ")),
            ErrorCode::InvalidDeadline => I::Deadline(reason("invalid deadline: ")),
            ErrorCode::InvalidTarget => I::Target(reason("invalid target: ")),
            ErrorCode::DeliveryMismatch => I::Delivery(message.to_owned()),
            ErrorCode::InvalidQuery => I::Query(reason("invalid query: ")),
            ErrorCode::InvalidTrace => I::Trace(reason("invalid trace context: ")),
            ErrorCode::InvalidKey => I::Key(reason("invalid key: ")),
            ErrorCode::InvalidBatchId => I::BatchId(reason("invalid batch id: ")),
            ErrorCode::InvalidDependencies => I::Dependencies(reason("invalid dependencies: ")),
            ErrorCode::InvalidFlow => I::Flow(reason("invalid flow: ")),
            ErrorCode::ResultTooLarge => I::ResultTooLarge(
                message
                    .split_whitespace()
                    .nth(2)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
            ),
            ErrorCode::InvalidPayload
            | ErrorCode::InvalidJson
            | ErrorCode::InvalidBody
            | ErrorCode::InvalidMaxAttempts
            | ErrorCode::InvalidPriority
            | ErrorCode::InvalidPollId
            | ErrorCode::PayloadTooLarge
            | ErrorCode::BodyTooLarge
            | ErrorCode::UnsupportedMediaType => I::Payload(format!("{self}: {message}")),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_4xx_or_5xx_status_is_unique_and_parses_back() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} twice");
            assert!((400..600).contains(&code.status()), "{code}");
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        }
        assert_eq!(ErrorCode::parse("from_a_newer_server"), None);
    }
}
