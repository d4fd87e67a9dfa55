//! A queue's stored settings ([`QueueSettings`]): shards, the one-delay lane, limits,
//! retention and the default push target — and what one shard of a queue enforces ([`Throttle`]).

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::job::Retention;
use crate::target::Target;

/// A queue's stored settings: every client reads them from the store, so all agree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueSettings {
    /// How many shards hold the queue's jobs (Redis: one hash slot each, so a queue spreads
    /// over a Cluster's masters and one consumer keeps one claim in flight per shard).
    pub shards: u32,
    /// Redis: keep the jobs whose due times come in arrival order — every job of a queue
    /// that uses one delay ("cancel the order in 30 minutes") — whole in a list in due order
    /// instead of a record hash and a sorted set: ~45 % less memory per job with lookup,
    /// cancel and dedupe by id kept (docs/TOPOLOGIES.md, "The one-delay lane"). Other jobs of
    /// the queue use the usual layout. Changes only while the queue is empty, like `shards`.
    #[serde(default)]
    pub lane: bool,
    /// Redis, with `lane`: the width (ms) of the lane's time windows, for jobs whose due times
    /// do not come in arrival order (random delays). A job due more than one width beyond the
    /// window it falls in is kept whole in that window's list — ~40 % less memory than the
    /// record hash and sorted set, lookup, cancel and dedupe by id kept — and the window moves
    /// to the usual layout one width before it starts (docs/TOPOLOGIES.md, "The one-delay
    /// lane"). 0: no windows; else [`MIN_LANE_WINDOW_MS`]–[`MAX_LANE_WINDOW_MS`]. Changes only
    /// while the queue is empty, like `lane`.
    #[serde(default = "default_lane_window_ms")]
    pub lane_window_ms: u32,
    /// Most jobs started per second, over all consumers (a token bucket on the store's
    /// clock, checked inside the claim); `None`: no limit.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Most jobs leased at once, over all consumers; `None`: no limit.
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// Retention of completed jobs that do not set their own.
    #[serde(default)]
    pub retention: Retention,
    /// HTTP push target of the queue's jobs that carry none.
    #[serde(default)]
    pub target: Option<Target>,
    /// Who takes the queue's due jobs: consumers that claim them ([`DeliveryMode::Pull`], the
    /// default) or pushers (`delayq serve --push`) that send each to its HTTP target
    /// ([`DeliveryMode::Push`]). A job with a target is refused on a pull queue; a job without one
    /// on a push queue without a default `target`.
    #[serde(default)]
    pub delivery: DeliveryMode,
    /// Most jobs of one key ([`crate::JobKey`]) leased at once; `None`: no limit. A key at its
    /// limit waits while the other keys' jobs are claimed.
    #[serde(default)]
    pub key_max_in_flight: Option<u32>,
    /// Most jobs of one key started per second (a token bucket per key); `None`: no limit.
    #[serde(default)]
    pub key_rate: Option<Rate>,
    /// A push delivery answered 429 with `Retry-After` pauses its job's key until then (the
    /// job itself is retried then, as without the setting).
    #[serde(default)]
    pub pause_key_on_429: bool,
    /// Keep a job due further ahead than this (ms) in the cold tier — PostgreSQL beside the
    /// store (`--postgres`) — and move it into the store once it is due within it, so the
    /// store holds only the next window of jobs; `None`: every job in the store. Needs a
    /// store with the cold tier beside it (`delayq_postgres::Tiered`); a plain store refuses
    /// it.
    pub cold_after_ms: Option<u64>,
}

/// How a queue's due jobs are delivered ([`QueueSettings::delivery`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    /// Consumers claim the jobs (workers, `Consumer`, `POST …/claim`).
    #[default]
    Pull,
    /// Pushers send each job to its HTTP target.
    Push,
}

