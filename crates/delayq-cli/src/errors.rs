//! The binary's typed error for settings and arguments it cannot use (exit code 2), apart
//! from the modules that find them so that any of them can say one.

/// A settings file that cannot be used, said with its file and line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConfigError(String);

impl ConfigError {
    /// An error saying `msg`.
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}
