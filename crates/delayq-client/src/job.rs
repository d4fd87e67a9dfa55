//! A job to enqueue built from Rust values — any `Serialize` payload (or bytes), `Duration`s
//! and `SystemTime`s — instead of the wire's fields: `Client::enqueue` takes it as it takes an
//! `EnqueueRequest`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq_wire::payload::payload_fields;
use delayq_wire::{EnqueueRequest, TargetView};
use serde::Serialize;

use crate::error::{Error, Result};

/// A job to enqueue:
/// `Job::json(&order)?.id("order-42").delay(Duration::from_secs(30 * 60)).max_attempts(5)`.
#[derive(Debug, Default)]
pub struct Job(EnqueueRequest);

/// Ms of `d`, saturating.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Ms since the epoch of `t` (0 before it).
fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, ms)
}

impl Job {
    /// A job whose payload is `payload` as JSON.
    pub fn json<T: Serialize + ?Sized>(payload: &T) -> Result<Self> {
        let bytes = serde_json::to_vec(payload)
            .map_err(|e| Error::Invalid(format!("the payload is not JSON: {e}")))?;
        Ok(Self::bytes(bytes))
    }

    /// A job whose payload is `payload` byte for byte (sent as JSON when it is JSON, else
    /// base64).
    pub fn bytes(payload: impl Into<Vec<u8>>) -> Self {
        let (payload, payload_b64) = payload_fields(payload.into());
        Self(EnqueueRequest {
            payload,
            payload_b64,
            ..EnqueueRequest::default()
        })
    }

    /// Its id: enqueueing the same id again stores nothing (default: one made by the client).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.0.id = Some(id.into());
        self
    }

    /// Due after `d`.
    pub fn delay(mut self, d: Duration) -> Self {
        self.0.delay_ms = Some(d.as_secs_f64() * 1000.0);
        self.0.run_at = None;
        self
    }

    /// Due at `t` (in the past: now).
    pub fn run_at(mut self, t: SystemTime) -> Self {
        self.0.run_at = Some(epoch_ms(t).into());
        self.0.delay_ms = None;
        self
    }

    /// Deliveries before it is dead-lettered (1-10,000; default 10).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.0.run.max_attempts = Some(n);
        self
    }

    /// How it waits between failed attempts.
    pub fn backoff(mut self, b: delayq::Backoff) -> Self {
        self.0.run.backoff = Some(b);
        self
    }

    /// The lease of each attempt, instead of the consumer's.
    pub fn lease(mut self, d: Duration) -> Self {
        self.0.run.lease_ms = Some(ms(d));
        self
    }

    /// The longest one attempt may run.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.0.run.timeout_ms = Some(ms(d));
        self
    }

    /// Dead-lettered (`expired`) instead of started after `t`.
    pub fn expires_at(mut self, t: SystemTime) -> Self {
        self.0.expires_at = Some(epoch_ms(t).into());
        self.0.expire_after_ms = None;
        self
    }

    /// Dead-lettered (`expired`) instead of started `d` after its due time.
    pub fn expire_after(mut self, d: Duration) -> Self {
        self.0.expire_after_ms = Some(ms(d));
        self.0.expires_at = None;
        self
    }

    /// Its priority among due jobs, 0-9 (default 5; higher first).
    pub fn priority(mut self, p: u8) -> Self {
        self.0.priority = Some(p);
        self
    }

    /// Its key (a tenant, a customer, an upstream host).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.0.key = Some(key.into());
        self
    }

    /// Replaces a scheduled job of the same id (debounce) instead of keeping it.
    pub fn replace(mut self) -> Self {
        self.0.on_conflict = Some(delayq::OnConflict::Replace);
        self
    }

    /// Readable as done for `d` after it completes (with its result).
    pub fn keep_done(mut self, d: Duration) -> Self {
        self.0.keep_done_ms = Some(ms(d));
        self
    }

    /// Its id refused again for `d` after it completes.
    pub fn dedupe(mut self, d: Duration) -> Self {
        self.0.dedupe_ms = Some(ms(d));
        self
    }

    /// Delivered by HTTP to `target` (a push queue's job).
    pub fn target(mut self, target: TargetView) -> Self {
        self.0.carried.target = Some(target);
        self
    }
}

impl From<Job> for EnqueueRequest {
    fn from(j: Job) -> Self {
        j.0
    }
}
