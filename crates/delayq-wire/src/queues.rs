//! Queues on the wire: counts and settings (`GET`/`PUT /v1/queues/{q}`), a settings patch, the
//! hour of throughput and lateness (`…/series`), the actions of the live stream, and what a
//! token may do (`/v1/whoami`).

use delayq::series::Counts;
use delayq::{QueueSettings, QueueStats};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::jobs::{OutcomeKind, TargetView};

/// Counts of one queue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct QueueView {
    /// The queue.
    pub queue: String,
    /// Jobs due later (the ones due now are `due`; `jobs?state=scheduled` lists these).
    pub scheduled: u64,
    /// Scheduled jobs due now.
    pub due: u64,
    /// Scheduled jobs due within the next minute.
    pub due_next_minute: u64,
    /// Jobs under a lease.
    pub leased: u64,
    /// Dead jobs.
    pub dead: u64,
    /// Age of the oldest due job, ms.
    pub oldest_overdue_ms: u64,
    /// Whether the queue is paused (accepts jobs, leases none).
    #[serde(default)]
    #[schema(required = true)]
    pub paused: bool,
    /// Due jobs held back right now by the queue's `rate` or `max_in_flight`.
    #[serde(default)]
    #[schema(required = true)]
    pub waiting_on_limit: u64,
    /// Completed jobs kept (retention).
    #[serde(default)]
    #[schema(required = true)]
    pub done: u64,
    /// Jobs waiting for their dependencies to end (what `jobs?state=waiting` lists).
    #[serde(default)]
    #[schema(required = true)]
    pub waiting: u64,
    /// The queue's settings (in `GET /v1/queues/{q}` and `PUT`; absent from the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsView>,
}

/// A queue's settings, as `GET /v1/queues/{q}` shows them.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SettingsView {
    /// Shards: hash slots the queue's jobs spread over (Redis; 1-256, default 1). Changes only
    /// while the queue is empty.
    pub shards: u32,
    /// One-delay lane (Redis): jobs whose due times come in arrival order are kept whole in
    /// a list, ~45 % less memory each. Changes only while the queue is empty.
    #[serde(default)]
    #[schema(required = true)]
    pub lane: bool,
    /// Width of the lane's time windows, ms (0: none): a lane queue's job due more than one
    /// width past its window's start waits whole in that window's list (~40 % less memory).
    #[serde(default)]
    #[schema(required = true)]
    pub lane_window_ms: u32,
    /// Most jobs started per second over all consumers (token bucket); `null`: no limit.
    pub rate: Option<RateView>,
    /// Most jobs leased at once over all consumers; `null`: no limit.
    pub max_in_flight: Option<u32>,
    /// Completed jobs stay readable as `done` this long, ms (0: deleted at once).
    pub keep_done_ms: u64,
    /// A completed job's id is refused this long, ms (0: free once done).
    pub dedupe_ms: u64,
    /// Default HTTP push target of the queue's jobs that carry none; `null`: none.
    pub target: Option<TargetView>,
    /// Who takes the due jobs: `pull` (workers claim them) or `push` (`delayq serve --push`
    /// sends each to its target).
    #[schema(example = "pull")]
    pub delivery: delayq::DeliveryMode,
    /// Most jobs of one key leased at once; `null`: no limit.
    #[serde(default)]
    pub key_max_in_flight: Option<u32>,
    /// Most jobs of one key started per second (a token bucket per key); `null`: no limit.
    #[serde(default)]
    pub key_rate: Option<RateView>,
    /// A push delivery answered 429 with `Retry-After` pauses its job's key until then.
    #[serde(default)]
    #[schema(required = true)]
    pub pause_key_on_429: bool,
    /// Jobs due further ahead than this, ms, wait in the cold tier (PostgreSQL beside the
    /// store, `--postgres`) and move into the store when due within it; `null`: none.
    #[serde(default)]
    pub cold_after_ms: Option<u64>,
}

/// A start-rate limit: `per_s` tokens a second, at most `burst` kept; each job started takes
/// one. On a sharded queue each shard keeps its share.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct RateView {
    /// Tokens per second (> 0, may be fractional: 0.5 = a job every 2 s).
    pub per_s: f64,
    /// Most tokens kept (1-1,000,000): jobs that may start at once after a quiet spell.
    pub burst: u32,
}

