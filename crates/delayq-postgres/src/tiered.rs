//! [`Tiered`]: a store with a cold tier in PostgreSQL beside it. A queue given a
//! `cold_after_ms` keeps each job due further ahead than that in the cold tier ([`Cold`]), not
//! the store; [`Tiered::move_due`] (run every second by [`Tiered::run_mover`]) moves it into
//! the store once it is due within the window, so the store holds only the next window of
//! jobs. Enqueue, get, cancel, reschedule and the counts see a job wherever it is; every other
//! call goes to the store. Jobs that wait for others or join a batch stay in the store.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Due, Enqueued, Inspect,
    JobId, JobInfo, JobKey, JobPage, KeyHold, LeaseRef, ListRequest, ListState, Nack, NackOutcome,
    NewJob, Producer, QueueName, QueueSeries, QueueSettings, QueueStats, Result, Wakeups,
};

use crate::Error;
use crate::cold::Cold;
use crate::outbox::guard;

/// Jobs one move takes per queue and transaction, and writes into the store in one call: the
/// store runs nothing else while it writes them (~20 ms for 2,000 beside PostgreSQL on one
/// CPU), so a backlog's move does not hold other queues' claims for long; larger batches moved
/// little faster (5,000,000-job tier, 1,000,000 moved: 75k jobs/s at 1,000, 83k at 2,000, 89k at
/// 5,000, 81k at 10,000).
const MOVE_BATCH: i64 = 2000;

/// Batches of one queue a mover moves at once.
const MOVERS: usize = 2;

/// A store (`B`) with a cold tier beside it, or without one ([`Tiered::plain`]: every call
/// is the store's). Clones share the tier.
#[derive(Clone)]
pub struct Tiered<B> {
    inner: B,
    cold: Option<Arc<Cold>>,
}

fn now_ms() -> u64 {
    delayq::job::system_now_ms()
}

fn store_err(e: Error) -> delayq::Error {
    match e {
        Error::Store(e) => e,
        other => delayq::Error::Unavailable(other.to_string()),
    }
}

/// The absolute due time of `due` at `now`.
fn due_ms(due: Due, now: u64) -> u64 {
    match due {
        Due::Now => now,
        Due::Delay(d) => now + d.as_millis() as u64,
        Due::At(ms) => ms,
    }
}

