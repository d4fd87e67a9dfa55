//! Errors of the embedded backend, and how they map onto [`delayq::Error`].

use std::path::PathBuf;

/// Errors opening or running the embedded store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another process holds the data directory.
    #[error(
        "data directory {dir} is in use by another delayq process{pid}; stop it, use its HTTP API, or pass --data DIR",
        pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The directory.
        dir: PathBuf,
        /// The owner's pid, when known.
        pid: Option<u32>,
    },
    /// A file-system error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// An SQLite error.
    #[error("embedded store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The store thread is gone.
    #[error("embedded store stopped")]
    Stopped,
    /// The store was written by a later delayq whose layout this one does not know.
    #[error(
        "the embedded store in {dir} has layout version {found}, written by a newer delayq; \
         this one reads up to version {known}: run the newer delayq, or restore a backup taken \
         before the upgrade (docs/DEPLOY.md, \"Upgrades and rollback\")"
    )]
    NewerLayout {
        /// The directory.
        dir: PathBuf,
        /// The store's layout version.
        found: i64,
        /// The newest this build reads.
        known: i64,
    },
}

impl From<Error> for delayq::Error {
    fn from(e: Error) -> Self {
        match e {
            Error::Locked { .. }
            | Error::Io { .. }
            | Error::Stopped
            | Error::NewerLayout { .. } => delayq::Error::Unavailable(e.to_string()),
            Error::Sqlite(_) => delayq::Error::Backend(e.to_string()),
        }
    }
}
