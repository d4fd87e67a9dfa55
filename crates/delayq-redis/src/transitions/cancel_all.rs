//! Cancelling waiting jobs of one kind in bulk: `lua/cancel_all.lua`.

use delayq::Result;

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;

use super::ADMIN_CHUNK;

script! {
    file: "cancel_all.lua",
    keys: [Sched, Jobs, Ready, Lane, LaneMeta, LaneGone, Stat, Members],
    args: {
        /// Due jobs (else jobs due later than now).
        due_ones: bool,
        /// Most jobs in this call.
        most: usize,
    },
    reply: u64,
}

impl RedisBackend {
    /// Cancels up to [`ADMIN_CHUNK`] of shard `k`'s due (or later) jobs; how many.
    pub(crate) async fn cancel_chunk(&self, k: &Keys, due_ones: bool) -> Result<u64> {
        let args = Args {
            due_ones,
            most: ADMIN_CHUNK,
        };
        self.run(&SCRIPT, k, args, false).await
    }
}
