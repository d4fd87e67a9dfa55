//! The cold tier's rows in PostgreSQL (schema version 2): which queues keep far-future jobs
//! here (`delayq.cold_queues`), the jobs (`delayq.cold`, partitioned by due month; a job as the
//! body of an HTTP enqueue beside its due time), their counts, and the by-id operations the
//! store's wrapper ([`crate::Tiered`]) asks for. Every write of a job takes the advisory lock
//! of (queue, id) first, so an id is one job across partitions. The mover takes rows due
//! within a queue's window by deleting them (`FOR UPDATE SKIP LOCKED`): a cancel or reschedule
//! of a row being moved waits for the move's commit and then finds it gone — decided once.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use delayq::{Enqueued, JobId, JobInfo, JobState, NewJob, OnConflict, QueueName};
use delayq_wire::EnqueueRequest;

use crate::Error;

mod bulk;

/// How long a queue's `cold_after_ms` read from PostgreSQL is used before it is read again.
const SETTING_TTL: Duration = Duration::from_secs(5);

/// The cold tier of one database.
pub struct Cold {
    pool: deadpool_postgres::Pool,
    /// Every cold queue's window as last read, and when (`None`: never read).
    settings: Mutex<Option<(Instant, HashMap<QueueName, u64>)>>,
    /// Months (ms of their first instant) whose partition exists.
    months: Mutex<HashSet<i64>>,
}

/// A job as the cold tier keeps it.
#[derive(Debug, Clone)]
pub(crate) struct ColdJob {
    pub(crate) id: String,
    pub(crate) due_ms: u64,
    pub(crate) body: String,
    pub(crate) enqueued_ms: u64,
}

impl ColdJob {
    /// The job to enqueue into the store (due at its due time).
    pub(crate) fn job(&self, queue: &QueueName) -> Result<NewJob, Error> {
        let bad = |why: String| Error::BadRow {
            queue: queue.to_string(),
            id: self.id.clone(),
            why,
        };
        let req: EnqueueRequest =
            serde_json::from_str(&self.body).map_err(|e| bad(e.to_string()))?;
        let mut job = req.into_job(queue).map_err(|e| bad(e.message))?;
        job.due = delayq::Due::At(self.due_ms);
        job.on_conflict = OnConflict::Keep;
        Ok(job)
    }

    /// What `get` answers for it.
    pub(crate) fn info(&self, queue: &QueueName) -> Result<JobInfo, Error> {
        let job = self.job(queue)?;
        Ok(JobInfo {
            id: JobId::new(self.id.clone()).map_err(|e| Error::BadRow {
                queue: queue.to_string(),
                id: self.id.clone(),
                why: e.to_string(),
            })?,
            state: JobState::Scheduled,
            attempt: 0,
            max_attempts: job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS),
            due_at_ms: self.due_ms,
            created_at_ms: self.enqueued_ms,
            lease_deadline_ms: None,
            failed_at_ms: None,
            completed_at_ms: None,
            last_error: None,
            timeout_ms: job.timeout.map(|t| t.as_millis() as u64),
            expires_at_ms: match job.expires {
                Some(delayq::Expiry::At(ms)) => Some(ms),
                Some(delayq::Expiry::AfterDue(d)) => Some(self.due_ms + d.as_millis() as u64),
                None => None,
            },
            priority: job.priority.unwrap_or(delayq::DEFAULT_PRIORITY),
            target: job.target,
            trace: job.trace,
            key: job.key,
            payload: job.payload,
            result: None,
            dependencies: Vec::new(),
            dependents: Vec::new(),
            cold: true,
        })
    }
}

/// The ids of `$2` (text[]) the tier holds for queue `$1`, with their due times (ms): one
/// look-up per id, by the index led by the id (a subquery with `LIMIT` is not flattened into
/// a join, so no stale estimate of a growing partition turns it into a scan of the queue's
/// every row).
const BY_IDS: &str = "SELECT c.id, ceil(extract(epoch FROM c.due_at) * 1000)::int8 \
     FROM unnest($2::text[]) AS i(id) CROSS JOIN LATERAL \
       (SELECT id, due_at FROM delayq.cold WHERE queue = $1 AND id = i.id LIMIT 1) AS c";

