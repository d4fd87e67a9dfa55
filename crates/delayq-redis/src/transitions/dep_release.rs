//! Telling a dependent how dependencies ended, and settling it: `lua/dep_release.lua`.

use delayq::{JobId, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{item, script};
use crate::transitions::Coded;

script! {
    file: "dep_release.lua",
    keys: [Sched, Jobs, Dead, Waiting, Wake, Stat, Members, DepReg],
    args: {
        /// The dependent.
        id: JobId,
        /// Its waiters are all registered now.
        registered: bool,
    },
    tail: ends: DepEnd,
    reply: Coded,
}

item! {
    /// One dependency's end.
    pub(crate) struct DepEnd {
        /// `<queue>\0<id>`.
        field: Vec<u8>,
        /// `o`, `d` or `c`.
        how: Vec<u8>,
        /// Its result ('' : none).
        result: Vec<u8>,
    }
}

impl RedisBackend {
    /// Tells dependent `id` of shard `k` of `ends`; returns how many outbox entries its own
    /// end posted (0 unless it was dead-lettered or cancelled and jobs wait for it).
    pub(crate) async fn dep_release(
        &self,
        k: &Keys,
        id: JobId,
        registered: bool,
        ends: Vec<DepEnd>,
    ) -> Result<i64> {
        let args = Args {
            id,
            registered,
            ends,
        };
        Ok(self.run(&SCRIPT, k, args, true).await?.value)
    }
}
