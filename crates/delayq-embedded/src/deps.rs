//! Jobs that wait for other jobs ([`delayq::deps`]) in the embedded store: a dependent is a
//! row in state waiting, its policy in `dependents` and each dependency in `job_deps` with
//! how it stands. Every step that ends a job (`crate::ends::ended`: ack, dead-lettering,
//! cancel) marks it ended in the rows of the jobs that wait for it and settles each of them in
//! the same transaction — due once none is pending, dead-lettered or cancelled by a failed
//! one as its policy says — so a dependent never starts before its last dependency ended, and
//! is never left waiting after it: both happen in one transaction.

use std::sync::atomic::{AtomicBool, Ordering};

use delayq::batch::Ending;
use delayq::deps::failure_error;
use delayq::{DepOutcome, DepRef, DepStatus, Dependencies, JobId, OnDependencyFailure, QueueName};
use delayq::{Error, Result};
use rusqlite::{Connection, OptionalExtension, params};

use crate::rows::{DEAD, DONE, SCHEDULED, WAITING, state_of};
use crate::store::sql;

/// Whether any store of this process has had a dependent: until then the steps that end a
/// job skip the look-up of its dependents (a store opened with dependents sets it: `mark_used`).
static USED: AtomicBool = AtomicBool::new(false);

/// Notes that a store holds dependents.
pub(crate) fn mark_used() {
    USED.store(true, Ordering::Relaxed);
}

/// Whether a store of this process has had dependents.
pub(crate) fn used() -> bool {
    USED.load(Ordering::Relaxed)
}

