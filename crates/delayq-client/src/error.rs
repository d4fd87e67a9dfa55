//! [`Error`]: what a call to the server can fail with — an answer of the API (its code,
//! status and message), no answer at all, or an answer this client cannot read — and how it
//! maps onto the core's [`delayq::Error`] for the [`crate::RemoteBackend`].

use delayq::{InvalidInput, JobId, JobState};
use delayq_wire::ErrorCode;

/// An error of a call to a delayq server.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with an error (`{code, message}`).
    #[error("{code} ({status}): {message}")]
    Api {
        /// The API's error code (`not_found`, `lease_lost`, …; see docs/API.md).
        code: String,
        /// The HTTP status.
        status: u16,
        /// The server's explanation.
        message: String,
        /// For a job found in another state than the action needs: that state.
        state: Option<String>,
        /// Seconds the server asked to wait (`Retry-After`).
        retry_after: Option<u64>,
    },
    /// No answer: the server could not be reached, or the request timed out.
    #[error("delayq server {url}: {message}")]
    Transport {
        /// The server's base URL.
        url: String,
        /// What went wrong.
        message: String,
        /// Whether it was a timeout.
        timeout: bool,
    },
    /// An answer this client cannot read (a proxy's page, another version's shape).
    #[error("unexpected answer from the delayq server: {0}")]
    Decode(String),
    /// A value refused before anything was sent (a bad base URL, queue name or job id).
    #[error("{0}")]
    Invalid(String),
    /// A push request whose signature, timestamp or headers do not verify (code
    /// `invalid_signature`).
    #[error("invalid_signature: {0}")]
    InvalidSignature(String),
}

impl Error {
    /// The API's error code, when the server answered with one this version knows.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Api { code, .. } => ErrorCode::parse(code),
            _ => None,
        }
    }

    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How long the server asked to wait before trying again (`Retry-After`), when it said.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Error::Api { retry_after, .. } => retry_after.map(std::time::Duration::from_secs),
            _ => None,
        }
    }

    /// Whether sending the same request again may succeed: no answer came, or the server
    /// was unavailable, full or over a budget. An enqueue is safe to retry: its job carries
    /// its id from the first try.
    pub fn retryable(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            Error::Api { code, status, .. } => {
                ErrorCode::parse(code).is_some_and(ErrorCode::retryable) || *status == 503
            }
            Error::Decode(_) | Error::Invalid(_) | Error::InvalidSignature(_) => false,
        }
    }

    /// The core's error for this one, about job `id` where the call was about one.
    pub fn into_core(self, id: Option<&JobId>) -> delayq::Error {
        let job = || {
            id.cloned()
                .unwrap_or_else(|| JobId::new("?").expect("a valid id"))
        };
        let (code, status, message, state) = match self {
            Error::Api {
                code,
                status,
                message,
                state,
                ..
            } => (code, status, message, state),
            Error::Transport { .. } => return delayq::Error::Unavailable(self.to_string()),
            Error::Decode(_) => return delayq::Error::Backend(self.to_string()),
            Error::Invalid(m) | Error::InvalidSignature(m) => {
                return InvalidInput::Payload(m).into();
            }
        };
        let strip = |prefix: &str| message.strip_prefix(prefix).unwrap_or(&message).to_owned();
        let wrong = |state| delayq::Error::WrongState {
            id: job(),
            state,
            expected: JobState::Scheduled,
        };
        match ErrorCode::parse(&code) {
            Some(ErrorCode::LeaseLost) => delayq::Error::LeaseLost { id: job() },
            Some(ErrorCode::Cancelled) => delayq::Error::Cancelled { id: job() },
            Some(ErrorCode::NotFound) => delayq::Error::NotFound { id: job() },
            Some(ErrorCode::JobLeased) => wrong(JobState::Leased),
            Some(ErrorCode::JobDead) => wrong(JobState::Dead),
            Some(ErrorCode::JobNotDead) => delayq::Error::WrongState {
                id: job(),
                state: match state.as_deref() {
                    Some("leased") => JobState::Leased,
                    _ => JobState::Scheduled,
                },
                expected: JobState::Dead,
            },
            Some(ErrorCode::Conflict) => delayq::Error::Conflict(strip("conflict: ")),
            Some(c) if c.to_input(&message).is_some() => {
                c.to_input(&message).expect("checked").into()
            }
            Some(ErrorCode::Unavailable) => delayq::Error::Unavailable(message),
            Some(ErrorCode::StoreFull) => delayq::Error::StoreFull(message),
            _ if status == 401 || status == 403 => delayq::Error::Backend(format!(
                "the delayq server refused the request ({status} {code}): {message}"
            )),
            _ if (400..500).contains(&status) => {
                InvalidInput::Payload(format!("{code}: {message}")).into()
            }
            _ => delayq::Error::Backend(format!("HTTP {status}: {code}: {message}")),
        }
    }
}

impl From<delayq_wire::Invalid> for Error {
    fn from(e: delayq_wire::Invalid) -> Self {
        Error::Decode(e.to_string())
    }
}

/// A result of a call to the server.
pub type Result<T, E = Error> = std::result::Result<T, E>;
