//! Errors of the Redis backend, and how Redis errors map onto [`delayq::Error`].

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Errors setting up the Redis backend. None of them shows a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The connection string could not be parsed (`url` has its password masked).
    #[error("invalid Redis URL {url}: {why}")]
    Url {
        /// The URL, password masked.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A TLS file is missing, unreadable or not PEM, or the TLS options do not fit the URL.
    #[error("TLS: {why}{}", path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default())]
    Tls {
        /// The file, when one is at fault.
        path: Option<std::path::PathBuf>,
        /// What is wrong.
        why: String,
    },
    /// The namespace is not 1–64 ASCII letters, digits, `-` or `_`.
    #[error("invalid namespace {name:?}: use 1 to 64 ASCII letters, digits, '-' or '_'")]
    Namespace {
        /// The namespace given.
        name: String,
    },
    /// The server could not be reached or refused the credentials.
    #[error(
        "cannot connect to Redis at {url}: {}; is the server up and the URL right? \
         (`delayq doctor` checks a deployment)",
        root_cause(cause)
    )]
    Connect {
        /// The URL, password masked.
        url: String,
        /// The client's error (its text is in the message once, not as a cause chain that
        /// repeats it).
        cause: RedisError,
    },
}

/// The innermost cause of a client error, said once (the client's own text repeats it); for
/// an answer that is not the Redis protocol, what that means.
fn root_cause(e: &RedisError) -> String {
    if e.kind() == ErrorKind::Parse {
        return "the server there answered with something that is not the Redis protocol \
                (an HTTP port, or another service?)"
            .into();
    }
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    let text = cur.to_string();
    if text.is_empty() { e.to_string() } else { text }
}

impl From<Error> for delayq::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Url { .. } | Error::Tls { .. } | Error::Namespace { .. } => {
                delayq::Error::Backend(e.to_string())
            }
            Error::Connect { .. } => delayq::Error::Unavailable(e.to_string()),
        }
    }
}

/// Whether a failed connect may succeed later (Redis starting or loading, a refused or
/// timed-out connection, a failover under way) — not a wrong password, missing permissions or
/// a client configuration the server refuses.
pub(crate) fn worth_retrying(e: &RedisError) -> bool {
    use redis::ErrorKind as K;
    // Not Redis at all (an HTTP port): waiting will not make it one.
    if matches!(
        e.kind(),
        K::AuthenticationFailed | K::InvalidClientConfig | K::Parse
    ) {
        return false;
    }
    !matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
}

/// Maps a Redis error: transport trouble and transient server states are retryable
/// ([`delayq::Error::Unavailable`]); anything else is a [`delayq::Error::Backend`].
pub(crate) fn map(e: RedisError) -> delayq::Error {
    if e.code() == Some("OOM") {
        return delayq::Error::StoreFull(
            "Redis is at maxmemory (noeviction) and refused the write; nothing was written. \
             Free memory or raise maxmemory, then retry"
                .into(),
        );
    }
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
