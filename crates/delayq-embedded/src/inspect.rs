//! The `Inspect` trait over the SQLite store: lookups, listings, counts, pause, the series
//! (kept in memory by the backend) and the dead-letter and bulk tools.

use delayq::listing::{check_cancellable, check_limit};
use delayq::{
    Cursor, Error, Found, Inspect, InvalidInput, JobId, JobInfo, JobKey, JobPage, JobState,
    KeyHold, ListRequest, ListState, QueueName, QueueSeries, QueueSettings, QueueStats, Result,
};
use rusqlite::{Connection, params};

use crate::backend::{EmbeddedBackend, conf, paused};
use crate::rows::{
    COLS, DEAD, DONE, LEASED, RowData, SCHEDULED, WAITING, claim_order_sql, get_row, head, row,
    state, state_of,
};
use crate::store::sql;
use crate::{push, throttle};

/// The error for an operation that needed `expected`: not found, or the state the job is in.
fn wrong_state(c: &Connection, q: &str, id: JobId, expected: JobState) -> Result<Error> {
    Ok(match state_of(c, q, id.as_str())? {
        None => Error::NotFound { id },
        Some(s) => Error::WrongState {
            id,
            state: state(s)?,
            expected,
        },
    })
}

impl Inspect for EmbeddedBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let (q, id) = (queue.to_string(), id.to_string());
        self.exec(move |c, _| {
            let Some(mut info) = get_row(c, &q, &id)?.map(RowData::info).transpose()? else {
                return Ok(None);
            };
            if crate::deps::used() {
                info.dependencies = crate::deps::statuses(c, &q, &id)?;
                info.dependents = crate::deps::dependents(c, &q, &id)?;
            }
            Ok(Some(info))
        })
        .await
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.exec(|c, _| {
            crate::rows::queue_names(c, "SELECT DISTINCT queue FROM jobs ORDER BY queue")
        })
        .await
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let q = queue.to_string();
        self.exec(move |c, now| {
            let now_us = now.us();
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
            let due = between(i64::MIN, now)?;
            Ok(QueueStats {
                // Due later (the due ones are `due`), as a listing by state shows them.
                scheduled: by_state(SCHEDULED)?.saturating_sub(due),
                due,
                due_next_minute: between(now, now + 60_000)?,
                leased: by_state(LEASED)?,
                dead: by_state(DEAD)?,
                oldest_overdue_ms: head_due
                    .filter(|h| *h <= now)
                    .map_or(0, |h| (now - h) as u64),
                paused: paused(c, &q)?,
                waiting_on_limit: throttle::waiting(c, &q, due, now_us)?,
                done: by_state(DONE)?,
                awaiting: by_state(WAITING)?,
            })
        })
        .await
    }

    async fn list(&self, queue: &QueueName, page: ListRequest) -> Result<JobPage> {
        let (which, limit, after) = page.checked()?;
        let q = queue.to_string();
        self.exec(move |c, now| {
            let now = now.ms();
            let (code, lo, hi) = match which {
                ListState::Scheduled => (SCHEDULED, now + 1, i64::MAX),
                ListState::Due => (SCHEDULED, i64::MIN, now),
                ListState::Leased => (LEASED, i64::MIN, i64::MAX),
                ListState::Dead => (DEAD, i64::MIN, i64::MAX),
                ListState::Done => (DONE, i64::MIN, i64::MAX),
                ListState::Waiting => (WAITING, i64::MIN, i64::MAX),
            };
            let (score, id) = after.map_or((i64::MIN, String::new()), |c| {
                (i64::try_from(c.score).unwrap_or(i64::MAX), c.id)
            });
            // The due jobs of a queue with priorities are listed in claim order (due time less
            // a level per PRIORITY_AGING: the claim's order, and the Redis listing's), the
            // cursor holding that key.
            let aging = delayq::limits::PRIORITY_AGING.as_millis() as i64;
            let by_prio = which == ListState::Due && conf(c, &q)?.1;
            let key = if by_prio {
                claim_order_sql(8)
            } else {
                "score".to_owned()
            };
            let mut stmt = c
                .prepare_cached(&format!(
                    "SELECT {COLS} FROM jobs WHERE queue = ?1 AND state = ?2 AND score >= ?3 \
                     AND score <= ?4 AND ({key}, id) > (?5, ?6) ORDER BY {key}, id LIMIT ?7"
                ))
                .map_err(sql)?;
            // One more than asked tells whether a next page exists.
            let page = limit as i64 + 1;
            let rows = if by_prio {
                let d = i64::from(delayq::DEFAULT_PRIORITY);
                stmt.query_map(params![q, code, lo, hi, score, id, page, d, aging], row)
            } else {
                stmt.query_map(params![q, code, lo, hi, score, id, page], row)
            };
            let mut rows: Vec<RowData> = rows
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            let more = rows.len() > limit;
            rows.truncate(limit);
            let next = rows.last().filter(|_| more).map(|r| Cursor {
                score: if by_prio {
                    let p = r.priority.map_or(delayq::DEFAULT_PRIORITY, |p| p as u8);
                    delayq::limits::claim_order_key(r.score as u64, p) as u64
                } else {
                    r.score as u64
                },
                id: r.id.clone(),
            });
            let jobs = rows
                .into_iter()
                .map(RowData::info)
                .collect::<Result<Vec<_>>>()?;
            Ok(JobPage { jobs, next })
        })
        .await
    }

    /// The `(queue, id)` index is ordered by id: a prefix is one range of it.
    async fn search(&self, queue: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        check_limit(limit)?;
        let (q, p) = (queue.to_string(), prefix.to_owned());
        self.exec(move |c, _| {
            let rows: Vec<RowData> = c
                .prepare_cached(&format!(
                    "SELECT {COLS} FROM jobs WHERE queue = ?1 AND id >= ?2 \
                     AND id < ?2 || char(1114111) AND substr(id, 1, length(?2)) = ?2 \
                     ORDER BY id LIMIT ?3"
                ))
                .map_err(sql)?
                .query_map(params![q, p, limit as i64], row)
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            Ok(Found {
                jobs: rows.into_iter().map(RowData::info).collect::<Result<_>>()?,
                by_prefix: true,
            })
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
            Err(wrong_state(c, &q, idc, JobState::Dead)?)
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

    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let (q, idc) = (queue.to_string(), id.clone());
        self.exec(move |c, _| {
            let n = c
                .execute(
                    "DELETE FROM jobs WHERE queue = ?1 AND id = ?2 AND state = ?3",
                    params![q, idc.as_str(), DEAD],
                )
                .map_err(sql)?;
            if n == 1 {
                return Ok(());
            }
            Err(wrong_state(c, &q, idc, JobState::Dead)?)
        })
        .await
    }

    async fn cancel_all(&self, queue: &QueueName, which: ListState) -> Result<u64> {
        check_cancellable(which)?;
        let q = queue.to_string();
        self.exec(move |c, now| {
            let (lo, hi) = if which == ListState::Due {
                (i64::MIN, now.ms())
            } else {
                (now.ms() + 1, i64::MAX)
            };
            // Each job of a batch among them is counted in its batch (batches.rs).
            let mut del = c
                .prepare(
                    "DELETE FROM jobs WHERE queue = ?1 AND state = ?2 AND score >= ?3 \
                     AND score <= ?4 RETURNING id, batch",
                )
                .map_err(sql)?;
            let gone: Vec<(String, Option<String>)> = del
                .query_map(params![q, SCHEDULED, lo, hi], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            for (id, b) in &gone {
                let ending = delayq::batch::Ending::Cancelled;
                crate::ends::ended(c, &q, id, b.as_deref(), ending, None, now.ms())?;
            }
            Ok(gone.len() as u64)
        })
        .await
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let q = queue.to_string();
        self.exec(move |c, _| {
            c.execute(
                "INSERT INTO queue_conf (queue, paused) VALUES (?1, ?2) \
                 ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused",
                params![q, i64::from(paused)],
            )
            .map_err(sql)
        })
        .await?;
        if !paused {
            self.wake(queue);
        }
        Ok(())
    }

    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        Ok(self.series_of(queue))
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        let q = queue.to_string();
        let ((rate, max_in_flight, retention), (delivery, target), keys) = self
            .exec(move |c, _| {
                Ok((
                    throttle::stored(c, &q)?,
                    push::settings(c, &q)?,
                    crate::keyed::KeyLimits::read(c, &q)?,
                ))
            })
            .await?;
        Ok(QueueSettings {
            shards: 1,
            lane: false,
            // (No lane, so no time windows either: the width is the default, which a queue
            // configured here was given and which means nothing without a lane.)
            lane_window_ms: delayq::settings::DEFAULT_LANE_WINDOW_MS,
            rate,
            max_in_flight,
            retention,
            target,
            delivery,
            key_max_in_flight: keys.max_in_flight,
            key_rate: keys.rate,
            pause_key_on_429: keys.pause_on_429,
            cold_after_ms: None,
        })
    }

    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        self.exec(|c, _| push::queues(c)).await
    }

    /// The embedded store keeps every queue in one table: it has no shards to spread over.
    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        s.validate()?;
        s.check_without_cold_tier()?;
        if s.shards != 1 {
            return Err(InvalidInput::Settings(
                "the embedded store does not shard queues (shards apply to Redis)".into(),
            )
            .into());
        }
        if s.lane {
            return Err(InvalidInput::Settings(
                "the embedded store has no one-delay lane (a Redis layout; its rows cost the                  same for every delay)"
                    .into(),
            )
            .into());
        }
        let q = queue.to_string();
        let stored = s.clone();
        self.exec(move |c, now| {
            throttle::store(c, &q, &stored, now.us())?;
            push::set(c, &q, stored.delivery, stored.target.as_ref())
        })
        .await?;
        self.remember_delivery(queue, s.delivery_rule());
        // Consumers sleeping on the old limits look again.
        self.wake(queue);
        Ok(s)
    }

    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        let queue = q.clone();
        let (q, k) = (q.to_string(), key.to_string());
        let end = self
            .exec(move |c, now| {
                let until = match hold {
                    KeyHold::Until(t) => Some(t as i64),
                    KeyHold::For(d) => Some(now.ms() + d.as_millis().max(1) as i64),
                    KeyHold::Lifted => None,
                };
                crate::keyed::hold(c, &q, &k, until.filter(|t| *t > now.ms()))
            })
            .await?;
        // Consumers sleeping past the hold's end, or on the held key, look again.
        self.wake(&queue);
        Ok(end.map(|t| t as u64))
    }

    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<delayq::KeyStats>> {
        let q = queue.to_string();
        self.exec(move |c, now| crate::keyed::stats(c, &q, now.ms(), limit))
            .await
    }

    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: delayq::KeyJobsRequest,
    ) -> Result<delayq::KeyJobsPage> {
        req.check()?;
        let (q, k) = (q.to_string(), key.to_string());
        self.exec(move |c, now| crate::key_jobs::page(c, &q, &k, &req, now.ms()))
            .await
    }

    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<delayq::KeyCancelled> {
        let (qs, k) = (q.to_string(), key.to_string());
        self.exec_waking(q, move |c, now| {
            crate::key_jobs::cancel_all(c, &qs, &k, running, now.ms())
        })
        .await
    }

    async fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: delayq::KeyMove,
    ) -> Result<u64> {
        to.check()?;
        let (qs, k) = (q.to_string(), key.to_string());
        self.exec_waking(q, move |c, now| {
            crate::key_jobs::reschedule(c, &qs, &k, to, now.ms())
        })
        .await
    }
}