impl DeliveryMode {
    /// `"pull"` or `"push"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryMode::Pull => "pull",
            DeliveryMode::Push => "push",
        }
    }

    /// The mode a store recorded (`None`: written before the setting existed — a queue with
    /// a default target was made a push queue by an admin and stays one, every other queue
    /// is pull).
    pub fn stored(recorded: Option<&str>, has_default_target: bool) -> Result<Self, InvalidInput> {
        match recorded {
            Some(d) => d.parse(),
            None if has_default_target => Ok(DeliveryMode::Push),
            None => Ok(DeliveryMode::Pull),
        }
    }
}

/// What an enqueue checks each job's target against: the queue's delivery and whether it has
/// a default target (both stores cache it per queue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryRule {
    /// The queue's delivery.
    pub mode: DeliveryMode,
    /// Whether the queue has a default target (then a push queue takes jobs without one).
    pub default_target: bool,
}

impl DeliveryRule {
    /// Refuses a job with (`has_target`) or without a target that does not fit the queue: a
    /// target on a pull queue, none on a push queue without a default target.
    pub fn admits(self, queue: &str, has_target: bool) -> Result<(), InvalidInput> {
        match (self.mode, has_target) {
            (DeliveryMode::Pull, true) => Err(InvalidInput::Delivery(format!(
                "queue {queue} is a pull queue (its jobs are claimed by workers): a job with a \
                 target needs a push queue (PUT /v1/queues/{queue} {{\"delivery\":\"push\"}}, \
                 delayq queue set {queue} --delivery push)"
            ))),
            (DeliveryMode::Push, false) if !self.default_target => {
                Err(InvalidInput::Delivery(format!(
                    "queue {queue} is a push queue without a default target: each job needs a \
                     target (or give the queue one: delayq queue set {queue} --target URL)"
                )))
            }
            _ => Ok(()),
        }
    }
}

impl std::str::FromStr for DeliveryMode {
    type Err = InvalidInput;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pull" => Ok(DeliveryMode::Pull),
            "push" => Ok(DeliveryMode::Push),
            _ => Err(InvalidInput::Settings(format!(
                "delivery must be pull or push, not {s:?}"
            ))),
        }
    }
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            shards: 1,
            lane: false,
            lane_window_ms: DEFAULT_LANE_WINDOW_MS,
            rate: None,
            max_in_flight: None,
            retention: Retention::default(),
            target: None,
            delivery: DeliveryMode::Pull,
            key_max_in_flight: None,
            key_rate: None,
            pause_key_on_429: false,
            cold_after_ms: None,
        }
    }
}

/// The shortest `cold_after_ms`: a minute (the mover looks every second; a job moves a whole
/// window before it is due).
pub const MIN_COLD_AFTER_MS: u64 = 60_000;

/// The lane's time windows' default width: 10 s.
pub const DEFAULT_LANE_WINDOW_MS: u32 = 10_000;
/// The narrowest time window.
pub const MIN_LANE_WINDOW_MS: u32 = 100;
/// The widest time window (the store keeps the width in 16 bits).
pub const MAX_LANE_WINDOW_MS: u32 = 60_000;

fn default_lane_window_ms() -> u32 {
    DEFAULT_LANE_WINDOW_MS
}

/// A start-rate limit: a token bucket that refills `per_s` tokens a second up to `burst`; each
/// job leased takes one.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Tokens added per second (may be fractional: 0.5 = one job every 2 s).
    pub per_s: f64,
    /// Most tokens the bucket holds: how many jobs may start at once after a quiet spell.
    pub burst: u32,
}

impl Rate {
    /// Checks `per_s` and `burst` (`what` names the setting in the error).
    pub fn validate(&self, what: &str) -> Result<(), InvalidInput> {
        use crate::limits::{MAX_BURST, MAX_RATE};
        if !self.per_s.is_finite() || self.per_s <= 0.0 || self.per_s > MAX_RATE {
            return Err(InvalidInput::Settings(format!(
                "{what}.per_s must be a number > 0 and <= {MAX_RATE}, not {}",
                self.per_s
            )));
        }
        if !(1..=MAX_BURST).contains(&self.burst) {
            return Err(InvalidInput::Settings(format!(
                "{what}.burst must be 1-{MAX_BURST}, not {}",
                self.burst
            )));
        }
        Ok(())
    }
}

