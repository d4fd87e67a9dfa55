//! [`ApiError`]: every error body is `{"code", "message"}` with a stable `code`; the table of
//! codes and statuses lives here (and in docs/API.md, which a test keeps in step).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
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

            /// The HTTP status.
            pub fn status(self) -> StatusCode {
                let s: u16 = match self { $(ErrorCode::$variant => $status,)* };
                StatusCode::from_u16(s).expect("valid status")
            }

            /// What the code means, for docs.
            pub const fn meaning(self) -> &'static str {
                match self { $(ErrorCode::$variant => $meaning,)* }
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
    InvalidSchedule = "invalid_schedule", 400, "a schedule name outside [A-Za-z0-9._-]{1,128}, a cron expression that does not parse, an unknown time zone, every_ms under 1,000, both or neither of cron and every_ms, or catch_up other than none, one, all";
    InvalidDeadline = "invalid_deadline", 400, "timeout_ms outside 10 ms - 24 h (30 min for a job with a push target), expire_after_ms over 10 years, expires_at malformed or too far, or both expiry forms given";
    InvalidPollId = "invalid_poll_id", 400, "a long poll's poll_id outside [A-Za-z0-9._-]{1,64}";
    InvalidTarget = "invalid_target", 400, "a push target's url is not an absolute http(s) URL with a host (no credentials, no fragment), its method is not POST, PUT, PATCH, DELETE, GET, HEAD or OPTIONS, or a header is invalid or reserved (host, content-length, webhook-*, delayq-*, ...)";
    DeliveryMismatch = "delivery_mismatch", 400, "a job with a target on a pull queue, or a job without one on a push queue without a default target (the queue's `delivery` setting decides; nothing was written)";
    Unauthorized = "unauthorized", 401, "missing or wrong bearer token";
    Forbidden = "forbidden", 403, "the token's scope does not allow this (read: browse and stats; produce: enqueue, cancel, reschedule; consume: claim, ack, nack, extend, release; admin: everything); without tokens: a Host that is not this machine, or a state-changing browser request from another site";
    NotFound = "not_found", 404, "no such job (never enqueued, done, or cancelled), or no such schedule";
    NoRoute = "no_route", 404, "no such endpoint";
    MethodNotAllowed = "method_not_allowed", 405, "the endpoint exists but not with this method";
    LeaseLost = "lease_lost", 409, "the lease token is stale or belongs to another lease; nothing changed";
    JobLeased = "job_leased", 409, "the job is leased by a consumer (cancel, reschedule or run now refused); the body's `state` says so";
    JobDead = "job_dead", 409, "the job is dead-lettered (cancel, reschedule or run now refused); the body's `state` says so";
    JobNotDead = "job_not_dead", 409, "requeue or delete of a dead job that is not dead (the body's `state` says where it is)";
    Conflict = "conflict", 409, "the change conflicts with the queue's state (e.g. a shard count change while it holds jobs); nothing changed";
    PayloadTooLarge = "payload_too_large", 413, "a job payload over the configured limit";
    BodyTooLarge = "body_too_large", 413, "a request body over the configured limit";
    UnsupportedMediaType = "unsupported_media_type", 415, "a body without Content-Type: application/json";
    TooManyLongPolls = "too_many_long_polls", 429, "this caller (its token; its address without tokens) or the whole server already has the maximum of long polls waiting; `Retry-After` says when to try again";
    TooManyStreams = "too_many_streams", 429, "this caller (its token; its address without tokens) or the whole server already has the maximum of event streams open; `Retry-After` says when to try again";
    Internal = "internal", 500, "a bug: please report it";
    StoreFull = "store_full", 507, "the store is full (Redis maxmemory with noeviction); nothing was written; retry after memory is freed. While full, what needs no memory still works: an enqueue of an id that exists answers 200 `created: false`, leases are extended, acks and cancels go through";
    Unavailable = "unavailable", 503, "the backend cannot be reached; retry";
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// Stable machine-readable code (it decides the HTTP status).
    pub code: ErrorCode,
    /// Readable explanation.
    pub message: String,
    /// For a job that is not in the state an action needs: the state it is in.
    pub state: Option<String>,
    /// Seconds for the `Retry-After` header (429s of the long-lived budgets).
    pub retry_after: Option<u64>,
}

/// The JSON body of every error.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code (see docs/API.md).
    pub code: String,
    /// Readable explanation.
    pub message: String,
    /// The job's current state, when an action found it in another one (409).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl ApiError {
    /// An error with `code` (and its status).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            state: None,
            retry_after: None,
        }
    }

    /// The same error, answered with `Retry-After: secs`.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The same error, telling the job's current state.
    pub fn with_state(mut self, state: impl std::fmt::Display) -> Self {
        self.state = Some(state.to_string());
        self
    }

    /// The HTTP status: the code's.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.as_str().to_owned(),
            message: self.message,
            state: self.state,
        };
        let mut resp = (self.code.status(), Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        resp
    }
}

impl From<delayq::InvalidInput> for ApiError {
    fn from(e: delayq::InvalidInput) -> Self {
        use delayq::InvalidInput as I;
        let code = match &e {
            I::QueueName(_) => ErrorCode::InvalidQueueName,
            I::JobId(_) => ErrorCode::InvalidJobId,
            I::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
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
            _ => ErrorCode::InvalidBody,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<delayq::Error> for ApiError {
    fn from(e: delayq::Error) -> Self {
        use delayq::{Error as E, JobState};
        match e {
            E::Invalid(i) => i.into(),
            E::LeaseLost { .. } => ApiError::new(ErrorCode::LeaseLost, e.to_string()),
            E::NotFound { .. } => ApiError::new(ErrorCode::NotFound, e.to_string()),
            E::WrongState {
                state, expected, ..
            } => {
                let code = match (state, expected) {
                    (_, JobState::Dead) => ErrorCode::JobNotDead,
                    (JobState::Leased, _) => ErrorCode::JobLeased,
                    (JobState::Dead, _) => ErrorCode::JobDead,
                    _ => ErrorCode::NotFound,
                };
                ApiError::new(code, e.to_string()).with_state(state)
            }
            E::Unavailable(_) => ApiError::new(ErrorCode::Unavailable, e.to_string()),
            E::Conflict(_) => ApiError::new(ErrorCode::Conflict, e.to_string()),
            E::StoreFull(_) => ApiError::new(ErrorCode::StoreFull, e.to_string()),
            _ => ApiError::new(ErrorCode::Internal, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_4xx_or_5xx_status_and_is_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} twice");
            assert!(code.status().is_client_error() || code.status().is_server_error());
            assert_eq!(ApiError::new(*code, "x").status(), code.status());
        }
    }
}
