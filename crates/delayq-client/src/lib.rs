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
//! use delayq_client::{Client, wire::EnqueueRequest};
//!
//! let client = Client::new("http://127.0.0.1:7070").token("secret");
//! let job = EnqueueRequest {
//!     payload: Some(serde_json::value::to_raw_value(&serde_json::json!({"order": 42})).unwrap()),
//!     delay_ms: Some(30.0 * 60_000.0),
//!     ..EnqueueRequest::default()
//! };
//! let done = client.enqueue("orders", job).await?;
//! println!("job {} due at {}", done.id, done.due_at);
//! # Ok(()) }
//! ```

mod client;
mod error;
mod remote;
mod webhook;

pub use client::{Client, DEFAULT_RETRIES, DEFAULT_TIMEOUT};
pub use delayq_wire as wire;
pub use error::{Error, Result};
pub use remote::{LONG_POLL, RemoteBackend};
pub use webhook::{WebhookMessage, verify_webhook, verify_webhook_at};