impl<B: Backend + Inspect + Clone + Send + Sync + 'static> Tiered<B> {
    /// `inner` with the cold tier of the database `pool` reaches (its schema migrated).
    pub fn new(inner: B, pool: deadpool_postgres::Pool) -> Self {
        Self {
            inner,
            cold: Some(Arc::new(Cold::new(pool))),
        }
    }

    /// `inner` alone: no queue keeps jobs cold, a queue's `cold_after_ms` is refused.
    pub fn plain(inner: B) -> Self {
        Self { inner, cold: None }
    }

    /// The store beneath.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// The cold tier, when there is one.
    pub fn cold(&self) -> Option<&Cold> {
        self.cold.as_deref()
    }

    /// The cold tier of a queue with a window (only called after [`Tiered::window`] said so).
    fn tier(&self) -> Result<&Cold> {
        self.cold
            .as_deref()
            .ok_or_else(|| delayq::Error::Backend("no cold tier".into()))
    }

    /// Moves the jobs due within their queue's window from the cold tier into the store: per
    /// queue, a batch of 2,000, then — when it was full — two at once (they take disjoint rows:
    /// `SKIP LOCKED`), so PostgreSQL's take of one batch overlaps the store's write of
    /// another; the tier's partitions are read once for the whole move. Returns how many moved.
    pub async fn move_due(&self) -> std::result::Result<usize, Error> {
        let Some(cold) = self.cold.as_deref() else {
            return Ok(0);
        };
        let mut moved = 0;
        let queues = cold.queues().await?;
        if queues.is_empty() {
            return Ok(0);
        }
        let parts = cold.partitions_now().await?;
        for (q, window) in queues {
            // Read once a move, when it moves anything: a moved job's dedupe window is its
            // queue's retention.
            let retention = tokio::sync::OnceCell::new();
            let frontier = std::sync::Mutex::new(crate::cold::Frontier::default());
            let batch = || self.move_batch(cold, &q, window, &parts, &retention, &frontier);
            // One batch first: most moves are a second's worth of jobs, and a second batch
            // beside it would only find nothing. A full one means a backlog: then two at once.
            let first = batch().await?;
            moved += first;
            if (first as i64) < MOVE_BATCH {
                continue;
            }
            let lanes = (0..MOVERS).map(|_| async {
                let mut n = 0;
                loop {
                    let m = batch().await?;
                    n += m;
                    if (m as i64) < MOVE_BATCH {
                        return Ok::<usize, Error>(n);
                    }
                }
            });
            moved += futures::future::try_join_all(lanes)
                .await?
                .into_iter()
                .sum::<usize>();
        }
        Ok(moved)
    }

    /// Moves one batch of `q`'s due jobs: takes them (deleting), writes them into the store,
    /// commits; how many.
    async fn move_batch(
        &self,
        cold: &Cold,
        q: &QueueName,
        window: Option<u64>,
        parts: &[crate::cold::Partition],
        retention: &tokio::sync::OnceCell<delayq::Retention>,
        frontier: &std::sync::Mutex<crate::cold::Frontier>,
    ) -> std::result::Result<usize, Error> {
        let (conn, rows) = cold
            .take_due(q, window, parts, MOVE_BATCH, frontier)
            .await?;
        if rows.is_empty() {
            Cold::taken_many(q, conn, None).await?;
            return Ok(0);
        }
        let n = rows.len();
        let retention = *retention
            .get_or_try_init(|| async { self.inner.settings(q).await.map(|s| s.retention) })
            .await?;
        let now = now_ms();
        let mut jobs = Vec::with_capacity(n);
        for r in &rows {
            let mut job = r.job(q)?;
            // A move repeated after a crash finds the job in the store by its id; one due soon
            // (a late move) is kept refused after it ends.
            guard(&mut job, retention, now);
            jobs.push(job);
        }
        match Producer::new(self.inner.clone(), q.clone())
            .enqueue_batch(jobs)
            .await
        {
            Ok(_) => Cold::taken_many(q, conn, Some(n as i64)).await?,
            Err(e) => {
                Cold::taken_many(q, conn, None).await?;
                return Err(e.into());
            }
        }
        metrics::counter!("delayq_cold_moved_total").increment(n as u64);
        Ok(n)
    }

    /// Runs [`Tiered::move_due`] every `every` until `stop` resolves; a failure is logged and
    /// tried again at the next turn.
    pub async fn run_mover(self, every: Duration, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            let started = std::time::Instant::now();
            match self.move_due().await {
                Ok(moved) => {
                    let took = started.elapsed();
                    metrics::histogram!("delayq_cold_move_seconds").record(took.as_secs_f64());
                    tracing::debug!(moved, took_ms = took.as_millis() as u64, "cold tier: move");
                }
                Err(e) => tracing::warn!("cold tier: moving due jobs into the store: {e}"),
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = &mut stop => return,
            }
        }
    }

    /// The queue's window, when it keeps jobs cold.
    async fn window(&self, queue: &QueueName) -> Result<Option<u64>> {
        match &self.cold {
            Some(c) => c.cold_after(queue).await.map_err(store_err),
            None => Ok(None),
        }
    }
}

