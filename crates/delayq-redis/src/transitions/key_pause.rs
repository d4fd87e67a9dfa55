//! Holding one key's jobs in one shard until a time, or lifting the hold:
//! `lua/key_pause.lua`.

use delayq::Result;

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;

script! {
    file: "key_pause.lua",
    keys: [Holds, Waits, Wake],
    args: {
        /// The key.
        key: String,
        /// The hold's end, ms (0 with `for_ms` 0: lift it).
        until_ms: u64,
        /// The hold's length from the store's clock, ms (0: `until_ms` says).
        for_ms: u64,
    },
    reply: u64,
}

impl RedisBackend {
    /// Holds `key` in shard `k` until `until_ms`, or for `for_ms` (neither: lifts the hold);
    /// the hold's end (0: none).
    pub(crate) async fn key_pause_shard(
        &self,
        k: &Keys,
        key: &str,
        until_ms: u64,
        for_ms: u64,
    ) -> Result<u64> {
        let args = Args {
            key: key.to_owned(),
            until_ms,
            for_ms,
        };
        self.run(&SCRIPT, k, args, true).await
    }
}
