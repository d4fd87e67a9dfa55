//! The arguments of `delayq batch …` (run by `crate::batch`).

use clap::Subcommand;
use delayq::{BatchId, QueueName};

/// `delayq batch …`.
#[derive(Subcommand, Debug)]
pub(crate) enum BatchCommand {
    /// Create a batch of the jobs read from stdin (JSON lines, as `enqueue --jsonl`); it is
    /// closed at once unless --open. When every job has ended (acked, dead or cancelled) the
    /// callbacks are enqueued once: `batch-<id>-complete` (and `batch-<id>-success` when none
    /// is dead), their payload with `batch: {id, total, succeeded, dead, cancelled}` added.
    Create {
        /// The batch's id (generated when absent).
        #[arg(long)]
        id: Option<BatchId>,
        /// Queue of the callback enqueued when every job has ended.
        #[arg(long, value_name = "QUEUE")]
        on_complete: Option<QueueName>,
        /// Queue of the callback enqueued when every job has ended and none is dead.
        #[arg(long, value_name = "QUEUE")]
        on_success: Option<QueueName>,
        /// The callbacks' payload: a JSON object (default `{}`).
        #[arg(long, value_name = "JSON")]
        callback_payload: Option<String>,
        /// Keep the batch open: add jobs with `batch add`, then `batch close`.
        #[arg(long)]
        open: bool,
        /// The callbacks carry the jobs' results.
        #[arg(long)]
        include_results: bool,
    },
    /// Add the jobs read from stdin (JSON lines) to an open batch.
    Add {
        /// The batch.
        id: BatchId,
        /// Close it after these jobs.
        #[arg(long)]
        close: bool,
    },
    /// Close a batch: no job joins it any more; it is done when its last job ends.
    Close {
        /// The batch.
        id: BatchId,
    },
    /// Show a batch: its state and how its jobs ended.
    Get {
        /// The batch.
        id: BatchId,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// The batches of the queue not done yet, oldest first.
    List {
        /// Most batches.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}