impl<B: Backend + Inspect + Clone + Send + Sync + 'static> Backend for Tiered<B> {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let Some(window) = self.window(queue).await? else {
            return self.inner.enqueue(queue, jobs).await;
        };
        let now = now_ms();
        let n = jobs.len();
        let ids: Vec<String> = jobs
            .iter()
            .map(|j| j.id.as_ref().map(|i| i.to_string()).unwrap_or_default())
            .collect();
        let far: Vec<bool> = jobs
            .iter()
            .map(|j| due_ms(j.due, now) > now + window && j.depends.is_none() && j.batch.is_none())
            .collect();
        // An id the cold tier holds is that job, whichever tier this enqueue would choose: a
        // near-bound id is looked up here; a cold-bound one by the tier's write, under its lock.
        let near_ids: Vec<String> = ids
            .iter()
            .zip(&far)
            .filter(|(id, far)| !**far && !id.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        let in_cold = if near_ids.is_empty() {
            HashMap::new()
        } else {
            self.tier()?
                .due_of(queue, &near_ids)
                .await
                .map_err(store_err)?
        };
        let mut out: Vec<Option<Enqueued>> = vec![None; n];
        let (mut hot, mut hot_at, mut cold, mut cold_at) = (vec![], vec![], vec![], vec![]);
        for (i, job) in jobs.into_iter().enumerate() {
            let due = due_ms(job.due, now);
            let far = far[i];
            match in_cold.get(&ids[i]) {
                Some(_) | None if far => {
                    cold.push((job, due));
                    cold_at.push(i);
                }
                Some(&was) if job.on_conflict != delayq::OnConflict::Replace => {
                    out[i] = Some(Enqueued {
                        id: job.id.clone().unwrap_or_else(JobId::generate),
                        due_at_ms: was,
                        created: false,
                        replaced: false,
                        existing: None,
                    });
                }
                held => {
                    if held.is_some() {
                        // Replaced by a near one: it leaves the cold tier for the store.
                        if let Some(id) = &job.id {
                            self.tier()?.cancel(queue, id).await.map_err(store_err)?;
                        }
                    }
                    hot.push(job);
                    hot_at.push(i);
                }
            }
        }
        // A cold-bound id the store holds is that job (the look-ups go out together).
        let held: Vec<Option<JobInfo>> =
            futures::future::try_join_all(cold.iter().map(|(job, _)| async move {
                match &job.id {
                    Some(id) => self.inner.get(queue, id).await,
                    None => Ok(None),
                }
            }))
            .await?;
        let mut still_cold = Vec::new();
        let mut still_at = Vec::new();
        for (((job, due), i), held) in cold.into_iter().zip(cold_at).zip(held) {
            match held {
                Some(info)
                    if job.on_conflict != delayq::OnConflict::Replace
                        || info.state != delayq::JobState::Scheduled =>
                {
                    out[i] = Some(Enqueued {
                        id: info.id.clone(),
                        due_at_ms: info.due_at_ms,
                        created: false,
                        replaced: false,
                        existing: (job.on_conflict == delayq::OnConflict::Replace)
                            .then_some(info.state),
                    });
                }
                Some(info) => {
                    // Replaced by a far one: it leaves the store for the cold tier.
                    if self.inner.cancel(queue, &info.id).await? == CancelOutcome::Cancelled {
                        still_cold.push((job, due));
                        still_at.push(i);
                    } else {
                        out[i] = Some(Enqueued {
                            id: info.id.clone(),
                            due_at_ms: info.due_at_ms,
                            created: false,
                            replaced: false,
                            existing: Some(delayq::JobState::Leased),
                        });
                    }
                }
                None => {
                    still_cold.push((job, due));
                    still_at.push(i);
                }
            }
        }
        if !still_cold.is_empty() {
            let put = self
                .tier()?
                .put(queue, still_cold)
                .await
                .map_err(store_err)?;
            for (e, i) in put.into_iter().zip(still_at) {
                out[i] = Some(e);
            }
        }
        if !hot.is_empty() {
            let put = self.inner.enqueue(queue, hot).await?;
            for (e, i) in put.into_iter().zip(hot_at) {
                out[i] = Some(e);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        self.inner.claim(queue, req).await
    }
    fn claims_over_queues(&self) -> bool {
        self.inner.claims_over_queues()
    }
    async fn claim_over(&self, req: delayq::ClaimOverRequest) -> Result<ClaimBatch> {
        self.inner.claim_over(req).await
    }
    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        self.inner.ack(queue, acks).await
    }
    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        self.inner.nack(queue, lease, nack).await
    }
    async fn extend(&self, queue: &QueueName, lease: LeaseRef, len: Duration) -> Result<u64> {
        self.inner.extend(queue, lease, len).await
    }
    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        self.inner.release(queue, leases, undo).await
    }
    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        if self.window(queue).await?.is_some()
            && self.tier()?.cancel(queue, id).await.map_err(store_err)?
        {
            return Ok(CancelOutcome::Cancelled);
        }
        self.inner.cancel(queue, id).await
    }
    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        if self.window(queue).await?.is_some()
            && self.tier()?.cancel(queue, id).await.map_err(store_err)?
        {
            return Ok(CancelOutcome::Cancelled);
        }
        self.inner.cancel_running(queue, id).await
    }
    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        self.inner.cancelled(queue, leases).await
    }
    async fn reschedule(&self, queue: &QueueName, id: &JobId, s: Due) -> Result<u64> {
        let Some(window) = self.window(queue).await? else {
            return self.inner.reschedule(queue, id, s).await;
        };
        let now = now_ms();
        let due = due_ms(s, now);
        if due > now + window {
            if self
                .tier()?
                .reschedule(queue, id, due)
                .await
                .map_err(store_err)?
            {
                return Ok(due);
            }
            return self.inner.reschedule(queue, id, s).await;
        }
        // Into the window: out of the cold tier and into the store now (the delete commits
        // once the store has it).
        match self.tier()?.take(queue, id).await.map_err(store_err)? {
            Some((conn, row)) => {
                let mut job = row.job(queue).map_err(store_err)?;
                job.due = Due::At(due);
                match self.inner.enqueue(queue, vec![job]).await {
                    Ok(_) => {
                        Cold::taken(queue, conn, true).await.map_err(store_err)?;
                        Ok(due)
                    }
                    Err(e) => {
                        Cold::taken(queue, conn, false).await.map_err(store_err)?;
                        Err(e)
                    }
                }
            }
            None => self.inner.reschedule(queue, id, s).await,
        }
    }
    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        self.inner.wakeups(queue).await
    }
    async fn stop_polling(&self) {
        self.inner.stop_polling().await
    }
}

