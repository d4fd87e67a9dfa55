//! Enqueueing jobs into one shard as jobs of a batch: `lua/batch_join.lua`.

use delayq::{BatchId, Enqueued, JobId, JobState, NewJob, Result};

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::keys::Keys;
use crate::protocol::{Flat, script};
use crate::record;
use crate::reply::Reply;

use super::enqueue::{Outcome, Spec};

script! {
    file: "batch_join.lua",
    keys: [Sched, Jobs, Wake, Stat, Done, Members, Tenants],
    args: {
        /// The batch.
        batch: String,
        /// The batch keeps its jobs' results.
        results: bool,
    },
    tail: jobs: Spec,
    reply: Flat<Outcome>,
}

impl RedisBackend {
    /// Enqueues `jobs` into shard `k` as jobs of batch `b` (each carries it); per job, its
    /// outcome (`Err(Conflict)` when the batch is closed in this shard).
    pub(crate) async fn batch_join_shard(
        &self,
        k: &Keys,
        b: &BatchId,
        results: bool,
        jobs: Vec<(JobId, NewJob)>,
    ) -> Result<Vec<Enqueued>> {
        let mut ids = Vec::with_capacity(jobs.len());
        let mut specs = Vec::with_capacity(jobs.len());
        for (id, mut job) in jobs {
            job.batch = Some(b.clone());
            ids.push(id.clone());
            specs.push(Spec {
                id,
                spec: record::spec(job),
            });
        }
        let args = Args {
            batch: b.to_string(),
            results,
            jobs: specs,
        };
        let Flat(outcomes) = self.run(&SCRIPT, k, args, true).await?;
        if outcomes.len() != ids.len() {
            return Err(shape("batch_join: one outcome per job expected"));
        }
        ids.into_iter()
            .zip(outcomes)
            .map(|(id, o)| {
                let (created, existing) = match o.code {
                    Reply::Ok => (true, None),
                    Reply::Exists => (false, None),
                    Reply::Done => (false, Some(JobState::Done)),
                    Reply::Closed => return Err(crate::batches::closed(b)),
                    r => return Err(shape(&format!("batch_join: {r:?}"))),
                };
                Ok(Enqueued {
                    id,
                    due_at_ms: o.due.max(0) as u64,
                    created,
                    replaced: false,
                    existing,
                })
            })
            .collect()
    }
}
