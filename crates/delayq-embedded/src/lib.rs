//! # delayq-embedded — delayq with nothing else installed
//!
//! A second implementation of `delayq::Backend` and `delayq::Inspect`, durable on local disk:
//! SQLite (bundled, WAL, `synchronous=FULL`) in a data directory that one process owns at a
//! time (a lock file refuses a second one). Every operation is one transaction savepoint;
//! concurrent operations share one commit (group commit). Consumers in the same process are
//! woken in-process when an earlier job arrives, never by polling. Times are this host's clock (or the clock given to
//! [`EmbeddedBackend::open_with_clock`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use delayq::{NewJob, Producer, QueueName};
//! let backend = delayq_embedded::EmbeddedBackend::open("./delayq-data")?;
//! Producer::new(backend, QueueName::new("orders")?)
//!     .enqueue(NewJob::new(b"order-42".to_vec()))
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! Parts: `store` (the thread that owns the connection), `rows` (state codes, row type,
//! shared queries), `backend` (the hot path), `limits` (rate and concurrency limits),
//! `enqueue` (the insert of new jobs), `schedules` (cron and interval schedules), `inspect` (the admin side), [`error`],
//! `schema.sql`.

mod backend;
mod backup;
mod batches;
mod cancel;
mod deps;
mod ends;
mod enqueue;
pub mod error;
mod health;
mod inspect;
mod key_jobs;
mod keyed;
mod push;
mod rows;
mod schedules;
mod store;
mod throttle;

pub use backend::{EmbeddedBackend, MAX_CLAIM};
pub use backup::{Backup, backup};
pub use error::Error;
pub use health::{Health, health};
pub use store::LAYOUT;
