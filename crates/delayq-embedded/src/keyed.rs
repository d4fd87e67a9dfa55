//! Keys on the embedded store (`delayq::JobKey`): a queue that has had a keyed job (its
//! `queue_conf.keyed`) shares its due jobs among its keys round-robin — start-time fair
//! queuing: a key's next job starts at the later of the key's turn (`job_keys.turn`, one past
//! its last job's start) and the queue's (`queue_conf.turn`, the start of the job claimed
//! last), and a claim takes a job from the key of the earliest start at a time — and bounds
//! each key by the queue's `key_max_in_flight` (its leased jobs, counted through the
//! `jobs_by_key` index), `key_rate` (a token bucket per key) and the key's hold (`pause_key`).
//! The queue's jobs without a key share the key '' (never a `JobKey`), which no limit or hold
//! applies to.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use delayq::{JobKey, KeyStats, Rate, Result};
use rusqlite::{Connection, OptionalExtension, params};

use crate::rows::{COLS, LEASED, RowData, SCHEDULED, row};
use crate::store::sql;

/// Whether queue `q` has had keyed jobs.
pub(crate) fn is_keyed(c: &Connection, q: &str) -> Result<bool> {
    let k: Option<i64> = c
        .prepare_cached("SELECT keyed FROM queue_conf WHERE queue = ?1")
        .map_err(sql)?
        .query_row(params![q], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    Ok(k == Some(1))
}

/// Makes `q` a keyed queue: its jobs without a key join the key ''.
pub(crate) fn mark_keyed(c: &Connection, q: &str) -> Result<()> {
    c.execute(
        "INSERT INTO queue_conf (queue, keyed) VALUES (?1, 1) \
         ON CONFLICT (queue) DO UPDATE SET keyed = 1",
        params![q],
    )
    .map_err(sql)?;
    c.execute(
        "UPDATE jobs SET key = '' WHERE queue = ?1 AND key IS NULL",
        params![q],
    )
    .map_err(sql)?;
    add_key(c, q, "")
}

/// Records key `k` of queue `q` (its turn starts at the queue's).
pub(crate) fn add_key(c: &Connection, q: &str, k: &str) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO job_keys (queue, key, turn) VALUES (?1, ?2, \
         COALESCE((SELECT turn FROM queue_conf WHERE queue = ?1), 0)) \
         ON CONFLICT (queue, key) DO NOTHING",
    )
    .map_err(sql)?
    .execute(params![q, k])
    .map_err(sql)?;
    Ok(())
}

/// A queue's limits per key (`queue_limits`).
#[derive(Clone, Copy, Default)]
pub(crate) struct KeyLimits {
    pub max_in_flight: Option<u32>,
    pub rate: Option<Rate>,
    pub pause_on_429: bool,
}

