//! The keys of one shard with jobs in flight, due or held (the console's busiest keys):
//! `lua/key_stats.lua`.

use delayq::Result;

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{Flat, reply, script};

script! {
    file: "key_stats.lua",
    keys: [Ready, Jobs, InFlight, Holds, Waits],
    args: {
        /// Most due jobs read from the front of `ready`, and keys from each hash.
        sample: u32,
    },
    reply: Flat<KeyRow>,
}

reply! {
    /// One key of the shard.
    pub(crate) flat struct KeyRow as "push_key_row" {
        /// The key.
        key: Vec<u8>,
        /// Its jobs leased now.
        in_flight: i64,
        /// Its due jobs: parked, and among the first `sample` due.
        due: i64,
        /// The end of its hold, ms (0: not held).
        held: i64,
    }
}

impl RedisBackend {
    /// The keys of shard `k` with jobs in flight, due or held.
    pub(crate) async fn key_stats_shard(&self, k: &Keys, sample: u32) -> Result<Vec<KeyRow>> {
        let Flat(rows) = self.run(&SCRIPT, k, Args { sample }, false).await?;
        Ok(rows)
    }
}