/// A monthly partition of `delayq.cold`.
pub(crate) struct Partition {
    /// Its month (ms of its first instant, UTC).
    month: i64,
    /// Its table's name (`cold_YYYYMM`).
    name: String,
}

/// How far one move has read the tier: every partition before `part` holds none of its queue's
/// due rows that were free to take, nor does `part` below `due_ms`. A move's concurrent takes
/// share it, so each batch starts where the last stopped instead of stepping again over the
/// index entries of rows already moved; a row skipped because another take held it (and gave
/// it back) is found by the next move, which starts from the beginning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Frontier {
    /// The first partition (an index into the move's partitions) with rows left.
    part: usize,
    /// In it, the due time (ms, rounded up) the rows left start at, when known.
    due_ms: Option<u64>,
}

/// The row columns every read selects, in this order.
const COLUMNS: &str = "id, ceil(extract(epoch FROM due_at) * 1000)::int8, body, \
     (extract(epoch FROM enqueued_at) * 1000)::int8";

fn read(r: &tokio_postgres::Row) -> ColdJob {
    ColdJob {
        id: r.get(0),
        due_ms: r.get::<_, i64>(1).max(0) as u64,
        body: r.get(2),
        enqueued_ms: r.get::<_, i64>(3).max(0) as u64,
    }
}

/// The month (ms of its first instant, UTC) of a partition named `cold_YYYYMM`; `None` for any
/// other name.
fn partition_month(name: &str) -> Option<i64> {
    let digits = name.strip_prefix("cold_")?;
    if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (y, m): (i64, i64) = (digits[..4].parse().ok()?, digits[4..].parse().ok()?);
    if !(1..=12).contains(&m) {
        return None;
    }
    // Days from 1970-01-01 to the month's first day (Howard Hinnant's days_from_civil).
    let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146_097 + doe - 719_468) * 86_400_000)
}

/// The first instant (ms) of the UTC month of `ms`.
fn month_of(ms: u64) -> i64 {
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm), then back to the month's first day.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5; // 0-based day of the month
    (days - d) * 86_400_000
}

impl Cold {
    /// The cold tier of the database `pool` reaches (schema version 2 or later).
    pub fn new(pool: deadpool_postgres::Pool) -> Self {
        Self {
            pool,
            settings: Mutex::default(),
            months: Mutex::default(),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, Error> {
        self.pool
            .get()
            .await
            .map_err(|e| Error::Pool(e.to_string()))
    }

    /// Makes the partitions of the months of `dues` not known to exist, in `tx`; the months
    /// it asked for, to remember once `tx` commits ([`Cold::made`]: a rolled-back creation
    /// must be asked for again).
    async fn partitions(
        &self,
        tx: &impl deadpool_postgres::GenericClient,
        dues: impl IntoIterator<Item = u64>,
    ) -> Result<Vec<i64>, Error> {
        let months: HashSet<i64> = dues.into_iter().map(month_of).collect();
        let mut made = Vec::new();
        for m in months {
            let known = self.months.lock().map(|k| k.contains(&m)).unwrap_or(false);
            if !known {
                tx.execute(
                    "SELECT delayq.cold_partition(to_timestamp($1::float8 / 1000))",
                    &[&(m as f64)],
                )
                .await?;
                made.push(m);
            }
        }
        Ok(made)
    }

    /// Remembers months whose partitions a committed transaction made.
    fn made(&self, months: Vec<i64>) {
        if let Ok(mut k) = self.months.lock() {
            k.extend(months);
        }
    }

    /// The queue's `cold_after_ms` (`None`: it keeps no job cold), from the settings read at
    /// most every 5 s (all queues' in one query). While PostgreSQL cannot be reached the last
    /// ones read stand; a process that has never reached it knows of no cold queue.
    pub async fn cold_after(&self, queue: &QueueName) -> Result<Option<u64>, Error> {
        let fresh = self
            .settings
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|(at, _)| at.elapsed() < SETTING_TTL))
            .unwrap_or(false);
        if !fresh && let Err(e) = self.refresh().await {
            tracing::debug!("cold tier: reading the queues' windows: {e}");
            if let Ok(mut s) = self.settings.lock()
                && let Some((at, _)) = s.as_mut()
            {
                // Try again in a second, not at every call.
                *at = Instant::now()
                    .checked_sub(SETTING_TTL - Duration::from_secs(1))
                    .unwrap_or_else(Instant::now);
            }
        }
        Ok(self
            .settings
            .lock()
            .ok()
            .and_then(|s| s.as_ref().and_then(|(_, m)| m.get(queue).copied())))
    }

