//! Pausing and resuming one shard: `lua/pause.lua`.

use delayq::Result;

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;

script! {
    file: "pause.lua",
    keys: [Stat, Wake],
    args: {
        /// Pause (else resume).
        paused: bool,
    },
    reply: bool,
}

impl RedisBackend {
    /// Pauses or resumes shard `k`; whether it is paused after.
    pub(crate) async fn pause_shard(&self, k: &Keys, paused: bool) -> Result<bool> {
        self.run(&SCRIPT, k, Args { paused }, true).await
    }
}
