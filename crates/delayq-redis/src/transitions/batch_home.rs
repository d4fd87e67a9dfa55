//! A batch's own record in its home shard — its state, callbacks and final counts:
//! `lua/batch_home.lua`.

use delayq::batch::{BATCH_KEPT, BatchCounts, BatchInfo, BatchState, CallbackFailure};
use delayq::{BatchId, BatchSpec, Result};

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::keys::Keys;
use crate::protocol::{reply, script};

script! {
    file: "batch_home.lua",
    keys: [Batches, BatchIndex],
    args: {
        /// `open`, `close`, `done`, `failed`, `fired`, `read` or `forget`.
        op: String,
        /// The batch.
        id: String,
        /// Its spec as JSON (`open`).
        spec: String,
        /// Its counts when done: "pending acked dead cancelled" (`done`).
        counts: String,
        /// How long a done batch is kept, ms (`fired`).
        kept_ms: u64,
        /// Why its callbacks failed (`failed`).
        reason: String,
        /// When they are tried next, ms from now (`failed`).
        retry_ms: u64,
    },
    reply: Home,
}

reply! {
    /// A batch's record after the op.
    pub(crate) struct Home as "batch_home" {
        /// `o`, `c`, `f`, `d`; empty: no such batch.
        state: Vec<u8>,
        /// Its spec as JSON.
        spec: Vec<u8>,
        /// Created, ms.
        created: i64,
        /// Done, ms (0: not done).
        done_at: i64,
        /// Its counts when done.
        counts: Vec<u8>,
        /// Why its callbacks failed last (empty: they did not).
        error: Vec<u8>,
        /// Failed tries of its callbacks.
        attempts: i64,
        /// Their next try, ms (0: none planned).
        retry_at: i64,
        /// The store's clock, ms.
        now: i64,
    }
}

/// What to do with a batch's record.
#[derive(Clone)]
pub(crate) enum HomeOp {
    /// Create it open with this spec, unless it exists.
    Open(BatchSpec),
    /// Open → closed.
    Close,
    /// Closed → finishing, with its counts.
    Done(BatchCounts),
    /// Finishing: its callbacks failed with this error, tried again after this long.
    Failed(String, std::time::Duration),
    /// Finishing → done.
    Fired,
    /// Read it.
    Read,
    /// Delete it.
    Forget,
}

/// A batch's record as read.
pub(crate) struct HomeRecord {
    /// Its state (finishing is [`BatchState::Closed`] with `finishing`).
    pub state: BatchState,
    /// Its callbacks are being enqueued (done, not yet marked so).
    pub finishing: bool,
    /// Its spec.
    pub spec: BatchSpec,
    /// Created, ms.
    pub created: u64,
    /// Done, ms.
    pub done_at: Option<u64>,
    /// Its counts once done.
    pub counts: Option<BatchCounts>,
    /// Why its callbacks could not be enqueued so far.
    pub failure: Option<CallbackFailure>,
    /// The store's clock when read, ms.
    pub now: u64,
}

impl HomeRecord {
    /// As a [`BatchInfo`] of `id`, with `live` counts when it has none of its own. A batch
    /// whose callbacks are being enqueued reads as closed (done means they are enqueued), or
    /// as [`BatchState::CallbackFailed`] once they failed.
    pub(crate) fn info(self, id: BatchId, live: BatchCounts) -> BatchInfo {
        BatchInfo {
            id,
            state: match self.failure {
                Some(_) if self.finishing => BatchState::CallbackFailed,
                _ => self.state,
            },
            callback_failure: self.failure,
            counts: self.counts.unwrap_or(live),
            created_ms: self.created,
            done_ms: self.done_at,
            spec: self.spec,
        }
    }
}

fn counts_text(c: BatchCounts) -> String {
    format!("{} {} {} {}", c.pending, c.succeeded, c.dead, c.cancelled)
}

fn counts_of(b: &[u8]) -> Option<BatchCounts> {
    let s = std::str::from_utf8(b).ok()?;
    let n: Vec<u64> = s.split(' ').filter_map(|v| v.parse().ok()).collect();
    match n[..] {
        [pending, succeeded, dead, cancelled] => Some(BatchCounts {
            pending,
            succeeded,
            dead,
            cancelled,
        }),
        _ => None,
    }
}

impl RedisBackend {
    /// `op` on batch `b`'s record in its home shard `k`; the record after it (`None`: none).
    pub(crate) async fn batch_home(
        &self,
        k: &Keys,
        b: &BatchId,
        op: HomeOp,
    ) -> Result<Option<HomeRecord>> {
        let mut args = Args {
            op: String::new(),
            id: b.to_string(),
            spec: String::new(),
            counts: String::new(),
            kept_ms: BATCH_KEPT.as_millis() as u64,
            reason: String::new(),
            retry_ms: 0,
        };
        args.op = match op {
            HomeOp::Open(s) => {
                args.spec = s.to_json();
                "open"
            }
            HomeOp::Close => "close",
            HomeOp::Done(c) => {
                args.counts = counts_text(c);
                "done"
            }
            HomeOp::Failed(reason, after) => {
                args.reason = reason;
                args.retry_ms = after.as_millis() as u64;
                "failed"
            }
            HomeOp::Fired => "fired",
            HomeOp::Read => "read",
            HomeOp::Forget => "forget",
        }
        .to_owned();
        let h: Home = self.run(&SCRIPT, k, args, true).await?;
        let (state, finishing) = match &h.state[..] {
            b"" => return Ok(None),
            b"o" => (BatchState::Open, false),
            b"c" => (BatchState::Closed, false),
            b"f" => (BatchState::Closed, true),
            b"d" => (BatchState::Done, false),
            other => {
                return Err(shape(&format!(
                    "batch_home: state {:?}",
                    String::from_utf8_lossy(other)
                )));
            }
        };
        let spec = BatchSpec::from_json(&String::from_utf8_lossy(&h.spec))?;
        Ok(Some(HomeRecord {
            state,
            finishing,
            spec,
            created: h.created.max(0) as u64,
            done_at: (h.done_at > 0).then_some(h.done_at as u64),
            counts: counts_of(&h.counts),
            failure: (!h.error.is_empty()).then(|| CallbackFailure {
                reason: String::from_utf8_lossy(&h.error).into_owned(),
                attempts: h.attempts.max(0) as u32,
                next_try_ms: h.retry_at.max(0) as u64,
            }),
            now: h.now.max(0) as u64,
        }))
    }
}
