//! Writing new jobs into `jobs`: the one insert an enqueue and a schedule's fire share (with
//! idempotent ids and `on_conflict: replace`).

use delayq::{Enqueued, Error, JobId, JobState, NewJob, OnConflict, Result};
use rusqlite::{Connection, ToSql, params, params_from_iter};

use crate::rows::{DONE, SCHEDULED, WAITING, due_from, due_of, head, state, state_of};
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
    let mut keyed = crate::keyed::is_keyed(c, q)?;
    // The keys this call recorded (one `job_keys` write per key, however many jobs).
    let mut added: std::collections::HashSet<String> = std::collections::HashSet::new();
    if !keyed && jobs.iter().any(|j| j.key.is_some()) {
        crate::keyed::mark_keyed(c, q)?;
        keyed = true;
    }
    let mut earliest: Option<i64> = None;
    let mut out = Vec::with_capacity(jobs.len());
    let mut insert = c
        .prepare_cached(
            "INSERT INTO jobs (queue, id, state, score, due, created, attempt, \
         max_attempts, backoff_kind, backoff_base, backoff_cap, lease_ms, token, \
         payload, timeout_ms, expires_at, priority, keep_done_ms, dedupe_ms, target, trace, \
         key, batch) \
         VALUES (?1, ?2, ?11, ?3, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?9, 0, ?10, ?12, ?13, ?14, ?15, \
         ?16, ?17, ?18, ?19, ?20) \
         ON CONFLICT (queue, id) DO NOTHING",
        )
        .map_err(sql)?;
    for job in jobs {
        let id = job.id.clone().unwrap_or_else(JobId::generate);
        let due = due_from(job.due, now);
        let expires_at = job
            .expiry_ms()
            .map(|(v, rel)| if rel { now + v as i64 } else { v as i64 });
        let timeout_ms = job.timeout.map(|t| t.as_millis() as i64);
        let backoff = job.backoff.map(|b| {
            let (base, cap) = b.base_cap_ms();
            (i64::from(b.kind_code()), base as i64, cap as i64)
        });
        let replace = job.on_conflict == OnConflict::Replace;
        let retention = job.retention;
        let target = job.target.as_ref().map(delayq::Target::to_json);
        let trace = job
            .trace
            .as_ref()
            .map(|t| String::from_utf8_lossy(&t.to_bytes()).into_owned());
        // In a keyed queue a job without a key is in the key '' (keyed.rs).
        let key: Option<&str> = match &job.key {
            Some(k) => Some(k.as_str()),
            None if keyed => Some(""),
            None => None,
        };
        if let Some(k) = job.key.as_ref()
            && !added.contains(k.as_str())
        {
            crate::keyed::add_key(c, q, k.as_str())?;
            added.insert(k.to_string());
        }
        // The job's columns as the insert and the replace write them (?3 … ?19 of both).
        let max_attempts = i64::from(job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS));
        let lease_ms = job.lease.map(|l| l.as_millis() as i64);
        let (keep_ms, dedupe_ms) = (
            retention.map(|r| r.keep_done_ms as i64),
            retention.map(|r| r.dedupe_ms as i64),
        );
        let cols: [&dyn ToSql; 17] = [
            &due,
            &now,
            &max_attempts,
            &backoff.map(|b| b.0),
            &backoff.map(|b| b.1),
            &backoff.map(|b| b.2),
            &lease_ms,
            &job.payload,
            if job.depends.is_some() {
                &WAITING
            } else {
                &SCHEDULED
            },
            &timeout_ms,
            &expires_at,
            &job.priority,
            &keep_ms,
            &dedupe_ms,
            &target,
            &trace,
            &key,
        ];
        let qid: [&dyn ToSql; 2] = [&q, &id.as_str()];
        let batch = job.batch.as_ref().map(delayq::BatchId::as_str);
        let last: [&dyn ToSql; 1] = [&batch];
        let mut insert_it = || {
            let all = qid.iter().chain(&cols).chain(&last);
            insert.execute(params_from_iter(all)).map_err(sql)
        };
        let mut n = insert_it()?;
        if job.priority.is_some() {
            mark_priorities(c, q)?;
        }
        if n == 0 && free_done(c, q, id.as_str(), now)? {
            n = insert_it()?;
        }
        // The outcome; the id moves into it last (the statements above borrow it).
        let (mut due_at_ms, mut replaced_it, mut existing) = (due as u64, false, None);
        if n == 1
            && let Some(deps) = &job.depends
        {
            // Waiting: due only once its dependencies have ended (maybe at once).
            if crate::deps::attach(c, q, id.as_str(), deps, now)? {
                let d = due.max(now);
                due_at_ms = d as u64;
                earliest = Some(earliest.map_or(d, |e: i64| e.min(d)));
            }
        } else if n == 1 {
            earliest = Some(earliest.map_or(due, |e: i64| e.min(due)));
        } else if let Some(done) = done_within_window(c, q, id.as_str())? {
            // Done, inside its dedupe window: refused, the original outcome answered.
            existing = Some(JobState::Done);
            due_at_ms = done as u64;
        } else if replace {
            // Debounce: only a scheduled job is replaced (created now, attempts
            // kept).
            let replaced = c
                .prepare_cached(
                    "UPDATE jobs SET score = ?3, due = ?3, created = ?4, \
                     max_attempts = ?5, backoff_kind = ?6, backoff_base = ?7, \
                     backoff_cap = ?8, lease_ms = ?9, payload = ?10, \
                     timeout_ms = ?12, expires_at = ?13, priority = ?14, \
                     keep_done_ms = ?15, dedupe_ms = ?16, target = ?17, trace = ?18, key = ?19 \
                     WHERE queue = ?1 AND id = ?2 AND state = ?11",
                )
                .map_err(sql)?
                .execute(params_from_iter(qid.iter().chain(&cols)))
                .map_err(sql)?;
            if replaced == 1 {
                replaced_it = true;
                earliest = Some(earliest.map_or(due, |x: i64| x.min(due)));
            } else {
                let code = state_of(c, q, id.as_str())?
                    .ok_or_else(|| Error::Backend("conflicting row vanished".into()))?;
                existing = Some(state(code)?);
                due_at_ms = due_of(c, q, id.as_str())?.unwrap_or(due) as u64;
            }
        } else {
            due_at_ms = due_of(c, q, id.as_str())?
                .ok_or_else(|| Error::Backend("conflicting row vanished".into()))?
                as u64;
        }
        out.push(Enqueued {
            id,
            due_at_ms,
            created: n == 1,
            replaced: replaced_it,
            existing,
        });
    }
    let wake = earliest.is_some_and(|e| head_due.is_none_or(|h| e < h));
    Ok((out, wake))
}

