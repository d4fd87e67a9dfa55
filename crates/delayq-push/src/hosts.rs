//! Per-host limits: at most so many requests in flight to one host and at most so many
//! started per second (a token bucket), over every queue this pusher serves, so that a burst of
//! due jobs does not hammer a receiver.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Limits of one host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostLimits {
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests started per second.
    pub per_s: f64,
    /// Requests that may start at once after a quiet spell.
    pub burst: u32,
}

impl Default for HostLimits {
    /// 32 at once and 200/s with bursts of 50: below what a small web service takes without
    /// notice (Cloud Tasks' default queue rate is 500/s).
    fn default() -> Self {
        Self {
            concurrency: 32,
            per_s: 200.0,
            burst: 50,
        }
    }
}

struct Host {
    slots: Arc<Semaphore>,
    /// `(tokens, refilled at)`.
    bucket: Mutex<(f64, Instant)>,
}

/// The limits of every host seen, created on first use.
pub(crate) struct Hosts {
    limits: HostLimits,
    by_name: Mutex<HashMap<String, Arc<Host>>>,
}

impl Hosts {
    pub(crate) fn new(limits: HostLimits) -> Self {
        Self {
            limits,
            by_name: Mutex::default(),
        }
    }

    /// Waits for a slot and a token of `host`; the slot is held until the permit drops.
    pub(crate) async fn acquire(&self, host: &str) -> OwnedSemaphorePermit {
        let h = {
            let mut m = self.by_name.lock().expect("hosts lock");
            m.entry(host.to_owned())
                .or_insert_with(|| {
                    Arc::new(Host {
                        slots: Arc::new(Semaphore::new(self.limits.concurrency)),
                        bucket: Mutex::new((f64::from(self.limits.burst), Instant::now())),
                    })
                })
                .clone()
        };
        let permit = h
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("host semaphore never closes");
        loop {
            let wait = {
                let mut b = h.bucket.lock().expect("bucket lock");
                let now = Instant::now();
                let refill = (now - b.1).as_secs_f64() * self.limits.per_s;
                b.0 = (b.0 + refill).min(f64::from(self.limits.burst));
                b.1 = now;
                if b.0 >= 1.0 {
                    b.0 -= 1.0;
                    None
                } else {
                    Some(Duration::from_secs_f64((1.0 - b.0) / self.limits.per_s))
                }
            };
            match wait {
                None => return permit,
                Some(w) => tokio::time::sleep(w).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rate_and_concurrency_per_host() {
        let hosts = Hosts::new(HostLimits {
            concurrency: 2,
            per_s: 10.0,
            burst: 2,
        });
        let start = Instant::now();
        let a = hosts.acquire("a").await;
        let _b = hosts.acquire("a").await;
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst");
        // Another host has its own limits.
        let _c = hosts.acquire("b").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        // A third request to a waits for a slot, then for a token.
        drop(a);
        let _d = hosts.acquire("a").await;
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(99) && waited <= Duration::from_millis(101),
            "{waited:?}"
        );
    }
}
