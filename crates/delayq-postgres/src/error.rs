//! The errors of the PostgreSQL companion: connecting, the schema, and relaying.

/// What went wrong between delayq and PostgreSQL.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection string does not parse, or a setting beside it is unusable.
    #[error("postgres settings: {0}")]
    Settings(String),
    /// A TLS file could not be used.
    #[error("postgres TLS: {0}")]
    Tls(String),
    /// PostgreSQL could not be reached or refused a statement.
    #[error("postgres: {}", chain(.0))]
    Db(#[from] tokio_postgres::Error),
    /// The database holds a newer `delayq` schema than this build knows: an older delayq
    /// must not write it (upgrade delayq, or migrate a fresh database).
    #[error(
        "the database's delayq schema is version {found}, newer than this build's {known}: \
         run a delayq that knows it"
    )]
    NewerSchema {
        /// The version in the database.
        found: i32,
        /// The newest this build knows.
        known: i32,
    },
    /// The `delayq` schema has not been created (run `delayq migrate --postgres URL`, or
    /// start `delayq serve --postgres URL`, which migrates).
    #[error("the database has no delayq schema: run `delayq migrate --postgres URL`")]
    NoSchema,
    /// No connection could be taken from the pool.
    #[error("postgres pool: {0}")]
    Pool(String),
    /// A row of the cold tier could not be read back as a job (written by another version?).
    #[error("cold tier row {queue}/{id}: {why}")]
    BadRow {
        /// Its queue.
        queue: String,
        /// Its id.
        id: String,
        /// What is wrong.
        why: String,
    },
    /// The store refused or failed while relaying.
    #[error("store: {0}")]
    Store(#[from] delayq::Error),
}

/// An error with its causes, `: `-separated (the driver's own text is often only the first).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}
