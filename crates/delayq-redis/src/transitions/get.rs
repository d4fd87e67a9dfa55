//! Reading one job in any state: `lua/get.lua`.

use delayq::{JobId, JobInfo, QueueName, Result};

use crate::backend::RedisBackend;
use crate::protocol::{reply, script};
use crate::reply::{job_info_deps, state};

script! {
    file: "get.lua",
    keys: [Sched, Lease, Jobs, Dead, Lane, LaneMeta, Waiting],
    key_tails: [ix],
    args: {
        /// The job.
        id: JobId,
    },
    reply: Option<Found>,
}

reply! {
    /// A job found.
    pub(crate) struct Found as "found" {
        /// Its state's code.
        state: i64,
        /// Its lease deadline or failed-at time, ms; -1 for the other states.
        at: i64,
        /// Its record.
        rec: Vec<u8>,
    }
}

impl RedisBackend {
    /// Job `id` of `queue`, in any state.
    pub(crate) async fn get_job(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let (k, ix) = self.keys_and_bucket(queue, id).await?;
        let args = Args { ix, id: id.clone() };
        match self.run(&SCRIPT, &k, args, false).await? {
            None => Ok(None),
            Some(f) => {
                let (mut info, _, deps) = job_info_deps(id.clone(), state(f.state)?, f.at, &f.rec)?;
                if deps.is_some() {
                    // Its dependencies, while it has not ended (deps.lua: `dg:<id>`).
                    info.dependencies = self.dep_statuses(&k, id).await?;
                }
                if self.is_watched(queue) {
                    info.dependents = self.dependents_of(&k, id).await?;
                }
                Ok(Some(info))
            }
        }
    }
}
