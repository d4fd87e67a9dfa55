//! [`ApiError`]: every error body is `{"code", "message"}` with a stable `code`; the table of
//! codes and statuses lives here (and in docs/API.md, which a test keeps in step).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// An error answer of the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Readable explanation.
    pub message: String,
}

/// The JSON body of every error.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code (see docs/API.md).
    pub code: String,
    /// Readable explanation.
    pub message: String,
}

/// Every error code with its status, in the order of docs/API.md.
pub const CODES: &[(&str, u16, &str)] = &[
    (
        "invalid_json",
        400,
        "the body is not valid JSON (or is truncated)",
    ),
    (
        "invalid_body",
        400,
        "the JSON does not match the request schema (wrong type, missing or unknown field)",
    ),
    (
        "invalid_queue_name",
        400,
        "queue name outside [A-Za-z0-9._-]{1,128}",
    ),
    (
        "invalid_job_id",
        400,
        "job id empty, over 256 bytes, or with control characters",
    ),
    (
        "invalid_payload",
        400,
        "payload missing, both payload and payload_b64 given, or bad base64",
    ),
    (
        "invalid_delay",
        400,
        "delay_ms negative, not a number or over 10 years; run_at malformed or too far; both given",
    ),
    ("invalid_max_attempts", 400, "max_attempts outside 1-10000"),
    (
        "invalid_backoff",
        400,
        "backoff out of range (base > cap or cap over 30 days)",
    ),
    ("invalid_lease", 400, "lease_ms outside 10 ms - 24 h"),
    (
        "invalid_batch",
        400,
        "a batch that is empty or over 10,000 jobs; claim max outside 1-1000; wait_ms over 60 s",
    ),
    ("invalid_query", 400, "query parameters that do not parse"),
    ("unauthorized", 401, "missing or wrong bearer token"),
    (
        "not_found",
        404,
        "no such job (never enqueued, done, or cancelled)",
    ),
    ("no_route", 404, "no such endpoint"),
    (
        "method_not_allowed",
        405,
        "the endpoint exists but not with this method",
    ),
    (
        "lease_lost",
        409,
        "the lease token is stale or belongs to another lease; nothing changed",
    ),
    (
        "job_leased",
        409,
        "the job is leased by a consumer (cancel or reschedule refused)",
    ),
    (
        "job_dead",
        409,
        "the job is dead-lettered (cancel or reschedule refused)",
    ),
    ("job_not_dead", 409, "requeue of a job that is not dead"),
    (
        "payload_too_large",
        413,
        "a job payload over the configured limit",
    ),
    (
        "body_too_large",
        413,
        "a request body over the configured limit",
    ),
    (
        "unsupported_media_type",
        415,
        "a body without Content-Type: application/json",
    ),
    ("internal", 500, "a bug: please report it"),
    ("unavailable", 503, "the backend cannot be reached; retry"),
];

impl ApiError {
    /// An error with a code from [`CODES`].
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        let status = CODES
            .iter()
            .find(|(c, _, _)| *c == code)
            .and_then(|(_, s, _)| StatusCode::from_u16(*s).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_owned(),
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<delayq::InvalidInput> for ApiError {
    fn from(e: delayq::InvalidInput) -> Self {
        use delayq::InvalidInput as I;
        let code = match &e {
            I::QueueName(_) => "invalid_queue_name",
            I::JobId(_) => "invalid_job_id",
            I::PayloadTooLarge { .. } => "payload_too_large",
            I::Delay(_) => "invalid_delay",
            I::MaxAttempts(_) => "invalid_max_attempts",
            I::Backoff(_) => "invalid_backoff",
            I::Lease(_) => "invalid_lease",
            I::Batch(_) => "invalid_batch",
            I::Payload(_) => "invalid_payload",
            _ => "invalid_body",
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<delayq::Error> for ApiError {
    fn from(e: delayq::Error) -> Self {
        use delayq::{Error as E, JobState};
        match e {
            E::Invalid(i) => i.into(),
            E::LeaseLost { .. } => ApiError::new("lease_lost", e.to_string()),
            E::NotFound { .. } => ApiError::new("not_found", e.to_string()),
            E::WrongState {
                state, expected, ..
            } => {
                let code = match (state, expected) {
                    (_, JobState::Dead) => "job_not_dead",
                    (JobState::Leased, _) => "job_leased",
                    (JobState::Dead, _) => "job_dead",
                    _ => "not_found",
                };
                ApiError::new(code, e.to_string())
            }
            E::Unavailable(_) => ApiError::new("unavailable", e.to_string()),
            _ => ApiError::new("internal", e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_4xx_or_5xx_status_and_is_unique() {
        let mut seen = std::collections::HashSet::new();
        for (code, status, _) in CODES {
            assert!(seen.insert(code), "{code} twice");
            assert!((400..600).contains(status));
            assert_eq!(ApiError::new(code, "x").status.as_u16(), *status);
        }
    }
}
