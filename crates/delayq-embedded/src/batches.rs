//! Batches in the embedded store ([`delayq::Batches`]): a row per batch in `batches` with its
//! callbacks and counts, and `jobs.batch` naming the batch of each job that has not ended.
//! Every step that ends a job — ack, dead-lettering, cancel — counts it in the same
//! transaction and clears its `batch` (a job requeued from the dead letters runs outside its
//! batch: it was counted once), and the step that ends a closed batch's last job, or closes a
//! batch whose jobs have all ended, enqueues its callbacks in that transaction too: exactly
//! once by construction.

use std::cell::RefCell;

use delayq::batch::{
    self, BatchAdded, BatchCounts, BatchId, BatchInfo, BatchSpec, BatchState, Ending, KeptResults,
    ResultRoom,
};
use delayq::{BatchAdd, BatchPut, Error, JobId, NewJob, QueueName, Result};
use rusqlite::{Connection, OptionalExtension, params};

use crate::enqueue::insert;
use crate::store::sql;

const OPEN: i64 = 0;
const CLOSED: i64 = 1;
const DONE: i64 = 2;

thread_local! {
    /// Queues that gained a callback job in the operation running on this (the store's)
    /// thread: their consumers are woken once it commits ([`take_woken`]).
    static WOKEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Queue `q` gained a due job in the operation running on this thread: its consumers are
/// woken once it commits.
pub(crate) fn woken(q: &str) {
    WOKEN.with(|w| w.borrow_mut().push(q.to_owned()));
}

/// The queues that gained callback jobs since the last call (this thread's).
pub(crate) fn take_woken() -> Vec<String> {
    WOKEN.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// Job `id` of batch `b` ended as `ending` (its row already changed in this transaction):
/// counts it, keeps its result when the batch asks for results, clears the row's `batch`
/// (when the row is still there) and finishes the batch when that was its last job.
pub(crate) fn ended(
    c: &Connection,
    q: &str,
    b: &str,
    id: &str,
    ending: Ending,
    result: Option<&[u8]>,
    now: i64,
) -> Result<()> {
    let col = match ending {
        Ending::Succeeded => "succeeded",
        Ending::Dead => "dead",
        Ending::Cancelled => "cancelled",
    };
    let n = c
        .prepare_cached(&format!(
            "UPDATE batches SET pending = pending - 1, {col} = {col} + 1 \
             WHERE queue = ?1 AND id = ?2 AND pending > 0"
        ))
        .map_err(sql)?
        .execute(params![q, b])
        .map_err(sql)?;
    c.prepare_cached("UPDATE jobs SET batch = NULL WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?
        .execute(params![q, id])
        .map_err(sql)?;
    if n == 0 {
        return Ok(());
    }
    if let Some(r) = result.filter(|r| !r.is_empty()) {
        // Kept while the batch's kept results fit one callback (delayq::batch::ResultRoom);
        // past that only counted, as an empty row.
        c.prepare_cached(
            "INSERT OR REPLACE INTO batch_results (queue, batch, job, result) \
             SELECT ?1, ?2, ?3, CASE WHEN k.n < ?5 AND k.bytes + length(?4) <= ?6 \
               THEN ?4 ELSE X'' END \
             FROM batches, (SELECT count(*) AS n, total(length(result)) AS bytes \
               FROM batch_results WHERE queue = ?1 AND batch = ?2 AND length(result) > 0) AS k \
             WHERE queue = ?1 AND id = ?2 AND results = 1",
        )
        .map_err(sql)?
        .execute(params![
            q,
            b,
            id,
            r,
            batch::MAX_CALLBACK_RESULTS as i64,
            batch::MAX_CALLBACK_RESULT_BYTES as i64
        ])
        .map_err(sql)?;
    }
    finish(c, q, b, now)
}

/// Finishes batch `b` when it is closed and none of its jobs is pending: enqueues its
/// callbacks and marks it done.
fn finish(c: &Connection, q: &str, b: &str, now: i64) -> Result<()> {
    let Some(info) = read(c, q, b)? else {
        return Ok(());
    };
    if info.state != BatchState::Closed || info.counts.pending > 0 {
        return Ok(());
    }
    let kept = if info.spec.include_results {
        results(c, q, b)?
    } else {
        KeptResults::default()
    };
    for (cq, job) in batch::callbacks(&info.id, &info.spec, info.counts, &kept) {
        let (_, wake) = insert(c, cq.as_str(), vec![job], now)?;
        if wake {
            WOKEN.with(|w| w.borrow_mut().push(cq.to_string()));
        }
    }
    c.prepare_cached("UPDATE batches SET state = ?3, done_at = ?4 WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?
        .execute(params![q, b, DONE, now])
        .map_err(sql)?;
    c.prepare_cached("DELETE FROM batch_results WHERE queue = ?1 AND batch = ?2")
        .map_err(sql)?
        .execute(params![q, b])
        .map_err(sql)?;
    // Done batches are kept for BATCH_KEPT, then go.
    let kept = batch::BATCH_KEPT.as_millis() as i64;
    c.prepare_cached("DELETE FROM batches WHERE queue = ?1 AND state = ?2 AND done_at < ?3")
        .map_err(sql)?
        .execute(params![q, DONE, now - kept])
        .map_err(sql)?;
    Ok(())
}

/// The kept results of batch `b`'s jobs, in the order they ended, within one
/// [`ResultRoom`]; the rest (and those only counted when they ended) left out.
fn results(c: &Connection, q: &str, b: &str) -> Result<KeptResults> {
    let mut room = ResultRoom::default();
    let mut out = KeptResults::default();
    let mut stmt = c
        .prepare_cached(
            "SELECT job, length(result), CASE WHEN length(result) <= ?3 THEN result END \
             FROM batch_results WHERE queue = ?1 AND batch = ?2 ORDER BY rowid",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![q, b, batch::MAX_CALLBACK_RESULT_BYTES as i64])
        .map_err(sql)?;
    while let Some(row) = rows.next().map_err(sql)? {
        let len: i64 = row.get(1).map_err(sql)?;
        if len == 0 || !room.take(len as usize) {
            out.left_out += 1;
            continue;
        }
        let job: String = row.get(0).map_err(sql)?;
        let r: Vec<u8> = row.get(2).map_err(sql)?;
        out.results.push((JobId::new(job)?, r));
    }
    Ok(out)
}

/// A row of `batches`: state, spec, created, done_at and the four counts.
type StoredBatch = (i64, String, i64, Option<i64>, [i64; 4]);

/// Batch `b` as stored.
pub(crate) fn read(c: &Connection, q: &str, b: &str) -> Result<Option<BatchInfo>> {
    let row: Option<StoredBatch> = c
        .prepare_cached(
            "SELECT state, spec, created, done_at, pending, succeeded, dead, cancelled \
             FROM batches WHERE queue = ?1 AND id = ?2",
        )
        .map_err(sql)?
        .query_row(params![q, b], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                [r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?],
            ))
        })
        .optional()
        .map_err(sql)?;
    let Some((state, spec, created, done_at, n)) = row else {
        return Ok(None);
    };
    Ok(Some(BatchInfo {
        id: BatchId::new(b)?,
        state: match state {
            OPEN => BatchState::Open,
            CLOSED => BatchState::Closed,
            _ => BatchState::Done,
        },
        counts: BatchCounts {
            pending: n[0] as u64,
            succeeded: n[1] as u64,
            dead: n[2] as u64,
            cancelled: n[3] as u64,
        },
        created_ms: created as u64,
        done_ms: done_at.map(|d| d as u64),
        spec: BatchSpec::from_json(&spec)?,
        // Callbacks go in with the step that ends the last job: they cannot fail apart.
        callback_failure: None,
    }))
}

/// Creates batch `b` (when `spec` is given and it does not exist), enqueues `jobs` into it
/// and closes it when `close`. `Ok(None)`: no such batch (and no spec to create it with).
pub(crate) fn put(
    c: &Connection,
    q: &str,
    b: &BatchId,
    spec: Option<&BatchSpec>,
    mut jobs: Vec<NewJob>,
    close: bool,
    now: i64,
) -> Result<Option<(BatchAdded, bool)>> {
    let state: Option<i64> = c
        .prepare_cached("SELECT state FROM batches WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?
        .query_row(params![q, b.as_str()], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    match (state, spec) {
        (None, None) => return Ok(None),
        (None, Some(spec)) => {
            let text = spec.to_json();
            c.prepare_cached(
                "INSERT INTO batches (queue, id, state, spec, created, results) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(sql)?
            .execute(params![
                q,
                b.as_str(),
                OPEN,
                text,
                now,
                spec.include_results
            ])
            .map_err(sql)?;
        }
        (Some(OPEN), _) => {}
        (Some(_), _) => return Err(closed(b)),
    }
    for j in &mut jobs {
        j.batch = Some(b.clone());
    }
    let (out, wake) = insert(c, q, jobs, now)?;
    let joined = out.iter().filter(|e| e.created).count() as i64;
    c.prepare_cached("UPDATE batches SET pending = pending + ?3 WHERE queue = ?1 AND id = ?2")
        .map_err(sql)?
        .execute(params![q, b.as_str(), joined])
        .map_err(sql)?;
    if close {
        close_it(c, q, b.as_str(), now)?;
    }
    Ok(Some((
        BatchAdded {
            id: b.clone(),
            jobs: out,
        },
        wake,
    )))
}

/// Closes batch `b` (finishing it when none of its jobs is pending); whether it exists.
pub(crate) fn close_it(c: &Connection, q: &str, b: &str, now: i64) -> Result<bool> {
    let n = c
        .prepare_cached("UPDATE batches SET state = ?3 WHERE queue = ?1 AND id = ?2 AND state = ?4")
        .map_err(sql)?
        .execute(params![q, b, CLOSED, OPEN])
        .map_err(sql)?;
    if n == 1 {
        finish(c, q, b, now)?;
    }
    Ok(n == 1 || read(c, q, b)?.is_some())
}

/// Up to `limit` batches of `q` not done, oldest first.
pub(crate) fn open_ones(c: &Connection, q: &str, limit: usize) -> Result<Vec<BatchInfo>> {
    let ids: Vec<String> = c
        .prepare_cached(
            "SELECT id FROM batches WHERE queue = ?1 AND state != ?2 ORDER BY created, id LIMIT ?3",
        )
        .map_err(sql)?
        .query_map(params![q, DONE, limit as i64], |r| r.get(0))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    ids.iter()
        .filter_map(|id| read(c, q, id).transpose())
        .collect()
}

/// The error of a call that would add to a closed batch.
pub(crate) fn closed(b: &BatchId) -> Error {
    Error::Conflict(format!("batch {b} is closed: no job may join it"))
}

/// `QueueName`s of `names` (the store's own strings).
pub(crate) fn queues(names: Vec<String>) -> Vec<QueueName> {
    names
        .into_iter()
        .filter_map(|n| QueueName::new(n).ok())
        .collect()
}

impl delayq::Batches for crate::EmbeddedBackend {
    async fn put_batch(&self, queue: &QueueName, put: BatchPut) -> Result<BatchAdded> {
        let id = put.id.unwrap_or_else(BatchId::generate);
        let added = self
            .put_in(queue, id, Some(put.spec), put.jobs, !put.open)
            .await?
            .ok_or_else(|| Error::Backend("a batch put with its spec was not created".into()))?;
        Ok(added)
    }

    async fn add_to_batch(&self, queue: &QueueName, add: BatchAdd) -> Result<Option<BatchAdded>> {
        let BatchAdd { id, jobs, close } = add;
        self.put_in(queue, id, None, jobs, close).await
    }

    async fn close_batch(&self, queue: &QueueName, id: &BatchId) -> Result<Option<BatchInfo>> {
        let (q, b) = (queue.to_string(), id.to_string());
        self.exec(move |c, now| {
            close_it(c, &q, &b, now.ms())?;
            read(c, &q, &b)
        })
        .await
    }

    async fn batch(&self, queue: &QueueName, id: &BatchId) -> Result<Option<BatchInfo>> {
        let (q, b) = (queue.to_string(), id.to_string());
        self.exec(move |c, _| read(c, &q, &b)).await
    }

    async fn open_batches(&self, queue: &QueueName, limit: usize) -> Result<Vec<BatchInfo>> {
        let q = queue.to_string();
        self.exec(move |c, _| open_ones(c, &q, limit)).await
    }

    async fn finish_batches(&self, _thorough: bool) -> Result<usize> {
        // Every batch is finished in the step that ends its last job or closes it.
        Ok(0)
    }
}

impl crate::EmbeddedBackend {
    /// [`put`] as one operation, with the queue's delivery checked and its consumers woken.
    async fn put_in(
        &self,
        queue: &QueueName,
        id: BatchId,
        spec: Option<BatchSpec>,
        jobs: Vec<NewJob>,
        close: bool,
    ) -> Result<Option<BatchAdded>> {
        let delivery = self.delivery(queue).await?;
        for j in &jobs {
            delivery.admits(queue.as_str(), j.target.is_some())?;
        }
        // A callback (a job without a target) must be one its queue takes: refused now, not
        // when the batch is done.
        let callbacks: Vec<QueueName> = spec
            .iter()
            .flat_map(|s| [&s.on_complete, &s.on_success])
            .flatten()
            .map(|cb| cb.queue.clone())
            .collect();
        for cq in &callbacks {
            self.delivery(cq).await?.admits(cq.as_str(), false)?;
        }
        let q = queue.to_string();
        let out = self
            .exec(move |c, now| put(c, &q, &id, spec.as_ref(), jobs, close, now.ms()))
            .await?;
        let Some((added, wake)) = out else {
            return Ok(None);
        };
        if wake {
            self.wake(queue);
        }
        let created = added.jobs.iter().filter(|e| e.created).count() as u64;
        self.count(
            queue,
            &delayq::Counts {
                enqueued: created,
                ..delayq::Counts::default()
            },
        );
        Ok(Some(added))
    }
}
