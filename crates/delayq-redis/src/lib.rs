//! # delayq-redis — the Redis backend of delayq
//!
//! The classic design: per queue a sorted set of scheduled ids scored by due time, a sorted
//! set of leases scored by deadline, a sorted set of dead ids, and one hash of compact binary
//! records (no Redis hash per job). Every transition is one Lua script (`lua/*.lua`) that reads
//! the server's `TIME`, so producer and consumer clocks do not matter. All keys of a queue share
//! one hash tag, so scripts run unchanged on Redis Cluster.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use delayq::{NewJob, Producer, QueueName};
//! let backend = delayq_redis::RedisBackend::connect("redis://127.0.0.1:6379").await?;
//! let producer = Producer::new(backend, QueueName::new("orders")?);
//! producer.enqueue(NewJob::new(b"order-42".to_vec())).await?;
//! # Ok(()) }
//! ```
//!
//! Parts: `keys` (every key name), `scripts` (the Lua files), `backend` (the trait impls),
//! `wake` (the Pub/Sub hub), `reply` (reply parsing), [`error`].

mod backend;
pub mod error;
mod keys;
mod record;
mod reply;
mod scripts;
mod wake;

pub use backend::{MAX_CLAIM, RedisBackend};
pub use error::Error;
