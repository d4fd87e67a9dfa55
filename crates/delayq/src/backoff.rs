//! Retry backoff policies. The Redis scripts implement the same formula (see `common.lua`);
//! a test in `delayq-redis` checks that both agree.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::limits::MAX_BACKOFF;

/// How long a failed job waits before its next attempt.
///
/// For attempt `n` (1 for the first failure) the raw delay is `base` for [`Backoff::Fixed`] and
/// `min(cap, base * 2^(n-1))` for the exponential kinds. [`Backoff::ExponentialJitter`] then
/// picks uniformly in `[raw/2, raw)` so that jobs that failed together do not retry together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Backoff {
    /// The same delay every time.
    Fixed {
        /// The delay in milliseconds.
        delay_ms: u64,
    },
    /// Doubling delays up to a cap.
    Exponential {
        /// First delay in milliseconds.
        base_ms: u64,
        /// Largest delay in milliseconds.
        cap_ms: u64,
    },
    /// Doubling delays up to a cap, with equal jitter.
    ExponentialJitter {
        /// First delay in milliseconds.
        base_ms: u64,
        /// Largest delay in milliseconds.
        cap_ms: u64,
    },
}

impl Default for Backoff {
    /// Exponential with jitter from 1 s up to 10 minutes.
    fn default() -> Self {
        Backoff::ExponentialJitter {
            base_ms: 1_000,
            cap_ms: 600_000,
        }
    }
}

impl Backoff {
    /// The wire code of the kind: 0 fixed, 1 exponential, 2 exponential with jitter.
    pub fn kind_code(&self) -> u8 {
        match self {
            Backoff::Fixed { .. } => 0,
            Backoff::Exponential { .. } => 1,
            Backoff::ExponentialJitter { .. } => 2,
        }
    }

    /// `(base_ms, cap_ms)`; for [`Backoff::Fixed`] both are the delay.
    pub fn base_cap_ms(&self) -> (u64, u64) {
        match *self {
            Backoff::Fixed { delay_ms } => (delay_ms, delay_ms),
            Backoff::Exponential { base_ms, cap_ms }
            | Backoff::ExponentialJitter { base_ms, cap_ms } => (base_ms, cap_ms),
        }
    }

    /// Rebuilds a policy from its wire form.
    pub fn from_parts(kind: u8, base_ms: u64, cap_ms: u64) -> Option<Self> {
        match kind {
            0 => Some(Backoff::Fixed { delay_ms: base_ms }),
            1 => Some(Backoff::Exponential { base_ms, cap_ms }),
            2 => Some(Backoff::ExponentialJitter { base_ms, cap_ms }),
            _ => None,
        }
    }

    /// Checks ranges: base ≤ cap ≤ 30 days.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let (base, cap) = self.base_cap_ms();
        let max = MAX_BACKOFF.as_millis() as u64;
        if cap > max {
            return Err(InvalidInput::Backoff(format!(
                "cap {cap} ms is over {max} ms"
            )));
        }
        if base > cap {
            return Err(InvalidInput::Backoff(format!(
                "base {base} ms is over cap {cap} ms"
            )));
        }
        Ok(())
    }

    /// The delay before the retry that follows failed attempt `attempt` (1-based), given a
    /// uniform random number `rnd` in `[0, 1)` (used only by the jitter kind).
    pub fn delay(&self, attempt: u32, rnd: f64) -> Duration {
        let ms = match *self {
            Backoff::Fixed { delay_ms } => delay_ms,
            Backoff::Exponential { base_ms, cap_ms } => exp(base_ms, cap_ms, attempt),
            Backoff::ExponentialJitter { base_ms, cap_ms } => {
                let raw = exp(base_ms, cap_ms, attempt) as f64;
                (raw / 2.0 + rnd * raw / 2.0).floor() as u64
            }
        };
        Duration::from_millis(ms)
    }
}

fn exp(base: u64, cap: u64, attempt: u32) -> u64 {
    let shift = attempt.saturating_sub(1).min(62);
    base.saturating_mul(1u64 << shift).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_doubles_up_to_cap() {
        let b = Backoff::Exponential {
            base_ms: 100,
            cap_ms: 1000,
        };
        let ms: Vec<u64> = (1..=6)
            .map(|a| b.delay(a, 0.5).as_millis() as u64)
            .collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(200, 0.0).as_millis(), 1000);
    }

    #[test]
    fn jitter_stays_in_upper_half() {
        let b = Backoff::ExponentialJitter {
            base_ms: 1000,
            cap_ms: 60_000,
        };
        assert_eq!(b.delay(3, 0.0).as_millis(), 2000);
        assert_eq!(b.delay(3, 0.999_999).as_millis(), 3999);
    }

    #[test]
    fn validation() {
        assert!(Backoff::default().validate().is_ok());
        assert!(
            Backoff::Exponential {
                base_ms: 10,
                cap_ms: 5
            }
            .validate()
            .is_err()
        );
        assert!(Backoff::Fixed { delay_ms: u64::MAX }.validate().is_err());
    }

    #[test]
    fn wire_roundtrip() {
        for b in [
            Backoff::Fixed { delay_ms: 5 },
            Backoff::Exponential {
                base_ms: 1,
                cap_ms: 9,
            },
            Backoff::default(),
        ] {
            let (base, cap) = b.base_cap_ms();
            assert_eq!(Backoff::from_parts(b.kind_code(), base, cap), Some(b));
        }
    }
}
