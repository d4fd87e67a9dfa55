//! Metric names and recording helpers, shared by the consumer engine and the HTTP server so
//! that an embedding service and `delayq serve` export the same series (recorded in one place:
//! [`crate::Instrumented`]). Everything goes through the `metrics` facade: without an
//! installed recorder these are no-ops.

/// Counter: jobs created by enqueue.
pub const ENQUEUED: &str = "delayq_enqueued_total";
/// Counter: enqueues of an id that already existed (nothing written).
pub const ENQUEUE_EXISTING: &str = "delayq_enqueue_existing_total";
/// Counter: jobs leased by claims.
pub const CLAIMED: &str = "delayq_claimed_total";
/// Counter: jobs acknowledged.
pub const ACKED: &str = "delayq_acked_total";
/// Counter: failed attempts scheduled for retry.
pub const RETRIED: &str = "delayq_retried_total";
/// Counter: jobs dead-lettered.
pub const DEAD: &str = "delayq_dead_total";
/// Counter: jobs cancelled.
pub const CANCELLED: &str = "delayq_cancelled_total";
/// Counter: acks, nacks or extensions refused because the lease was lost.
pub const LEASE_LOST: &str = "delayq_lease_lost_total";
/// Counter: jobs enqueued by schedule fires ([`crate::Ticker`]).
pub const FIRES: &str = "delayq_schedule_fires_total";
/// Counter: tries to finish a batch whose callbacks could not be enqueued (a callback queue
/// that no longer takes them, a store error), by `queue`; each is tried again later.
pub const BATCH_CALLBACK_FAILURES: &str = "delayq_batch_callback_failures_total";

/// Counts one failed try to finish a batch of `queue` ([`BATCH_CALLBACK_FAILURES`]).
pub fn batch_callback_failed(queue: &str) {
    metrics::counter!(BATCH_CALLBACK_FAILURES, "queue" => queue.to_owned()).increment(1);
}

/// Histogram (seconds): due time → claim.
pub const LATENESS: &str = "delayq_lateness_seconds";
/// Histogram (seconds): handler run time (library consumers).
pub const HANDLER: &str = "delayq_handler_seconds";
/// Counter: HTTP push requests by `queue`, `outcome` (`delivered`, `throttled`, `http_error`,
/// `timeout`, `connect_error`, `refused`, `invalid`) and `status_class` (`2xx` … `5xx`,
/// `none`).
pub const PUSH_REQUESTS: &str = "delayq_push_requests_total";
/// Histogram (seconds): HTTP push response time by target `host`.
pub const PUSH_RESPONSE: &str = "delayq_push_response_seconds";
/// Buckets of [`PUSH_RESPONSE`]: 1 ms to 30 min.
pub const PUSH_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 1800.0,
];
/// Buckets of [`LATENESS`]: 1 ms to 60 s.
pub const LATENESS_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The counters and the lateness histogram of one queue, registered once (a hot path records
/// into them without building labels each time).
#[derive(Clone)]
pub struct QueueCounters {
    /// [`ENQUEUED`].
    pub enqueued: metrics::Counter,
    /// [`ENQUEUE_EXISTING`].
    pub enqueue_existing: metrics::Counter,
    /// [`CANCELLED`].
    pub cancelled: metrics::Counter,
    /// [`CLAIMED`].
    pub claimed: metrics::Counter,
    /// [`ACKED`].
    pub acked: metrics::Counter,
    /// [`RETRIED`].
    pub retried: metrics::Counter,
    /// [`DEAD`].
    pub dead: metrics::Counter,
    /// [`LEASE_LOST`].
    pub lease_lost: metrics::Counter,
    /// [`LATENESS`].
    pub lateness: metrics::Histogram,
}

impl QueueCounters {
    /// Registers the counters of `queue` with the installed recorder.
    pub fn new(queue: &str) -> Self {
        let c = |name: &'static str| metrics::counter!(name, "queue" => queue.to_owned());
        Self {
            enqueued: c(ENQUEUED),
            enqueue_existing: c(ENQUEUE_EXISTING),
            cancelled: c(CANCELLED),
            claimed: c(CLAIMED),
            acked: c(ACKED),
            retried: c(RETRIED),
            dead: c(DEAD),
            lease_lost: c(LEASE_LOST),
            lateness: metrics::histogram!(LATENESS, "queue" => queue.to_owned()),
        }
    }

    /// Records one lateness sample: how long after `due_at_ms` the job was claimed (`now_ms`).
    pub fn record_lateness(&self, due_at_ms: u64, now_ms: u64) {
        let late = now_ms.saturating_sub(due_at_ms) as f64 / 1000.0;
        self.lateness.record(late);
    }
}
