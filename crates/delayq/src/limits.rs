//! Every input limit of delayq, in one place (the docs point here).

use std::time::Duration;

/// Longest queue name, in bytes.
pub const MAX_QUEUE_NAME_BYTES: usize = 128;
/// Longest job id, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Default largest payload, in bytes (1 MiB); a [`crate::Producer`] can be configured otherwise.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Longest delay (and furthest `run_at`): 10 years.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Largest `max_attempts`.
pub const MAX_ATTEMPTS: u32 = 10_000;
/// Shortest lease.
pub const MIN_LEASE: Duration = Duration::from_millis(10);
/// Longest lease (one day): a stuck consumer must not hide a job for longer.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);
/// Longest backoff cap (30 days).
pub const MAX_BACKOFF: Duration = Duration::from_secs(30 * 24 * 3600);
/// Longest stored `last_error`, in bytes; longer messages are truncated.
pub const MAX_ERROR_BYTES: usize = 1024;
/// Most jobs in one batch enqueue or claim.
pub const MAX_BATCH: usize = 10_000;
