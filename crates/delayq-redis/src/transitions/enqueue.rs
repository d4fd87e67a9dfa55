//! Writing new jobs into one shard: `lua/enqueue.lua`, one call at a time or shared by the
//! callers waiting at the shard's gate (`crate::gate`).

use std::sync::Arc;

use delayq::{Enqueued, Error, JobId, JobState, NewJob, Result};

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::gate::{Entry, Shared, Sharers, fail_all};
use crate::keys::Keys;
use crate::protocol::{Flat, item, reply, script};
use crate::record;
use crate::reply::Reply;
use crate::route::Route;

script! {
    file: "enqueue.lua",
    keys: [Sched, Jobs, Wake, Stat, Ready, Done, Lane, LaneMeta, LaneGone, Tenants],
    key_tails: [ix],
    args: {},
    tail: batch: Spec,
    reply: Flat<Outcome>,
}

item! {
    /// One new job.
    pub(crate) struct Spec {
        /// The job's id.
        id: JobId,
        /// Its flags byte and record (`record::spec`).
        spec: Vec<u8>,
    }
}

reply! {
    /// What the enqueue did with one job.
    pub(crate) flat struct Outcome as "push_enqueued" {
        /// R_OK, R_EXISTS, R_REPLACED, R_DONE, R_LEASED or R_DEAD.
        code: Reply,
        /// The job's due time after the call, ms.
        due: i64,
    }
}

impl RedisBackend {
    /// One call of the enqueue script with `jobs` on shard `k`.
    pub(crate) async fn enqueue_call(
        &self,
        route: &Route,
        k: &Keys,
        jobs: Vec<(JobId, NewJob)>,
    ) -> Result<Vec<Enqueued>> {
        let ix = route.buckets(k, jobs.iter().map(|(id, _)| id.as_str()));
        let mut ids = Vec::with_capacity(jobs.len());
        let mut batch = Vec::with_capacity(jobs.len());
        for (id, job) in jobs {
            ids.push(id.clone());
            batch.push(Spec {
                id,
                spec: record::spec(job),
            });
        }
        let Flat(outcomes) = self.run(&SCRIPT, k, Args { ix, batch }, true).await?;
        if outcomes.len() != ids.len() {
            return Err(shape("enqueue: one outcome per job expected"));
        }
        ids.into_iter()
            .zip(outcomes)
            .map(|(id, o)| {
                let (created, replaced, existing) = match o.code {
                    Reply::Ok => (true, false, None),
                    Reply::Exists => (false, false, None),
                    Reply::Replaced => (false, true, None),
                    Reply::Leased => (false, false, Some(JobState::Leased)),
                    Reply::Dead => (false, false, Some(JobState::Dead)),
                    Reply::Done => (false, false, Some(JobState::Done)),
                    r => return Err(shape(&format!("enqueue: {r:?}"))),
                };
                Ok(Enqueued {
                    id,
                    created,
                    due_at_ms: o.due as u64,
                    replaced,
                    existing,
                })
            })
            .collect()
    }
}

impl RedisBackend {
    /// Enqueues `jobs` into shard `s` through its gate (`crate::gate`): at once while few calls are
    /// out, else together with the calls waiting beside it.
    pub(crate) async fn enqueue_shard(
        &self,
        route: &Arc<Route>,
        s: usize,
        jobs: Vec<(JobId, NewJob)>,
    ) -> Result<Vec<Enqueued>> {
        match route.gates[s].enter(jobs) {
            Entry::Go(jobs) => {
                // Leaves the gate when the call is done or dropped, sending what waits then.
                let _place = Place {
                    backend: self,
                    route,
                    shard: s,
                };
                self.enqueue_call(route, &route.keys[s], jobs).await
            }
            Entry::Wait(rx) => rx.await.unwrap_or_else(|_| {
                Err(Error::Unavailable(
                    "enqueue: the call it shared was dropped".into(),
                ))
            }),
        }
    }

    /// Sends calls that waited at shard `s`'s gate, one shared call after another, until none
    /// wait.
    async fn enqueue_shared(self, route: Arc<Route>, s: usize, first: Shared) {
        let mut task = Draining {
            route,
            shard: s,
            out: None,
        };
        let mut next = Some(first);
        while let Some(Shared { jobs, sharers }) = next {
            // (Held by the guard while the call is out: a task dropped there fails them.)
            task.out = Some(sharers);
            let out = self
                .enqueue_call(&task.route, &task.route.keys[s], jobs)
                .await;
            if let Some(sharers) = task.out.take() {
                sharers.answer(out);
            }
            next = task.route.gates[s].leave();
        }
    }
}

/// The task sending shared calls, as a guard: dropped with a call out (its runtime stopped),
/// it fails that call's sharers and every call still waiting, and gives its place back, so the
/// gate never loses a place.
struct Draining {
    route: Arc<Route>,
    shard: usize,
    /// The sharers of the call out now.
    out: Option<Sharers>,
}

impl Drop for Draining {
    fn drop(&mut self) {
        if let Some(sharers) = self.out.take() {
            fail_all(&self.route.gates[self.shard], sharers);
        }
    }
}

/// A place taken at a shard's enqueue gate. Dropped when its call is done (or the caller gave
/// up): the calls waiting then go out as one shared call, on a task of their own so this
/// caller has its answer at once. (It borrows: a lone producer's enqueue clones nothing.)
struct Place<'a> {
    backend: &'a RedisBackend,
    route: &'a Arc<Route>,
    shard: usize,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let gate = &self.route.gates[self.shard];
        let Some(shared) = gate.leave() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                let b = self.backend.clone();
                rt.spawn(b.enqueue_shared(self.route.clone(), self.shard, shared));
            }
            // No runtime to send them on (it is shutting down): every waiting call fails.
            Err(_) => fail_all(gate, shared.sharers),
        }
    }
}
