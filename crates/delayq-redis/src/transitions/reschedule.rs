//! Moving a scheduled job to a new due time: `lua/reschedule.lua`.

use delayq::{Due, JobId, JobState, QueueName, Result};

use crate::backend::RedisBackend;
use crate::protocol::script;
use crate::record;
use crate::reply::Reply;

use super::Coded;

script! {
    file: "reschedule.lua",
    keys: [Sched, Lease, Jobs, Dead, Wake, Ready, Lane, LaneMeta, LaneGone, Waiting],
    key_tails: [ix],
    args: {
        /// The job.
        id: JobId,
        /// How `t` is read: `record::SPEC_NOW`, `SPEC_DELAY` or `SPEC_AT`.
        mode: u8,
        /// The delay or the time, ms.
        t: u64,
    },
    reply: Coded,
}

impl RedisBackend {
    /// Moves scheduled job `id` to `schedule`; its new due time (ms).
    pub(crate) async fn reschedule_job(
        &self,
        queue: &QueueName,
        id: &JobId,
        schedule: Due,
    ) -> Result<u64> {
        let (k, ix) = self.keys_and_bucket(queue, id).await?;
        let (mode, t) = record::when(schedule);
        let args = Args {
            ix,
            id: id.clone(),
            mode,
            t,
        };
        let r = self.run(&SCRIPT, &k, args, true).await?;
        match r.code {
            Reply::Ok => Ok(r.value as u64),
            code => Err(code.refusal(id, JobState::Scheduled)),
        }
    }
}
