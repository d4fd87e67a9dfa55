//! [`ApiError`]: an error answer of the server — a code of the wire table
//! ([`delayq_wire::ErrorCode`]) with its status, as the body `{"code", "message"}` — and how the
//! core's errors map onto it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

pub use delayq_wire::{ErrorBody, ErrorCode, Invalid};

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
    /// Seconds for the `Retry-After` header (429s of the long-lived budgets, which also close
    /// their connection: `Connection: close`).
    pub retry_after: Option<u64>,
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
        status_of(self.code)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.as_str().to_owned(),
            message: self.message,
            state: self.state,
        };
        let mut resp = (status_of(self.code), Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
            // A long-lived request refused by its budget gives its connection back: kept
            // open, the refused connections of one address would fill that address's
            // connection limit and lock out its health checks and admins.
            resp.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        resp
    }
}

/// The HTTP status of `code`.
pub fn status_of(code: ErrorCode) -> StatusCode {
    StatusCode::from_u16(code.status()).expect("every code's status is valid")
}

impl From<delayq::InvalidInput> for ApiError {
    fn from(e: delayq::InvalidInput) -> Self {
        ApiError::new(ErrorCode::of_input(&e), e.to_string())
    }
}

impl From<Invalid> for ApiError {
    fn from(e: Invalid) -> Self {
        ApiError::new(e.code, e.message)
    }
}

impl From<delayq::Error> for ApiError {
    fn from(e: delayq::Error) -> Self {
        let code = ErrorCode::of_error(&e);
        let state = match &e {
            delayq::Error::WrongState { state, .. } => Some(*state),
            _ => None,
        };
        let err = ApiError::new(code, e.to_string());
        match state {
            Some(s) => err.with_state(s),
            None => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_answered_with_its_status() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()), "{code} twice");
            let status = ApiError::new(*code, "x").status();
            assert!(status.is_client_error() || status.is_server_error());
            assert_eq!(status.as_u16(), code.status());
        }
    }
}
