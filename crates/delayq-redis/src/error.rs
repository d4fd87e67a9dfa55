//! Errors of the Redis backend, and how Redis errors map onto [`delayq::Error`].

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Errors setting up the Redis backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL could not be parsed.
    #[error("invalid Redis URL: {0}")]
    Url(#[source] RedisError),
    /// The server could not be reached.
    #[error("cannot connect to Redis: {0}")]
    Connect(#[source] RedisError),
}

impl From<Error> for delayq::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Url(_) => delayq::Error::Backend(e.to_string()),
            Error::Connect(_) => delayq::Error::Unavailable(e.to_string()),
        }
    }
}

/// Maps a Redis error: transport trouble and transient server states are retryable
/// ([`delayq::Error::Unavailable`]); anything else is a [`delayq::Error::Backend`].
pub(crate) fn map(e: RedisError) -> delayq::Error {
    let transient = e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
            ) | ErrorKind::ClusterConnectionNotFound
        );
    if transient {
        delayq::Error::Unavailable(e.to_string())
    } else {
        delayq::Error::Backend(e.to_string())
    }
}

/// A reply that does not have the shape a script promises.
pub(crate) fn shape(what: &str) -> delayq::Error {
    delayq::Error::Backend(format!("unexpected script reply: {what}"))
}
