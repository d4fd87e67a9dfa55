//! [`EmbeddedBackend`]: the `Backend` and `Inspect` traits over the SQLite store, each method
//! one atomic operation, with in-process wake-ups for consumers.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::{
    AckOutcome, Backend, Backoff, CancelOutcome, ClaimBatch, ClaimRequest, Enqueued, Error,
    Inspect, Job, JobId, JobInfo, JobState, LeaseRef, Nack, NackOutcome, NewJob, QueueName,
    QueueStats, Result, Schedule, Wakeups,
};
use rusqlite::{Connection, OptionalExtension, Row, params};
use tokio::sync::watch;

use crate::store::{Store, sql};

const SCHEDULED: i64 = 0;
const LEASED: i64 = 1;
const DEAD: i64 = 2;
/// Most expired leases recovered per claim.
const REAP_LIMIT: i64 = 100;
/// Most jobs leased per claim.
pub const MAX_CLAIM: usize = 1000;

/// The embedded backend. Cheap to clone; one per data directory and process.
#[derive(Clone)]
pub struct EmbeddedBackend {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    wakes: Mutex<HashMap<QueueName, watch::Sender<u64>>>,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn due_from(s: Schedule, now: i64) -> i64 {
    match s {
        Schedule::Now => now,
        Schedule::Delay(d) => now + d.as_millis() as i64,
        Schedule::At(t) => (t as i64).max(now),
    }
}

fn head(c: &Connection, q: &str, state: i64) -> Result<Option<i64>> {
    c.query_row(
        "SELECT score FROM jobs WHERE queue = ?1 AND state = ?2 ORDER BY score LIMIT 1",
        params![q, state],
        |r| r.get(0),
    )
    .optional()
    .map_err(sql)
}

const COLS: &str = "id, state, score, due, created, attempt, max_attempts, backoff_kind, \
                    backoff_base, backoff_cap, lease_ms, token, last_error, payload";

struct RowData {
    id: String,
    state: i64,
    score: i64,
    due: i64,
    created: i64,
    attempt: i64,
    max_attempts: i64,
    backoff: Option<Backoff>,
    lease_ms: Option<i64>,
    token: i64,
    last_error: Option<String>,
    payload: Vec<u8>,
}

fn row(r: &Row<'_>) -> rusqlite::Result<RowData> {
    let kind: Option<i64> = r.get(7)?;
    let base: Option<i64> = r.get(8)?;
    let cap: Option<i64> = r.get(9)?;
    Ok(RowData {
        id: r.get(0)?,
        state: r.get(1)?,
        score: r.get(2)?,
        due: r.get(3)?,
        created: r.get(4)?,
        attempt: r.get(5)?,
        max_attempts: r.get(6)?,
        backoff: match (kind, base, cap) {
            (Some(k), Some(b), Some(c)) => Backoff::from_parts(k as u8, b as u64, c as u64),
            _ => None,
        },
        lease_ms: r.get(10)?,
        token: r.get(11)?,
        last_error: r.get(12)?,
        payload: r.get(13)?,
    })
}

impl RowData {
    fn info(self) -> Result<JobInfo> {
        let state = match self.state {
            SCHEDULED => JobState::Scheduled,
            LEASED => JobState::Leased,
            _ => JobState::Dead,
        };
        Ok(JobInfo {
            id: JobId::new(self.id).map_err(|e| Error::Backend(e.to_string()))?,
            state,
            attempt: self.attempt as u32,
            max_attempts: self.max_attempts as u32,
            due_at_ms: self.due as u64,
            created_at_ms: self.created as u64,
            lease_deadline_ms: (state == JobState::Leased).then_some(self.score as u64),
            failed_at_ms: (state == JobState::Dead).then_some(self.score as u64),
            last_error: self.last_error,
            payload: self.payload,
        })
    }
}

fn get_row(c: &Connection, q: &str, id: &str) -> Result<Option<RowData>> {
    c.query_row(
        &format!("SELECT {COLS} FROM jobs WHERE queue = ?1 AND id = ?2"),
        params![q, id],
        row,
    )
    .optional()
    .map_err(sql)
}

fn leased_row(c: &Connection, q: &str, l: &LeaseRef) -> Result<Option<RowData>> {
    Ok(get_row(c, q, l.id.as_str())?
        .filter(|r| r.state == LEASED && r.token != 0 && r.token as u64 == l.token))
}

/// Deletes the records of valid leases; one outcome per lease. An expired lease that no claim
/// recovered yet is still the job's current lease (as on Redis).
fn ack_all(c: &Connection, q: &str, leases: &[LeaseRef]) -> Result<Vec<AckOutcome>> {
    let mut del = c
        .prepare_cached(
            "DELETE FROM jobs WHERE queue = ?1 AND id = ?2 AND state = 1 AND token = ?3 \
             AND token != 0",
        )
        .map_err(sql)?;
    leases
        .iter()
        .map(|l| {
            let n = del
                .execute(params![q, l.id.as_str(), l.token as i64])
                .map_err(sql)?;
            Ok(if n == 1 {
                AckOutcome::Acked
            } else {
                AckOutcome::LeaseLost
            })
        })
        .collect()
}

impl EmbeddedBackend {
    /// Opens (creating) the store in `dir`. A second process opening the same directory gets
    /// [`crate::Error::Locked`].
    pub fn open(dir: impl AsRef<Path>) -> std::result::Result<Self, crate::Error> {
        Ok(Self {
            inner: Arc::new(Inner {
                store: Store::open(dir.as_ref())?,
                wakes: Mutex::default(),
            }),
        })
    }