    /// Reads every queue's `cold_after_ms`.
    pub async fn refresh(&self) -> Result<(), Error> {
        let c = self.client().await?;
        let rows = c
            .query("SELECT queue, cold_after_ms FROM delayq.cold_queues", &[])
            .await?;
        let m: HashMap<QueueName, u64> = rows
            .iter()
            .filter_map(|r| {
                let q = QueueName::new(r.get::<_, String>(0)).ok()?;
                Some((q, r.get::<_, i64>(1).max(0) as u64))
            })
            .collect();
        if let Ok(mut s) = self.settings.lock() {
            *s = Some((Instant::now(), m));
        }
        Ok(())
    }

    /// Sets (or, with `None`, clears) the queue's `cold_after_ms`. Cleared, the mover moves
    /// its cold jobs into the store at once.
    pub async fn set_cold_after(&self, queue: &QueueName, v: Option<u64>) -> Result<(), Error> {
        let c = self.client().await?;
        match v {
            Some(ms) => {
                c.execute(
                    "INSERT INTO delayq.cold_queues (queue, cold_after_ms) VALUES ($1, $2) \
                     ON CONFLICT (queue) DO UPDATE SET cold_after_ms = excluded.cold_after_ms",
                    &[&queue.as_str(), &(ms as i64)],
                )
                .await?;
            }
            None => {
                c.execute(
                    "DELETE FROM delayq.cold_queues WHERE queue = $1",
                    &[&queue.as_str()],
                )
                .await?;
            }
        }
        self.refresh().await
    }

