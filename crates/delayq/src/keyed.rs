//! A queue's keys ([`crate::JobKey`]) as the admin side sees and steers them: one key's hold
//! ([`KeyHold`]: pause until a time, e.g. an upstream's `Retry-After`) and what each key has
//! in flight, due and held ([`KeyStats`], the console's busiest keys).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::name::JobKey;

/// A hold on one key's jobs ([`crate::Inspect::pause_key`]): its due jobs wait, the other
/// keys' are claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyHold {
    /// Until this time (ms since the epoch, the store's clock).
    Until(u64),
    /// For this long from now (the store's clock).
    For(Duration),
    /// No hold: the key's jobs are claimed again.
    Lifted,
}

/// One key of a queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyStats {
    /// The key.
    pub key: JobKey,
    /// Its jobs leased now.
    pub in_flight: u64,
    /// Its due jobs (on Redis: those waiting on the key's limits or hold, and those among the
    /// first 1,000 due of each shard).
    pub due: u64,
    /// The end of its hold, if it is held (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until_ms: Option<u64>,
}

impl KeyStats {
    /// Orders keys busiest first: most in flight and due, then held ones, then by key.
    pub fn busiest_first(rows: &mut [KeyStats]) {
        rows.sort_by(|a, b| {
            (b.in_flight + b.due)
                .cmp(&(a.in_flight + a.due))
                .then(
                    b.paused_until_ms
                        .is_some()
                        .cmp(&a.paused_until_ms.is_some()),
                )
                .then(a.key.cmp(&b.key))
        });
    }
}
