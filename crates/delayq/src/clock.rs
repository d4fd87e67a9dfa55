//! The local clock, injectable. delayq never computes a due time from it (the store's clock
//! decides); it is used for local measurements such as lateness, so tests can skew it.

use std::sync::Arc;

/// A source of "now" in ms since the epoch.
pub trait Clock: Send + Sync + 'static {
    /// Now, in ms since the epoch.
    fn now_ms(&self) -> u64;
}

/// This host's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        crate::job::system_now_ms()
    }
}

/// This host's clock shifted by a fixed offset (for tests of clock skew).
#[derive(Clone, Copy, Debug)]
pub struct OffsetClock(pub i64);

impl Clock for OffsetClock {
    fn now_ms(&self) -> u64 {
        (crate::job::system_now_ms() as i64)
            .saturating_add(self.0)
            .max(0) as u64
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;