impl<B: Backend + Inspect + Clone + Send + Sync + 'static> Inspect for Tiered<B> {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        // The cold tier first: a job moved meanwhile is in the store by the time its row is
        // gone (the move's delete commits after the store's write).
        if self.window(queue).await?.is_some()
            && let Some(info) = self.tier()?.get(queue, id).await.map_err(store_err)?
        {
            return Ok(Some(info));
        }
        self.inner.get(queue, id).await
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.inner.queues().await
    }
    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let mut s = self.inner.stats(queue).await?;
        if self.window(queue).await?.is_some() {
            match self.tier()?.count(queue).await {
                Ok(n) => s.scheduled += n,
                // The store's own counts stand while PostgreSQL cannot be reached.
                Err(e) => tracing::debug!("cold tier: counting {queue}'s cold jobs: {e}"),
            }
        }
        Ok(s)
    }
    async fn list(&self, q: &QueueName, page: ListRequest) -> Result<JobPage> {
        if page.state != ListState::Scheduled || self.window(q).await?.is_none() {
            return self.inner.list(q, page).await;
        }
        // The store's scheduled jobs first (due within the window, as a rule), then the
        // tier's, each in due order; a cursor past the store's last continues in the tier.
        let limit = page.limit;
        let after = page.after.clone();
        let mut out = self.inner.list(q, page).await?;
        if out.next.is_some() || out.jobs.len() >= limit {
            return Ok(out);
        }
        let from = out
            .jobs
            .last()
            .map(|j| (j.due_at_ms, j.id.to_string()))
            .or(after.map(|c| (c.score, c.id)));
        let room = limit - out.jobs.len();
        let mut cold = self
            .tier()?
            .list_after(q, from, room as i64 + 1)
            .await
            .map_err(store_err)?;
        let more = cold.len() > room;
        cold.truncate(room);
        out.jobs.extend(cold);
        out.next = more.then(|| {
            let last = out.jobs.last().expect("a full page");
            delayq::Cursor {
                score: last.due_at_ms,
                id: last.id.to_string(),
            }
        });
        Ok(out)
    }
    async fn search(&self, q: &QueueName, prefix: &str, limit: usize) -> Result<delayq::Found> {
        let mut found = self.inner.search(q, prefix, limit).await?;
        // The tier answers the exact id (as Redis does).
        if found.jobs.is_empty()
            && self.window(q).await?.is_some()
            && let Ok(id) = JobId::new(prefix)
            && let Some(job) = self.tier()?.get(q, &id).await.map_err(store_err)?
        {
            found.jobs.push(job);
        }
        Ok(found)
    }
    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.inner.dead_requeue(queue, id).await
    }
    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        self.inner.dead_requeue_all(queue).await
    }
    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        self.inner.dead_purge(queue).await
    }
    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.inner.dead_delete(queue, id).await
    }
    async fn cancel_all(&self, queue: &QueueName, state: ListState) -> Result<u64> {
        // The tier first: a job it is moving is waited for, then is the store's.
        let mut n = 0;
        if matches!(state, ListState::Scheduled | ListState::Due)
            && self.window(queue).await?.is_some()
        {
            n = self
                .tier()?
                .cancel_all(queue, state == ListState::Due)
                .await
                .map_err(store_err)?;
        }
        Ok(n + self.inner.cancel_all(queue, state).await?)
    }
    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        self.inner.set_paused(queue, paused).await
    }
    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        self.inner.series(queue).await
    }
    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        let mut s = self.inner.settings(queue).await?;
        s.cold_after_ms = self.window(queue).await?;
        Ok(s)
    }
    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        self.inner.push_queues().await
    }
    async fn configure(&self, queue: &QueueName, mut s: QueueSettings) -> Result<QueueSettings> {
        if self.cold.is_none() {
            // The store refuses a window it cannot keep.
            return self.inner.configure(queue, s).await;
        }
        s.validate()?;
        // The window is the tier's (PostgreSQL's); the rest is the store's.
        let cold = s.cold_after_ms.take();
        let mut out = self.inner.configure(queue, s).await?;
        if cold != self.window(queue).await? {
            self.tier()?
                .set_cold_after(queue, cold)
                .await
                .map_err(store_err)?;
        }
        out.cold_after_ms = cold;
        Ok(out)
    }
    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        self.inner.pause_key(q, key, hold).await
    }
    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<delayq::KeyStats>> {
        self.inner.keys(queue, limit).await
    }
    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: delayq::KeyJobsRequest,
    ) -> Result<delayq::KeyJobsPage> {
        let waiting = matches!(
            req.state,
            None | Some(ListState::Scheduled | ListState::Due)
        );
        if !waiting || self.window(q).await?.is_none() {
            return self.inner.key_jobs(q, key, req).await;
        }
        // The tier is one more part of the page, merged by id as shards' parts are (the
        // store's own page ends where it stopped reading).
        let (limit, state) = (req.limit, req.state);
        let after = req.after.clone();
        let store = self.inner.key_jobs(q, key, req).await?;
        let stopped_at = store.next.clone();
        let now_ms = store.now_ms;
        let cold = self
            .tier()?
            .key_page(q, key, after.as_ref().map(JobId::as_str), limit as i64 + 1)
            .await
            .map_err(store_err)?
            .into_iter()
            .filter(|j| state.is_none() || delayq::key_jobs::listed_as(j, now_ms) == state)
            .collect();
        let part = |jobs, stopped_at| delayq::key_jobs::ShardKeyPage {
            jobs,
            stopped_at,
            now_ms,
        };
        Ok(delayq::KeyJobsPage::merge(
            vec![part(store.jobs, stopped_at), part(cold, None)],
            limit,
        ))
    }
    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<delayq::KeyCancelled> {
        // The tier first: a job it is moving is waited for, then is the store's.
        let mut cold = 0;
        if self.window(q).await?.is_some() {
            cold = self.tier()?.cancel_key(q, key).await.map_err(store_err)?;
        }
        let mut out = self.inner.cancel_key(q, key, running).await?;
        out.cancelled += cold;
        Ok(out)
    }
    async fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: delayq::KeyMove,
    ) -> Result<u64> {
        let Some(window) = self.window(q).await? else {
            return self.inner.reschedule_key(q, key, to).await;
        };
        // The tier's jobs are taken first (a job being moved is waited for, then is the
        // store's), the store's own are moved, and only then do the taken ones that are now
        // near enter the store at their new times — so none is moved twice.
        let taken = self
            .tier()?
            .take_key(q, key, to, now_ms(), window)
            .await
            .map_err(store_err)?;
        // An error from here on drops the take unfinished: `cold::Open` rolls it back.
        let moved = self.inner.reschedule_key(q, key, to).await?;
        let near = taken.near.len();
        // (Each taken job's due time is already its new one.)
        let jobs = taken
            .near
            .iter()
            .map(|j| j.job(q))
            .collect::<std::result::Result<Vec<_>, Error>>()
            .map_err(store_err)?;
        if !jobs.is_empty() {
            self.inner.enqueue(q, jobs).await?;
        }
        Cold::taken_many(q, taken.conn, Some(near as i64))
            .await
            .map_err(store_err)?;
        Ok(moved + near as u64 + taken.stayed)
    }
}