/// A job kept as done whose dedupe window is over no longer holds its id: deletes it; whether
/// it did.
fn free_done(c: &Connection, q: &str, id: &str, now: i64) -> Result<bool> {
    let n = c
        .prepare_cached(
            "DELETE FROM jobs WHERE queue = ?1 AND id = ?2 AND state = ?3 AND dedupe_until <= ?4",
        )
        .map_err(sql)?
        .execute(params![q, id, DONE, now])
        .map_err(sql)?;
    Ok(n == 1)
}

/// The due time of job `id` when it is done (and so inside its dedupe window: [`free_done`]
/// ran first).
fn done_within_window(c: &Connection, q: &str, id: &str) -> Result<Option<i64>> {
    use rusqlite::OptionalExtension;
    c.prepare_cached("SELECT due FROM jobs WHERE queue = ?1 AND id = ?2 AND state = ?3")
        .map_err(sql)?
        .query_row(params![q, id, DONE], |r| r.get(0))
        .optional()
        .map_err(sql)
}

/// Marks the queue as one with priorities (claims then order due jobs by priority).
fn mark_priorities(c: &Connection, q: &str) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO queue_conf (queue, prio) VALUES (?1, 1) \
         ON CONFLICT (queue) DO UPDATE SET prio = 1",
    )
    .map_err(sql)?
    .execute(params![q])
    .map_err(sql)?;
    Ok(())
}
