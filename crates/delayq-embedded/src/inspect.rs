//! The `Inspect` trait over the SQLite store: lookups, counts and the dead-letter tools.

use delayq::{
    Error, Inspect, InvalidInput, JobId, JobInfo, JobState, QueueName, QueueSettings, QueueStats,
    Result,
};
use rusqlite::params;

use crate::backend::{EmbeddedBackend, MAX_CLAIM};
use crate::rows::{COLS, DEAD, LEASED, RowData, SCHEDULED, get_row, head, row, state, state_of};
use crate::store::sql;

impl Inspect for EmbeddedBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let (q, id) = (queue.to_string(), id.to_string());
        self.exec(move |c, _| get_row(c, &q, &id)?.map(RowData::info).transpose())
            .await
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.exec(|c, _| {
            let names: Vec<String> = c
                .prepare_cached("SELECT DISTINCT queue FROM jobs ORDER BY queue")
                .map_err(sql)?
                .query_map([], |r| r.get(0))
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            Ok(names
                .into_iter()
                .filter_map(|n| QueueName::new(n).ok())
                .collect())
        })
        .await
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let q = queue.to_string();
        self.exec(move |c, now| {
            let now = now.ms();
            let count = |sql_text: &str, p: &[&dyn rusqlite::ToSql]| -> Result<u64> {
                c.prepare_cached(sql_text)
                    .map_err(sql)?
                    .query_row(p, |r| r.get::<_, i64>(0))
                    .map(|v| v as u64)
                    .map_err(sql)
            };
            let by_state = |s: i64| {
                count(
                    "SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND state = ?2",
                    &[&q, &s],
                )
            };
            let between = |lo: i64, hi: i64| {
                count(
                    "SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND state = ?2 AND score > ?3 \
                     AND score <= ?4",
                    &[&q, &SCHEDULED, &lo, &hi],
                )
            };
            let head_due = head(c, &q, SCHEDULED)?;
            Ok(QueueStats {
                scheduled: by_state(SCHEDULED)?,
                due: between(i64::MIN, now)?,
                due_next_minute: between(now, now + 60_000)?,
                leased: by_state(LEASED)?,
                dead: by_state(DEAD)?,
                oldest_overdue_ms: head_due
                    .filter(|h| *h <= now)
                    .map_or(0, |h| (now - h) as u64),
            })
        })
        .await
    }

    async fn dead_list(&self, queue: &QueueName, from: usize, n: usize) -> Result<Vec<JobInfo>> {
        let q = queue.to_string();
        self.exec(move |c, _| {
            let rows: Vec<RowData> = c
                .prepare_cached(&format!(
                    "SELECT {COLS} FROM jobs WHERE queue = ?1 AND state = ?4 ORDER BY score, id \
                     LIMIT ?2 OFFSET ?3"
                ))
                .map_err(sql)?
                .query_map(params![q, n.min(MAX_CLAIM) as i64, from as i64, DEAD], row)
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            rows.into_iter().map(RowData::info).collect()
        })
        .await
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let (q, idc) = (queue.to_string(), id.clone());
        self.exec(move |c, now| {
            let n = c
                .execute(
                    "UPDATE jobs SET state = ?4, score = ?3, due = ?3, attempt = 0, \
                     last_error = NULL WHERE queue = ?1 AND id = ?2 AND state = ?5",
                    params![q, idc.as_str(), now.ms(), SCHEDULED, DEAD],
                )
                .map_err(sql)?;
            if n == 1 {
                return Ok(());
            }
            match state_of(c, &q, idc.as_str())? {
                None => Err(Error::NotFound { id: idc }),
                Some(s) => Err(Error::WrongState {
                    id: idc,
                    state: state(s)?,
                    expected: JobState::Dead,
                }),
            }
        })
        .await?;
        self.wake(queue);
        Ok(())
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        let q = queue.to_string();
        let n = self
            .exec(move |c, now| {
                c.execute(
                    "UPDATE jobs SET state = ?3, score = ?2, due = ?2, attempt = 0, \
                     last_error = NULL WHERE queue = ?1 AND state = ?4",
                    params![q, now.ms(), SCHEDULED, DEAD],
                )
                .map(|n| n as u64)
                .map_err(sql)
            })
            .await?;
        if n > 0 {
            self.wake(queue);
        }
        Ok(n)
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        let q = queue.to_string();
        self.exec(move |c, _| {
            c.execute(
                "DELETE FROM jobs WHERE queue = ?1 AND state = ?2",
                params![q, DEAD],
            )
            .map(|n| n as u64)
            .map_err(sql)
        })
        .await
    }

    async fn settings(&self, _queue: &QueueName) -> Result<QueueSettings> {
        Ok(QueueSettings::default())
    }

    /// The embedded store keeps every queue in one table: it has no shards to spread over.
    async fn configure(&self, _queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        s.validate()?;
        if s.shards != 1 {
            return Err(InvalidInput::Settings(
                "the embedded store does not shard queues (shards apply to Redis)".into(),
            )
            .into());
        }
        Ok(s)
    }
}
