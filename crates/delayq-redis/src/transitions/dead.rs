//! Putting dead jobs back or deleting them: `lua/dead.lua`.

use delayq::{JobId, JobState, QueueName, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;
use crate::reply::Reply;

use super::{ADMIN_CHUNK, Coded};

script! {
    file: "dead.lua",
    keys: [Sched, Lease, Dead, Jobs, Wake, Ready, Lane, LaneMeta],
    key_tails: [ix],
    args: {
        /// Put the jobs back (else delete them).
        requeue: bool,
        /// The job `id` (else the oldest failures, at most `most`).
        one: bool,
        /// The job, with `one`.
        id: String,
        /// Most jobs in this call, without `one`.
        most: usize,
    },
    reply: Coded,
}

impl RedisBackend {
    /// Requeues (`requeue`) or deletes dead job `id`.
    pub(crate) async fn dead_one(
        &self,
        queue: &QueueName,
        id: &JobId,
        requeue: bool,
    ) -> Result<()> {
        let (k, ix) = self.keys_and_bucket(queue, id).await?;
        let args = Args {
            ix,
            requeue,
            one: true,
            id: id.to_string(),
            most: 1,
        };
        match self.run(&SCRIPT, &k, args, true).await?.code {
            Reply::Ok => Ok(()),
            r => Err(r.refusal(id, JobState::Dead)),
        }
    }

    /// Requeues (`requeue`) or deletes up to [`ADMIN_CHUNK`] of shard `k`'s dead jobs; how
    /// many.
    pub(crate) async fn dead_chunk(&self, k: &Keys, requeue: bool) -> Result<u64> {
        let args = Args {
            ix: Vec::new(),
            requeue,
            one: false,
            id: String::new(),
            most: ADMIN_CHUNK,
        };
        Ok(self.run(&SCRIPT, k, args, false).await?.value as u64)
    }
}