impl QueueSettings {
    /// The default settings with `shards` shards.
    pub fn with_shards(shards: u32) -> Self {
        Self {
            shards,
            ..Self::default()
        }
    }

    /// The rule an enqueue on this queue checks its jobs' targets against.
    pub fn delivery_rule(&self) -> DeliveryRule {
        DeliveryRule {
            mode: self.delivery,
            default_target: self.target.is_some(),
        }
    }

    /// Sets the default push target (`None` removes it); giving a pull queue one makes it a
    /// push queue (set `delivery` after this to say otherwise).
    pub fn set_target(&mut self, target: Option<Target>) {
        if target.is_some() {
            self.delivery = DeliveryMode::Push;
        }
        self.target = target;
    }

    /// Sets the lane (`None`: as it is) and its window width (`None`: as it is — except that
    /// turning the lane on gives a queue without windows [`DEFAULT_LANE_WINDOW_MS`]).
    pub fn set_lane(&mut self, lane: Option<bool>, window_ms: Option<u32>) {
        let turned_on = lane == Some(true) && !self.lane;
        if let Some(l) = lane {
            self.lane = l;
        }
        match window_ms {
            Some(w) => self.lane_window_ms = w,
            None if turned_on && self.lane_window_ms == 0 => {
                self.lane_window_ms = DEFAULT_LANE_WINDOW_MS;
            }
            None => {}
        }
    }