/// A field that may be given as `null` (remove) or a value (set), or left out (keep).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// The body of `PUT /v1/queues/{q}`: any subset of the settings; a field not given keeps its
/// stored value.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// Shards (Redis; 1-256). Changes only while the queue is empty.
    pub shards: Option<u32>,
    /// One-delay lane (Redis): keep jobs whose due times come in arrival order — every job of
    /// a queue with one delay — whole in a list (~45 % less memory each). Changes only while
    /// the queue is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<bool>,
    /// Width of the lane's time windows, ms (0: none; 100-60,000): a job of a lane queue
    /// due more than one width past its window's start is kept whole in that window (~40 %
    /// less memory) until one width before the window starts. Turning the lane on without it
    /// gives 10,000 when the queue has none. Changes only while the queue is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_window_ms: Option<u32>,
    /// Start-rate limit; `null` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<RateView>)]
    pub rate: Option<Option<RateView>>,
    /// Most jobs leased at once (1-1,000,000); `null` removes the limit.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u32>)]
    pub max_in_flight: Option<Option<u32>>,
    /// Keep completed jobs readable as `done` this long, ms (0: off; at most 30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_done_ms: Option<u64>,
    /// Refuse a completed job's id this long, ms (0: off; at most 30 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_ms: Option<u64>,
    /// Default push target of the queue's jobs that carry none (the queue is then delivered
    /// by `delayq serve --push`); `null` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<TargetView>)]
    pub target: Option<Option<TargetView>>,
    /// `pull` (workers claim the jobs; a job with a target is refused) or `push` (pushers
    /// deliver them; a job without a target is refused unless the queue has a default one).
    /// Not given: as it is — except that giving a pull queue a default `target` makes it
    /// `push`.
    #[schema(example = "push")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<delayq::DeliveryMode>,
    /// Most jobs of one key leased at once (1-1,000,000); `null` removes the limit.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u32>)]
    pub key_max_in_flight: Option<Option<u32>>,
    /// Start-rate limit of each key; `null` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<RateView>)]
    pub key_rate: Option<Option<RateView>>,
    /// A push delivery answered 429 with `Retry-After` pauses its job's key until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_key_on_429: Option<bool>,
    /// Keep jobs due further ahead than this, ms (at least 60,000), in the cold tier
    /// (PostgreSQL beside the store: `delayq serve --postgres`); `null` moves them all into
    /// the store.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub cold_after_ms: Option<Option<u64>>,
}

impl SettingsPatch {
    /// The settings after this patch of `current`.
    pub fn apply(&self, current: QueueSettings) -> QueueSettings {
        let mut s = QueueSettings {
            shards: self.shards.unwrap_or(current.shards),
            rate: self.rate.map_or(current.rate, |r| {
                r.map(|r| delayq::Rate {
                    per_s: r.per_s,
                    burst: r.burst,
                })
            }),
            max_in_flight: self.max_in_flight.unwrap_or(current.max_in_flight),
            key_max_in_flight: self.key_max_in_flight.unwrap_or(current.key_max_in_flight),
            key_rate: self.key_rate.map_or(current.key_rate, |r| {
                r.map(|r| delayq::Rate {
                    per_s: r.per_s,
                    burst: r.burst,
                })
            }),
            pause_key_on_429: self.pause_key_on_429.unwrap_or(current.pause_key_on_429),
            cold_after_ms: self.cold_after_ms.unwrap_or(current.cold_after_ms),
            retention: delayq::Retention {
                keep_done_ms: self.keep_done_ms.unwrap_or(current.retention.keep_done_ms),
                dedupe_ms: self.dedupe_ms.unwrap_or(current.retention.dedupe_ms),
            },
            ..current
        };
        if let Some(t) = &self.target {
            s.set_target(t.clone().map(Into::into));
        }
        if let Some(d) = self.delivery {
            s.delivery = d;
        }
        s.set_lane(self.lane, self.lane_window_ms);
        s
    }
}

impl QueueView {
    /// From stats.
    pub fn new(queue: &str, s: QueueStats) -> Self {
        Self {
            queue: queue.to_owned(),
            scheduled: s.scheduled,
            due: s.due,
            due_next_minute: s.due_next_minute,
            leased: s.leased,
            dead: s.dead,
            oldest_overdue_ms: s.oldest_overdue_ms,
            paused: s.paused,
            waiting_on_limit: s.waiting_on_limit,
            done: s.done,
            waiting: s.awaiting,
            settings: None,
        }
    }

