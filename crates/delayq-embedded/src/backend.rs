//! [`EmbeddedBackend`]: the `Backend` trait over the SQLite store, each method one atomic
//! operation, with in-process wake-ups for consumers. Claim is three steps in one savepoint:
//! [`recover`] expired leases, [`lease`] due jobs, [`next_due`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::batch::Ending;
use delayq::limits::truncate_error;
use delayq::series::{Ring, lateness_bucket};
use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Counts, Due, Enqueued,
    Error, Job, JobId, JobState, LeaseRef, Nack, NackOutcome, NewJob, QueueName, QueueSeries,
    Result, SharedClock, SystemClock, Wakeups,
};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::watch;

use crate::cancel::cancel;
use crate::enqueue::insert;
use crate::rows::{
    COLS, DEAD, DONE, LEASED, RowData, SCHEDULED, WAITING, cancelled_lease, claim_order_sql,
    due_from, head, leased_row, refused, row, state, state_of,
};
use crate::store::{Store, sql};
use crate::throttle::{self, Bucket, Held};
use crate::{batches, ends};

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
    clock: SharedClock,
    wakes: Mutex<HashMap<QueueName, watch::Sender<u64>>>,
    /// Throughput and lateness per queue, in memory: one process owns the store, so it sees
    /// every transition (lost on restart; totals count from the store's opening).
    series: Mutex<HashMap<QueueName, Ring>>,
    /// Each queue's delivery as an enqueue checks it, read once: one process owns the store,
    /// and `configure` (the only writer) replaces the entry.
    deliveries: Mutex<HashMap<QueueName, delayq::DeliveryRule>>,
}

/// "Now" of one operation in µs since the epoch, read on the store thread when the operation
/// runs.
#[derive(Clone, Copy)]
pub(crate) struct Now(u64);

impl Now {
    /// ms since the epoch.
    pub(crate) fn ms(self) -> i64 {
        (self.0 / 1000) as i64
    }

    /// µs since the epoch.
    pub(crate) fn us(self) -> u64 {
        self.0
    }
}

