//! One batch's jobs of one shard — their counts and kept results — closing it there,
//! dropping its results or forgetting it: `lua/batch_shard.lua`.

use delayq::batch::{BatchCounts, ResultRoom};
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
        /// `read`, `close`, `drop` or `forget`.
        op: String,
        /// Answer the kept results too.
        results: bool,
        /// Most results to answer.
        room_count: u64,
        /// Most bytes of results to answer.
        room_bytes: u64,
    },
    reply: ShardPart,
}

reply! {
    /// A batch's jobs of one shard.
    pub(crate) struct ShardPart as "batch_shard" {
        /// Pending, acked, dead, cancelled.
        counts: Vec<i64>,
        /// The results kept (with `results`), within the room.
        kept: Flat<Kept>,
        /// Results of this shard not answered.
        left_out: i64,
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
    /// Delete its kept results (its callbacks are enqueued); keep none from now on.
    Drop,
    /// Delete its entries.
    Forget,
}

/// A shard's part of a batch: its counts, the results it answered and how many it left out.
pub(crate) struct Part {
    /// Its jobs' counts.
    pub counts: BatchCounts,
    /// Job id → result, within the room asked.
    pub kept: Vec<(JobId, Vec<u8>)>,
    /// Results not answered (past the room, or never kept).
    pub left_out: u64,
}

impl RedisBackend {
    /// Batch `b`'s jobs of shard `k`: their counts, and their kept results within `room`
    /// when given.
    pub(crate) async fn batch_shard(
        &self,
        k: &Keys,
        b: &BatchId,
        op: ShardOp,
        room: Option<ResultRoom>,
    ) -> Result<Part> {
        let op = match op {
            ShardOp::Read => "read",
            ShardOp::Close => "close",
            ShardOp::Drop => "drop",
            ShardOp::Forget => "forget",
        };
        let r = room.unwrap_or(ResultRoom { count: 0, bytes: 0 });
        let args = Args {
            batch: b.to_string(),
            op: op.to_owned(),
            results: room.is_some(),
            room_count: r.count as u64,
            room_bytes: r.bytes as u64,
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
        Ok(Part {
            counts,
            kept: kept.into_iter().map(|k| (k.id, k.result)).collect(),
            left_out: part.left_out.max(0) as u64,
        })
    }
}