    /// With the queue's settings.
    pub fn with_settings(mut self, s: &QueueSettings) -> Self {
        self.settings = Some(s.into());
        self
    }
}

/// Counts of one interval (or the totals).
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
pub struct CountsView {
    /// Start of the interval, ms since the epoch (absent from totals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    /// Jobs created.
    pub enqueued: u64,
    /// Deliveries started.
    pub started: u64,
    /// Jobs acknowledged.
    pub completed: u64,
    /// Failed attempts to be retried.
    pub retried: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Median lateness (due → start) of the deliveries started, ms (from a histogram).
    pub lateness_p50_ms: Option<f64>,
    /// 99th percentile lateness, ms.
    pub lateness_p99_ms: Option<f64>,
    /// Deliveries started per lateness bucket (upper edges in `lateness_edges_ms`, one more
    /// bucket for everything later).
    pub lateness_histogram: Vec<u64>,
}

impl CountsView {
    /// From counts.
    pub fn new(start: Option<u64>, c: &Counts) -> Self {
        let round = |v: Option<f64>| v.map(|x| (x * 100.0).round() / 100.0);
        Self {
            start,
            enqueued: c.enqueued,
            started: c.started,
            completed: c.completed,
            retried: c.retried,
            dead: c.dead,
            lateness_p50_ms: round(c.lateness_quantile(0.5)),
            lateness_p99_ms: round(c.lateness_quantile(0.99)),
            lateness_histogram: c.lateness.to_vec(),
        }
    }
}

/// A queue's throughput and lateness over the last hour.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct SeriesView {
    /// Length of an interval, ms.
    pub interval_ms: u64,
    /// Upper edges (ms, inclusive) of the lateness histogram's buckets.
    pub lateness_edges_ms: Vec<u64>,
    /// Every interval of the last hour, oldest first (zeros where nothing happened).
    pub intervals: Vec<CountsView>,
    /// Since the store began counting.
    pub totals: CountsView,
    /// The queue's depth every 10 s over the last hour, as this server sampled it (oldest
    /// first; empty until the server has sampled it).
    pub depth: Vec<DepthSample>,
}

impl SeriesView {
    /// The last hour up to `now_ms`, every interval present.
    pub fn new(s: &delayq::QueueSeries, now_ms: u64) -> Self {
        let step = s.interval_ms.max(1);
        let last = now_ms / step;
        let first = last.saturating_sub(delayq::series::SLOTS - 1);
        let empty = Counts::default();
        let mut given = s.intervals.iter().peekable();
        let intervals = (first..=last)
            .map(|n| {
                let start = n * step;
                while given.peek().is_some_and(|i| i.start_ms < start) {
                    given.next();
                }
                let c = match given.peek() {
                    Some(i) if i.start_ms == start => &i.counts,
                    _ => &empty,
                };
                CountsView::new(Some(start), c)
            })
            .collect();
        Self {
            interval_ms: step,
            lateness_edges_ms: delayq::series::LATENESS_EDGES_MS.to_vec(),
            intervals,
            totals: CountsView::new(None, &s.totals),
            depth: Vec::new(),
        }
    }
}

/// An action taken on a queue through this server (an `action` event of the live stream).
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// The queue.
    pub queue: String,
    /// What was done: `cancelled`, `rescheduled`, `due_now`, `requeued`, `deleted`, `purged`,
    /// `paused`, `resumed`.
    pub outcome: OutcomeKind,
    /// The job, for one-job actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Jobs affected, for bulk actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl Action {
    /// A bulk action that affected `count` jobs.
    pub fn bulk(q: &delayq::QueueName, outcome: OutcomeKind, count: u64) -> Self {
        Self {
            queue: q.to_string(),
            outcome,
            id: None,
            count: Some(count),
        }
    }

    /// An action on the queue itself (pause, resume).
    pub fn queue(q: &delayq::QueueName, outcome: OutcomeKind) -> Self {
        Self {
            queue: q.to_string(),
            outcome,
            id: None,
            count: None,
        }
    }

    /// A one-job action.
    pub fn one(q: &delayq::QueueName, outcome: OutcomeKind, id: &delayq::JobId) -> Self {
        Self {
            queue: q.to_string(),
            outcome,
            id: Some(id.to_string()),
            count: None,
        }
    }
}

