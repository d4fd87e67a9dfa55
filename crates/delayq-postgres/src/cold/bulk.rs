//! The cold tier's calls on many jobs: a key's jobs (schema version 3: the `key` column and
//! its index) — a page of them by id, cancelling them all, moving them all, each reading only
//! the key's rows — and cancelling a whole queue's. Rows the mover is moving are waited for
//! (no `SKIP LOCKED`), then found gone: by then the store holds them, and the store's half of
//! the call sees them.

use delayq::{JobInfo, JobKey, KeyMove, QueueName};

use super::{COLUMNS, Cold, ColdJob, Open, count, read};
use crate::Error;

/// What [`Cold::take_key`] took out for the store: the transaction holding its deletes (commit
/// with [`Cold::taken_many`] once the store has them), and the jobs now due within the window,
/// each with its new due time.
pub(crate) struct KeyTaken {
    /// The open transaction.
    pub(crate) conn: Open,
    /// The jobs for the store (their `due_ms` is the new one).
    pub(crate) near: Vec<ColdJob>,
    /// How many stayed cold at their new due times.
    pub(crate) stayed: u64,
}

impl Cold {
    /// Up to `limit` of the key's cold jobs after `after`, by id (byte order).
    pub(crate) async fn key_page(
        &self,
        queue: &QueueName,
        key: &JobKey,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<JobInfo>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM delayq.cold WHERE queue = $1 AND key = $2 \
                     AND id COLLATE \"C\" > $3 ORDER BY id COLLATE \"C\" LIMIT $4"
                ),
                &[&queue.as_str(), &key.as_str(), &after.unwrap_or(""), &limit],
            )
            .await?;
        rows.iter().map(|r| read(r).info(queue)).collect()
    }

    /// Deletes every cold job of the key; how many.
    pub(crate) async fn cancel_key(&self, queue: &QueueName, key: &JobKey) -> Result<u64, Error> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM delayq.cold WHERE queue = $1 AND key = $2",
                &[&queue.as_str(), &key.as_str()],
            )
            .await?;
        if n > 0 {
            count(&tx, queue, -(n as i64)).await?;
        }
        tx.commit().await?;
        Ok(n)
    }

    /// Moves every cold job of the key by `to` (at `now_ms`): those still due past the window
    /// (`window_ms`) stay cold at their new times; the others are taken out for the store, in
    /// a transaction left open (see [`KeyTaken`]).
    pub(crate) async fn take_key(
        &self,
        queue: &QueueName,
        key: &JobKey,
        to: KeyMove,
        now_ms: u64,
        window_ms: u64,
    ) -> Result<KeyTaken, Error> {
        // An error below drops the transaction unfinished: `Open` rolls it back.
        let open = Open::begin(self.client().await?).await?;
        let c = open.conn();
        let rows = c
            .query(
                &format!(
                    "DELETE FROM delayq.cold WHERE queue = $1 AND key = $2 RETURNING {COLUMNS}"
                ),
                &[&queue.as_str(), &key.as_str()],
            )
            .await?;
        let mut near = Vec::new();
        let (mut ids, mut dues, mut bodies, mut since) = (vec![], vec![], vec![], vec![]);
        for r in &rows {
            let mut job = read(r);
            job.due_ms = to.apply(job.due_ms, now_ms);
            if job.due_ms > now_ms + window_ms {
                ids.push(job.id);
                dues.push(job.due_ms as f64);
                bodies.push(job.body);
                since.push(job.enqueued_ms as f64);
            } else {
                near.push(job);
            }
        }
        if !ids.is_empty() {
            // The new months' partitions in this transaction: not remembered as made (it may
            // roll back), so a later write asks for them again.
            self.partitions(c, dues.iter().map(|d| *d as u64)).await?;
            c.execute(
                "INSERT INTO delayq.cold (queue, id, due_at, body, key, enqueued_at) \
                 SELECT $1, i, to_timestamp(d / 1000), b, $2, to_timestamp(e / 1000) \
                 FROM unnest($3::text[], $4::float8[], $5::text[], $6::float8[]) \
                   AS t(i, d, b, e)",
                &[&queue.as_str(), &key.as_str(), &ids, &dues, &bodies, &since],
            )
            .await?;
        }
        near.sort_by_key(|j| j.due_ms);
        Ok(KeyTaken {
            conn: open,
            near,
            stayed: ids.len() as u64,
        })
    }

    /// Deletes the queue's cold jobs due by now (`due`) or after it (scheduled), in
    /// transactions of 10,000 until none is left; how many.
    pub(crate) async fn cancel_all(&self, queue: &QueueName, due: bool) -> Result<u64, Error> {
        const CHUNK: i64 = 10_000;
        let cond = if due {
            "due_at <= now()"
        } else {
            "due_at > now()"
        };
        let mut total = 0;
        loop {
            let mut c = self.client().await?;
            let tx = c.transaction().await?;
            let n = tx
                .execute(
                    &format!(
                        "DELETE FROM delayq.cold WHERE (queue, due_at, id) IN \
                           (SELECT queue, due_at, id FROM delayq.cold \
                            WHERE queue = $1 AND {cond} LIMIT $2 FOR UPDATE)"
                    ),
                    &[&queue.as_str(), &CHUNK],
                )
                .await?;
            if n > 0 {
                count(&tx, queue, -(n as i64)).await?;
            }
            tx.commit().await?;
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }
}