    /// The ids of `ids` the cold tier holds for `queue`, with their due times.
    pub(crate) async fn due_of(
        &self,
        queue: &QueueName,
        ids: &[String],
    ) -> Result<HashMap<String, u64>, Error> {
        let c = self.client().await?;
        let rows = c.query(BY_IDS, &[&queue.as_str(), &ids]).await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1).max(0) as u64))
            .collect())
    }

    /// Writes `jobs` (each with its id and absolute due time) to the cold tier: a job whose id
    /// the tier holds is not written (`created: false`) unless it replaces (`on_conflict:
    /// replace`: its body and due time change). One transaction.
    pub(crate) async fn put(
        &self,
        queue: &QueueName,
        jobs: Vec<(NewJob, u64)>,
    ) -> Result<Vec<Enqueued>, Error> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        let made = self
            .partitions(&tx, jobs.iter().map(|(_, due)| *due))
            .await?;
        let mut ids: Vec<String> = jobs
            .iter()
            .map(|(j, _)| j.id.as_ref().map(|i| i.to_string()).unwrap_or_default())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        // In one order, so two writers of overlapping batches never deadlock.
        tx.execute(
            "SELECT delayq.cold_lock($1, i) FROM unnest($2::text[]) AS i ORDER BY i",
            &[&queue.as_str(), &sorted],
        )
        .await?;
        let existing: HashMap<String, u64> = tx
            .query(BY_IDS, &[&queue.as_str(), &sorted])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1).max(0) as u64))
            .collect();
        let mut out = Vec::with_capacity(jobs.len());
        let (mut new_ids, mut new_dues, mut new_bodies) = (Vec::new(), Vec::new(), Vec::new());
        let mut new_keys: Vec<Option<String>> = Vec::new();
        // Ids written by this batch (an id twice in one batch: the first is written).
        let mut written: HashMap<String, u64> = HashMap::new();
        for ((job, due), id) in jobs.into_iter().zip(ids.drain(..)) {
            let replace = job.on_conflict == OnConflict::Replace;
            let job_id = job.id.clone().unwrap_or_else(JobId::generate);
            let key: Option<String> = job.key.as_ref().map(|k| k.to_string());
            if let Some(&was) = written.get(&id) {
                out.push(Enqueued {
                    id: job_id,
                    due_at_ms: was,
                    created: false,
                    replaced: false,
                    existing: None,
                });
                continue;
            }
            match existing.get(&id).copied() {
                Some(was) if !replace => out.push(Enqueued {
                    id: job_id,
                    due_at_ms: was,
                    created: false,
                    replaced: false,
                    existing: None,
                }),
                Some(_) => {
                    let body = body_of(job)?;
                    tx.execute(
                        "DELETE FROM delayq.cold WHERE queue = $1 AND id = $2",
                        &[&queue.as_str(), &id],
                    )
                    .await?;
                    tx.execute(
                        "INSERT INTO delayq.cold (queue, id, due_at, body, key) \
                         VALUES ($1, $2, to_timestamp($3::float8 / 1000), $4, $5)",
                        &[&queue.as_str(), &id, &(due as f64), &body, &key],
                    )
                    .await?;
                    written.insert(id, due);
                    out.push(Enqueued {
                        id: job_id,
                        due_at_ms: due,
                        created: false,
                        replaced: true,
                        existing: None,
                    });
                }
                None => {
                    written.insert(id.clone(), due);
                    new_ids.push(id);
                    new_dues.push(due as f64);
                    new_keys.push(key);
                    new_bodies.push(body_of(job)?);
                    out.push(Enqueued {
                        id: job_id,
                        due_at_ms: due,
                        created: true,
                        replaced: false,
                        existing: None,
                    });
                }
            }
        }
        if !new_ids.is_empty() {
            tx.execute(
                "INSERT INTO delayq.cold (queue, id, due_at, body, key) \
                 SELECT $1, i, to_timestamp(d / 1000), b, k \
                 FROM unnest($2::text[], $3::float8[], $4::text[], $5::text[]) AS t(i, d, b, k)",
                &[&queue.as_str(), &new_ids, &new_dues, &new_bodies, &new_keys],
            )
            .await?;
            count(&tx, queue, new_ids.len() as i64).await?;
        }
        tx.commit().await?;
        self.made(made);
        Ok(out)
    }

    /// The job, when the cold tier holds it.
    pub(crate) async fn get(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> Result<Option<JobInfo>, Error> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                &format!("SELECT {COLUMNS} FROM delayq.cold WHERE queue = $1 AND id = $2"),
                &[&queue.as_str(), &id.as_str()],
            )
            .await?;
        row.map(|r| read(&r).info(queue)).transpose()
    }

    /// Deletes the job from the cold tier; whether it was there. A job being moved is waited
    /// for and then not found (it is in the store).
    pub(crate) async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<bool, Error> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM delayq.cold WHERE queue = $1 AND id = $2",
                &[&queue.as_str(), &id.as_str()],
            )
            .await?;
        if n > 0 {
            count(&tx, queue, -(n as i64)).await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    /// Takes the job out of the cold tier to be written elsewhere (a reschedule into the
    /// window): the transaction that deleted it, and the job. The caller finishes it once the
    /// store has the job ([`Cold::taken`]).
    pub(crate) async fn take(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> Result<Option<(Open, ColdJob)>, Error> {
        let open = Open::begin(self.client().await?).await?;
        let row = open
            .conn()
            .query_opt(
                &format!(
                    "DELETE FROM delayq.cold WHERE queue = $1 AND id = $2 RETURNING {COLUMNS}"
                ),
                &[&queue.as_str(), &id.as_str()],
            )
            .await?;
        match row {
            Some(r) => Ok(Some((open, read(&r)))),
            None => {
                open.finish("ROLLBACK").await?;
                Ok(None)
            }
        }
    }

    /// Finishes [`Cold::take`]: the job left the tier (`true`: commit) or stays (`false`).
    pub(crate) async fn taken(queue: &QueueName, open: Open, commit: bool) -> Result<(), Error> {
        Cold::taken_many(queue, open, commit.then_some(1)).await
    }

    /// Moves the job to `due_ms` within the cold tier; whether it was there.
    pub(crate) async fn reschedule(
        &self,
        queue: &QueueName,
        id: &JobId,
        due_ms: u64,
    ) -> Result<bool, Error> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        let made = self.partitions(&tx, [due_ms]).await?;
        let n = tx
            .execute(
                "UPDATE delayq.cold SET due_at = to_timestamp($3::float8 / 1000) \
                 WHERE queue = $1 AND id = $2",
                &[&queue.as_str(), &id.as_str(), &(due_ms as f64)],
            )
            .await?;
        tx.commit().await?;
        self.made(made);
        Ok(n > 0)
    }

    /// Up to `limit` of the queue's cold jobs after `after` (its `(due ms, id)`), in due order.
    pub(crate) async fn list_after(
        &self,
        queue: &QueueName,
        after: Option<(u64, String)>,
        limit: i64,
    ) -> Result<Vec<JobInfo>, Error> {
        let c = self.client().await?;
        let (score, id) = after.unwrap_or((0, String::new()));
        let rows = c
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM delayq.cold WHERE queue = $1 \
                     AND due_at >= to_timestamp($2::float8 / 1000) - interval '1 millisecond' \
                     AND (ceil(extract(epoch FROM due_at) * 1000)::int8, id) > ($3, $4) \
                     ORDER BY due_at, id LIMIT $5"
                ),
                &[
                    &queue.as_str(),
                    &(score as f64),
                    &(score as i64),
                    &id,
                    &limit,
                ],
            )
            .await?;
        rows.iter().map(|r| read(r).info(queue)).collect()
    }

    /// How many jobs of the queue the cold tier holds.
    pub async fn count(&self, queue: &QueueName) -> Result<u64, Error> {
        let c = self.client().await?;
        let n: Option<i64> = c
            .query_one(
                "SELECT sum(n)::int8 FROM delayq.cold_counts WHERE queue = $1",
                &[&queue.as_str()],
            )
            .await?
            .get(0);
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// The queues with cold jobs or a cold setting, each with its window (ms; `None`: the
    /// setting was cleared — every job moves).
    pub(crate) async fn queues(&self) -> Result<Vec<(QueueName, Option<u64>)>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT q.queue, s.cold_after_ms FROM \
                   (SELECT queue FROM delayq.cold_counts GROUP BY queue HAVING sum(n) > 0 \
                    UNION SELECT queue FROM delayq.cold_queues) AS q \
                 LEFT JOIN delayq.cold_queues s USING (queue)",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                let q = QueueName::new(r.get::<_, String>(0)).ok()?;
                let w: Option<i64> = r.get(1);
                Some((q, w.map(|w| w.max(0) as u64)))
            })
            .collect())
    }

    /// Takes up to `limit` jobs of `queue` due within `window_ms` of PostgreSQL's clock (all,
    /// with `None`), oldest first, by deleting them in a transaction the caller commits once
    /// the store has them ([`Cold::taken_many`]). Reads from `frontier` on (the rows a move's
    /// earlier takes left behind them are taken or being taken) and moves it past what it took.
    pub(crate) async fn take_due(
        &self,
        queue: &QueueName,
        window_ms: Option<u64>,
        parts: &[Partition],
        limit: i64,
        frontier: &Mutex<Frontier>,
    ) -> Result<(Open, Vec<ColdJob>), Error> {
        // Each partition's due rows are read down its `(queue, due_at)` index, in order, up to
        // the batch: a partition that grew since it was last analyzed (the tier's normal
        // state) makes the planner believe few rows are due and read them all by a bitmap
        // and sort them — every batch reading the whole due part of the partition (a 5,000-job
        // batch took 350 ms of a 5,000,000-job tier). An index scan also marks the index
        // entries of rows moved before as dead, so the next batch steps over them instead of
        // visiting their heap rows again.
        let open = Open::begin_with(
            self.client().await?,
            "BEGIN; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off",
        )
        .await?;
        let window: Option<f64> = window_ms.map(|w| w as f64);
        let from = *frontier.lock().expect("the frontier's lock");
        // Partition by partition, oldest month first, up to the month the window reaches (a
        // day past it on this host's clock: the rows are chosen on PostgreSQL's): each row
        // found by its index and deleted by its address, not looked up again.
        let last = window_ms.map(|w| month_of(delayq::job::system_now_ms() + w + 86_400_000));
        let mut reached = from;
        let mut jobs: Vec<ColdJob> = Vec::new();
        for (i, part) in parts.iter().enumerate().skip(from.part) {
            let room = limit - jobs.len() as i64;
            if room <= 0 || last.is_some_and(|l| part.month > l) {
                break;
            }
            // Where an earlier take of this move stopped in this partition (a millisecond
            // early: the due times read are rounded up).
            let floor = (i == from.part)
                .then_some(from.due_ms)
                .flatten()
                .map(|d| d.saturating_sub(1) as f64);
            let rows = open
                .conn()
                .query(
                    &format!(
                        "DELETE FROM delayq.\"{name}\" WHERE ctid = ANY(ARRAY( \
                           SELECT ctid FROM delayq.\"{name}\" \
                           WHERE queue = $1 AND ($2::float8 IS NULL \
                                 OR due_at < now() + $2::float8 * interval '1 millisecond') \
                             AND ($4::float8 IS NULL \
                                 OR due_at >= to_timestamp($4::float8 / 1000)) \
                           ORDER BY due_at LIMIT $3 FOR UPDATE SKIP LOCKED)) \
                         RETURNING {COLUMNS}",
                        name = part.name
                    ),
                    &[&queue.as_str(), &window, &room, &floor],
                )
                .await?;
            let got = rows.len() as i64;
            jobs.extend(rows.iter().map(read));
            reached = if got < room {
                // Every due row of this partition not locked by another take is taken.
                Frontier {
                    part: i + 1,
                    due_ms: None,
                }
            } else {
                Frontier {
                    part: i,
                    due_ms: jobs.iter().map(|j| j.due_ms).max(),
                }
            };
        }
        {
            let mut f = frontier.lock().expect("the frontier's lock");
            *f = (*f).max(reached);
        }
        jobs.sort_by_key(|j| j.due_ms);
        Ok((open, jobs))
    }

    /// The tier's partitions, oldest month first (one catalog read for a whole move).
    pub(crate) async fn partitions_now(&self) -> Result<Vec<Partition>, Error> {
        let c = self.client().await?;
        let mut parts: Vec<Partition> = c
            .query(
                "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
                 WHERE i.inhparent = 'delayq.cold'::regclass",
                &[],
            )
            .await?
            .iter()
            .filter_map(|r| {
                let name: String = r.get(0);
                partition_month(&name).map(|month| Partition { month, name })
            })
            .collect();
        parts.sort_by_key(|p| p.month);
        Ok(parts)
    }

    /// Finishes [`Cold::take_due`]: `n` jobs left the tier (commit), or none did (rollback).
    pub(crate) async fn taken_many(
        queue: &QueueName,
        open: Open,
        n: Option<i64>,
    ) -> Result<(), Error> {
        match n {
            Some(n) => {
                if n > 0 {
                    open.conn()
                        .execute(COUNT, &[&queue.as_str(), &slot(), &-n])
                        .await?;
                }
                open.finish("COMMIT").await
            }
            None => open.finish("ROLLBACK").await,
        }
    }
}

