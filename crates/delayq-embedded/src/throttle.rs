//! A queue's rate and concurrency limits and its retention on the embedded store (the
//! `queue_limits` table):
//! what a claim may lease, when a held-back consumer should come back, and waking consumers
//! when an in-flight slot frees. The same rules as the Redis claim (`claim.lua`).

use std::time::Duration;

use delayq::{QueueSettings, Rate, Result, Retention};
use rusqlite::types::FromSql;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::rows::{LEASED, SCHEDULED, head};
use crate::store::sql;

/// `per_s, burst, max_in_flight, keep_done_ms, dedupe_ms` of a `queue_limits` row.
type SettingsRow = (Option<f64>, u32, Option<u32>, i64, i64);

/// `per_s, burst, max_in_flight, tokens, at_us` of a `queue_limits` row.
type BucketRow = (Option<f64>, u32, Option<u32>, f64, i64);

/// The first five columns of a row.
fn five<A, B, C, D, E>(r: &Row<'_>) -> rusqlite::Result<(A, B, C, D, E)>
where
    A: FromSql,
    B: FromSql,
    C: FromSql,
    D: FromSql,
    E: FromSql,
{
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

/// What `read` makes of the columns that `select` (`SELECT … FROM queue_limits WHERE queue =
/// ?1`) reads of queue `q`'s row; `None` without a row.
fn limits_row<T>(
    c: &Connection,
    q: &str,
    select: &str,
    read: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    c.prepare_cached(select)
        .map_err(sql)?
        .query_row(params![q], read)
        .optional()
        .map_err(sql)
}

/// One queue's limits with its bucket refilled to the claim's now.
pub(crate) struct Bucket {
    per_s: Option<f64>,
    max_in_flight: Option<u32>,
    tokens: f64,
    leased: u64,
}

/// A queue's limits and retention as stored (none without a row).
pub(crate) fn stored(c: &Connection, q: &str) -> Result<(Option<Rate>, Option<u32>, Retention)> {
    let select = "SELECT per_s, burst, max_in_flight, keep_done_ms, dedupe_ms FROM queue_limits \
                  WHERE queue = ?1";
    let row: Option<SettingsRow> = limits_row(c, q, select, five)?;
    Ok(row.map_or(
        (None, None, Retention::default()),
        |(per_s, burst, m, keep, dedupe)| {
            (
                per_s.map(|per_s| Rate { per_s, burst }),
                m,
                Retention {
                    keep_done_ms: keep as u64,
                    dedupe_ms: dedupe as u64,
                },
            )
        },
    ))
}

/// Stores a queue's limits and retention (or removes them). A bucket that had a rate keeps
/// its tokens, capped at the new burst; a new one starts full.
pub(crate) fn store(c: &Connection, q: &str, s: &QueueSettings, now_us: u64) -> Result<()> {
    let (rate, max_in_flight, r) = (s.rate, s.max_in_flight, s.retention);
    let keys = s.key_max_in_flight.is_some() || s.key_rate.is_some() || s.pause_key_on_429;
    if rate.is_none() && max_in_flight.is_none() && !r.any() && !keys {
        c.execute("DELETE FROM queue_limits WHERE queue = ?1", params![q])
            .map_err(sql)?;
        return Ok(());
    }
    let burst = rate.map_or(0, |r| r.burst);
    c.execute(
        "INSERT INTO queue_limits (queue, per_s, burst, max_in_flight, tokens, at_us, \
         keep_done_ms, dedupe_ms, key_mif, key_per_s, key_burst, pause_key_on_429) \
         VALUES (?1, ?2, ?3, ?4, ?3, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (queue) DO UPDATE SET \
         per_s = excluded.per_s, burst = excluded.burst, max_in_flight = excluded.max_in_flight, \
         tokens = CASE WHEN queue_limits.per_s IS NULL THEN excluded.tokens \
                  ELSE MIN(queue_limits.tokens, excluded.burst) END, waiting = 0, \
         keep_done_ms = excluded.keep_done_ms, dedupe_ms = excluded.dedupe_ms, \
         key_mif = excluded.key_mif, key_per_s = excluded.key_per_s, \
         key_burst = excluded.key_burst, pause_key_on_429 = excluded.pause_key_on_429",
        params![
            q,
            rate.map(|r| r.per_s),
            burst,
            max_in_flight,
            now_us as i64,
            r.keep_done_ms as i64,
            r.dedupe_ms as i64,
            s.key_max_in_flight,
            s.key_rate.map(|k| k.per_s),
            s.key_rate.map_or(0, |k| k.burst),
            i64::from(s.pause_key_on_429),
        ],
    )
    .map_err(sql)?;
    Ok(())
}

/// The queue's retention of completed jobs (the default without a row).
pub(crate) fn retention(c: &Connection, q: &str) -> Result<Retention> {
    Ok(stored(c, q)?.2)
}

impl Bucket {
    /// The queue's limits refilled to `now_us`; `None` when it has none.
    pub(crate) fn read(c: &Connection, q: &str, now_us: u64) -> Result<Option<Self>> {
        let select = "SELECT per_s, burst, max_in_flight, tokens, at_us FROM queue_limits \
                      WHERE queue = ?1";
        let row: Option<BucketRow> = limits_row(c, q, select, five)?;
        let Some((per_s, burst, max_in_flight, mut tokens, at_us)) = row else {
            return Ok(None);
        };
        if per_s.is_none() && max_in_flight.is_none() {
            return Ok(None); // a row for retention only
        }
        if let Some(p) = per_s {
            let dt = (now_us as i64 - at_us).max(0) as f64;
            tokens = (tokens + dt * p / 1e6).min(f64::from(burst));
        }
        let leased = match max_in_flight {
            Some(_) => c
                .prepare_cached("SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND state = ?2")
                .map_err(sql)?
                .query_row(params![q, LEASED], |r| r.get::<_, i64>(0))
                .map_err(sql)? as u64,
            None => 0,
        };
        Ok(Some(Self {
            per_s,
            max_in_flight,
            tokens,
            leased,
        }))
    }

    /// How many of `max` jobs the limits let a claim lease now.
    pub(crate) fn allow(&self, max: i64) -> i64 {
        let mut m = max;
        if self.per_s.is_some() {
            m = m.min(self.tokens.floor() as i64);
        }
        if let Some(limit) = self.max_in_flight {
            m = m.min(i64::from(limit) - self.leased as i64);
        }
        m.max(0)
    }

    /// After a claim leased `n` of the `want` jobs it asked for: takes the tokens and, when a
    /// due job was held back, says when to come back — `Some(d)`: the next token; `None`
    /// with `held`: a full `max_in_flight` (woken by the next freed slot, marked `waiting`).
    pub(crate) fn after(
        &self,
        c: &Connection,
        q: &str,
        n: usize,
        want: usize,
        now_us: u64,
    ) -> Result<Held> {
        let tokens = self.tokens - n as f64;
        if self.per_s.is_some() {
            c.prepare_cached("UPDATE queue_limits SET tokens = ?2, at_us = ?3 WHERE queue = ?1")
                .map_err(sql)?
                .execute(params![q, tokens, now_us as i64])
                .map_err(sql)?;
        }
        let now_ms = (now_us / 1000) as i64;
        let due_left = head(c, q, SCHEDULED)?.is_some_and(|h| h <= now_ms);
        if n >= want || !due_left {
            return Ok(Held::No);
        }
        if let Some(limit) = self.max_in_flight
            && self.leased + n as u64 >= u64::from(limit)
        {
            c.prepare_cached("UPDATE queue_limits SET waiting = 1 WHERE queue = ?1")
                .map_err(sql)?
                .execute(params![q])
                .map_err(sql)?;
            return Ok(Held::Slot);
        }
        match self.per_s {
            Some(p) if tokens < 1.0 => Ok(Held::Token(Duration::from_micros(
                ((1.0 - tokens) * 1e6 / p).ceil() as u64,
            ))),
            _ => Ok(Held::No),
        }
    }
}

/// Whether a claim left due jobs behind because of a limit.
pub(crate) enum Held {
    /// Not held back.
    No,
    /// `max_in_flight` is full: come back when a slot frees (or a lease expires).
    Slot,
    /// The bucket is empty: come back after this long.
    Token(Duration),
}

/// Slots were freed (ack, nack, release, recovered leases): whether consumers a full
/// `max_in_flight` held back must be woken (clears the mark).
pub(crate) fn freed(c: &Connection, q: &str) -> Result<bool> {
    let n = c
        .prepare_cached("UPDATE queue_limits SET waiting = 0 WHERE queue = ?1 AND waiting = 1")
        .map_err(sql)?
        .execute(params![q])
        .map_err(sql)?;
    Ok(n > 0)
}

/// Marks queue `q` as held back by a full in-flight limit (its queue's or a key's): the next
/// freed slot wakes consumers ([`freed`]).
pub(crate) fn wait_for_slot(c: &Connection, q: &str) -> Result<()> {
    c.prepare_cached("UPDATE queue_limits SET waiting = 1 WHERE queue = ?1")
        .map_err(sql)?
        .execute(params![q])
        .map_err(sql)?;
    Ok(())
}

/// Due jobs the limits hold back now, of `due` (for stats).
pub(crate) fn waiting(c: &Connection, q: &str, due: u64, now_us: u64) -> Result<u64> {
    Ok(match Bucket::read(c, q, now_us)? {
        Some(b) => due.saturating_sub(b.allow(due as i64) as u64),
        None => 0,
    })
}
