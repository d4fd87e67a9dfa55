//! Throughput and lateness over time: per queue, counts of enqueued, started, completed,
//! retried and dead jobs per [`INTERVAL_MS`] and a histogram of lateness (due → start), kept
//! for the last [`SLOTS`] intervals (one hour) plus running totals.
//!
//! The stores keep them where they already write: Redis in one string per shard, counted in
//! with one `BITFIELD` per script call by the scripts that change state (the layout is
//! [`layout`], shared with the Lua prelude); the embedded store in memory, in [`Ring`]. Both
//! hand out a [`QueueSeries`].

use serde::{Deserialize, Serialize};

/// Length of one interval, in ms.
pub const INTERVAL_MS: u64 = 10_000;
/// Intervals kept (a ring): one hour of 10-s intervals.
pub const SLOTS: u64 = 360;
/// Upper edges (ms, inclusive) of the lateness histogram's buckets; one more bucket holds
/// everything later than the last edge.
pub const LATENESS_EDGES_MS: [u64; 15] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
];
/// Buckets of the lateness histogram.
pub const LATENESS_BUCKETS: usize = LATENESS_EDGES_MS.len() + 1;
/// Counters kept per interval on Redis: enqueued, completed, retried, dead, then the lateness
/// buckets (deliveries started are their sum).
pub const COUNTERS: usize = 4 + LATENESS_BUCKETS;

/// Where Redis keeps a shard's series: one string per shard, read and written with
/// `BITFIELD` (big-endian integers at fixed offsets), so a script adds its counts in one
/// command without decoding anything. Byte offsets:
/// - [`layout::PAUSED`]: `u8`, 1 while the shard is paused;
/// - [`layout::LAST`]: `u32`, the last interval counted in;
/// - [`layout::TOTALS`]: [`COUNTERS`] totals, `i64` each, of every interval before the last
///   (an interval is folded in when the next one begins, so the hot path writes only its
///   interval; the totals are these plus the last interval);
/// - [`layout::RING`]: [`SLOTS`] intervals of [`layout::SLOT`] bytes: the interval number
///   (`u32`, ms / [`INTERVAL_MS`]) then [`COUNTERS`] counts (`u32` each). The slot of interval
///   `n` is `n % SLOTS`; a slot holding another interval is zeroed before it is counted in.
pub mod layout {
    use super::{COUNTERS, SLOTS};

    /// The paused flag.
    pub const PAUSED: usize = 0;
    /// The limit flags: [`LIMITED`] (the shard has limits at [`LIMITS`]) and [`WAITING`] (a
    /// claim was held back by `max_in_flight`: the next freed slot wakes consumers).
    pub const FLAGS: usize = 1;
    /// Flag: limits set.
    pub const LIMITED: u8 = 1;
    /// Flag: a claim waits for an in-flight slot.
    pub const WAITING: u8 = 2;
    /// Flag: the queue keeps completed jobs ([`RETAIN`] holds how long).
    pub const RETAINS: u8 = 4;
    /// Flag: the queue has had jobs with a priority: its due jobs wait in `ready`.
    pub const PRIORITIES: u8 = 8;
    /// Flag: the queue keeps jobs whose due times come in arrival order in its one-delay lane
    /// (`QueueSettings::lane`).
    pub const LANE: u8 = 16;
    /// Flag: the queue has had jobs with a key ([`crate::JobKey`]): its due jobs wait in
    /// `ready`, scored by their keys' turns.
    pub const KEYS: u8 = 32;
    /// Flag: the queue bounds each key ([`KEY_LIMITS`] holds how).
    pub const KEY_LIMITED: u8 = 64;
    /// Flag: the queue has had a batch ([`crate::Batches`]): a job's end is counted in its
    /// batch.
    pub const BATCHES: u8 = 128;
    /// The width of the lane's time windows in ms (`u16`, 0: none; `QueueSettings::lane_window_ms`).
    pub const WIDTH: usize = 2;
    /// The last interval counted in.
    pub const LAST: usize = 4;
    /// The totals.
    pub const TOTALS: usize = 8;
    /// The ring of intervals.
    pub const RING: usize = TOTALS + 8 * COUNTERS;
    /// Bytes per interval.
    pub const SLOT: usize = 4 + 4 * COUNTERS;
    /// Bytes of the whole string.
    pub const LEN: usize = RING + SLOT * SLOTS as usize;
    /// The shard's limits, after the series (only written when a queue has limits): per_s
    /// (f64, 0: no rate limit), burst (u32), max_in_flight (u32, 0: none), then the bucket's
    /// tokens (f64) and when they were counted (µs, f64) — big-endian.
    pub const LIMITS: usize = LEN;
    /// Bytes of the limits.
    pub const LIMITS_LEN: usize = 32;
    /// The queue's retention of completed jobs, after the limits: keep_done_ms and dedupe_ms
    /// (f64 each, big-endian).
    pub const RETAIN: usize = LIMITS + LIMITS_LEN;
    /// Each key's limits, after the retention: key_max_in_flight (u32, 0: none), the key
    /// rate's burst (u32) and per_s (f64, 0: no rate limit), big-endian.
    pub const KEY_LIMITS: usize = RETAIN + 16;
}

