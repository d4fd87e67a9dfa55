//! Writing new jobs into `jobs`: the one insert an enqueue and a schedule's fire share (with
//! idempotent ids and `on_conflict: replace`).

use delayq::{Enqueued, Error, JobId, NewJob, OnConflict, Result};
use rusqlite::{Connection, params};

use crate::rows::{SCHEDULED, due_from, due_of, head, state, state_of};
use crate::store::sql;

/// Inserts `jobs` into queue `q` at `now` (ms); returns one outcome per job and whether a job
/// became due before the head (consumers must be woken).
pub(crate) fn insert(
    c: &Connection,
    q: &str,
    jobs: Vec<NewJob>,
    now: i64,
) -> Result<(Vec<Enqueued>, bool)> {
    let head_due = head(c, q, SCHEDULED)?;
    let mut earliest: Option<i64> = None;
    let mut out = Vec::with_capacity(jobs.len());
    let mut insert = c
        .prepare_cached(
            "INSERT INTO jobs (queue, id, state, score, due, created, attempt, \
         max_attempts, backoff_kind, backoff_base, backoff_cap, lease_ms, token, \
         payload, timeout_ms, expires_at) \
         VALUES (?1, ?2, ?11, ?3, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?12, ?13) \
         ON CONFLICT (queue, id) DO NOTHING",
        )
        .map_err(sql)?;
    for job in jobs {
        let id = job.id.clone().unwrap_or_else(JobId::generate);
        let due = due_from(job.schedule, now);
        let expires_at = job
            .expiry_ms()
            .map(|(v, rel)| if rel { now + v as i64 } else { v as i64 });
        let timeout_ms = job.timeout.map(|t| t.as_millis() as i64);
        let backoff = job.backoff.map(|b| {
            let (base, cap) = b.base_cap_ms();
            (i64::from(b.kind_code()), base as i64, cap as i64)
        });
        let replace = (job.on_conflict == OnConflict::Replace)
            .then(|| (job.payload.clone(), job.max_attempts, job.lease));
        let n = insert
            .execute(params![
                q,
                id.as_str(),
                due,
                now,
                i64::from(job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS)),
                backoff.map(|b| b.0),
                backoff.map(|b| b.1),
                backoff.map(|b| b.2),
                job.lease.map(|l| l.as_millis() as i64),
                job.payload,
                SCHEDULED,
                timeout_ms,
                expires_at,
            ])
            .map_err(sql)?;
        let mut e = Enqueued {
            id,
            due_at_ms: due as u64,
            created: n == 1,
            replaced: false,
            existing: None,
        };
        if n == 1 {
            earliest = Some(earliest.map_or(due, |e: i64| e.min(due)));
        } else if let Some((payload, max, lease)) = replace {
            // Debounce: only a scheduled job is replaced (created now, attempts
            // kept).
            let replaced = c
                .prepare_cached(
                    "UPDATE jobs SET score = ?3, due = ?3, created = ?4, \
                     max_attempts = ?5, backoff_kind = ?6, backoff_base = ?7, \
                     backoff_cap = ?8, lease_ms = ?9, payload = ?10, \
                     timeout_ms = ?11, expires_at = ?12 \
                     WHERE queue = ?1 AND id = ?2 AND state = ?13",
                )
                .map_err(sql)?
                .execute(params![
                    q,
                    e.id.as_str(),
                    due,
                    now,
                    i64::from(max.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS)),
                    backoff.map(|b| b.0),
                    backoff.map(|b| b.1),
                    backoff.map(|b| b.2),
                    lease.map(|l| l.as_millis() as i64),
                    payload,
                    timeout_ms,
                    expires_at,
                    SCHEDULED,
                ])
                .map_err(sql)?;
            if replaced == 1 {
                e.replaced = true;
                earliest = Some(earliest.map_or(due, |x: i64| x.min(due)));
            } else {
                let code = state_of(c, q, e.id.as_str())?
                    .ok_or_else(|| Error::Backend("conflicting row vanished".into()))?;
                e.existing = Some(state(code)?);
                e.due_at_ms = due_of(c, q, e.id.as_str())?.unwrap_or(due) as u64;
            }
        } else {
            e.due_at_ms = due_of(c, q, e.id.as_str())?
                .ok_or_else(|| Error::Backend("conflicting row vanished".into()))?
                as u64;
        }
        out.push(e);
    }
    let wake = earliest.is_some_and(|e| head_due.is_none_or(|h| e < h));
    Ok((out, wake))
}
