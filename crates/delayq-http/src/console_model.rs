//! Bodies of the console endpoints: job listings, the series, and the events of the live
//! stream.

use delayq::series::Counts;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::JobView;

/// Query of `GET /v1/queues/{q}/jobs`.
#[derive(Deserialize, utoipa::IntoParams, Debug)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `scheduled` (due later), `due` (due now, waiting), `leased` or `dead`; required unless
    /// `id_prefix` is given.
    pub state: Option<String>,
    /// At most this many (1-1000, default 100).
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Jobs whose id starts with this (any state), where the store can search by prefix
    /// (embedded); on Redis the job with exactly this id.
    pub id_prefix: Option<String>,
}

/// Query of `DELETE /v1/queues/{q}/jobs`.
#[derive(Deserialize, utoipa::IntoParams, Debug)]
#[serde(deny_unknown_fields)]
pub struct StateQuery {
    /// `scheduled` (every job due later) or `due` (every job due now, waiting).
    pub state: String,
}

/// A page of jobs.
#[derive(Serialize, ToSchema, Debug)]
pub struct JobList {
    /// The jobs, ordered by due time (leased: lease deadline; dead: failure time; a search:
    /// id).
    pub jobs: Vec<JobView>,
    /// Pass as `cursor` for the next page; `null` at the end.
    pub next_cursor: Option<String>,
    /// For a search: whether the store searched by prefix (`false`: exact id only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_prefix: Option<bool>,
}

/// Counts of one interval (or the totals).
#[derive(Serialize, ToSchema, Debug, Default)]
pub struct CountsView {
    /// Start of the interval, ms since the epoch (absent from totals).
    #[serde(skip_serializing_if = "Option::is_none")]
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
#[derive(Serialize, ToSchema, Debug)]
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
    pub depth: Vec<crate::depth::DepthSample>,
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
#[derive(Serialize, ToSchema, Debug, Clone)]
pub struct Action {
    /// The queue.
    pub queue: String,
    /// What was done: `cancelled`, `rescheduled`, `due_now`, `requeued`, `deleted`, `purged`,
    /// `paused`, `resumed`.
    pub outcome: String,
    /// The job, for one-job actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Jobs affected, for bulk actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

impl Action {
    /// A bulk action that affected `count` jobs.
    pub fn bulk(q: &delayq::QueueName, outcome: &str, count: u64) -> Self {
        Self {
            queue: q.to_string(),
            outcome: outcome.into(),
            id: None,
            count: Some(count),
        }
    }

    /// An action on the queue itself (pause, resume).
    pub fn queue(q: &delayq::QueueName, outcome: &str) -> Self {
        Self {
            queue: q.to_string(),
            outcome: outcome.into(),
            id: None,
            count: None,
        }
    }

    /// A one-job action.
    pub fn one(q: &delayq::QueueName, outcome: &str, id: &delayq::JobId) -> Self {
        Self {
            queue: q.to_string(),
            outcome: outcome.into(),
            id: Some(id.to_string()),
            count: None,
        }
    }
}
