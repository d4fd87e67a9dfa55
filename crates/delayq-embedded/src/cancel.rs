//! Cancelling a job by id in one transaction: a scheduled one is removed; with `running` a
//! leased one too, ended cancelled at once with its lease remembered in `cancelled_leases`
//! (so that its consumer's extend, ack and nack answer `cancelled`, see `rows::refused`).

use delayq::batch::Ending;
use delayq::{CancelOutcome, JobState, Result};
use rusqlite::{Connection, OptionalExtension, params};

use crate::rows::{LEASED, SCHEDULED, WAITING, state, state_of};
use crate::store::sql;
use crate::throttle;

/// Cancels job `id` of queue `q` at `now` (ms): what it found, and whether a slot of a full
/// in-flight limit freed (the caller wakes the queue's consumers).
pub(crate) fn cancel(
    c: &Connection,
    q: &str,
    id: &str,
    running: bool,
    now: i64,
) -> Result<(CancelOutcome, bool)> {
    // One statement removes it, scheduled or (with `running`) leased; RETURNING says which.
    let gone: Option<(i64, Option<String>, i64, i64)> = c
        .prepare_cached(
            "DELETE FROM jobs WHERE queue = ?1 AND id = ?2 \
             AND (state IN (?3, ?6) OR (?4 AND state = ?5)) RETURNING state, batch, token, score",
        )
        .map_err(sql)?
        .query_row(params![q, id, SCHEDULED, running, LEASED, WAITING], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
        .map_err(sql)?;
    let Some((was, batch, token, deadline)) = gone else {
        let found = match state_of(c, q, id)?.map(state).transpose()? {
            Some(JobState::Leased) => CancelOutcome::Leased,
            // Done (kept): nothing to cancel, as on Redis.
            Some(JobState::Done) | None => CancelOutcome::NotFound,
            Some(_) => CancelOutcome::Dead,
        };
        return Ok((found, false));
    };
    crate::ends::ended(c, q, id, batch.as_deref(), Ending::Cancelled, None, now)?;
    if was != LEASED {
        return Ok((CancelOutcome::Cancelled, false));
    }
    // Its lease is remembered so that its consumer is told; the ones whose time is up go.
    c.prepare_cached("DELETE FROM cancelled_leases WHERE until <= ?1")
        .map_err(sql)?
        .execute(params![now])
        .map_err(sql)?;
    let until = deadline + delayq::cancellation::REMEMBERED_FOR.as_millis() as i64;
    c.prepare_cached(
        "INSERT OR REPLACE INTO cancelled_leases (queue, id, token, until) \
         VALUES (?1, ?2, ?3, ?4)",
    )
    .map_err(sql)?
    .execute(params![q, id, token, until])
    .map_err(sql)?;
    Ok((CancelOutcome::Cancelling, throttle::freed(c, q)?))
}
