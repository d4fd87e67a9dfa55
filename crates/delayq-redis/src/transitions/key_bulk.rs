//! Every waiting job of one key cancelled or moved, atomically per shard: `lua/key_bulk.lua`.

use delayq::{JobKey, KeyCancelled, KeyMove, QueueName, Result};
use futures::future::try_join_all;

use crate::backend::RedisBackend;
use crate::protocol::{reply, script};

/// The script's operations (the Lua prelude defines each name).
pub(crate) const OPS: [(&str, u8); 3] = [
    ("KEY_CANCEL", 1),
    ("KEY_CANCEL_RUNNING", 2),
    ("KEY_MOVE", 3),
];

script! {
    file: "key_bulk.lua",
    keys: [
        Sched, Lease, Dead, Jobs, Ready, Stat, Wake, Lane, LaneMeta, LaneGone, InFlight, Waits,
        Members, Cancelled, Tenants
    ],
    args: {
        /// The key.
        key: String,
        /// One of [`OPS`].
        op: u8,
        /// KEY_MOVE: each job by `t` from its due time (else all to `t`).
        shift: bool,
        /// KEY_MOVE: the shift or the time (ms).
        t: i64,
    },
    reply: KeyBulk,
}

reply! {
    /// What one shard's call did.
    pub(crate) struct KeyBulk as "key_bulk" {
        /// Jobs cancelled or moved.
        n: u64,
        /// Of the cancelled, those that were running.
        running: u64,
    }
}

impl RedisBackend {
    /// Runs `key_bulk.lua` on every shard of `queue` at once; the shards' counts summed.
    async fn key_bulk(
        &self,
        queue: &QueueName,
        key: &JobKey,
        op: u8,
        to: KeyMove,
    ) -> Result<KeyCancelled> {
        let route = self.route(queue).await?;
        let (mode, t) = to.as_pair();
        let calls = route.keys.iter().map(|k| {
            let args = Args {
                key: key.to_string(),
                op,
                shift: mode == 0,
                t,
            };
            self.run(&SCRIPT, k, args, true)
        });
        let mut out = KeyCancelled::default();
        for r in try_join_all(calls).await? {
            out += KeyCancelled {
                cancelled: r.n,
                running: r.running,
            };
        }
        Ok(out)
    }

    /// Cancels `key`'s waiting jobs in `queue` (with `running` its leased ones too).
    pub(crate) async fn cancel_key_jobs(
        &self,
        queue: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<KeyCancelled> {
        let op = if running { OPS[1].1 } else { OPS[0].1 };
        self.key_bulk(queue, key, op, KeyMove::Shift(0)).await
    }

    /// Moves `key`'s waiting jobs in `queue`; returns how many moved.
    pub(crate) async fn move_key_jobs(
        &self,
        queue: &QueueName,
        key: &JobKey,
        to: KeyMove,
    ) -> Result<u64> {
        to.check()?;
        Ok(self.key_bulk(queue, key, OPS[2].1, to).await?.cancelled)
    }
}
