//! Every job of one key, through the `jobs_by_key` index (store.rs): a page of them by id,
//! cancelling and moving the waiting ones — each one transaction, reading only the key's rows.

use delayq::key_jobs::listed_as;
use delayq::{KeyCancelled, KeyJobsPage, KeyJobsRequest, KeyMove, ListState, Result};
use rusqlite::{Connection, params};

use crate::cancel::cancel;
use crate::rows::{COLS, DEAD, DONE, LEASED, RowData, SCHEDULED, WAITING, head, row};
use crate::store::sql;

/// A page of key `k`'s jobs in queue `q` at `now` (ms), by id.
pub(crate) fn page(
    c: &Connection,
    q: &str,
    k: &str,
    req: &KeyJobsRequest,
    now: i64,
) -> Result<KeyJobsPage> {
    // The rows of the asked state's code (scheduled and due share one, told apart by time);
    // every code but done's for all.
    let (lo, hi) = match req.state {
        None => (SCHEDULED, WAITING),
        Some(ListState::Scheduled | ListState::Due) => (SCHEDULED, SCHEDULED),
        Some(ListState::Leased) => (LEASED, LEASED),
        Some(ListState::Dead) => (DEAD, DEAD),
        Some(ListState::Waiting) => (WAITING, WAITING),
        Some(ListState::Done) => return Ok(KeyJobsPage::default()),
    };
    let (tlo, thi) = match req.state {
        Some(ListState::Scheduled) => (now + 1, i64::MAX),
        Some(ListState::Due) => (i64::MIN, now),
        _ => (i64::MIN, i64::MAX),
    };
    let after = req.after.as_ref().map_or("", |a| a.as_str());
    // The key's rows through its index, sorted by id here: left to itself the planner walks
    // the queue's (queue, id) index for the order, reading every job of the queue.
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLS} FROM jobs INDEXED BY jobs_by_key \
             WHERE queue = ?1 AND key = ?2 AND state BETWEEN ?3 AND ?4 AND state <> ?10 \
             AND (state <> ?5 OR score BETWEEN ?6 AND ?7) AND id > ?8 ORDER BY id LIMIT ?9"
        ))
        .map_err(sql)?;
    let rows: Vec<RowData> = stmt
        .query_map(
            params![
                q,
                k,
                lo,
                hi,
                SCHEDULED,
                tlo,
                thi,
                after,
                req.limit as i64 + 1,
                DONE
            ],
            row,
        )
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    let more = rows.len() > req.limit;
    let mut jobs = Vec::with_capacity(rows.len().min(req.limit));
    for r in rows.into_iter().take(req.limit) {
        let info = r.info()?;
        debug_assert!(req.state.is_none() || listed_as(&info, now as u64) == req.state);
        jobs.push(info);
    }
    let next = if more {
        jobs.last().map(|j| j.id.clone())
    } else {
        None
    };
    Ok(KeyJobsPage {
        jobs,
        next,
        now_ms: now as u64,
    })
}

/// Cancels key `k`'s waiting jobs in queue `q` (and with `running` its leased ones), each as a
/// cancel by id does (cancel.rs); the whole in the caller's one transaction. Returns what it
/// did and whether a freed in-flight slot should wake consumers.
pub(crate) fn cancel_all(
    c: &Connection,
    q: &str,
    k: &str,
    running: bool,
    now: i64,
) -> Result<(KeyCancelled, bool)> {
    let top = if running { LEASED } else { SCHEDULED };
    let ids: Vec<String> = c
        .prepare_cached(
            "SELECT id FROM jobs WHERE queue = ?1 AND key = ?2 AND state BETWEEN ?3 AND ?4",
        )
        .map_err(sql)?
        .query_map(params![q, k, SCHEDULED, top], |r| r.get(0))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    let (mut out, mut wake) = (KeyCancelled::default(), false);
    for id in ids {
        let (outcome, freed) = cancel(c, q, &id, running, now)?;
        match outcome {
            delayq::CancelOutcome::Cancelled => out.cancelled += 1,
            delayq::CancelOutcome::Cancelling => {
                out.cancelled += 1;
                out.running += 1;
            }
            _ => {}
        }
        wake |= freed;
    }
    Ok((out, wake))
}

/// Moves key `k`'s waiting jobs in queue `q` by `to` at `now`; returns how many moved and
/// whether one is now due before the queue's head (the caller wakes consumers).
pub(crate) fn reschedule(
    c: &Connection,
    q: &str,
    k: &str,
    to: KeyMove,
    now: i64,
) -> Result<(u64, bool)> {
    let rows: Vec<(String, i64)> = c
        .prepare_cached("SELECT id, due FROM jobs WHERE queue = ?1 AND key = ?2 AND state = ?3")
        .map_err(sql)?
        .query_map(params![q, k, SCHEDULED], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    let first = head(c, q, SCHEDULED)?;
    let mut update = c
        .prepare_cached("UPDATE jobs SET score = ?3, due = ?3 WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?;
    let mut earliest: Option<i64> = None;
    for (id, due) in &rows {
        let new = to.apply(*due as u64, now as u64) as i64;
        update.execute(params![q, id, new]).map_err(sql)?;
        earliest = Some(earliest.map_or(new, |e| e.min(new)));
    }
    let wake = earliest.is_some_and(|e| first.is_none_or(|h| e < h));
    Ok((rows.len() as u64, wake))
}
