//! What a sweep has to do with the batches whose home is one shard: `lua/batch_scan.lua`.

use delayq::{BatchId, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{reply, script};

/// Most batches one scan of a shard answers.
pub(crate) const SCAN_LIMIT: u32 = 1000;

script! {
    file: "batch_scan.lua",
    keys: [Batches, BatchIndex],
    args: {
        /// Most entries read.
        limit: u32,
        /// Answer the open batches too.
        open: bool,
    },
    reply: Scan,
}

reply! {
    /// The batches of a home shard that need a sweep.
    pub(crate) struct Scan as "batch_scan" {
        /// Closed or finishing: may be done.
        due: Vec<Vec<u8>>,
        /// Open (with `open`).
        open: Vec<Vec<u8>>,
        /// Done and past their keeping: to forget.
        gone: Vec<Vec<u8>>,
    }
}

/// The ids of `raw`, those that are ids.
fn ids(raw: Vec<Vec<u8>>) -> Vec<BatchId> {
    raw.into_iter()
        .filter_map(|b| BatchId::new(String::from_utf8(b).ok()?).ok())
        .collect()
}

impl RedisBackend {
    /// The batches of home shard `k` that may be done, the open ones (with `open`), and those
    /// to forget.
    pub(crate) async fn batch_scan(
        &self,
        k: &Keys,
        open: bool,
    ) -> Result<(Vec<BatchId>, Vec<BatchId>, Vec<BatchId>)> {
        let args = Args {
            limit: SCAN_LIMIT,
            open,
        };
        let s: Scan = self.run(&SCRIPT, k, args, false).await?;
        Ok((ids(s.due), ids(s.open), ids(s.gone)))
    }
}
