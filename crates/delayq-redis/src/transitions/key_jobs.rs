//! A page of one key's jobs, every shard read through its key index: `lua/key_jobs.lua`.

use delayq::key_jobs::ShardKeyPage;
use delayq::{JobId, JobKey, KeyJobsPage, KeyJobsRequest, QueueName, Result};
use futures::future::try_join_all;

use crate::backend::RedisBackend;
use crate::prelude::which_code;
use crate::protocol::{Flat, reply, script};
use crate::reply::{job_info, state};

/// Most index members one call reads (each shard), so a key of a million jobs filtered down
/// to a few never holds Redis for long: the page then ends early with a cursor.
const SCAN: usize = 4000;

script! {
    file: "key_jobs.lua",
    keys: [Sched, Lease, Dead, Jobs, Ready, Stat, Lane, LaneMeta, LaneGone, Tenants],
    args: {
        /// The key.
        key: String,
        /// The page starts strictly after this id ('' from the first).
        after: String,
        /// The page's size.
        n: usize,
        /// 0: every state but done; else a listing's code ([`crate::prelude::WHICH`]).
        which: u8,
        /// Most index members read.
        scan: usize,
    },
    reply: KeyPage,
}

reply! {
    /// One shard's part of a key's page.
    pub(crate) struct KeyPage as "key_page" {
        /// Matching jobs by id: at most n + 1.
        jobs: Flat<KeyJob>,
        /// '' or the last id read when the call stopped early.
        stopped: Vec<u8>,
        /// The shard's clock (ms).
        now: u64,
    }
}

reply! {
    /// A job of a key's page.
    pub(crate) flat struct KeyJob as "push_key_job" {
        /// The job.
        id: JobId,
        /// Its state's code.
        state: i64,
        /// Its lease deadline or failed-at time (ms), -1 for the other states.
        at: i64,
        /// Its record.
        rec: Vec<u8>,
    }
}

impl RedisBackend {
    /// A page of `key`'s jobs in `queue`: each shard's part (one call each, at once), merged
    /// by id.
    pub(crate) async fn key_page(
        &self,
        queue: &QueueName,
        key: &JobKey,
        req: KeyJobsRequest,
    ) -> Result<KeyJobsPage> {
        req.check()?;
        let route = self.route(queue).await?;
        let which = req.state.map_or(0, which_code);
        let after = req.after.as_ref().map_or("", |a| a.as_str()).to_owned();
        let parts = route.keys.iter().map(|k| {
            let args = Args {
                key: key.to_string(),
                after: after.clone(),
                n: req.limit,
                which,
                scan: SCAN,
            };
            async move {
                let page = self.run(&SCRIPT, k, args, false).await?;
                let mut jobs = Vec::with_capacity(page.jobs.0.len());
                for j in page.jobs.0 {
                    jobs.push(job_info(j.id, state(j.state)?, j.at, &j.rec)?.0);
                }
                let stopped_at = if page.stopped.is_empty() {
                    None
                } else {
                    Some(crate::reply::job_id(redis::Value::BulkString(
                        page.stopped,
                    ))?)
                };
                Ok::<_, delayq::Error>(ShardKeyPage {
                    jobs,
                    stopped_at,
                    now_ms: page.now,
                })
            }
        });
        let parts = try_join_all(parts).await?;
        Ok(KeyJobsPage::merge(parts, req.limit))
    }
}