/// The bucket of the lateness histogram that `ms` falls in.
pub fn lateness_bucket(ms: u64) -> usize {
    LATENESS_EDGES_MS
        .iter()
        .position(|&edge| ms <= edge)
        .unwrap_or(LATENESS_EDGES_MS.len())
}

/// What happened to a queue's jobs in one interval (or in total).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Jobs created by an enqueue.
    pub enqueued: u64,
    /// Deliveries started (jobs leased by a claim).
    pub started: u64,
    /// Jobs acknowledged.
    pub completed: u64,
    /// Failed attempts that will be retried (nack, or a lease that expired).
    pub retried: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Deliveries started, by lateness bucket ([`LATENESS_EDGES_MS`]).
    pub lateness: [u64; LATENESS_BUCKETS],
}

impl Counts {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: &Counts) {
        self.enqueued += other.enqueued;
        self.started += other.started;
        self.completed += other.completed;
        self.retried += other.retried;
        self.dead += other.dead;
        for (a, b) in self.lateness.iter_mut().zip(other.lateness) {
            *a += b;
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Counts::default()
    }

    /// The lateness (ms) below which a fraction `q` (0–1) of the deliveries started, by linear
    /// interpolation inside the histogram's bucket (the last bucket answers its lower edge);
    /// `None` when none started.
    pub fn lateness_quantile(&self, q: f64) -> Option<f64> {
        let total: u64 = self.lateness.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut seen = 0.0;
        for (i, &n) in self.lateness.iter().enumerate() {
            let next = seen + n as f64;
            if n > 0 && next >= rank {
                let lo = if i == 0 {
                    0.0
                } else {
                    LATENESS_EDGES_MS[i - 1] as f64
                };
                let Some(&hi) = LATENESS_EDGES_MS.get(i) else {
                    return Some(lo);
                };
                return Some(lo + (hi as f64 - lo) * ((rank - seen) / n as f64));
            }
            seen = next;
        }
        Some(*LATENESS_EDGES_MS.last().expect("edges") as f64)
    }

    /// Counts from [`COUNTERS`] values in Redis's counter order (enqueued, completed,
    /// retried, dead, lateness buckets; started is their sum); `None` when there are too few.
    pub fn from_values(v: &[u64]) -> Option<Counts> {
        if v.len() < COUNTERS {
            return None;
        }
        let mut c = Counts {
            enqueued: v[0],
            completed: v[1],
            retried: v[2],
            dead: v[3],
            started: v[4..COUNTERS].iter().sum(),
            ..Counts::default()
        };
        c.lateness.copy_from_slice(&v[4..COUNTERS]);
        Some(c)
    }
}

fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// A shard's series string as Redis keeps it ([`layout`]): whether the shard is paused, its
/// totals and every interval it holds (interval number, counts). A short string (a shard that
/// never counted that far) reads as zeros.
pub fn decode(raw: &[u8]) -> (bool, Counts, Vec<(u64, Counts)>) {
    let mut full = raw.to_vec();
    full.resize(layout::LEN, 0);
    let paused = full[layout::PAUSED] != 0;
    let last = be(&full[layout::LAST..layout::LAST + 4]);
    let totals: Vec<u64> = full[layout::TOTALS..layout::RING]
        .chunks(8)
        .map(be)
        .collect();
    let mut totals = Counts::from_values(&totals).unwrap_or_default();
    let parts: Vec<(u64, Counts)> = full[layout::RING..]
        .chunks(layout::SLOT)
        .filter_map(|slot| {
            let n = be(&slot[..4]);
            let v: Vec<u64> = slot[4..].chunks(4).map(be).collect();
            Some((n, Counts::from_values(&v)?))
        })
        .filter(|(n, c)| *n > 0 && !c.is_empty())
        .collect();
    if let Some((_, c)) = parts.iter().find(|(n, _)| *n == last) {
        totals.add(c);
    }
    (paused, totals, parts)
}

/// One interval of a queue's series.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    /// Start of the interval (ms since epoch).
    pub start_ms: u64,
    /// What happened in it.
    pub counts: Counts,
}

/// A queue's throughput and lateness over the last hour.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSeries {
    /// Length of each interval (ms).
    pub interval_ms: u64,
    /// Every interval of the last hour that counted something, oldest first (intervals
    /// missing from the list counted nothing).
    pub intervals: Vec<Interval>,
    /// Totals since the store began counting (Redis: since the queue's first write with this
    /// version; embedded: since the process opened the store).
    pub totals: Counts,
}

