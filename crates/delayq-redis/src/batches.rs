//! Batches on Redis ([`delayq::Batches`]). A batch's jobs may live on several shards of its
//! queue; no script spans two slots, so a batch is kept in two parts:
//!
//! - per shard, its jobs there (`bm:<batch>`, batch.lua): a job joins as pending in the
//!   script that creates it (batch_join.lua) and is counted once as acked, dead or cancelled
//!   in the script that ends it; a closed batch's shards refuse new jobs;
//! - in its home shard (the shard its id hashes to), its state and callbacks
//!   (batch_home.lua).
//!
//! A batch is finished by [`RedisBackend::finish_one`]: when it is closed (every shard
//! closed first, then the home) and every shard counts no pending job, its home moves to
//! *finishing* with the summed counts, its callbacks are enqueued under their fixed ids
//! (`batch-<id>-complete`, with a dedupe window), then its home is marked done. A crash
//! between those steps leaves it finishing: the next sweep ([`delayq::Batches::finish_batches`],
//! every `delayq serve` and `delayq worker`) enqueues the callbacks again — refused by their
//! ids — and marks it done. So a callback comes only after the last job ended, once.

use std::collections::HashSet;

use delayq::batch::{
    self, BatchAdded, BatchCounts, BatchInfo, BatchState, KeptResults, ResultRoom,
};
use delayq::{Backend, BatchAdd, BatchId, BatchPut, Error, JobId, NewJob, QueueName, Result};
use futures::future::join_all;

use crate::backend::RedisBackend;
use crate::error;
use crate::keys::Keys;
use crate::route::{Route, group};
use crate::transitions::batch_home::{HomeOp, HomeRecord};
use crate::transitions::batch_shard::ShardOp;

/// Most jobs one `batch_join.lua` call enqueues (~3-6 ms of Redis's time).
const JOIN_STEP: usize = 500;

/// The error of a call that would add to a closed batch.
pub(crate) fn closed(b: &BatchId) -> Error {
    Error::Conflict(format!("batch {b} is closed: no job may join it"))
}

/// The home shard of batch `b`.
fn home<'r>(route: &'r Route, b: &BatchId) -> &'r Keys {
    &route.keys[crate::keys::shard_of(b.as_str(), route.shards) as usize]
}

impl RedisBackend {
    /// Records `queue` among the queues with batches (the sweeps' list).
    async fn register_batches(&self, queue: &QueueName) -> Result<()> {
        let mut conn = self.connection();
        redis::cmd("ZADD")
            .arg(self.inner.space.batch_queues())
            .arg(0)
            .arg(queue.as_str())
            .query_async::<()>(&mut conn)
            .await
            .map_err(error::map)
    }

