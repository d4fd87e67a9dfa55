//! Counting one shard's jobs: `lua/stats.lua`.

use delayq::{QueueStats, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{reply, script};

script! {
    file: "stats.lua",
    keys: [Sched, Lease, Dead, Stat, Done, Ready, Jobs, Lane, LaneMeta, LaneGone],
    args: {},
    helpers: [
        now_us, now_ms, rec_due, limits_read, lane_dead, lane_due, lane_hb, lane_tombs, win_key,
        wins_key, wtombs_key, win_width, win_entry, lane_pos,
    ],
    reply: ShardStats,
}

reply! {
    /// One shard's counts (`delayq::QueueStats`'s fields).
    pub(crate) struct ShardStats as "shard_stats" {
        /// Scheduled jobs (due and later).
        scheduled: u64,
        /// Due now.
        due: u64,
        /// Due within the next minute.
        due_next_minute: u64,
        /// Leased.
        leased: u64,
        /// Dead.
        dead: u64,
        /// How overdue the oldest due job is, ms.
        oldest_overdue_ms: u64,
        /// The shard is paused.
        paused: bool,
        /// Due jobs a limit holds back now.
        waiting_on_limit: u64,
        /// Completed jobs kept.
        done: u64,
    }
}

impl RedisBackend {
    /// The counts of shard `k`.
    pub(crate) async fn shard_stats(&self, k: &Keys) -> Result<QueueStats> {
        let s = self.run(&SCRIPT, k, Args {}, false).await?;
        Ok(QueueStats {
            scheduled: s.scheduled,
            due: s.due,
            due_next_minute: s.due_next_minute,
            leased: s.leased,
            dead: s.dead,
            oldest_overdue_ms: s.oldest_overdue_ms,
            paused: s.paused,
            waiting_on_limit: s.waiting_on_limit,
            done: s.done,
        })
    }
}
