//! The relay: moves committed outbox rows into the store. Every `delayq serve` and `delayq
//! worker` given `--postgres` runs one; they need no leader. A batch is one PostgreSQL
//! transaction: take the oldest rows no other relay holds (`FOR UPDATE SKIP LOCKED`), enqueue
//! them by id (dependencies first), delete them, commit. A relay killed between the store's
//! write and the commit leaves its rows unlocked (PostgreSQL ends the transaction with the
//! connection) and another relay enqueues them again: the id refuses what is already there,
//! and a job due soon keeps its id refused after it ends ([`crate::outbox::REPLAY_GUARD_MS`]).
//! A row the store refuses moves to `delayq.rejected`; a store that cannot be reached leaves
//! every row where it is. LISTEN wakes the relay on each commit; a sweep every second catches
//! a notification lost with a connection.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::{Backend, DepRef, Inspect, NewJob, Producer, QueueName, Retention};
use tokio::sync::Notify;
use tokio_postgres::Client;

use crate::outbox::{OutboxRow, PUT_BACK, REJECT, TAKE, guard};
use crate::{CHANNEL, Error, PgOptions};

/// Rows one batch takes.
const BATCH: i64 = 1000;

/// What a relay has done since it started, and what is wrong now.
#[derive(Clone, Default)]
pub struct RelayStatus(Arc<Mutex<StatusInner>>);

#[derive(Default)]
struct StatusInner {
    problem: Option<String>,
    totals: RelayTotals,
}

/// Counts of a relay's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayTotals {
    /// Rows enqueued into the store (an id the store already held counts: its row is done).
    pub relayed: u64,
    /// Rows the store refused, moved to `delayq.rejected`.
    pub rejected: u64,
    /// Rows left for a later batch because a job they wait for was still in the outbox.
    pub deferred: u64,
}

impl RelayStatus {
    /// What keeps the relay from working now (PostgreSQL unreachable, the store failing),
    /// or `None` while it works.
    pub fn problem(&self) -> Option<String> {
        self.0.lock().ok().and_then(|s| s.problem.clone())
    }

    /// The counts so far.
    pub fn totals(&self) -> RelayTotals {
        self.0.lock().map(|s| s.totals).unwrap_or_default()
    }

    fn set_problem(&self, p: Option<String>) {
        let up = p.is_none();
        if let Ok(mut s) = self.0.lock() {
            if s.problem != p {
                match &p {
                    Some(why) => tracing::warn!("postgres relay: {why}"),
                    None if s.problem.is_some() => tracing::info!("postgres relay: working again"),
                    None => {}
                }
            }
            s.problem = p;
        }
        metrics::gauge!("delayq_postgres_up").set(if up { 1.0 } else { 0.0 });
    }

    fn add(&self, b: &BatchOutcome) {
        if let Ok(mut s) = self.0.lock() {
            s.totals.relayed += b.relayed as u64;
            s.totals.rejected += b.rejected as u64;
            s.totals.deferred += b.deferred as u64;
        }
        metrics::counter!("delayq_relay_jobs_total", "outcome" => "relayed")
            .increment(b.relayed as u64);
        metrics::counter!("delayq_relay_jobs_total", "outcome" => "rejected")
            .increment(b.rejected as u64);
    }
}

/// What one batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Rows taken.
    pub taken: usize,
    /// Rows enqueued and deleted.
    pub relayed: usize,
    /// Rows moved to `delayq.rejected`.
    pub rejected: usize,
    /// Rows left in the outbox for later (a dependency still there).
    pub deferred: usize,
}

/// Moves committed `delayq.outbox` rows into `backend`.
pub struct Relay<B> {
    backend: B,
    pg: PgOptions,
    status: RelayStatus,
    sweep: Duration,
    /// Each queue's retention as last read, and when (read again after [`RETENTION_TTL`]).
    retention: Mutex<HashMap<QueueName, (Instant, Retention)>>,
}

/// How long a queue's retention read by the relay is used before it is read again.
const RETENTION_TTL: Duration = Duration::from_secs(5);

