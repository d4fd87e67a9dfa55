//! The clock, injectable. On Redis the server's clock decides every due time; the embedded
//! store and local measurements (lateness) read a [`Clock`], so tests can skew it or move it
//! forward instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of "now".
pub trait Clock: Send + Sync + 'static {
    /// Now, in µs since the epoch.
    fn now_us(&self) -> u64;

    /// Now, in ms since the epoch.
    fn now_ms(&self) -> u64 {
        self.now_us() / 1000
    }
}

/// µs since the Unix epoch on this host's clock.
pub fn system_now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// This host's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        system_now_us()
    }
}

/// This host's clock shifted by a fixed offset in ms (for tests of clock skew).
#[derive(Clone, Copy, Debug)]
pub struct OffsetClock(pub i64);

impl Clock for OffsetClock {
    fn now_us(&self) -> u64 {
        (system_now_us() as i64)
            .saturating_add(self.0.saturating_mul(1000))
            .max(0) as u64
    }
}

/// This host's clock plus an offset that only grows: tests call [`TestClock::advance`] to let
/// an hour pass at once (leases expire, backoffs end, delayed jobs fall due) while time keeps
/// flowing in between, so consumers and long polls behave as they do in production. Clones
/// share the offset.
#[derive(Clone, Debug, Default)]
pub struct TestClock {
    offset_us: Arc<AtomicU64>,
}

impl TestClock {
    /// A clock that reads like the system clock until advanced.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        self.offset_us
            .fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    }

    /// How far it has been moved ahead of the system clock.
    pub fn offset(&self) -> Duration {
        Duration::from_micros(self.offset_us.load(Ordering::SeqCst))
    }
}

impl Clock for TestClock {
    fn now_us(&self) -> u64 {
        system_now_us() + self.offset_us.load(Ordering::SeqCst)
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clock_moves_forward_by_what_it_is_told() {
        let c = TestClock::new();
        let before = c.now_ms();
        c.clone().advance(Duration::from_secs(3600));
        let after = c.now_ms();
        assert!(after >= before + 3_600_000 && after < before + 3_700_000);
        assert!(OffsetClock(-60_000).now_ms() + 59_000 < SystemClock.now_ms());
    }
}