    fn wake(&self, q: &QueueName) {
        if let Ok(map) = self.inner.wakes.lock()
            && let Some(tx) = map.get(q)
        {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    async fn exec<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.inner.store.exec(f).await
    }
}

impl Backend for EmbeddedBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let q = queue.to_string();
        let (out, wake) = self
            .exec(move |c| {
                let now = (now_us() / 1000) as i64;
                let head_due = head(c, &q, SCHEDULED)?;
                let mut earliest: Option<i64> = None;
                let mut out = Vec::with_capacity(jobs.len());
                let mut insert = c
                    .prepare_cached(
                        "INSERT INTO jobs (queue, id, state, score, due, created, attempt, \
                         max_attempts, backoff_kind, backoff_base, backoff_cap, lease_ms, token, \
                         payload) VALUES (?1, ?2, 0, ?3, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?9, 0, ?10) \
                         ON CONFLICT (queue, id) DO NOTHING",
                    )
                    .map_err(sql)?;
                for job in jobs {
                    let id = job.id.clone().unwrap_or_else(JobId::generate);
                    let due = due_from(job.schedule, now);
                    let (kind, base, cap) = match job.backoff {
                        Some(b) => {
                            let (base, cap) = b.base_cap_ms();
                            (
                                Some(i64::from(b.kind_code())),
                                Some(base as i64),
                                Some(cap as i64),
                            )
                        }
                        None => (None, None, None),
                    };
                    let n = insert
                        .execute(params![
                            q,
                            id.as_str(),
                            due,
                            now,
                            i64::from(job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS)),
                            kind,
                            base,
                            cap,
                            job.lease.map(|l| l.as_millis() as i64),
                            job.payload,
                        ])
                        .map_err(sql)?;
                    if n == 1 {
                        earliest = Some(earliest.map_or(due, |e: i64| e.min(due)));
                        out.push(Enqueued {
                            id,
                            due_at_ms: due as u64,
                            created: true,
                        });
                    } else {
                        let existing: i64 = c
                            .query_row(
                                "SELECT due FROM jobs WHERE queue = ?1 AND id = ?2",
                                params![q, id.as_str()],
                                |r| r.get(0),
                            )
                            .map_err(sql)?;
                        out.push(Enqueued {
                            id,
                            due_at_ms: existing as u64,
                            created: false,
                        });
                    }
                }
                let wake = matches!((earliest, head_due), (Some(e), Some(h)) if e < h)
                    || (earliest.is_some() && head_due.is_none());
                Ok((out, wake))
            })
            .await?;
        if wake {
            self.wake(queue);
        }
        Ok(out)
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        let q = queue.clone();
        self.exec(move |c| {
            let now_exact = now_us();
            let now = (now_exact / 1000) as i64;
            let qs = q.as_str();
            let acks = ack_all(c, qs, &req.acks)?;
            // Crash recovery: expired leases are due again now, or dead when attempts are
            // used up; the attempt they were given counts.
            let expired: Vec<(String, i64, i64)> = c
                .prepare_cached(
                    "SELECT id, attempt, max_attempts FROM jobs WHERE queue = ?1 AND state = 1 \
                     AND score <= ?2 ORDER BY score LIMIT ?3",
                )
                .map_err(sql)?
                .query_map(params![qs, now, REAP_LIMIT], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            for (id, attempt, max) in expired {
                let err = format!("lease expired (attempt {attempt})");
                let (state, due) = if attempt >= max {
                    (DEAD, None)
                } else {
                    (SCHEDULED, Some(now))
                };
                c.execute(
                    "UPDATE jobs SET state = ?3, score = ?4, due = COALESCE(?5, due), token = 0, \
                     last_error = ?6 WHERE queue = ?1 AND id = ?2",
                    params![qs, id, state, now, due, err],
                )
                .map_err(sql)?;
            }
            let mut jobs = Vec::new();
            let max = req.max.min(MAX_CLAIM) as i64;
            if max > 0 {
                let due_rows: Vec<RowData> = c
                    .prepare_cached(&format!(
                        "SELECT {COLS} FROM jobs WHERE queue = ?1 AND state = 0 AND score <= ?2 \
                         ORDER BY score, id LIMIT ?3"
                    ))
                    .map_err(sql)?
                    .query_map(params![qs, now, max], row)
                    .map_err(sql)?
                    .collect::<rusqlite::Result<_>>()
                    .map_err(sql)?;
                if !due_rows.is_empty() {
                    let last: i64 = c
                        .query_row(
                            "UPDATE meta SET v = v + ?1 WHERE k = 'fence' RETURNING v",
                            params![due_rows.len() as i64],
                            |r| r.get(0),
                        )
                        .map_err(sql)?;
                    let mut token = last - due_rows.len() as i64;
                    let mut upd = c
                        .prepare_cached(
                            "UPDATE jobs SET state = 1, score = ?3, attempt = attempt + 1, \
                             token = ?4 WHERE queue = ?1 AND id = ?2",
                        )
                        .map_err(sql)?;
                    for r in due_rows {
                        token += 1;
                        let lease_ms = r.lease_ms.unwrap_or(req.lease.as_millis() as i64);
                        let deadline = now + lease_ms;
                        upd.execute(params![qs, r.id, deadline, token])
                            .map_err(sql)?;
                        jobs.push(Job {
                            id: JobId::new(r.id).map_err(|e| Error::Backend(e.to_string()))?,
                            queue: q.clone(),
                            payload: r.payload,
                            attempt: r.attempt as u32 + 1,
                            max_attempts: r.max_attempts as u32,
                            due_at_ms: r.due as u64,
                            created_at_ms: r.created as u64,
                            lease_token: token as u64,
                            lease_deadline_ms: deadline as u64,
                            lease: Duration::from_millis(lease_ms as u64),
                            last_error: r.last_error,
                        });
                    }
                }
            }
            let next = [head(c, qs, SCHEDULED)?, head(c, qs, LEASED)?]
                .into_iter()
                .flatten()
                .min();
            let next_due_in =
                next.map(|t| Duration::from_micros(((t as u64) * 1000).saturating_sub(now_exact)));
            Ok(ClaimBatch {
                jobs,
                acks,
                next_due_in,
            })
        })
        .await
    }