/// A transaction a take leaves open for its caller, who commits it once the store has the
/// jobs. Dropped unfinished — an error returned early, the caller's future cancelled — its
/// connection leaves the pool and closes, so PostgreSQL rolls the transaction back: a pooled
/// connection never hands a half-done take (rows deleted, not yet in the store) to its next
/// user, whose commit would make them gone for good.
pub(crate) struct Open(Option<deadpool_postgres::Object>);

impl Open {
    /// Begins a transaction on `c`.
    pub(crate) async fn begin(c: deadpool_postgres::Object) -> Result<Self, Error> {
        Self::begin_with(c, "BEGIN").await
    }

    /// Begins a transaction on `c` with `sql` (`BEGIN` and what the transaction sets).
    async fn begin_with(c: deadpool_postgres::Object, sql: &str) -> Result<Self, Error> {
        let open = Open(Some(c));
        open.conn().batch_execute(sql).await?;
        Ok(open)
    }

    /// The connection, inside the transaction.
    pub(crate) fn conn(&self) -> &deadpool_postgres::Object {
        self.0
            .as_ref()
            .expect("an open transaction has its connection")
    }

    /// Ends the transaction with `sql` (`COMMIT` or `ROLLBACK`); the connection goes back to
    /// the pool only once that has answered.
    async fn finish(mut self, sql: &str) -> Result<(), Error> {
        self.conn().batch_execute(sql).await?;
        drop(self.0.take());
        Ok(())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            // Out of the pool: dropped, the client closes its connection.
            drop(deadpool_postgres::Object::take(c));
        }
    }
}

