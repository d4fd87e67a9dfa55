//! One page of a shard's jobs in one state: `lua/list.lua`.

use delayq::{JobId, JobInfo, JobState, ListState, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::prelude::which_code;
use crate::protocol::{Flat, reply, script};
use crate::reply::job_info;

script! {
    file: "list.lua",
    keys: [Sched, Lease, Dead, Jobs, Done, Stat, Ready, Lane, LaneMeta, Turns, Waiting],
    args: {
        /// Which jobs: one of [`WHICH`]'s codes.
        which: u8,
        /// The page's size.
        n: usize,
        /// A cursor is given.
        after: bool,
        /// The cursor's score.
        after_score: u64,
        /// The cursor's id.
        after_id: String,
    },
    reply: ListReply,
}

reply! {
    /// A page of one shard.
    pub(crate) struct ListReply as "list_reply" {
        /// The jobs, by (score, id): at most n + 1.
        jobs: Flat<Listed>,
        /// -1, or the score the call stopped at (its jobs are those scored before it).
        cut: i64,
    }
}

reply! {
    /// A job of a page.
    pub(crate) flat struct Listed as "push_listed" {
        /// The job.
        id: JobId,
        /// Its score (due time, lease deadline, failed-at or retention end, ms).
        score: i64,
        /// Its record.
        rec: Vec<u8>,
    }
}

impl RedisBackend {
    /// One call of `list.lua` on shard `k` from `after` (score, id): appends its jobs (score,
    /// job) to `got`; `Some(d)` when the call stopped early at due time `d` (it read its share
    /// of a lane's entries), to ask again from there.
    pub(crate) async fn list_call(
        &self,
        k: &Keys,
        which: ListState,
        state: JobState,
        limit: usize,
        after: Option<(u64, String)>,
        got: &mut Vec<(u64, JobInfo)>,
    ) -> Result<Option<u64>> {
        let (after_score, after_id) = after.clone().unwrap_or_default();
        let args = Args {
            which: which_code(which),
            n: limit,
            after: after.is_some(),
            after_score,
            after_id,
        };
        let page = self.run(&SCRIPT, k, args, false).await?;
        for j in page.jobs.0 {
            let score = j.score as u64;
            let extra = if matches!(state, JobState::Scheduled | JobState::Done) {
                -1
            } else {
                j.score
            };
            got.push((score, job_info(j.id, state, extra, &j.rec)?.0));
        }
        Ok((page.cut >= 0).then_some(page.cut as u64))
    }
}
