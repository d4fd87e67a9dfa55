//! The batches left with no pending job in one shard — where the sweeps look first — and
//! dropping such a mark once looked at: `lua/batch_ready.lua`.

use delayq::{BatchId, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{Flat, reply, script};

/// Most marks one read answers.
const READ_LIMIT: u32 = 1000;

script! {
    file: "batch_ready.lua",
    keys: [Members],
    args: {
        /// `read` or `unmark`.
        op: String,
        /// The batch to unmark.
        id: String,
        /// The time of the mark read (`unmark`: only that mark goes).
        at: i64,
        /// Most marks read.
        limit: u32,
    },
    reply: Flat<Mark>,
}

reply! {
    /// A batch left with no pending job in the shard.
    pub(crate) flat struct Mark as "push_mark" {
        /// The batch.
        id: Vec<u8>,
        /// When, ms.
        at: i64,
    }
}

impl RedisBackend {
    /// The batches marked in shard `k` as left with no pending job there, with when.
    pub(crate) async fn batch_marks(&self, k: &Keys) -> Result<Vec<(BatchId, i64)>> {
        let args = Args {
            op: "read".into(),
            id: String::new(),
            at: 0,
            limit: READ_LIMIT,
        };
        let Flat(marks) = self.run(&SCRIPT, k, args, false).await?;
        Ok(marks
            .into_iter()
            .filter_map(|m| {
                let id = BatchId::new(String::from_utf8(m.id).ok()?).ok()?;
                Some((id, m.at))
            })
            .collect())
    }

    /// Drops the mark of `b` in shard `k` if it is still the one made at `at`.
    pub(crate) async fn batch_unmark(&self, k: &Keys, b: &BatchId, at: i64) -> Result<()> {
        let args = Args {
            op: "unmark".into(),
            id: b.to_string(),
            at,
            limit: 0,
        };
        let Flat(_) = self.run(&SCRIPT, k, args, true).await?;
        Ok(())
    }
}
