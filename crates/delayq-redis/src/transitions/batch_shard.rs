//! One batch's jobs of one shard — their counts and kept results — closing it there or
//! forgetting it: `lua/batch_shard.lua`.

use delayq::batch::BatchCounts;
use delayq::{BatchId, JobId, Result};

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::keys::Keys;
use crate::protocol::{Flat, reply, script};

script! {
    file: "batch_shard.lua",
    keys: [Members],
    args: {
        /// The batch.
        batch: String,
        /// `read`, `close` or `forget`.
        op: String,
        /// Answer the kept results too.
        results: bool,
    },
    helpers: [],
    reply: ShardPart,
}

reply! {
    /// A batch's jobs of one shard.
    pub(crate) struct ShardPart as "batch_shard" {
        /// Pending, acked, dead, cancelled.
        counts: Vec<i64>,
        /// The results kept (with `results`).
        kept: Flat<Kept>,
    }
}

reply! {
    /// A job's kept result.
    pub(crate) flat struct Kept as "push_kept" {
        /// The job.
        id: JobId,
        /// Its result.
        result: Vec<u8>,
    }
}

/// What to do with a batch's part of a shard.
#[derive(Clone, Copy)]
pub(crate) enum ShardOp {
    /// Read its counts.
    Read,
    /// No job joins in this shard from now on; read its counts.
    Close,
    /// Delete its entries.
    Forget,
}

impl RedisBackend {
    /// Batch `b`'s jobs of shard `k`: their counts, and their kept results when `results`.
    pub(crate) async fn batch_shard(
        &self,
        k: &Keys,
        b: &BatchId,
        op: ShardOp,
        results: bool,
    ) -> Result<(BatchCounts, Vec<(JobId, Vec<u8>)>)> {
        let op = match op {
            ShardOp::Read => "read",
            ShardOp::Close => "close",
            ShardOp::Forget => "forget",
        };
        let args = Args {
            batch: b.to_string(),
            op: op.to_owned(),
            results,
        };
        let part: ShardPart = self.run(&SCRIPT, k, args, true).await?;
        let [pending, succeeded, dead, cancelled] = part.counts[..] else {
            return Err(shape("batch_shard: four counts expected"));
        };
        let n = |v: i64| v.max(0) as u64;
        let counts = BatchCounts {
            pending: n(pending),
            succeeded: n(succeeded),
            dead: n(dead),
            cancelled: n(cancelled),
        };
        let Flat(kept) = part.kept;
        Ok((counts, kept.into_iter().map(|k| (k.id, k.result)).collect()))
    }
}
