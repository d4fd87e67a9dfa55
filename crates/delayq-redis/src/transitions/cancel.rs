//! Removing a scheduled job: `lua/cancel.lua`.

use delayq::{CancelOutcome, JobId, QueueName, Result};

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::protocol::script;
use crate::reply::Reply;

script! {
    file: "cancel.lua",
    keys: [Sched, Lease, Jobs, Dead, Ready, Lane, LaneMeta, LaneGone, Members],
    key_tails: [ix],
    args: {
        /// The job.
        id: JobId,
    },
    reply: Reply,
}

impl RedisBackend {
    /// Cancels job `id` when it is scheduled.
    pub(crate) async fn cancel_job(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let (k, ix) = self.keys_and_bucket(queue, id).await?;
        let args = Args { ix, id: id.clone() };
        match self.run(&SCRIPT, &k, args, true).await? {
            Reply::Ok => Ok(CancelOutcome::Cancelled),
            Reply::Leased => Ok(CancelOutcome::Leased),
            Reply::Dead => Ok(CancelOutcome::Dead),
            Reply::Missing => Ok(CancelOutcome::NotFound),
            r => Err(shape(&format!("cancel: {r:?}"))),
        }
    }
}