impl QueueSeries {
    /// A series from `(interval number, counts)` pairs as stores keep them (several per
    /// interval when a queue has shards): merged per interval, sorted, and cut to the
    /// [`SLOTS`] intervals that end at `now_ms`.
    pub fn collect(
        now_ms: u64,
        parts: impl IntoIterator<Item = (u64, Counts)>,
        totals: Counts,
    ) -> Self {
        let current = now_ms / INTERVAL_MS;
        let oldest = current.saturating_sub(SLOTS - 1);
        let mut by: std::collections::BTreeMap<u64, Counts> = Default::default();
        for (n, c) in parts {
            if (oldest..=current).contains(&n) && !c.is_empty() {
                by.entry(n).or_default().add(&c);
            }
        }
        Self {
            interval_ms: INTERVAL_MS,
            intervals: by
                .into_iter()
                .map(|(n, counts)| Interval {
                    start_ms: n * INTERVAL_MS,
                    counts,
                })
                .collect(),
            totals,
        }
    }
}

/// The series of one queue kept in memory (the embedded store): a ring of [`SLOTS`]
/// intervals and the totals.
#[derive(Clone, Debug)]
pub struct Ring {
    slots: Vec<(u64, Counts)>,
    totals: Counts,
}

impl Default for Ring {
    fn default() -> Self {
        Self {
            slots: vec![(u64::MAX, Counts::default()); SLOTS as usize],
            totals: Counts::default(),
        }
    }
}

impl Ring {
    /// Adds `c` to the interval of `now_ms` and to the totals.
    pub fn record(&mut self, now_ms: u64, c: &Counts) {
        if c.is_empty() {
            return;
        }
        let n = now_ms / INTERVAL_MS;
        let slot = &mut self.slots[(n % SLOTS) as usize];
        if slot.0 != n {
            *slot = (n, Counts::default());
        }
        slot.1.add(c);
        self.totals.add(c);
    }

    /// The series as of `now_ms`.
    pub fn series(&self, now_ms: u64) -> QueueSeries {
        QueueSeries::collect(now_ms, self.slots.iter().cloned(), self.totals.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_fits() {
        assert_eq!(LATENESS_BUCKETS, 16);
        assert_eq!(layout::RING, 168);
        assert_eq!(layout::SLOT, 84);
        assert_eq!(layout::LEN, 168 + 84 * 360);
    }

    #[test]
    fn buckets_and_quantiles() {
        assert_eq!(lateness_bucket(0), 0);
        assert_eq!(lateness_bucket(1), 0);
        assert_eq!(lateness_bucket(2), 1);
        assert_eq!(lateness_bucket(3), 2);
        assert_eq!(lateness_bucket(60_001), 15);
        let mut c = Counts::default();
        assert_eq!(c.lateness_quantile(0.5), None);
        c.lateness[0] = 98; // ≤ 1 ms
        c.lateness[6] = 2; // 50–100 ms
        let p50 = c.lateness_quantile(0.5).unwrap();
        assert!((0.0..=1.0).contains(&p50), "{p50}");
        let p99 = c.lateness_quantile(0.99).unwrap();
        assert!((50.0..=100.0).contains(&p99), "{p99}");
        c.lateness[15] = 1000;
        assert_eq!(c.lateness_quantile(0.99), Some(60_000.0));
    }

    #[test]
    fn decode_reads_the_bitfield_layout() {
        let mut raw = vec![0u8; layout::LEN];
        raw[layout::PAUSED] = 1;
        raw[layout::LAST..layout::LAST + 4].copy_from_slice(&7u32.to_be_bytes());
        raw[layout::TOTALS..layout::TOTALS + 8].copy_from_slice(&300u64.to_be_bytes());
        let slot = layout::RING + 7 * layout::SLOT;
        raw[slot..slot + 4].copy_from_slice(&7u32.to_be_bytes());
        raw[slot + 4..slot + 8].copy_from_slice(&5u32.to_be_bytes());
        let last = slot + 4 + 4 * (COUNTERS - 1);
        raw[last..last + 4].copy_from_slice(&2u32.to_be_bytes());
        let (paused, totals, parts) = decode(&raw);
        assert!(paused);
        assert_eq!(totals.enqueued, 305, "folded + the last interval");
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].0, 7);
        let c = &parts[0].1;
        assert_eq!((c.enqueued, c.lateness[15], c.started), (5, 2, 2));
        let (paused, totals, parts) = decode(&[]);
        assert!(!paused && totals.is_empty() && parts.is_empty());
    }

    #[test]
    fn the_ring_keeps_one_hour() {
        let mut r = Ring::default();
        let one = Counts {
            enqueued: 1,
            ..Counts::default()
        };
        r.record(0, &one);
        r.record(5_000, &one);
        r.record(INTERVAL_MS * 3, &one);
        let s = r.series(INTERVAL_MS * 3);
        assert_eq!(s.intervals.len(), 2);
        assert_eq!(s.intervals[0].counts.enqueued, 2);
        assert_eq!(s.totals.enqueued, 3);
        // An hour later the first interval's slot is reused and the old one is gone.
        r.record(INTERVAL_MS * SLOTS, &one);
        let s = r.series(INTERVAL_MS * SLOTS);
        assert_eq!(s.intervals.len(), 2, "{s:?}");
        assert_eq!(s.intervals[1].start_ms, INTERVAL_MS * SLOTS);
        assert_eq!(s.totals.enqueued, 4);
    }
}
