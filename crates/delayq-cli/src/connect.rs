//! Reaching Redis from the binary: how long a command keeps trying when Redis cannot be
//! reached (started beside it, mid-failover) and how the wait is reported.

use std::time::{Duration, Instant};

/// How often a wait for Redis says why it is still waiting.
const SAY_EVERY: Duration = Duration::from_secs(5);

/// Default wait of a one-shot command (`enqueue`, `get`, …).
const ONE_SHOT: Duration = Duration::from_secs(10);

/// The connect timeout: the one given, else none (wait indefinitely) for the long-running
/// `serve` and `worker` and [`ONE_SHOT`] for the others.
pub(crate) fn timeout(given: Option<Duration>, long_running: bool) -> Option<Duration> {
    match given {
        Some(t) => Some(t),
        None if long_running => None,
        None => Some(ONE_SHOT),
    }
}

/// Says on stderr why Redis is not reachable yet, at most every [`SAY_EVERY`].
pub(crate) struct RetryLog {
    desc: String,
    last: Option<Instant>,
}

impl RetryLog {
    /// A log for Redis at `desc` (its URL, password masked).
    pub(crate) fn new(desc: &str) -> Self {
        Self {
            desc: desc.to_owned(),
            last: None,
        }
    }

    /// One failed attempt that will be retried.
    pub(crate) fn retrying(&mut self, e: &delayq_redis::Error) {
        if self.last.is_some_and(|t| t.elapsed() < SAY_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        eprintln!(
            "delayq: waiting for Redis at {}: {}; retrying (--connect-timeout bounds the wait)",
            self.desc,
            first_line(&e.to_string())
        );
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}