impl<B: Backend + Inspect + Clone + Send + Sync + 'static> Relay<B> {
    /// A relay into `backend` from the database `pg` names.
    pub fn new(backend: B, pg: PgOptions) -> Self {
        Self {
            backend,
            pg,
            status: RelayStatus::default(),
            sweep: Duration::from_secs(1),
            retention: Mutex::default(),
        }
    }

    /// How often it looks for rows without a notification (default 1 s).
    pub fn sweep_every(mut self, every: Duration) -> Self {
        self.sweep = every;
        self
    }

    /// Its status, to show in `/readyz`, `delayq doctor` and the metrics.
    pub fn status(&self) -> RelayStatus {
        self.status.clone()
    }

    /// Runs until `stop` resolves: connects (migrating the schema), listens, relays; on a lost
    /// connection or a failing store it says so in its status and tries again.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let notify = Arc::new(Notify::new());
        let mut backoff = Duration::from_millis(100);
        loop {
            let connected = tokio::select! {
                c = self.connect(notify.clone()) => c,
                () = &mut stop => return,
            };
            let mut client = match connected {
                Ok(c) => c,
                Err(e) => {
                    self.status.set_problem(Some(format!(
                        "cannot reach {}: {e}; committed jobs wait in delayq.outbox",
                        self.pg.masked()
                    )));
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = &mut stop => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            backoff = Duration::from_millis(100);
            loop {
                match self.drain(&mut client).await {
                    Ok(()) => self.status.set_problem(None),
                    Err(e) if client.is_closed() => {
                        self.status.set_problem(Some(format!(
                            "lost {}: {e}; committed jobs wait in delayq.outbox",
                            self.pg.masked()
                        )));
                        break;
                    }
                    Err(e) => self.status.set_problem(Some(format!(
                        "relaying: {e}; the rows stay in delayq.outbox and are tried again"
                    ))),
                }
                tokio::select! {
                    () = notify.notified() => {}
                    () = tokio::time::sleep(self.sweep) => {}
                    () = &mut stop => return,
                }
            }
        }
    }

    async fn connect(&self, notify: Arc<Notify>) -> Result<Client, Error> {
        let mut client = self.pg.connect(Some(notify)).await?;
        crate::migrate(&mut client).await?;
        // A relay that stops answering mid-batch (a paused process, a lost peer) does not hold
        // its rows for longer than this.
        client
            .batch_execute(&format!(
                "LISTEN {CHANNEL}; SET idle_in_transaction_session_timeout = '30s'"
            ))
            .await?;
        Ok(client)
    }

    /// Relays batches until the outbox has no row this relay can take now.
    pub async fn drain(&self, client: &mut Client) -> Result<(), Error> {
        loop {
            let b = self.relay_batch(client).await?;
            self.status.add(&b);
            if b.taken < BATCH as usize || b.relayed + b.rejected == 0 {
                return Ok(());
            }
        }
    }

    /// One batch: take, enqueue, delete, commit.
    pub async fn relay_batch(&self, client: &mut Client) -> Result<BatchOutcome, Error> {
        let tx = client.transaction().await?;
        let mut rows: Vec<OutboxRow> = tx
            .query(TAKE, &[&BATCH])
            .await?
            .iter()
            .map(OutboxRow::from_row)
            .collect();
        rows.sort_by_key(|r| r.seq);
        let mut out = BatchOutcome {
            taken: rows.len(),
            ..BatchOutcome::default()
        };
        if rows.is_empty() {
            return Ok(out);
        }
        let mut rejected: Vec<(i64, String)> = Vec::new();
        let mut jobs: Vec<(i64, QueueName, NewJob)> = Vec::new();
        for row in &rows {
            match row.job() {
                Ok((q, job)) => jobs.push((row.seq, q, job)),
                Err(why) => rejected.push((row.seq, why)),
            }
        }
        let deferred = self.still_waiting(&tx, &jobs).await?;
        jobs.retain(|(seq, _, _)| !deferred.contains(seq));
        let jobs = dependencies_first(jobs, &mut rejected);
        let mut relayed: Vec<i64> = Vec::with_capacity(jobs.len());
        let now = delayq::job::system_now_ms();
        // Consecutive jobs of one queue go in one enqueue (one round trip per shard).
        let mut run: Vec<(i64, NewJob)> = Vec::new();
        let mut run_queue: Option<QueueName> = None;
        for (seq, q, mut job) in jobs {
            if run_queue.as_ref() != Some(&q) || run.len() >= delayq::limits::MAX_BATCH {
                if let Some(rq) = run_queue.take() {
                    self.enqueue_run(&rq, std::mem::take(&mut run), &mut relayed, &mut rejected)
                        .await?;
                }
                run_queue = Some(q.clone());
            }
            let r = self.retention_of(&q).await?;
            guard(&mut job, r, now);
            run.push((seq, job));
        }
        if let Some(rq) = run_queue.take() {
            self.enqueue_run(&rq, run, &mut relayed, &mut rejected)
                .await?;
        }
        let row = |seq: i64| rows.iter().find(|r| r.seq == seq);
        for seq in &deferred {
            if let Some(r) = row(*seq) {
                r.write(&tx, PUT_BACK, None).await?;
            }
        }
        for (seq, why) in &rejected {
            tracing::warn!("postgres relay: outbox row {seq} refused: {why}");
            if let Some(r) = row(*seq) {
                r.write(&tx, REJECT, Some(why)).await?;
            }
        }
        tx.commit().await?;
        out.relayed = relayed.len();
        out.rejected = rejected.len();
        out.deferred = deferred.len();
        Ok(out)
    }

    /// The queue's retention (the relay's guard keeps it), read at most every
    /// [`RETENTION_TTL`].
    async fn retention_of(&self, q: &QueueName) -> Result<Retention, Error> {
        let known = self
            .retention
            .lock()
            .ok()
            .and_then(|m| m.get(q).copied())
            .filter(|(at, _)| at.elapsed() < RETENTION_TTL);
        if let Some((_, r)) = known {
            return Ok(r);
        }
        let r = self.backend.settings(q).await?.retention;
        if let Ok(mut m) = self.retention.lock() {
            m.insert(q.clone(), (Instant::now(), r));
        }
        Ok(r)
    }

    /// Enqueues one queue's consecutive jobs; a refusal of the whole call is narrowed to the
    /// jobs refused (each tried alone). An unreachable store fails the batch.
    async fn enqueue_run(
        &self,
        queue: &QueueName,
        run: Vec<(i64, NewJob)>,
        relayed: &mut Vec<i64>,
        rejected: &mut Vec<(i64, String)>,
    ) -> Result<(), Error> {
        let producer = Producer::new(self.backend.clone(), queue.clone());
        let (seqs, jobs): (Vec<i64>, Vec<NewJob>) = run.into_iter().unzip();
        match producer.enqueue_batch(jobs.clone()).await {
            Ok(_) => relayed.extend(seqs),
            Err(e) if refused(&e) => {
                for (seq, job) in seqs.into_iter().zip(jobs) {
                    match producer.enqueue(job).await {
                        Ok(_) => relayed.push(seq),
                        Err(e) if refused(&e) => rejected.push((seq, e.to_string())),
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    /// The rows (of `jobs`) that wait for a job still in the outbox outside this batch —
    /// committed but not relayed yet, or in another relay's batch: relayed later, once it
    /// is in the store (a dependency not in the store would count as ended).
    async fn still_waiting(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        jobs: &[(i64, QueueName, NewJob)],
    ) -> Result<Vec<i64>, Error> {
        let in_batch: std::collections::HashSet<DepRef> = jobs
            .iter()
            .filter_map(|(_, q, j)| {
                j.id.clone().map(|id| DepRef {
                    queue: q.clone(),
                    id,
                })
            })
            .collect();
        let mut queues: Vec<String> = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        let mut owners: Vec<i64> = Vec::new();
        for (seq, _, job) in jobs {
            for d in job.depends.iter().flat_map(|d| &d.on) {
                if !in_batch.contains(d) {
                    queues.push(d.queue.to_string());
                    ids.push(d.id.to_string());
                    owners.push(*seq);
                }
            }
        }
        if owners.is_empty() {
            return Ok(Vec::new());
        }
        let rows = tx
            .query(
                "SELECT d.owner FROM unnest($1::text[], $2::text[], $3::int8[]) AS d(queue, id, owner) \
                 WHERE EXISTS (SELECT 1 FROM delayq.outbox o \
                               WHERE o.queue = d.queue AND o.id = d.id)",
                &[&queues, &ids, &owners],
            )
            .await?;
        let mut waiting: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        waiting.sort_unstable();
        waiting.dedup();
        Ok(waiting)
    }
}

/// Whether the store refused the jobs (nothing written, retrying the same cannot help), as
/// opposed to failing to answer.
fn refused(e: &delayq::Error) -> bool {
    matches!(
        e,
        delayq::Error::Invalid(_) | delayq::Error::Conflict(_) | delayq::Error::WrongState { .. }
    )
}

/// `jobs` in an order where each comes after the jobs of the batch it waits for (stable
/// otherwise); the jobs of a cycle are moved to `rejected`.
fn dependencies_first(
    mut jobs: Vec<(i64, QueueName, NewJob)>,
    rejected: &mut Vec<(i64, String)>,
) -> Vec<(i64, QueueName, NewJob)> {
    if jobs.iter().all(|(_, _, j)| j.depends.is_none()) {
        return jobs;
    }
    loop {
        let at: HashMap<DepRef, usize> = jobs
            .iter()
            .enumerate()
            .filter_map(|(i, (_, q, j))| {
                j.id.clone().map(|id| {
                    (
                        DepRef {
                            queue: q.clone(),
                            id,
                        },
                        i,
                    )
                })
            })
            .collect();
        let waits_for: Vec<Vec<usize>> = jobs
            .iter()
            .map(|(_, _, j)| {
                j.depends
                    .iter()
                    .flat_map(|d| &d.on)
                    .filter_map(|d| at.get(d).copied())
                    .collect()
            })
            .collect();
        match delayq::deps::topological(&waits_for) {
            Ok(order) => {
                let mut slots: Vec<Option<_>> = jobs.into_iter().map(Some).collect();
                return order.into_iter().filter_map(|i| slots[i].take()).collect();
            }
            Err(i) => {
                let (seq, q, j) = jobs.remove(i);
                let id = j.id.as_ref().map_or("", |i| i.as_str());
                rejected.push((seq, format!("{q}/{id} is in a cycle of dependencies")));
            }
        }
    }
}
