//! PostgreSQL beside delayq's store. An application enqueues a job inside its own database
//! transaction (`SELECT delayq.enqueue(…)`): committed, the job reaches the store exactly
//! once; rolled back, never. This crate owns the `delayq` schema ([`mod@migrate`]: versioned
//! migrations, refusing a newer schema), the connection ([`mod@connect`]: URL, password file,
//! TLS), the outbox rows and how one becomes a job ([`outbox`]), and the [`Relay`] that every
//! `delayq serve` / `delayq worker` given `--postgres` runs to move committed rows into the
//! store (LISTEN/NOTIFY, a periodic sweep, `FOR UPDATE SKIP LOCKED`, no leader).

pub mod cold;
pub mod connect;
mod error;
mod health;
pub mod migrate;
pub mod outbox;
mod relay;
mod tiered;

pub use connect::PgOptions;
pub use error::Error;
pub use health::{Health, health};
pub use migrate::{LATEST, Migrated, migrate, schema_version};
pub use relay::{Relay, RelayStatus, RelayTotals};
pub use tiered::Tiered;
/// The PostgreSQL driver, for callers holding the client [`PgOptions::connect`] returns.
pub use tokio_postgres;

/// The channel `delayq.enqueue` notifies when its transaction commits.
pub const CHANNEL: &str = "delayq_outbox";
