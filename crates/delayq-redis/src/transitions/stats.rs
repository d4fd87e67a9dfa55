//! Counting one shard's jobs: `lua/stats.lua`.

use delayq::{QueueStats, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{reply, script};

script! {
    file: "stats.lua",
    keys: [Sched, Lease, Dead, Stat, Done, Ready, Jobs, Lane, LaneMeta, LaneGone, Waiting],
    args: {},
    reply: QueueStats,
}

reply! {
    impl QueueStats as "shard_stats" {
        scheduled: u64,
        due: u64,
        due_next_minute: u64,
        leased: u64,
        dead: u64,
        oldest_overdue_ms: u64,
        paused: bool,
        waiting_on_limit: u64,
        done: u64,
        awaiting: u64,
    }
}

impl RedisBackend {
    /// The counts of shard `k`.
    pub(crate) async fn shard_stats(&self, k: &Keys) -> Result<QueueStats> {
        self.run(&SCRIPT, k, Args {}, false).await
    }
}
