//! One fire of a schedule into one shard of a sharded queue: `lua/fire_shard.lua`.

use delayq::Result;

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;

script! {
    file: "fire_shard.lua",
    keys: [Sched, Jobs, Wake, Stat, Fired, Lane, LaneMeta],
    key_tails: [ix],
    args: {
        /// The schedule.
        name: String,
        /// The fire, ms in decimal (as the job's id carries it).
        at: String,
        /// The job's attempts.
        max_attempts: u32,
        /// The job's record flags.
        flags: u8,
        /// The job's record after its header (`record::tail`).
        rest: Vec<u8>,
    },
    reply: bool,
}

/// One fire for [`RedisBackend::fire_into_shard`].
pub(crate) struct ShardFire<'a> {
    /// The schedule.
    pub name: &'a str,
    /// The fire, ms.
    pub at: u64,
    /// The job's attempts.
    pub max_attempts: u32,
    /// The job's record flags and the record after its header.
    pub record: (u8, Vec<u8>),
}

impl RedisBackend {
    /// Enqueues one fire into shard `k` unless it took this fire or a later one; whether it did.
    pub(crate) async fn fire_into_shard(
        &self,
        k: &Keys,
        ix: Vec<String>,
        f: ShardFire<'_>,
    ) -> Result<bool> {
        let args = Args {
            ix,
            name: f.name.to_owned(),
            at: f.at.to_string(),
            max_attempts: f.max_attempts,
            flags: f.record.0,
            rest: f.record.1,
        };
        self.run(&SCRIPT, k, args, true).await
    }
}