impl KeyLimits {
    /// As stored (none without a row).
    pub(crate) fn read(c: &Connection, q: &str) -> Result<Self> {
        type Row = (Option<u32>, Option<f64>, u32, i64);
        let r: Option<Row> = c
            .prepare_cached(
                "SELECT key_mif, key_per_s, key_burst, pause_key_on_429 FROM queue_limits \
                 WHERE queue = ?1",
            )
            .map_err(sql)?
            .query_row(params![q], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .optional()
            .map_err(sql)?;
        Ok(r.map_or(Self::default(), |(mif, per_s, burst, p)| Self {
            max_in_flight: mif,
            rate: per_s.map(|per_s| Rate { per_s, burst }),
            pause_on_429: p == 1,
        }))
    }
}

/// What a keyed claim found besides its jobs.
pub(crate) struct KeyedTake {
    /// The due jobs taken, in turn order.
    pub rows: Vec<RowData>,
    /// When a job not taken may be claimable (ms): now while more are, a key's hold end, its
    /// next token or its next due time.
    pub next: Option<i64>,
    /// A key at `key_max_in_flight` holds due jobs back (woken when a lease ends).
    pub slot_held: bool,
}

struct Group {
    key: String,
    turn: i64,
    tokens: Option<f64>,
    in_flight: i64,
    rows: VecDeque<RowData>,
    taken: i64,
}

/// Claim step 2 of a keyed queue: up to `max` due jobs — the highest priority first, as the
/// Redis claim takes them, and within it a key of the earliest turn at a time — each key
/// within its limits and hold (the rows are leased by the caller). A queue that has had
/// priorities (`prio`) reads each key's due jobs in priority order (a sort of the key's due
/// rows); any other in the `jobs_by_key` index's order (due time).
pub(crate) fn take(
    c: &Connection,
    q: &str,
    max: i64,
    now: i64,
    now_us: u64,
    prio: bool,
) -> Result<KeyedTake> {
    let lim = KeyLimits::read(c, q)?;
    let v: i64 = c
        .prepare_cached("SELECT turn FROM queue_conf WHERE queue = ?1")
        .map_err(sql)?
        .query_row(params![q], |r| r.get(0))
        .optional()
        .map_err(sql)?
        .unwrap_or(0);
    type KeyRow = (String, i64, Option<i64>, Option<f64>, i64);
    let keys: Vec<KeyRow> = c
        .prepare_cached(
            "SELECT key, turn, hold_until, tokens, at_us FROM job_keys WHERE queue = ?1",
        )
        .map_err(sql)?
        .query_map(params![q], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    let mut head = c
        .prepare_cached(
            "SELECT score FROM jobs WHERE queue = ?1 AND key = ?2 AND state = ?3 \
             ORDER BY score LIMIT 1",
        )
        .map_err(sql)?;
    let mut leased = c
        .prepare_cached("SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND key = ?2 AND state = ?3")
        .map_err(sql)?;
    let order = if prio {
        "COALESCE(priority, ?6) DESC, score, id"
    } else {
        "score, id"
    };
    let mut select = c
        .prepare_cached(&format!(
            "SELECT {COLS} FROM jobs WHERE queue = ?1 AND key = ?2 AND state = ?3 \
             AND score <= ?4 ORDER BY {order} LIMIT ?5"
        ))
        .map_err(sql)?;
    let prio_of = |r: &RowData| r.priority.unwrap_or(i64::from(delayq::DEFAULT_PRIORITY));
    let mut next: Option<i64> = None;
    let mut slot_held = false;
    let mut groups = Vec::new();
    let mut heap = BinaryHeap::new();
    for (key, turn, hold, tokens, at_us) in keys {
        let Some(h) = head
            .query_row(params![q, key, SCHEDULED], |r| r.get::<_, i64>(0))
            .optional()
            .map_err(sql)?
        else {
            continue;
        };
        if h > now {
            soon(h, &mut next);
            continue;
        }
        let limited = !key.is_empty();
        if let Some(end) = hold.filter(|e| *e > now && limited) {
            soon(end, &mut next);
            continue;
        }
        let in_flight = match lim.max_in_flight {
            Some(_) if limited => leased
                .query_row(params![q, key, LEASED], |r| r.get(0))
                .map_err(sql)?,
            _ => 0,
        };
        if lim
            .max_in_flight
            .is_some_and(|m| limited && in_flight >= i64::from(m))
        {
            slot_held = true;
            continue;
        }
        let tokens = match lim.rate {
            Some(r) if limited => {
                let full = f64::from(r.burst);
                let t = tokens.map_or(full, |t| {
                    (t + (now_us as i64 - at_us).max(0) as f64 * r.per_s / 1e6).min(full)
                });
                if t < 1.0 {
                    soon(
                        now + ((1.0 - t) * 1000.0 / r.per_s).ceil() as i64,
                        &mut next,
                    );
                    continue;
                }
                Some(t)
            }
            _ => None,
        };
        let got = if prio {
            select.query_map(
                params![q, key, SCHEDULED, now, max, delayq::DEFAULT_PRIORITY],
                row,
            )
        } else {
            select.query_map(params![q, key, SCHEDULED, now, max], row)
        };
        let rows: VecDeque<RowData> = got
            .map_err(sql)?
            .collect::<rusqlite::Result<_>>()
            .map_err(sql)?;
        let Some(first) = rows.front() else {
            continue;
        };
        heap.push(Reverse((-prio_of(first), turn.max(v), groups.len())));
        groups.push(Group {
            key,
            turn: turn.max(v),
            tokens,
            in_flight,
            rows,
            taken: 0,
        });
    }
    drop((head, leased, select));
    let mut rows = Vec::new();
    let mut top = v;
    while (rows.len() as i64) < max {
        let Some(Reverse((_, _, i))) = heap.pop() else {
            break;
        };
        let g = &mut groups[i];
        let Some(r) = g.rows.pop_front() else {
            continue;
        };
        rows.push(r);
        // Start-time fair queuing: the queue's turn is the start of the job taken last.
        top = top.max(g.turn);
        g.turn += 1;
        g.taken += 1;
        g.in_flight += 1;
        if let Some(t) = g.tokens.as_mut() {
            *t -= 1.0;
        }
        let next_prio = g.rows.front().map(prio_of);
        let slot_full = lim
            .max_in_flight
            .is_some_and(|m| !g.key.is_empty() && g.in_flight >= i64::from(m));
        let empty_bucket = g.tokens.is_some_and(|t| t < 1.0);
        let Some(next_prio) = next_prio else {
            continue;
        };
        if slot_full {
            slot_held = true;
        } else if empty_bucket {
            if let (Some(r), Some(t)) = (lim.rate, g.tokens) {
                soon(
                    now + ((1.0 - t) * 1000.0 / r.per_s).ceil() as i64,
                    &mut next,
                );
            }
        } else {
            heap.push(Reverse((-next_prio, g.turn, i)));
        }
    }
    if !heap.is_empty() {
        next = Some(now);
    }
    let mut upd = c
        .prepare_cached(
            "UPDATE job_keys SET turn = ?3, tokens = COALESCE(?4, tokens), at_us = ?5 \
             WHERE queue = ?1 AND key = ?2",
        )
        .map_err(sql)?;
    for g in groups.iter().filter(|g| g.taken > 0) {
        upd.execute(params![q, g.key, g.turn, g.tokens, now_us as i64])
            .map_err(sql)?;
    }
    if top > v {
        c.prepare_cached("UPDATE queue_conf SET turn = ?2 WHERE queue = ?1")
            .map_err(sql)?
            .execute(params![q, top])
            .map_err(sql)?;
    }
    Ok(KeyedTake {
        rows,
        next,
        slot_held,
    })
}

/// Lowers `next` to `t`.
fn soon(t: i64, next: &mut Option<i64>) {
    *next = Some(next.map_or(t, |n| n.min(t)));
}

/// Holds key `k` of queue `q` until `until` (ms; `None`: lifts the hold). Returns the hold's
/// end.
pub(crate) fn hold(c: &Connection, q: &str, k: &str, until: Option<i64>) -> Result<Option<i64>> {
    c.execute(
        "INSERT INTO job_keys (queue, key, turn, hold_until) VALUES (?1, ?2, \
         COALESCE((SELECT turn FROM queue_conf WHERE queue = ?1), 0), ?3) \
         ON CONFLICT (queue, key) DO UPDATE SET hold_until = excluded.hold_until",
        params![q, k, until],
    )
    .map_err(sql)?;
    Ok(until)
}

/// The keys of `q` with jobs in flight, due or held, busiest first, at most `limit`.
pub(crate) fn stats(c: &Connection, q: &str, now: i64, limit: usize) -> Result<Vec<KeyStats>> {
    let mut by: HashMap<String, KeyStats> = HashMap::new();
    fn entry(by: &mut HashMap<String, KeyStats>, k: String) -> Option<&mut KeyStats> {
        let key = JobKey::new(k.clone()).ok()?;
        Some(by.entry(k).or_insert(KeyStats {
            key,
            in_flight: 0,
            due: 0,
            paused_until_ms: None,
        }))
    }
    let counts: Vec<(String, i64, i64)> = c
        .prepare_cached(
            "SELECT key, SUM(state = ?2), SUM(state = ?3 AND score <= ?4) FROM jobs \
             WHERE queue = ?1 AND key IS NOT NULL AND key != '' AND state IN (?2, ?3) \
             GROUP BY key",
        )
        .map_err(sql)?
        .query_map(params![q, LEASED, SCHEDULED, now], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    for (k, leased, due) in counts {
        if let Some(e) = entry(&mut by, k) {
            e.in_flight = leased as u64;
            e.due = due as u64;
        }
    }
    let holds: Vec<(String, i64)> = c
        .prepare_cached("SELECT key, hold_until FROM job_keys WHERE queue = ?1 AND hold_until > ?2")
        .map_err(sql)?
        .query_map(params![q, now], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    for (k, end) in holds {
        if let Some(e) = entry(&mut by, k) {
            e.paused_until_ms = Some(end as u64);
        }
    }
    let mut rows: Vec<KeyStats> = by
        .into_values()
        .filter(|k| k.in_flight + k.due > 0 || k.paused_until_ms.is_some())
        .collect();
    KeyStats::busiest_first(&mut rows);
    rows.truncate(limit);
    Ok(rows)
}