/// Job `id` of queue `q`, just inserted as waiting, waits for `deps`: records each with how it
/// stands now (a dependency missing or done has ended well, a dead one failed), then settles
/// the job (it may be due, dead or cancelled at once). Returns whether it is due now.
pub(crate) fn attach(
    c: &Connection,
    q: &str,
    id: &str,
    deps: &Dependencies,
    now: i64,
) -> Result<bool> {
    mark_used();
    c.prepare_cached(
        "INSERT OR REPLACE INTO dependents (queue, id, on_failure, results) VALUES (?1, ?2, ?3, ?4)",
    )
    .map_err(sql)?
    .execute(params![
        q,
        id,
        deps.on_failure.code(),
        deps.include_results
    ])
    .map_err(sql)?;
    let mut add = c
        .prepare_cached(
            "INSERT OR REPLACE INTO job_deps (queue, id, dep_queue, dep_id, outcome, result) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .map_err(sql)?;
    // The results kept, while they fit MAX_RESULT_BYTES together.
    let mut room = delayq::deps::MAX_RESULT_BYTES;
    for d in &deps.on {
        let (dq, did) = (d.queue.as_str(), d.id.as_str());
        let (outcome, mut result) = match state_of(c, dq, did)? {
            None => (DepOutcome::Done, None),
            Some(DONE) => (DepOutcome::Done, done_result(c, dq, did, deps)?),
            Some(DEAD) => (DepOutcome::Dead, None),
            Some(_) => (DepOutcome::Pending, None),
        };
        match &result {
            Some(r) if r.len() <= room => room -= r.len(),
            Some(_) => result = None,
            None => {}
        }
        add.execute(params![q, id, dq, did, outcome.code().to_string(), result])
            .map_err(sql)?;
    }
    settle(c, q, id, now)
}

/// The result a done dependency `dq`/`did` keeps, when the dependent asked for results.
fn done_result(
    c: &Connection,
    dq: &str,
    did: &str,
    deps: &Dependencies,
) -> Result<Option<Vec<u8>>> {
    if !deps.include_results {
        return Ok(None);
    }
    c.prepare_cached("SELECT result FROM jobs WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?
        .query_row(params![dq, did], |r| r.get(0))
        .optional()
        .map(Option::flatten)
        .map_err(sql)
}

/// Job `id` of queue `q` ended as `ending` (its row already changed in this transaction):
/// the jobs waiting for it hear of it (with its `result` when they asked for results) and
/// settle; its own waiting rows, if it was a dependent, go.
pub(crate) fn ended(
    c: &Connection,
    q: &str,
    id: &str,
    ending: Ending,
    result: Option<&[u8]>,
    now: i64,
) -> Result<()> {
    if !used() {
        return Ok(());
    }
    forget(c, q, id)?;
    let waiting: Vec<(String, String)> = c
        .prepare_cached(
            "UPDATE job_deps SET outcome = ?3, \
               result = CASE WHEN (SELECT results FROM dependents d \
                 WHERE d.queue = job_deps.queue AND d.id = job_deps.id) = 1 \
                 AND (SELECT total(length(x.result)) FROM job_deps x \
                   WHERE x.queue = job_deps.queue AND x.id = job_deps.id) + length(?4) <= ?5 \
                 THEN ?4 END \
             WHERE dep_queue = ?1 AND dep_id = ?2 AND outcome = 'p' RETURNING queue, id",
        )
        .map_err(sql)?
        .query_map(
            params![
                q,
                id,
                DepOutcome::of(ending).code().to_string(),
                result,
                delayq::deps::MAX_RESULT_BYTES as i64
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    for (dq, did) in waiting {
        if settle(c, &dq, &did, now)? {
            crate::batches::woken(&dq);
        }
    }
    Ok(())
}

/// A dependent's rows go (it ended, or left the store).
fn forget(c: &Connection, q: &str, id: &str) -> Result<()> {
    for table in ["job_deps", "dependents"] {
        c.prepare_cached(&format!("DELETE FROM {table} WHERE queue = ?1 AND id = ?2"))
            .map_err(sql)?
            .execute(params![q, id])
            .map_err(sql)?;
    }
    Ok(())
}

/// Settles waiting job `id` of queue `q` by its dependencies: a failed one applies its
/// policy (dead letters, cancel — or run once none is pending), and with none pending it is
/// due at the later of its due time and now. Returns whether it became due.
fn settle(c: &Connection, q: &str, id: &str, now: i64) -> Result<bool> {
    if state_of(c, q, id)? != Some(WAITING) {
        return Ok(false);
    }
    let Some(policy) = c
        .prepare_cached("SELECT on_failure FROM dependents WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?
        .query_row(params![q, id], |r| r.get::<_, i64>(0))
        .optional()
        .map_err(sql)?
        .map(OnDependencyFailure::from_code)
    else {
        return Ok(false);
    };
    let rows = statuses(c, q, id)?;
    let failed = rows.iter().find(|s| s.state.failed());
    let pending = rows.iter().any(|s| s.state == DepOutcome::Pending);
    match (failed, policy) {
        (Some(f), OnDependencyFailure::Dead) => {
            let err = failure_error(&f.dep, f.state);
            let batch: Option<String> = c
                .prepare_cached(
                    "UPDATE jobs SET state = ?3, score = ?4, token = 0, last_error = ?5 \
                     WHERE queue = ?1 AND id = ?2 RETURNING batch",
                )
                .map_err(sql)?
                .query_row(params![q, id, DEAD, now, err], |r| r.get(0))
                .map_err(sql)?;
            crate::ends::ended(c, q, id, batch.as_deref(), Ending::Dead, None, now)?;
            Ok(false)
        }
        (Some(_), OnDependencyFailure::Cancel) => {
            crate::cancel::cancel(c, q, id, false, now)?;
            Ok(false)
        }
        _ if pending => Ok(false),
        _ => {
            c.prepare_cached(
                "UPDATE jobs SET state = ?3, score = max(due, ?4), due = max(due, ?4) \
                 WHERE queue = ?1 AND id = ?2",
            )
            .map_err(sql)?
            .execute(params![q, id, SCHEDULED, now])
            .map_err(sql)?;
            Ok(true)
        }
    }
}

/// Job `id`'s dependencies with how each stands (and a result where one was kept), in the
/// order of their queues and ids; empty for a job that waits for none.
pub(crate) fn statuses(c: &Connection, q: &str, id: &str) -> Result<Vec<DepStatus>> {
    let rows: Vec<(String, String, String, Option<Vec<u8>>)> = c
        .prepare_cached(
            "SELECT dep_queue, dep_id, outcome, result FROM job_deps \
             WHERE queue = ?1 AND id = ?2 ORDER BY dep_queue, dep_id",
        )
        .map_err(sql)?
        .query_map(params![q, id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    rows.into_iter()
        .map(|(dq, did, o, result)| {
            let state = o
                .chars()
                .next()
                .and_then(DepOutcome::from_code)
                .ok_or_else(|| Error::Backend(format!("dependency outcome {o:?}")))?;
            Ok(DepStatus {
                dep: DepRef {
                    queue: QueueName::new(dq)?,
                    id: JobId::new(did)?,
                },
                state,
                result,
            })
        })
        .collect()
}

/// The jobs waiting for job `id` of queue `q` (their rows say it is pending), by queue and id.
pub(crate) fn dependents(c: &Connection, q: &str, id: &str) -> Result<Vec<DepRef>> {
    let rows: Vec<(String, String)> = c
        .prepare_cached(
            "SELECT queue, id FROM job_deps WHERE dep_queue = ?1 AND dep_id = ?2 \
             AND outcome = 'p' ORDER BY queue, id",
        )
        .map_err(sql)?
        .query_map(params![q, id], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    rows.into_iter()
        .map(|(dq, did)| {
            Ok(DepRef {
                queue: QueueName::new(dq)?,
                id: JobId::new(did)?,
            })
        })
        .collect()
}

/// Whether a claim of job `id` carries its dependencies' results.
pub(crate) fn wants_results(c: &Connection, q: &str, id: &str) -> Result<bool> {
    if !used() {
        return Ok(false);
    }
    Ok(
        c.prepare_cached("SELECT results FROM dependents WHERE queue = ?1 AND id = ?2")
            .map_err(sql)?
            .query_row(params![q, id], |r| r.get::<_, bool>(0))
            .optional()
            .map_err(sql)?
            .unwrap_or(false),
    )
}
