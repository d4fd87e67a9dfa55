//! The Rust client of a delayq server's HTTP API.
//!
//! [`Client`] has one async method per `/v1` operation, with the request and response
//! bodies of [`delayq_wire`] (re-exported as [`wire`]); [`RemoteBackend`] implements the core's
//! `Backend`, `Inspect` and `Schedules` traits over it, so `delayq::Producer` and
//! `delayq::Consumer` — retries, lease extension, acks riding on claims, graceful shutdown —
//! run against a remote server unchanged.
//!
//! ```no_run
//! # async fn demo() -> Result<(), delayq_client::Error> {
//! use std::time::Duration;
//! use delayq_client::{Client, Job};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Order { order: u64 }
//!
//! let client = Client::new("http://127.0.0.1:7070").token("secret");
//! let job = Job::json(&Order { order: 42 })?
//!     .id("order-42")
//!     .delay(Duration::from_secs(30 * 60))
//!     .max_attempts(5);
//! let done = client.enqueue("orders", job).await?;
//! println!("job {} due at {}", done.id, done.due_at);
//! let stored: Option<Order> = client.get("orders", "order-42").await?.map(|j| j.payload_as()).transpose()
//!     .map_err(|e| delayq_client::Error::Decode(e.to_string()))?;
//! # Ok(()) }
//! ```

mod client;
mod error;
mod flows;
mod job;
mod keys;
mod remote;
mod webhook;

pub use client::{Client, DEFAULT_RETRIES, DEFAULT_TIMEOUT};
pub use delayq_wire as wire;
pub use error::{Error, Result};
pub use job::Job;
pub use remote::{LONG_POLL, RemoteBackend};
pub use webhook::{WebhookMessage, verify_webhook, verify_webhook_at};