/// Adds `$3` to the queue's count in slot `$2`.
const COUNT: &str = "INSERT INTO delayq.cold_counts (queue, slot, n) VALUES ($1, $2, $3) \
     ON CONFLICT (queue, slot) DO UPDATE SET n = delayq.cold_counts.n + excluded.n";

/// A random count slot of 16: concurrent writers of one queue rarely share a row.
fn slot() -> i16 {
    (rand::random::<u16>() % 16) as i16
}

async fn count(
    tx: &tokio_postgres::Transaction<'_>,
    queue: &QueueName,
    n: i64,
) -> Result<(), Error> {
    tx.execute(COUNT, &[&queue.as_str(), &slot(), &n]).await?;
    Ok(())
}

/// The body a cold row keeps: the job as an HTTP enqueue's body.
fn body_of(job: NewJob) -> Result<String, Error> {
    serde_json::to_string(&EnqueueRequest::from_job(job)).map_err(|e| Error::Pool(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::month_of;

    #[test]
    fn a_partition_name_is_its_month() {
        use super::partition_month;
        assert_eq!(partition_month("cold_202612"), Some(1_796_083_200_000));
        assert_eq!(partition_month("cold_202402"), Some(1_706_745_600_000));
        assert_eq!(partition_month("cold_197001"), Some(0));
        assert_eq!(partition_month("cold_202613"), None);
        assert_eq!(partition_month("cold_2026x2"), None);
        assert_eq!(partition_month("cold_queues"), None);
        // The month a due time falls in has the partition named for it.
        assert_eq!(
            partition_month("cold_202612"),
            Some(month_of(1_796_497_200_000))
        );
        assert_eq!(
            partition_month("cold_202402"),
            Some(month_of(1_709_251_199_999))
        );
    }

    #[test]
    fn a_month_starts_on_its_first_day_utc() {
        // 2026-12-05T19:00:00Z → 2026-12-01T00:00:00Z.
        assert_eq!(month_of(1_796_497_200_000), 1_796_083_200_000);
        // 2024-02-29T23:59:59.999Z → 2024-02-01.
        assert_eq!(month_of(1_709_251_199_999), 1_706_745_600_000);
        // 1970-01-01.
        assert_eq!(month_of(0), 0);
    }
}
