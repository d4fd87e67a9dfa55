//! Putting dead jobs back: `lua/dead_requeue.lua`.

use delayq::{JobId, JobState, QueueName, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;
use crate::reply::Reply;

use super::{ADMIN_CHUNK, Coded};

script! {
    file: "dead_requeue.lua",
    keys: [Sched, Lease, Dead, Jobs, Wake, Ready, Lane, LaneMeta],
    key_tails: [ix],
    args: {
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
    /// Requeues dead job `id`.
    pub(crate) async fn requeue_dead(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let (k, ix) = self.keys_and_bucket(queue, id).await?;
        let args = Args {
            ix,
            one: true,
            id: id.to_string(),
            most: 1,
        };
        match self.run(&SCRIPT, &k, args, true).await?.code {
            Reply::Ok => Ok(()),
            r => Err(r.refusal(id, JobState::Dead)),
        }
    }

    /// Requeues up to [`ADMIN_CHUNK`] of shard `k`'s dead jobs; how many.
    pub(crate) async fn requeue_dead_chunk(&self, k: &Keys) -> Result<u64> {
        let args = Args {
            ix: Vec::new(),
            one: false,
            id: String::new(),
            most: ADMIN_CHUNK,
        };
        Ok(self.run(&SCRIPT, k, args, false).await?.value as u64)
    }
}