impl<B> delayq::Schedules for Tiered<B>
where
    B: Backend + Inspect + delayq::Schedules + Clone + Send + Sync + 'static,
{
    async fn put_schedule(&self, queue: &QueueName, info: delayq::ScheduleInfo) -> Result<()> {
        self.inner.put_schedule(queue, info).await
    }
    async fn schedules(&self, queue: &QueueName) -> Result<Vec<delayq::ScheduleInfo>> {
        self.inner.schedules(queue).await
    }
    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        self.inner.delete_schedule(queue, name).await
    }
    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        self.inner.scheduled_queues().await
    }
    async fn clock_ms(&self) -> Result<u64> {
        self.inner.clock_ms().await
    }
    async fn fire(&self, queue: &QueueName, name: &str, f: delayq::Firing) -> Result<bool> {
        self.inner.fire(queue, name, f).await
    }
}

/// Batches stay in the store (their jobs and callbacks are never cold).
impl<B> delayq::Batches for Tiered<B>
where
    B: Backend + Inspect + delayq::Batches + Clone + Send + Sync + 'static,
{
    async fn put_batch(
        &self,
        queue: &QueueName,
        put: delayq::BatchPut,
    ) -> Result<delayq::batch::BatchAdded> {
        self.inner.put_batch(queue, put).await
    }
    async fn add_to_batch(
        &self,
        queue: &QueueName,
        add: delayq::BatchAdd,
    ) -> Result<Option<delayq::batch::BatchAdded>> {
        self.inner.add_to_batch(queue, add).await
    }
    async fn close_batch(
        &self,
        queue: &QueueName,
        id: &delayq::BatchId,
    ) -> Result<Option<delayq::BatchInfo>> {
        self.inner.close_batch(queue, id).await
    }
    async fn batch(
        &self,
        queue: &QueueName,
        id: &delayq::BatchId,
    ) -> Result<Option<delayq::BatchInfo>> {
        self.inner.batch(queue, id).await
    }
    async fn open_batches(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> Result<Vec<delayq::BatchInfo>> {
        self.inner.open_batches(queue, limit).await
    }
    async fn finish_batches(&self, thorough: bool) -> Result<usize> {
        self.inner.finish_batches(thorough).await
    }
}