    async fn ack(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<AckOutcome>> {
        let q = queue.to_string();
        self.exec(move |c| ack_all(c, &q, &leases)).await
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let q = queue.to_string();
        let rnd: f64 = rand::random();
        let (out, wake) = self
            .exec(move |c| {
                let Some(r) = leased_row(c, &q, &lease)? else {
                    return Err(Error::LeaseLost { id: lease.id });
                };
                let now = (now_us() / 1000) as i64;
                let err: String = nack
                    .error
                    .chars()
                    .take(delayq::limits::MAX_ERROR_BYTES)
                    .collect();
                if nack.dead || r.attempt >= r.max_attempts {
                    c.execute(
                        "UPDATE jobs SET state = 2, score = ?3, token = 0, last_error = ?4 \
                         WHERE queue = ?1 AND id = ?2",
                        params![q, r.id, now, err],
                    )
                    .map_err(sql)?;
                    return Ok((
                        NackOutcome::Dead {
                            failed_at_ms: now as u64,
                        },
                        false,
                    ));
                }
                let delay = nack
                    .retry_in
                    .unwrap_or_else(|| r.backoff.unwrap_or_default().delay(r.attempt as u32, rnd));
                let due = now + delay.as_millis() as i64;
                let wake = head(c, &q, SCHEDULED)?.is_none_or(|h| due < h);
                c.execute(
                    "UPDATE jobs SET state = 0, score = ?3, due = ?3, token = 0, last_error = ?4 \
                     WHERE queue = ?1 AND id = ?2",
                    params![q, r.id, due, err],
                )
                .map_err(sql)?;
                Ok((
                    NackOutcome::Retrying {
                        due_at_ms: due as u64,
                    },
                    wake,
                ))
            })
            .await?;
        if wake {
            self.wake(queue);
        }
        Ok(out)
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, lease_len: Duration) -> Result<u64> {
        delayq::job::validate_lease(lease_len)?;
        let q = queue.to_string();
        self.exec(move |c| {
            let deadline = (now_us() / 1000) as i64 + lease_len.as_millis() as i64;
            let n = c
                .execute(
                    "UPDATE jobs SET score = ?4 WHERE queue = ?1 AND id = ?2 AND state = 1 \
                     AND token = ?3 AND token != 0",
                    params![q, lease.id.as_str(), lease.token as i64, deadline],
                )
                .map_err(sql)?;
            if n == 1 {
                Ok(deadline as u64)
            } else {
                Err(Error::LeaseLost { id: lease.id })
            }
        })
        .await
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        let q = queue.to_string();
        let n = self
            .exec(move |c| {
                let now = (now_us() / 1000) as i64;
                let mut n = 0;
                for l in leases {
                    n += c
                        .execute(
                            "UPDATE jobs SET state = 0, due = MIN(due, ?4), score = MIN(due, ?4), \
                             token = 0, attempt = MAX(attempt - ?5, 0) WHERE queue = ?1 \
                             AND id = ?2 AND state = 1 AND token = ?3 AND token != 0",
                            params![q, l.id.as_str(), l.token as i64, now, i64::from(undo)],
                        )
                        .map_err(sql)?;
                }
                Ok(n)
            })
            .await?;
        if n > 0 {
            self.wake(queue);
        }
        Ok(())
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let (q, id) = (queue.to_string(), id.to_string());
        self.exec(move |c| {
            let n = c
                .execute(
                    "DELETE FROM jobs WHERE queue = ?1 AND id = ?2 AND state = 0",
                    params![q, id],
                )
                .map_err(sql)?;
            if n == 1 {
                return Ok(CancelOutcome::Cancelled);
            }
            Ok(match get_row(c, &q, &id)?.map(|r| r.state) {
                Some(LEASED) => CancelOutcome::Leased,
                Some(_) => CancelOutcome::Dead,
                None => CancelOutcome::NotFound,
            })
        })
        .await
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, schedule: Schedule) -> Result<u64> {
        let (q, idc) = (queue.to_string(), id.clone());
        let (due, wake) = self
            .exec(move |c| {
                let now = (now_us() / 1000) as i64;
                let due = due_from(schedule, now);
                match get_row(c, &q, idc.as_str())? {
                    None => Err(Error::NotFound { id: idc }),
                    Some(r) if r.state != SCHEDULED => Err(Error::WrongState {
                        id: idc,
                        state: if r.state == LEASED {
                            JobState::Leased
                        } else {
                            JobState::Dead
                        },
                        expected: JobState::Scheduled,
                    }),
                    Some(_) => {
                        let wake = head(c, &q, SCHEDULED)?.is_none_or(|h| due < h);
                        c.execute(
                            "UPDATE jobs SET score = ?3, due = ?3 WHERE queue = ?1 AND id = ?2",
                            params![q, idc.as_str(), due],
                        )
                        .map_err(sql)?;
                        Ok((due as u64, wake))
                    }
                }
            })
            .await?;
        if wake {
            self.wake(queue);
        }
        Ok(due)
    }

    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        let mut map = self
            .inner
            .wakes
            .lock()
            .map_err(|_| Error::Backend("wake lock".into()))?;
        Ok(map
            .entry(queue.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe())
    }
}

impl Inspect for EmbeddedBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let (q, id) = (queue.to_string(), id.to_string());
        self.exec(move |c| get_row(c, &q, &id)?.map(RowData::info).transpose())
            .await
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.exec(|c| {
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
        self.exec(move |c| {
            let now = (now_us() / 1000) as i64;
            let count = |sql_text: &str, p: &[&dyn rusqlite::ToSql]| -> Result<u64> {
                c.query_row(sql_text, p, |r| r.get::<_, i64>(0))
                    .map(|v| v as u64)
                    .map_err(sql)
            };
            let by_state = |s: i64| {
                count(
                    "SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND state = ?2",
                    &[&q, &s],
                )
            };
            let head_due = head(c, &q, SCHEDULED)?;
            Ok(QueueStats {
                scheduled: by_state(SCHEDULED)?,
                due: count(
                    "SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND state = 0 AND score <= ?2",
                    &[&q, &now],
                )?,
                due_next_minute: count(
                    "SELECT COUNT(*) FROM jobs WHERE queue = ?1 AND state = 0 AND score > ?2 \
                     AND score <= ?3",
                    &[&q, &now, &(now + 60_000)],
                )?,
                leased: by_state(LEASED)?,
                dead: by_state(DEAD)?,
                oldest_overdue_ms: head_due
                    .filter(|h| *h <= now)
                    .map_or(0, |h| (now - h) as u64),
            })
        })
        .await
    }

    async fn dead_list(
        &self,
        queue: &QueueName,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<JobInfo>> {
        let q = queue.to_string();
        self.exec(move |c| {
            let rows: Vec<RowData> = c
                .prepare_cached(&format!(
                    "SELECT {COLS} FROM jobs WHERE queue = ?1 AND state = 2 ORDER BY score, id \
                     LIMIT ?2 OFFSET ?3"
                ))
                .map_err(sql)?
                .query_map(params![q, limit.min(MAX_CLAIM) as i64, offset as i64], row)
                .map_err(sql)?
                .collect::<rusqlite::Result<_>>()
                .map_err(sql)?;
            rows.into_iter().map(RowData::info).collect()
        })
        .await
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let (q, idc) = (queue.to_string(), id.clone());
        self.exec(move |c| {
            let now = (now_us() / 1000) as i64;
            let n = c
                .execute(
                    "UPDATE jobs SET state = 0, score = ?3, due = ?3, attempt = 0, last_error = NULL \
                     WHERE queue = ?1 AND id = ?2 AND state = 2",
                    params![q, idc.as_str(), now],
                )
                .map_err(sql)?;
            if n == 1 {
                return Ok(());
            }
            match get_row(c, &q, idc.as_str())? {
                None => Err(Error::NotFound { id: idc }),
                Some(r) => Err(Error::WrongState {
                    id: idc,
                    state: if r.state == LEASED { JobState::Leased } else { JobState::Scheduled },
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
            .exec(move |c| {
                let now = (now_us() / 1000) as i64;
                c.execute(
                    "UPDATE jobs SET state = 0, score = ?2, due = ?2, attempt = 0, last_error = NULL \
                     WHERE queue = ?1 AND state = 2",
                    params![q, now],
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
        self.exec(move |c| {
            c.execute(
                "DELETE FROM jobs WHERE queue = ?1 AND state = 2",
                params![q],
            )
            .map(|n| n as u64)
            .map_err(sql)
        })
        .await
    }
}
