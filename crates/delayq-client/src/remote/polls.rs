//! Ending a remote worker's long poll early: once the worker is closing, its claims do not
//! wait, and the one waiting is cut short (`DELETE /v1/queues/{q}/polls/{poll_id}`), so a
//! SIGTERM does not wait out a poll. Jobs the cut poll was handed come back in its answer
//! and are given back by the engine's shutdown, as any held job is.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use delayq::QueueName;

use super::RemoteBackend;

/// Whether the worker is closing, and the long poll it has in flight.
#[derive(Default)]
pub(super) struct Closing {
    closing: AtomicBool,
    /// The queue and `poll_id` of the long poll in flight.
    poll: Mutex<Option<(QueueName, String)>>,
}

impl Closing {
    /// A `poll_id` for a claim on `queue` and how long it may wait, in ms: none and 0 once
    /// closing.
    pub(super) fn start(&self, queue: &QueueName, wait_ms: u64) -> (Option<String>, u64) {
        let mut poll = self.poll.lock().expect("poll lock");
        // Read under the lock: `close` sets the flag, then takes the poll under it, so a poll
        // started here is either seen by `close` or sees the flag.
        if self.closing.load(Ordering::SeqCst) {
            return (None, 0);
        }
        let id = format!("{:016x}", rand::random::<u64>());
        *poll = Some((queue.clone(), id.clone()));
        (Some(id), wait_ms)
    }

    /// The long poll answered.
    pub(super) fn done(&self) {
        *self.poll.lock().expect("poll lock") = None;
    }
}

impl RemoteBackend {
    /// Stops long-polling: later claims answer at once and the poll in flight, if any, is cut
    /// short. For a worker's shutdown; a failure only means the poll runs out on its own.
    pub async fn close(&self) {
        let poll = {
            let mut poll = self.closing.poll.lock().expect("poll lock");
            self.closing.closing.store(true, Ordering::SeqCst);
            poll.take()
        };
        if let Some((queue, id)) = poll
            && let Err(e) = self.client.cut_poll(queue.as_str(), &id).await
        {
            tracing::debug!(error = %e, "cutting the long poll short failed");
        }
    }
}