/// Deletes the records of valid leases — or keeps them as done, with the ack's result, when
/// the job's retention (its own, else the queue's) says so, then trims kept jobs whose time is
/// up; one outcome per ack. An expired lease that no claim recovered yet is still the job's
/// current lease (as on Redis).
fn ack_all(c: &Connection, q: &str, acks: &[Ack], now: i64) -> Result<Vec<AckOutcome>> {
    if acks.is_empty() {
        return Ok(Vec::new());
    }
    let ret = throttle::retention(c, q)?;
    let mut keep = c
        .prepare_cached(
            "UPDATE jobs SET state = ?5, token = 0, completed_at = ?4, result = ?9, \
             dedupe_until = ?4 + COALESCE(dedupe_ms, ?7), \
             score = ?4 + MAX(COALESCE(keep_done_ms, ?6), COALESCE(dedupe_ms, ?7)) \
             WHERE queue = ?1 AND id = ?2 AND state = ?8 AND token = ?3 AND token != 0 \
             AND (COALESCE(keep_done_ms, ?6) > 0 OR COALESCE(dedupe_ms, ?7) > 0) \
             RETURNING batch",
        )
        .map_err(sql)?;
    // The common case first: a job without retention is deleted in one statement; only a job
    // the delete left (kept, or not this lease) is tried by the keeping update.
    let mut del = c
        .prepare_cached(
            "DELETE FROM jobs WHERE queue = ?1 AND id = ?2 AND state = ?4 AND token = ?3 \
             AND token != 0 AND COALESCE(keep_done_ms, ?5) = 0 AND COALESCE(dedupe_ms, ?6) = 0 \
             RETURNING batch",
        )
        .map_err(sql)?;
    let mut kept = 0;
    let out = acks
        .iter()
        .map(|a| {
            let (id, token) = (a.lease.id.as_str(), a.lease.token as i64);
            let result = a.result.as_ref().filter(|r| !r.is_empty());
            let (keep_ms, dedupe_ms) = (ret.keep_done_ms as i64, ret.dedupe_ms as i64);
            // Each answers the job's batch when it acked it (RETURNING: no second read).
            let batch_of = |r: &rusqlite::Row<'_>| r.get::<_, Option<String>>(0);
            let mut acked = del
                .query_row(params![q, id, token, LEASED, keep_ms, dedupe_ms], batch_of)
                .optional()
                .map_err(sql)?;
            if acked.is_none() {
                acked = keep
                    .query_row(
                        params![q, id, token, now, DONE, keep_ms, dedupe_ms, LEASED, result],
                        batch_of,
                    )
                    .optional()
                    .map_err(sql)?;
                kept += usize::from(acked.is_some());
            }
            if let Some(b) = &acked {
                let result = result.map(Vec::as_slice);
                ends::ended(c, q, id, b.as_deref(), Ending::Succeeded, result, now)?;
            }
            Ok(if acked.is_some() {
                AckOutcome::Acked
            } else if state_of(c, q, id)?.is_some() {
                AckOutcome::LeaseLost
            } else if cancelled_lease(c, q, &a.lease)? {
                AckOutcome::Cancelled
            } else {
                AckOutcome::NotFound
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // Kept jobs whose time is up go — a job's own retention too, on a queue without one
    // (an indexed look that finds nothing costs next to nothing beside the commit).
    if out.contains(&AckOutcome::Acked) {
        c.prepare_cached(
            "DELETE FROM jobs WHERE rowid IN (SELECT rowid FROM jobs WHERE queue = ?1 \
             AND state = ?2 AND score <= ?3 ORDER BY score LIMIT ?4)",
        )
        .map_err(sql)?
        .execute(params![q, DONE, now, delayq::limits::TRIM_PER_CALL as i64])
        .map_err(sql)?;
    }
    Ok(out)
}

/// Claim step 1, crash recovery: expired leases are due again now, or dead when attempts are
/// used up; the attempt they were given counts.
fn recover(c: &Connection, q: &str, now: i64, counts: &mut Counts) -> Result<()> {
    let expired: Vec<(String, i64, i64, Option<String>)> = c
        .prepare_cached(
            "SELECT id, attempt, max_attempts, batch FROM jobs WHERE queue = ?1 AND state = ?4 \
             AND score <= ?2 ORDER BY score LIMIT ?3",
        )
        .map_err(sql)?
        .query_map(params![q, now, REAP_LIMIT, LEASED], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    let mut upd = c
        .prepare_cached(
            "UPDATE jobs SET state = ?3, score = ?4, due = COALESCE(?5, due), token = 0, \
             last_error = ?6 WHERE queue = ?1 AND id = ?2",
        )
        .map_err(sql)?;
    for (id, attempt, max, batch) in expired {
        let err = format!("lease expired (attempt {attempt})");
        let (state, due) = if attempt >= max {
            counts.dead += 1;
            (DEAD, None)
        } else {
            counts.retried += 1;
            (SCHEDULED, Some(now))
        };
        upd.execute(params![q, id, state, now, due, err])
            .map_err(sql)?;
        if state == DEAD {
            ends::ended(c, q, &id, batch.as_deref(), Ending::Dead, None, now)?;
        }
    }
    Ok(())
}

/// Claim step 2: leases up to `max` due jobs, oldest due first, each under a fresh token.
/// A due job past its expiry is dead-lettered as `expired` instead (counted in `counts`).
fn lease(
    c: &Connection,
    q: &QueueName,
    max: i64,
    default: Duration,
    now: i64,
    prio: bool,
    counts: &mut Counts,
) -> Result<Vec<Job>> {
    let qs = q.as_str();
    // With priorities: the lowest due time minus a level's aging per priority first (a due job
    // gains a level per PRIORITY_AGING it waits), as the Redis claim.
    let order = if prio {
        format!("{}, id", claim_order_sql(5))
    } else {
        "score, id".to_owned()
    };
    let aging = delayq::limits::PRIORITY_AGING.as_millis() as i64;
    let mut select = c
        .prepare_cached(&format!(
            "SELECT {COLS} FROM jobs WHERE queue = ?1 AND state = ?4 AND score <= ?2 \
             ORDER BY {order} LIMIT ?3"
        ))
        .map_err(sql)?;
    let rows = if prio {
        select.query_map(
            params![qs, now, max, SCHEDULED, delayq::DEFAULT_PRIORITY, aging],
            row,
        )
    } else {
        select.query_map(params![qs, now, max, SCHEDULED], row)
    };
    let due_rows: Vec<RowData> = rows
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    drop(select);
    lease_rows(c, q, due_rows, default, now, counts)
}

/// Leases the due jobs `due_rows`, each under a fresh token; a job past its expiry is
/// dead-lettered as `expired` instead (counted in `counts`).
fn lease_rows(
    c: &Connection,
    q: &QueueName,
    due_rows: Vec<RowData>,
    default: Duration,
    now: i64,
    counts: &mut Counts,
) -> Result<Vec<Job>> {
    let qs = q.as_str();
    if due_rows.is_empty() {
        return Ok(Vec::new());
    }
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
            "UPDATE jobs SET state = ?5, score = ?3, attempt = attempt + 1, token = ?4 \
             WHERE queue = ?1 AND id = ?2",
        )
        .map_err(sql)?;
    let mut jobs = Vec::with_capacity(due_rows.len());
    for mut r in due_rows {
        if r.expires_at.is_some_and(|e| now > e) {
            c.prepare_cached(
                "UPDATE jobs SET state = ?3, score = ?4, token = 0, last_error = 'expired' \
                 WHERE queue = ?1 AND id = ?2",
            )
            .map_err(sql)?
            .execute(params![qs, r.id, DEAD, now])
            .map_err(sql)?;
            counts.dead += 1;
            ends::ended(c, qs, &r.id, r.batch.as_deref(), Ending::Dead, None, now)?;
            continue;
        }
        token += 1;
        let lease_ms = r.lease_ms.unwrap_or(default.as_millis() as i64);
        let deadline = now + lease_ms;
        upd.execute(params![qs, r.id, deadline, token, LEASED])
            .map_err(sql)?;
        // The row as the update left it.
        (r.state, r.score, r.attempt) = (LEASED, deadline, r.attempt + 1);
        let lease = Duration::from_millis(lease_ms as u64);
        let mut info = r.info()?;
        if crate::deps::wants_results(c, qs, info.id.as_str())? {
            info.dependencies = crate::deps::statuses(c, qs, info.id.as_str())?;
        }
        jobs.push(info.into_job(q.clone(), token as u64, lease));
    }
    Ok(jobs)
}

/// Claim step 3: time from now until the next scheduled job is due or the next lease expires.
fn next_due(c: &Connection, q: &str, now: Now) -> Result<Option<Duration>> {
    let next = [head(c, q, SCHEDULED)?, head(c, q, LEASED)?]
        .into_iter()
        .flatten()
        .min();
    Ok(next.map(|t| Duration::from_micros(((t as u64) * 1000).saturating_sub(now.0))))
}

/// Whether the queue is paused (a row of `queue_conf`).
pub(crate) fn paused(c: &Connection, q: &str) -> Result<bool> {
    Ok(conf(c, q)?.0)
}

/// `(paused, has priorities)` of a queue (a row of `queue_conf`).
pub(crate) fn conf(c: &Connection, q: &str) -> Result<(bool, bool)> {
    use rusqlite::OptionalExtension;
    let p: Option<(i64, i64)> = c
        .prepare_cached("SELECT paused, prio FROM queue_conf WHERE queue = ?1")
        .map_err(sql)?
        .query_row(params![q], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(sql)?;
    Ok(p.map_or((false, false), |(a, b)| (a != 0, b != 0)))
}

/// Whether a job due at `due` is earlier than the head of the queue (consumers must be woken).
fn ahead_of_head(c: &Connection, q: &str, due: i64) -> Result<bool> {
    Ok(head(c, q, SCHEDULED)?.is_none_or(|h| due < h))
}

impl EmbeddedBackend {
    /// Opens (creating) the store in `dir`. A second process opening the same directory gets
    /// [`crate::Error::Locked`].
    pub fn open(dir: impl AsRef<Path>) -> std::result::Result<Self, crate::Error> {
        // Tests only (delayq's feature `test-clock`): the clock of the test that started this
        // process, when it gave one (DELAYQ_TEST_CLOCK); always the system clock otherwise.
        let clock: SharedClock = match delayq::clock::from_env() {
            Some(test) => Arc::new(test),
            None => Arc::new(SystemClock),
        };
        Self::open_with_clock(dir, clock)
    }

    /// Like [`EmbeddedBackend::open`], with the clock every due time and lease deadline is read
    /// from (tests pass a `delayq::TestClock` and move time forward instead of sleeping).
    pub fn open_with_clock(
        dir: impl AsRef<Path>,
        clock: SharedClock,
    ) -> std::result::Result<Self, crate::Error> {
        Ok(Self {
            inner: Arc::new(Inner {
                store: Store::open(dir.as_ref())?,
                clock,
                wakes: Mutex::default(),
                series: Mutex::default(),
                deliveries: Mutex::default(),
            }),
        })
    }

    /// The queue's delivery as an enqueue checks it (read from the store once).
    pub(crate) async fn delivery(&self, queue: &QueueName) -> Result<delayq::DeliveryRule> {
        if let Some(d) = self.inner.deliveries.lock().expect("lock").get(queue) {
            return Ok(*d);
        }
        let q = queue.to_string();
        let d = self.exec(move |c, _| crate::push::delivery(c, &q)).await?;
        self.remember_delivery(queue, d);
        Ok(d)
    }

    /// Replaces the queue's cached delivery (`configure` just wrote it).
    pub(crate) fn remember_delivery(&self, queue: &QueueName, d: delayq::DeliveryRule) {
        self.inner
            .deliveries
            .lock()
            .expect("lock")
            .insert(queue.clone(), d);
    }

    /// The store's clock, µs since the Unix epoch.
    pub(crate) fn clock_us(&self) -> u64 {
        self.inner.clock.now_us()
    }

    /// Adds `c` to the queue's series, at the store clock's now.
    pub(crate) fn count(&self, q: &QueueName, c: &Counts) {
        if c.is_empty() {
            return;
        }
        let now = self.inner.clock.now_us() / 1000;
        if let Ok(mut m) = self.inner.series.lock() {
            m.entry(q.clone()).or_default().record(now, c);
        }
    }

    /// The queue's series as of now.
    pub(crate) fn series_of(&self, q: &QueueName) -> QueueSeries {
        let now = self.inner.clock.now_us() / 1000;
        self.inner
            .series
            .lock()
            .ok()
            .and_then(|m| m.get(q).map(|r| r.series(now)))
            .unwrap_or_else(|| QueueSeries::collect(now, [], Counts::default()))
    }

    pub(crate) fn wake(&self, q: &QueueName) {
        if let Ok(map) = self.inner.wakes.lock()
            && let Some(tx) = map.get(q)
        {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Runs `f` as one atomic operation on the store thread, with the clock read there.
    pub(crate) async fn exec<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection, Now) -> Result<R> + Send + 'static,
    {
        let clock = self.inner.clock.clone();
        let (out, woken) = self
            .inner
            .store
            .exec(move |c| {
                let out = f(c, Now(clock.now_us()));
                // Queues that gained a batch's callback in this operation (batches.rs).
                let woken = batches::take_woken();
                out.map(|o| (o, woken))
            })
            .await?;
        for q in batches::queues(woken) {
            self.wake(&q);
        }
        Ok(out)
    }

    /// Runs `f`, then wakes `queue`'s consumers when it says so.
    pub(crate) async fn exec_waking<R, F>(&self, queue: &QueueName, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection, Now) -> Result<(R, bool)> + Send + 'static,
    {
        let (out, wake) = self.exec(f).await?;
        if wake {
            self.wake(queue);
        }
        Ok(out)
    }
}

impl Backend for EmbeddedBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let delivery = self.delivery(queue).await?;
        for j in &jobs {
            delivery.admits(queue.as_str(), j.target.is_some())?;
        }
        let q = queue.to_string();
        let out = self
            .exec_waking(queue, move |c, now| insert(c, &q, jobs, now.ms()))
            .await?;
        let created = out.iter().filter(|e| e.created).count() as u64;
        self.count(
            queue,
            &Counts {
                enqueued: created,
                ..Counts::default()
            },
        );
        Ok(out)
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        delayq::limits::check_acks(&req.acks)?;
        let q = queue.clone();
        let (batch, counts, wake) = self
            .exec(move |c, now| {
                let mut counts = Counts::default();
                let acks = ack_all(c, q.as_str(), &req.acks, now.ms())?;
                counts.completed = acks.iter().filter(|a| **a == AckOutcome::Acked).count() as u64;
                recover(c, q.as_str(), now.ms(), &mut counts)?;
                let want = req.max.min(MAX_CLAIM) as i64;
                let (paused, prio) = conf(c, q.as_str())?;
                let bucket = if want > 0 && !paused {
                    Bucket::read(c, q.as_str(), now.0)?
                } else {
                    None
                };
                let max = bucket.as_ref().map_or(want, |b| b.allow(want));
                let mut keyed = None;
                let jobs = if max > 0 && !paused {
                    if crate::keyed::is_keyed(c, q.as_str())? {
                        let mut t = crate::keyed::take(c, q.as_str(), max, now.ms(), now.0, prio)?;
                        let rows = std::mem::take(&mut t.rows);
                        keyed = Some(t);
                        lease_rows(c, &q, rows, req.lease, now.ms(), &mut counts)?
                    } else {
                        lease(c, &q, max, req.lease, now.ms(), prio, &mut counts)?
                    }
                } else {
                    Vec::new()
                };
                for j in &jobs {
                    counts.started += 1;
                    let late = (now.ms() as u64).saturating_sub(j.due_at_ms);
                    counts.lateness[lateness_bucket(late)] += 1;
                }
                let held = match &bucket {
                    Some(b) => b.after(c, q.as_str(), jobs.len(), want as usize, now.0)?,
                    None => Held::No,
                };
                let lease_head = || -> Result<Option<Duration>> {
                    Ok(head(c, q.as_str(), LEASED)?
                        .map(|t| Duration::from_micros(((t as u64) * 1000).saturating_sub(now.0))))
                };
                // Paused: come back when a lease expires (to recover it), or when resumed.
                // Held back by a limit: when a token is due, or a slot frees (woken).
                let next_due_in = match held {
                    _ if paused => lease_head()?,
                    Held::Slot => lease_head()?,
                    Held::Token(d) => Some(lease_head()?.map_or(d, |l| l.min(d))),
                    // A keyed queue: the next time a key's job may go (a key at its
                    // in-flight limit is woken by the next freed slot, marked waiting).
                    Held::No => match &keyed {
                        Some(k) => {
                            if k.slot_held {
                                throttle::wait_for_slot(c, q.as_str())?;
                            }
                            let d = k.next.map(|t| {
                                Duration::from_micros(((t as u64) * 1000).saturating_sub(now.0))
                            });
                            match (d, lease_head()?) {
                                (Some(a), Some(b)) => Some(a.min(b)),
                                (a, b) => a.or(b),
                            }
                        }
                        None => next_due(c, q.as_str(), now)?,
                    },
                };
                let freed = counts.completed + counts.retried + counts.dead > 0;
                let wake = freed && matches!(held, Held::No) && throttle::freed(c, q.as_str())?;
                let batch = ClaimBatch {
                    jobs,
                    acks,
                    next_due_in,
                };
                Ok((batch, counts, wake))
            })
            .await?;
        if wake {
            self.wake(queue);
        }
        self.count(queue, &counts);
        Ok(batch)
    }

    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        delayq::limits::check_acks(&acks)?;
        let q = queue.to_string();
        let out = self
            .exec_waking(queue, move |c, now| {
                let out = ack_all(c, &q, &acks, now.ms())?;
                let freed = out.contains(&AckOutcome::Acked) && throttle::freed(c, &q)?;
                Ok((out, freed))
            })
            .await?;
        let completed = out.iter().filter(|a| **a == AckOutcome::Acked).count() as u64;
        self.count(
            queue,
            &Counts {
                completed,
                ..Counts::default()
            },
        );
        Ok(out)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let q = queue.to_string();
        let rnd: f64 = rand::random();
        let out = self
            .exec_waking(queue, move |c, now| {
                let r = leased_row(c, &q, &lease)?;
                let freed = throttle::freed(c, &q)?;
                let now = now.ms();
                let err = truncate_error(&nack.error);
                if nack.dead || r.attempt >= r.max_attempts {
                    c.execute(
                        "UPDATE jobs SET state = ?5, score = ?3, token = 0, last_error = ?4 \
                     WHERE queue = ?1 AND id = ?2",
                        params![q, r.id, now, err, DEAD],
                    )
                    .map_err(sql)?;
                    ends::ended(c, &q, &r.id, r.batch.as_deref(), Ending::Dead, None, now)?;
                    let dead = NackOutcome::Dead {
                        failed_at_ms: now as u64,
                    };
                    return Ok((dead, freed));
                }
                let delay = nack
                    .retry_in
                    .unwrap_or_else(|| r.backoff.unwrap_or_default().delay(r.attempt as u32, rnd));
                let due = now + delay.as_millis() as i64;
                let wake = ahead_of_head(c, &q, due)?;
                c.execute(
                    "UPDATE jobs SET state = ?5, score = ?3, due = ?3, token = 0, last_error = ?4 \
                 WHERE queue = ?1 AND id = ?2",
                    params![q, r.id, due, err, SCHEDULED],
                )
                .map_err(sql)?;
                let retry = NackOutcome::Retrying {
                    due_at_ms: due as u64,
                };
                Ok((retry, wake || freed))
            })
            .await?;
        let mut counts = Counts::default();
        match out {
            NackOutcome::Retrying { .. } => counts.retried = 1,
            NackOutcome::Dead { .. } => counts.dead = 1,
        }
        self.count(queue, &counts);
        Ok(out)
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, lease_len: Duration) -> Result<u64> {
        delayq::job::validate_lease(lease_len)?;
        let q = queue.to_string();
        self.exec(move |c, now| {
            let deadline = now.ms() + lease_len.as_millis() as i64;
            let n = c
                .execute(
                    "UPDATE jobs SET score = ?4 WHERE queue = ?1 AND id = ?2 AND state = ?5 \
                     AND token = ?3 AND token != 0",
                    params![q, lease.id.as_str(), lease.token as i64, deadline, LEASED],
                )
                .map_err(sql)?;
            if n == 1 {
                Ok(deadline as u64)
            } else {
                Err(refused(c, &q, &lease)?)
            }
        })
        .await
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        let q = queue.to_string();
        self.exec_waking(queue, move |c, now| {
            let mut upd = c
                .prepare_cached(
                    "UPDATE jobs SET state = ?6, due = MIN(due, ?4), score = MIN(due, ?4), \
                     token = 0, attempt = MAX(attempt - ?5, 0) WHERE queue = ?1 AND id = ?2 \
                     AND state = ?7 AND token = ?3 AND token != 0",
                )
                .map_err(sql)?;
            let mut n = 0;
            for l in leases {
                let p = params![
                    q,
                    l.id.as_str(),
                    l.token as i64,
                    now.ms(),
                    i64::from(undo),
                    SCHEDULED,
                    LEASED
                ];
                n += upd.execute(p).map_err(sql)?;
            }
            Ok(((), n > 0))
        })
        .await
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let (q, id) = (queue.to_string(), id.to_string());
        self.exec_waking(queue, move |c, now| cancel(c, &q, &id, false, now.ms()))
            .await
    }

    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let (q, id) = (queue.to_string(), id.to_string());
        self.exec_waking(queue, move |c, now| cancel(c, &q, &id, true, now.ms()))
            .await
    }

    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let q = queue.to_string();
        self.exec(move |c, _| leases.iter().map(|l| cancelled_lease(c, &q, l)).collect())
            .await
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, schedule: Due) -> Result<u64> {
        let (q, idc) = (queue.to_string(), id.clone());
        self.exec_waking(queue, move |c, now| {
            let due = due_from(schedule, now.ms());
            match state_of(c, &q, idc.as_str())? {
                None => Err(Error::NotFound { id: idc }),
                Some(s) if s != SCHEDULED && s != WAITING => Err(Error::WrongState {
                    id: idc,
                    state: state(s)?,
                    expected: JobState::Scheduled,
                }),
                Some(s) => {
                    // A waiting job keeps waiting, due then once its dependencies end.
                    let wake = s == SCHEDULED && ahead_of_head(c, &q, due)?;
                    c.execute(
                        "UPDATE jobs SET score = ?3, due = ?3 WHERE queue = ?1 AND id = ?2",
                        params![q, idc.as_str(), due],
                    )
                    .map_err(sql)?;
                    Ok((due as u64, wake))
                }
            }
        })
        .await
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
