//! Writing new jobs into one shard: `lua/enqueue.lua`.

use delayq::{Enqueued, JobId, JobState, NewJob, Result};

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::keys::Keys;
use crate::protocol::{Flat, item, reply, script};
use crate::record;
use crate::reply::Reply;
use crate::route::Route;

script! {
    file: "enqueue.lua",
    keys: [Sched, Jobs, Wake, Stat, Ready, Done, Lane, LaneMeta, LaneGone],
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