    /// Refuses settings a store without the cold tier cannot keep (`cold_after_ms`).
    pub fn check_without_cold_tier(&self) -> Result<(), InvalidInput> {
        if self.cold_after_ms.is_some() {
            return Err(InvalidInput::Settings(
                "cold_after_ms keeps far jobs in PostgreSQL beside the store: start delayq \
                 serve (or worker) with --postgres URL"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Checks the settings' ranges.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        use crate::limits::{MAX_IN_FLIGHT, MAX_SHARDS};
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(InvalidInput::Settings(format!(
                "shards must be 1-{MAX_SHARDS}, not {}",
                self.shards
            )));
        }
        let w = self.lane_window_ms;
        if w != 0 && !(MIN_LANE_WINDOW_MS..=MAX_LANE_WINDOW_MS).contains(&w) {
            return Err(InvalidInput::Settings(format!(
                "lane_window_ms must be 0 (no windows) or \
                 {MIN_LANE_WINDOW_MS}-{MAX_LANE_WINDOW_MS}, not {w}"
            )));
        }
        if let Some(r) = self.rate {
            r.validate("rate")?;
            if r.burst < self.shards {
                return Err(InvalidInput::Settings(format!(
                    "rate.burst ({}) must be at least the shard count ({}): each shard keeps \
                     its share of the bucket",
                    r.burst, self.shards
                )));
            }
        }
        self.retention.validate()?;
        let max_cold = crate::limits::MAX_DELAY.as_millis() as u64;
        if let Some(c) = self.cold_after_ms
            && !(MIN_COLD_AFTER_MS..=max_cold).contains(&c)
        {
            return Err(InvalidInput::Settings(format!(
                "cold_after_ms must be {MIN_COLD_AFTER_MS}-{max_cold}, not {c}"
            )));
        }
        if let Some(t) = &self.target {
            t.validate()?;
        }
        if let Some(r) = self.key_rate {
            r.validate("key_rate")?;
        }
        if let Some(m) = self.key_max_in_flight
            && !(1..=MAX_IN_FLIGHT).contains(&m)
        {
            return Err(InvalidInput::Settings(format!(
                "key_max_in_flight must be 1-{MAX_IN_FLIGHT}, not {m}"
            )));
        }
        if let Some(m) = self.max_in_flight {
            if !(1..=MAX_IN_FLIGHT).contains(&m) {
                return Err(InvalidInput::Settings(format!(
                    "max_in_flight must be 1-{MAX_IN_FLIGHT}, not {m}"
                )));
            }
            if m < self.shards {
                return Err(InvalidInput::Settings(format!(
                    "max_in_flight ({m}) must be at least the shard count ({}): each shard \
                     keeps its share",
                    self.shards
                )));
            }
        }
        Ok(())
    }

    /// The limits one of the queue's shards enforces: the queue's limits divided among its
    /// shards (each shard's claim is atomic on its own; a Cluster cannot share one bucket
    /// between slots). Rates divide exactly; burst and `max_in_flight` round down, so the
    /// shards together never exceed the queue's figures.
    pub fn shard_throttle(&self) -> Throttle {
        let n = self.shards.max(1);
        Throttle {
            per_s: self.rate.map(|r| r.per_s / f64::from(n)),
            burst: self.rate.map_or(0, |r| r.burst / n),
            max_in_flight: self.max_in_flight.map(|m| m / n),
        }
    }
}

/// A queue's throttle as one shard enforces it: its share of the rate and in-flight limits
/// (see [`QueueSettings::shard_throttle`]). (`crate::limits` is something else: the bounds of
/// every input.)
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Throttle {
    /// Tokens per second; `None`: no rate limit.
    pub per_s: Option<f64>,
    /// Bucket size (0 without a rate limit).
    pub burst: u32,
    /// Most leased jobs; `None`: no limit.
    pub max_in_flight: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_deliveries_read_back_and_old_queues_are_classified() {
        assert_eq!(
            DeliveryMode::stored(Some("push"), false),
            Ok(DeliveryMode::Push)
        );
        assert_eq!(
            DeliveryMode::stored(Some("pull"), true),
            Ok(DeliveryMode::Pull)
        );
        // Upgrade: nothing recorded — a default target means an admin made it push.
        assert_eq!(DeliveryMode::stored(None, true), Ok(DeliveryMode::Push));
        assert_eq!(DeliveryMode::stored(None, false), Ok(DeliveryMode::Pull));
        assert!(DeliveryMode::stored(Some("both"), false).is_err());
        let rule = |mode, default_target| DeliveryRule {
            mode,
            default_target,
        };
        assert!(rule(DeliveryMode::Pull, false).admits("q", true).is_err());
        assert!(rule(DeliveryMode::Pull, false).admits("q", false).is_ok());
        assert!(rule(DeliveryMode::Push, false).admits("q", false).is_err());
        assert!(rule(DeliveryMode::Push, true).admits("q", false).is_ok());
        assert!(rule(DeliveryMode::Push, false).admits("q", true).is_ok());
        let mut s = QueueSettings::default();
        s.set_target(Some(Target::post("https://example.com/")));
        assert_eq!(s.delivery_rule(), rule(DeliveryMode::Push, true));
        s.set_target(None);
        assert_eq!(
            s.delivery_rule(),
            rule(DeliveryMode::Push, false),
            "stays push"
        );
    }

    #[test]
    fn limits_are_divided_among_shards() {
        let s = QueueSettings {
            shards: 4,
            lane: false,
            lane_window_ms: DEFAULT_LANE_WINDOW_MS,
            rate: Some(Rate {
                per_s: 100.0,
                burst: 10,
            }),
            max_in_flight: Some(5),
            retention: Retention::default(),
            target: None,
            delivery: DeliveryMode::Pull,
            ..QueueSettings::default()
        };
        s.validate().unwrap();
        let l = s.shard_throttle();
        assert_eq!(l.per_s, Some(25.0));
        assert_eq!(l.burst, 2, "rounded down: 4 x 2 <= 10");
        assert_eq!(l.max_in_flight, Some(1), "4 x 1 <= 5");
        let narrow = QueueSettings {
            max_in_flight: Some(3),
            ..s
        };
        assert!(narrow.validate().is_err(), "fewer slots than shards");
        assert_eq!(
            QueueSettings::default().shard_throttle(),
            Throttle::default()
        );
        for (w, ok) in [
            (0, true),
            (99, false),
            (100, true),
            (60_000, true),
            (60_001, false),
        ] {
            let s = QueueSettings {
                lane_window_ms: w,
                ..QueueSettings::default()
            };
            assert_eq!(s.validate().is_ok(), ok, "lane_window_ms {w}");
        }
    }
}