/// A queue's counts at one time.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
pub struct DepthSample {
    /// When (ms since the epoch, the server's clock).
    pub at: u64,
    /// Jobs due later.
    pub scheduled: u64,
    /// Jobs due now, waiting.
    pub due: u64,
    /// Jobs under a lease.
    pub leased: u64,
    /// Dead jobs.
    pub dead: u64,
}

/// What the caller may do (`GET /v1/whoami`): the console shows the actions a token allows
/// and greys out the others, instead of letting an operator click into a 403.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
pub struct Whoami {
    /// The token's scope: `read`, `produce`, `consume`, `admin`, or `all` (a bare token, or a
    /// server without tokens).
    #[schema(example = "read")]
    pub scope: String,
    /// Every scope whose routes it may call (`read` always).
    #[schema(example = json!(["read"]))]
    pub allows: Vec<String>,
    /// Whether the server requires a token (false: whoever reaches it may do everything).
    pub tokens_required: bool,
}

impl From<&QueueView> for QueueStats {
    fn from(v: &QueueView) -> Self {
        Self {
            scheduled: v.scheduled,
            due: v.due,
            due_next_minute: v.due_next_minute,
            leased: v.leased,
            dead: v.dead,
            oldest_overdue_ms: v.oldest_overdue_ms,
            paused: v.paused,
            waiting_on_limit: v.waiting_on_limit,
            done: v.done,
            awaiting: v.waiting,
        }
    }
}

impl From<&QueueSettings> for SettingsView {
    fn from(s: &QueueSettings) -> Self {
        Self {
            shards: s.shards,
            lane: s.lane,
            lane_window_ms: s.lane_window_ms,
            rate: s.rate.map(|r| RateView {
                per_s: r.per_s,
                burst: r.burst,
            }),
            max_in_flight: s.max_in_flight,
            keep_done_ms: s.retention.keep_done_ms,
            dedupe_ms: s.retention.dedupe_ms,
            target: s.target.clone().map(Into::into),
            delivery: s.delivery,
            key_max_in_flight: s.key_max_in_flight,
            key_rate: s.key_rate.map(|r| RateView {
                per_s: r.per_s,
                burst: r.burst,
            }),
            pause_key_on_429: s.pause_key_on_429,
            cold_after_ms: s.cold_after_ms,
        }
    }
}

impl From<SettingsView> for QueueSettings {
    fn from(s: SettingsView) -> Self {
        Self {
            shards: s.shards,
            lane: s.lane,
            lane_window_ms: s.lane_window_ms,
            rate: s.rate.map(|r| delayq::Rate {
                per_s: r.per_s,
                burst: r.burst,
            }),
            max_in_flight: s.max_in_flight,
            retention: delayq::Retention {
                keep_done_ms: s.keep_done_ms,
                dedupe_ms: s.dedupe_ms,
            },
            target: s.target.map(Into::into),
            delivery: s.delivery,
            key_max_in_flight: s.key_max_in_flight,
            key_rate: s.key_rate.map(|r| delayq::Rate {
                per_s: r.per_s,
                burst: r.burst,
            }),
            pause_key_on_429: s.pause_key_on_429,
            cold_after_ms: s.cold_after_ms,
        }
    }
}

impl From<&QueueSettings> for SettingsPatch {
    /// A patch that sets every setting to `s`'s.
    fn from(s: &QueueSettings) -> Self {
        let v = SettingsView::from(s);
        Self {
            shards: Some(v.shards),
            lane: Some(v.lane),
            lane_window_ms: Some(v.lane_window_ms),
            rate: Some(v.rate),
            max_in_flight: Some(v.max_in_flight),
            keep_done_ms: Some(v.keep_done_ms),
            dedupe_ms: Some(v.dedupe_ms),
            target: Some(v.target),
            delivery: Some(v.delivery),
            key_max_in_flight: Some(v.key_max_in_flight),
            key_rate: Some(v.key_rate),
            pause_key_on_429: Some(v.pause_key_on_429),
            cold_after_ms: Some(v.cold_after_ms),
        }
    }
}