    /// Enqueues `jobs` into batch `b` of `route`'s queue, each on its shard.
    async fn join(
        &self,
        queue: &QueueName,
        route: &Route,
        b: &BatchId,
        results: bool,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<delayq::Enqueued>> {
        let delivery = route.delivery();
        for j in &jobs {
            delivery.admits(queue.as_str(), j.target.is_some())?;
        }
        let jobs: Vec<(JobId, NewJob)> = jobs
            .into_iter()
            .map(|mut job| {
                let id = job.id.take().unwrap_or_else(|| match &job.key {
                    Some(k) => JobId::generate_for(k),
                    None => JobId::generate(),
                });
                (id, job)
            })
            .collect();
        let total = jobs.len();
        let calls = group(jobs, route.shards, |(id, _)| id.as_str())
            .into_iter()
            .enumerate()
            .filter(|(_, (p, _))| !p.is_empty())
            .map(|(s, (pos, jobs))| async move {
                // At most JOIN_STEP jobs a script call: a batch of 10,000 does not hold Redis
                // for one long call (each job joins on its own, so steps change nothing else).
                let mut out = Vec::with_capacity(jobs.len());
                let mut rest = jobs.into_iter().peekable();
                while rest.peek().is_some() {
                    let step: Vec<_> = rest.by_ref().take(JOIN_STEP).collect();
                    match self
                        .batch_join_shard(&route.keys[s], b, results, step)
                        .await
                    {
                        Ok(e) => out.extend(e),
                        Err(e) => return (pos, Err(e)),
                    }
                }
                (pos, Ok(out))
            });
        let mut out: Vec<Option<delayq::Enqueued>> = vec![None; total];
        for (pos, r) in join_all(calls).await {
            for (p, e) in pos.into_iter().zip(r?) {
                out[p] = Some(e);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Every shard's counts of batch `b`, summed (after `op` on each).
    async fn parts(&self, route: &Route, b: &BatchId, op: ShardOp) -> Result<BatchCounts> {
        let calls = route.keys.iter().map(|k| self.batch_shard(k, b, op, None));
        let mut counts = BatchCounts::default();
        for r in join_all(calls).await {
            counts = counts.plus(r?.counts);
        }
        Ok(counts)
    }

    /// The results batch `b`'s callbacks carry: each shard's kept results within what is left
    /// of one [`ResultRoom`], a shard at a time (a shard keeps at most one room's worth, so
    /// each read is short and the whole read at most one room plus what it leaves out).
    async fn kept_results(&self, route: &Route, b: &BatchId) -> Result<KeptResults> {
        let mut room = ResultRoom::default();
        let mut out = KeptResults::default();
        for k in &route.keys {
            let part = self.batch_shard(k, b, ShardOp::Read, Some(room)).await?;
            for (_, r) in &part.kept {
                room.take(r.len());
            }
            out.results.extend(part.kept);
            out.left_out += part.left_out;
        }
        out.results.sort();
        Ok(out)
    }

    /// Closes batch `b`: every shard first (no job joins after), then its home; then finishes
    /// it when its jobs have all ended (a failure to enqueue its callbacks is the batch's,
    /// not the close's: [`Self::try_finish`]).
    async fn close_in(&self, q: &QueueName, route: &Route, b: &BatchId) -> Result<()> {
        self.parts(route, b, ShardOp::Close).await?;
        self.batch_home(home(route, b), b, HomeOp::Close).await?;
        self.try_finish(q, route, b).await;
        Ok(())
    }

    /// Finishes batch `b` if it is closed and none of its jobs is pending (or it was being
    /// finished, and a failed try's backoff has passed): enqueues its callbacks, drops its
    /// kept results, then marks it done. Whether it finished it now.
    pub(crate) async fn finish_one(&self, route: &Route, b: &BatchId) -> Result<bool> {
        let k = home(route, b);
        let Some(rec) = self.batch_home(k, b, HomeOp::Read).await? else {
            return Ok(false);
        };
        let rec: HomeRecord = match (rec.state, rec.finishing) {
            (BatchState::Closed, false) => {
                let counts = self.parts(route, b, ShardOp::Read).await?;
                if counts.pending > 0 {
                    return Ok(false);
                }
                match self.batch_home(k, b, HomeOp::Done(counts)).await? {
                    Some(r) if r.finishing => r,
                    _ => return Ok(false),
                }
            }
            (BatchState::Closed, true) => {
                if rec
                    .failure
                    .as_ref()
                    .is_some_and(|f| f.next_try_ms > rec.now)
                {
                    return Ok(false);
                }
                rec
            }
            _ => return Ok(false),
        };
        let keep = rec.spec.include_results;
        let kept = if keep {
            self.kept_results(route, b).await?
        } else {
            KeptResults::default()
        };
        let counts = rec.counts.unwrap_or_default();
        for (cq, job) in batch::callbacks(b, &rec.spec, counts, &kept) {
            self.enqueue(&cq, vec![job]).await?;
        }
        // The results go once the callbacks carry them. A crash before the next step leaves
        // the batch finishing: the next try enqueues the callbacks again (refused by their
        // ids, so the results they carry are not needed again) and marks it done.
        if keep {
            self.parts(route, b, ShardOp::Drop).await?;
        }
        self.batch_home(k, b, HomeOp::Fired).await?;
        Ok(true)
    }

    /// Forgets done batch `b`: every shard's part, then its home.
    async fn forget(&self, route: &Route, b: &BatchId) -> Result<()> {
        self.parts(route, b, ShardOp::Forget).await?;
        self.batch_home(home(route, b), b, HomeOp::Forget).await?;
        Ok(())
    }

    /// Batch `b` of `route`'s queue as read (live counts from its shards until it is done).
    async fn read_batch(&self, route: &Route, b: &BatchId) -> Result<Option<BatchInfo>> {
        let Some(rec) = self.batch_home(home(route, b), b, HomeOp::Read).await? else {
            return Ok(None);
        };
        let live = if rec.counts.is_some() {
            BatchCounts::default()
        } else {
            self.parts(route, b, ShardOp::Read).await?
        };
        Ok(Some(rec.info(b.clone(), live)))
    }
}

impl delayq::Batches for RedisBackend {
    async fn put_batch(&self, queue: &QueueName, put: BatchPut) -> Result<BatchAdded> {
        let BatchPut {
            id,
            spec,
            jobs,
            open,
        } = put;
        let route = self.route(queue).await?;
        // A callback (a job without a target) must be one its queue takes: refused now, not
        // when the batch is done.
        for cb in spec.on_complete.iter().chain(&spec.on_success) {
            let cq = &cb.queue;
            self.route(cq)
                .await?
                .delivery()
                .admits(cq.as_str(), false)?;
        }
        // Every job must be one its queue takes before anything is written: a refused create
        // leaves no batch behind.
        let delivery = route.delivery();
        for j in &jobs {
            delivery.admits(queue.as_str(), j.target.is_some())?;
        }
        let b = id.unwrap_or_else(BatchId::generate);
        let results = spec.include_results;
        self.register_batches(queue).await?;
        let rec = self
            .batch_home(home(&route, &b), &b, HomeOp::Open(spec))
            .await?
            .ok_or_else(|| error::shape("batch_home: an opened batch reads as none"))?;
        if rec.state != BatchState::Open {
            return Err(closed(&b));
        }
        let results = rec.spec.include_results || results;
        let jobs = self.join(queue, &route, &b, results, jobs).await?;
        if !open {
            self.close_in(queue, &route, &b).await?;
        }
        Ok(BatchAdded { id: b, jobs })
    }

    async fn add_to_batch(&self, queue: &QueueName, add: BatchAdd) -> Result<Option<BatchAdded>> {
        let BatchAdd { id, jobs, close } = add;
        let id = &id;
        let route = self.route(queue).await?;
        let Some(rec) = self.batch_home(home(&route, id), id, HomeOp::Read).await? else {
            return Ok(None);
        };
        if rec.state != BatchState::Open {
            return Err(closed(id));
        }
        let jobs = self
            .join(queue, &route, id, rec.spec.include_results, jobs)
            .await?;
        if close {
            self.close_in(queue, &route, id).await?;
        }
        Ok(Some(BatchAdded {
            id: id.clone(),
            jobs,
        }))
    }

    async fn close_batch(&self, queue: &QueueName, id: &BatchId) -> Result<Option<BatchInfo>> {
        let route = self.route(queue).await?;
        if self
            .batch_home(home(&route, id), id, HomeOp::Read)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        self.close_in(queue, &route, id).await?;
        self.read_batch(&route, id).await
    }

    async fn batch(&self, queue: &QueueName, id: &BatchId) -> Result<Option<BatchInfo>> {
        let route = self.route(queue).await?;
        self.read_batch(&route, id).await
    }

    async fn open_batches(&self, queue: &QueueName, limit: usize) -> Result<Vec<BatchInfo>> {
        let route = self.route(queue).await?;
        let mut ids: Vec<BatchId> = Vec::new();
        for k in &route.keys {
            let (due, open, _) = self.batch_scan(k, true).await?;
            ids.extend(due);
            ids.extend(open);
        }
        let mut out = Vec::new();
        for b in ids {
            if let Some(i) = self.read_batch(&route, &b).await?
                && i.state != BatchState::Done
            {
                out.push(i);
            }
        }
        out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        out.truncate(limit);
        Ok(out)
    }

    async fn finish_batches(&self, thorough: bool) -> Result<usize> {
        // The same sweep finishes what a crash left of dependencies (deps.rs).
        if let Err(e) = self.sweep_deps().await {
            tracing::warn!(error = %e, "finishing dependencies failed; retrying");
        }
        let queues = self.queue_registry(self.inner.space.batch_queues()).await?;
        let mut finished = 0;
        let mut first_error = None;
        // A batch that fails is logged where it fails (`try_finish`); a queue that cannot be
        // read (its shards, its marks) does not stop the others, and the first such error is
        // the sweep's, logged once by the sweeper (not once per queue while Redis is away).
        for q in queues {
            match self.finish_queue(&q, thorough).await {
                Ok(n) => finished += n,
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(finished), Err)
    }
}

impl RedisBackend {
    /// [`delayq::Batches::finish_batches`] for one queue.
    async fn finish_queue(&self, q: &QueueName, thorough: bool) -> Result<usize> {
        let route = self.route(q).await?;
        let mut finished = 0;
        let mut done: HashSet<BatchId> = HashSet::new();
        // The batches a shard marked as left with no pending job there: each is tried
        // (again for every shard that marked it: a try may have met another shard still
        // pending, which marked it since), then its mark is dropped. A batch whose try fails
        // loses its mark too: the thorough sweep (every `THOROUGH_EVERY` sweeps) tries it
        // again, so a batch that keeps failing is retried every few seconds, not every sweep.
        for k in &route.keys {
            for (b, at) in self.batch_marks(k).await? {
                if !done.contains(&b) && self.try_finish(q, &route, &b).await {
                    finished += 1;
                    done.insert(b.clone());
                }
                self.batch_unmark(k, &b, at).await?;
            }
        }
        if !thorough {
            return Ok(finished);
        }
        // Every closed batch of every home shard, whatever its marks (a mark dropped by a
        // sweep that crashed before it finished the batch), and the done ones to forget.
        for k in &route.keys {
            let (due, _, gone) = self.batch_scan(k, false).await?;
            for b in due {
                if !done.contains(&b) && self.try_finish(q, &route, &b).await {
                    finished += 1;
                    done.insert(b);
                }
            }
            for b in gone {
                self.forget(&route, &b).await?;
            }
        }
        Ok(finished)
    }

    /// [`Self::finish_one`], its failure logged, counted
    /// (`delayq_batch_callback_failures_total`) and kept in the batch — which then reads
    /// [`BatchState::CallbackFailed`] with the reason, and is tried again after
    /// [`batch::callback_retry_in`] — instead of ending the sweep.
    async fn try_finish(&self, q: &QueueName, route: &Route, b: &BatchId) -> bool {
        let e = match self.finish_one(route, b).await {
            Ok(done) => return done,
            Err(e) => e,
        };
        delayq::telemetry::batch_callback_failed(q.as_str());
        let k = home(route, b);
        let tries = match self.batch_home(k, b, HomeOp::Read).await {
            Ok(Some(r)) => r.failure.map_or(0, |f| f.attempts) + 1,
            _ => 1,
        };
        let after = batch::callback_retry_in(tries);
        tracing::warn!(
            queue = %q,
            batch = %b,
            error = %e,
            tries,
            retry_in_ms = after.as_millis() as u64,
            "a batch's callbacks could not be enqueued; it is tried again, other batches go on"
        );
        // Only a finishing batch takes it (a failure before — Redis away — changes nothing).
        let reason = e.to_string();
        if let Err(e) = self.batch_home(k, b, HomeOp::Failed(reason, after)).await {
            tracing::debug!(batch = %b, error = %e, "the failure could not be kept");
        }
        false
    }
}
