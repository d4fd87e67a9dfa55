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
/// Longest job key ([`crate::JobKey`]), in bytes.
pub const MAX_KEY_BYTES: usize = 128;
/// Most shards of one queue.
pub const MAX_SHARDS: u32 = 256;
/// Highest `rate.per_s` of a queue.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Largest `rate.burst` of a queue.
pub const MAX_BURST: u32 = 1_000_000;
/// Largest `max_in_flight` of a queue.
pub const MAX_IN_FLIGHT: u32 = 1_000_000;
/// Shortest lease.
pub const MIN_LEASE: Duration = Duration::from_millis(10);
/// Longest lease (one day): a stuck consumer must not hide a job for longer.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);
/// Longest `keep_done_ms` / `dedupe_ms` (30 days).
pub const MAX_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Completed jobs past their retention deleted per script call (trimming rides on acks).
pub const TRIM_PER_CALL: usize = 20;
/// Highest job priority (0 is the lowest; 5 the default).
pub const MAX_PRIORITY: u8 = 9;
/// Anti-starvation of priorities: a due job gains one priority level for every this long it
/// waits, so a priority-0 job waits at most 9 minutes behind a stream of priority-9 ones.
pub const PRIORITY_AGING: Duration = Duration::from_secs(60);

/// Where a due job of priority `priority` stands among the due jobs of a queue with
/// priorities (lower first): its due time less a level per [`PRIORITY_AGING`] — the order
/// every claim takes (Redis `ready` scores, the embedded claim's `ORDER BY`).
pub fn claim_order_key(due_ms: u64, priority: u8) -> i64 {
    due_ms as i64 - i64::from(priority) * PRIORITY_AGING.as_millis() as i64
}
/// Due jobs of a queue with priorities moved to its ready set per claim.
pub const PROMOTE_PER_CALL: usize = 1000;
/// Shortest job timeout.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(10);
/// Longest job timeout (one day, like a lease).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Longest backoff cap (30 days).
pub const MAX_BACKOFF: Duration = Duration::from_secs(30 * 24 * 3600);
/// Longest stored `last_error`, in bytes; longer messages are truncated.
pub const MAX_ERROR_BYTES: usize = 1024;
/// Most jobs in one batch enqueue or claim.
pub const MAX_BATCH: usize = 10_000;
/// Largest result a handler may return with its ack, in bytes (64 KiB less one byte: a
/// result is a record extra on Redis, whose length field is 16 bits).
pub const MAX_RESULT_BYTES: usize = 65_535;

/// `result` if it is at most [`MAX_RESULT_BYTES`], else the error every store answers.
pub fn check_result(result: &[u8]) -> Result<(), crate::InvalidInput> {
    if result.len() > MAX_RESULT_BYTES {
        return Err(crate::InvalidInput::ResultTooLarge(result.len()));
    }
    Ok(())
}

/// Every ack's result within [`MAX_RESULT_BYTES`]: one too large refuses the whole call.
pub fn check_acks(acks: &[crate::Ack]) -> Result<(), crate::InvalidInput> {
    for r in acks.iter().filter_map(|a| a.result.as_deref()) {
        check_result(r)?;
    }
    Ok(())
}

/// `error` cut to at most [`MAX_ERROR_BYTES`] bytes on a character boundary: the one rule every
/// store applies to `last_error`.
pub fn truncate_error(error: &str) -> &str {
    if error.len() <= MAX_ERROR_BYTES {
        return error;
    }
    let mut end = MAX_ERROR_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_cut_on_a_character_boundary() {
        assert_eq!(truncate_error("short"), "short");
        let euro = "€".repeat(1000); // 3 bytes each
        let cut = truncate_error(&euro);
        assert_eq!(cut.len(), 1023);
        assert_eq!(cut, "€".repeat(341));
        let ascii = "x".repeat(5000);
        assert_eq!(truncate_error(&ascii).len(), MAX_ERROR_BYTES);
    }
}
