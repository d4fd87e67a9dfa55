//! Batches: jobs enqueued together whose ends — each acked, dead or cancelled — enqueue a
//! callback job once ([`Batches`]), its payload extended with how they ended.
//!
//! A batch lives in the queue of its jobs. It is *open* while jobs may join it, *closed* once
//! none may (its create call closes it unless asked not to), and *done* once it was closed and
//! every job of it had ended: its callbacks are then enqueued — `on_complete` always,
//! `on_success` only when none of its jobs is dead — with the ids `batch-<id>-complete` and
//! `batch-<id>-success` and a dedupe window of [`CALLBACK_DEDUPE`], so a repeated enqueue
//! (a sweep after a crash) creates nothing.

use std::future::Future;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{InvalidInput, Result};
use crate::job::{Due, Enqueued, NewJob, Retention};
use crate::limits::MAX_ID_BYTES;
use crate::name::{JobId, QueueName};

/// How a batch's callback job ids begin: `batch-<id>-complete`, `batch-<id>-success`.
const CALLBACK_PREFIX: &str = "batch-";
/// How its `on_complete` callback's id ends.
const COMPLETE_SUFFIX: &str = "-complete";
/// How its `on_success` callback's id ends.
const SUCCESS_SUFFIX: &str = "-success";

/// Longest batch id: `batch-<id>-complete` must be a job id.
pub const MAX_BATCH_ID_BYTES: usize = MAX_ID_BYTES - CALLBACK_PREFIX.len() - COMPLETE_SUFFIX.len();

/// Most job results a callback carries (`include_results`).
pub const MAX_CALLBACK_RESULTS: usize = 1_000;

/// Most bytes of job results a callback carries (`include_results`): results past it are left
/// out and the payload says how many (`results_left_out`).
pub const MAX_CALLBACK_RESULT_BYTES: usize = 1 << 20;

/// What a batch's callback can still carry of its jobs' results: at most
/// [`MAX_CALLBACK_RESULTS`] results and [`MAX_CALLBACK_RESULT_BYTES`] bytes. A store keeps a
/// batch's results within it as its jobs end — a result past it is only counted — and reads
/// them within it when the batch is done, so a batch costs what its callback carries, not
/// what its jobs returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResultRoom {
    /// Results it may still take.
    pub count: usize,
    /// Bytes it may still take.
    pub bytes: usize,
}

impl Default for ResultRoom {
    fn default() -> Self {
        Self {
            count: MAX_CALLBACK_RESULTS,
            bytes: MAX_CALLBACK_RESULT_BYTES,
        }
    }
}

impl ResultRoom {
    /// Takes a result of `len` bytes when it fits; whether it did.
    pub fn take(&mut self, len: usize) -> bool {
        if self.count == 0 || len > self.bytes {
            return false;
        }
        self.count -= 1;
        self.bytes -= len;
        true
    }
}

/// The results a done batch's callbacks carry, and how many were left out (past the
/// [`ResultRoom`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeptResults {
    /// Job id → its result, at most a [`ResultRoom`]'s worth.
    pub results: Vec<(JobId, Vec<u8>)>,
    /// Results left out.
    pub left_out: u64,
}

/// How long after a callback job is done a second enqueue of its id still creates nothing.
pub const CALLBACK_DEDUPE: Duration = Duration::from_secs(30 * 24 * 3600);

/// A batch's id: 1–[`MAX_BATCH_ID_BYTES`] bytes of text without control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BatchId(String);

impl BatchId {
    /// Validates an id.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidInput> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_BATCH_ID_BYTES {
            return Err(InvalidInput::BatchId(format!(
                "length {} is outside 1-{MAX_BATCH_ID_BYTES} bytes",
                id.len()
            )));
        }
        if id.chars().any(char::is_control) {
            return Err(InvalidInput::BatchId(format!(
                "{id:?} contains control characters"
            )));
        }
        Ok(Self(id))
    }

    /// A new unique id.
    pub fn generate() -> Self {
        Self(JobId::generate().as_str().to_owned())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of its `on_complete` callback job: `batch-<id>-complete`.
    pub fn complete_job(&self) -> JobId {
        self.callback_job(COMPLETE_SUFFIX)
    }

    /// The id of its `on_success` callback job: `batch-<id>-success`.
    pub fn success_job(&self) -> JobId {
        self.callback_job(SUCCESS_SUFFIX)
    }

    fn callback_job(&self, suffix: &str) -> JobId {
        JobId::new(format!("{CALLBACK_PREFIX}{}{suffix}", self.0))
            .expect("bounded by MAX_BATCH_ID_BYTES")
    }
}

/// Whether `id` has the form of a batch's callback job, `batch-<id>-complete` or
/// `batch-<id>-success`: ids reserved for the batches, refused to every producer so that no
/// one can enqueue a callback's id first and run a forged payload in its place.
pub fn is_callback_id(id: &JobId) -> bool {
    id.as_str()
        .strip_prefix(CALLBACK_PREFIX)
        .is_some_and(|rest| {
            [COMPLETE_SUFFIX, SUCCESS_SUFFIX]
                .iter()
                .any(|end| rest.len() > end.len() && rest.ends_with(end))
        })
}

impl std::fmt::Display for BatchId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for BatchId {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, InvalidInput> {
        Self::new(s)
    }
}

impl TryFrom<String> for BatchId {
    type Error = InvalidInput;
    fn try_from(s: String) -> Result<Self, InvalidInput> {
        Self::new(s)
    }
}

impl From<BatchId> for String {
    fn from(id: BatchId) -> String {
        id.0
    }
}

/// A job enqueued when a batch is done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Callback {
    /// The queue it goes to (any queue, the batch's own among them).
    pub queue: QueueName,
    /// Its payload: a JSON object, to which the callback adds `batch` (see [`callbacks`]).
    #[serde(default = "empty_object")]
    pub payload: serde_json::Value,
    /// Due this long after the batch is done, ms.
    #[serde(default)]
    pub delay_ms: u64,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl Callback {
    /// A callback to `queue` with an empty payload, due at once.
    pub fn new(queue: QueueName) -> Self {
        Self {
            queue,
            payload: empty_object(),
            delay_ms: 0,
        }
    }

    /// Checks that its payload is a JSON object of at most `max_payload` bytes and its delay
    /// is in range.
    pub fn validate(&self, max_payload: usize) -> Result<(), InvalidInput> {
        if !self.payload.is_object() {
            return Err(InvalidInput::Payload(
                "a callback's payload must be a JSON object (the callback adds `batch` to it)"
                    .into(),
            ));
        }
        let size = serde_json::to_vec(&self.payload).map_or(0, |v| v.len());
        if size > max_payload {
            return Err(InvalidInput::PayloadTooLarge {
                size,
                limit: max_payload,
            });
        }
        Due::Delay(Duration::from_millis(self.delay_ms)).validate(0)
    }
}

/// What a batch does when done: stored with it when it is created.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchSpec {
    /// Enqueued when every job has ended, however.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_complete: Option<Callback>,
    /// Enqueued when every job has ended and none is dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<Callback>,
    /// The callbacks carry the jobs' results (at most [`MAX_CALLBACK_RESULTS`] of them and
    /// [`MAX_CALLBACK_RESULT_BYTES`] in all).
    #[serde(default)]
    pub include_results: bool,
}

impl BatchSpec {
    /// As stored: JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Read back from [`BatchSpec::to_json`].
    pub fn from_json(s: &str) -> Result<Self, InvalidInput> {
        serde_json::from_str(s).map_err(|e| InvalidInput::Payload(format!("a batch's spec: {e}")))
    }

    /// Checks both callbacks.
    pub fn validate(&self, max_payload: usize) -> Result<(), InvalidInput> {
        for cb in self.on_complete.iter().chain(&self.on_success) {
            cb.validate(max_payload)?;
        }
        Ok(())
    }
}

/// Where a batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchState {
    /// Jobs may join it.
    Open,
    /// No job may join; it is done when the last of its jobs ends.
    Closed,
    /// Closed and every job ended: its callbacks were enqueued.
    Done,
    /// Closed and every job ended, but its callbacks could not be enqueued (the reason is in
    /// [`BatchInfo::callback_failure`]): tried again with a backoff until they are. Only a
    /// store that enqueues callbacks apart from the step that ends the last job (Redis) can
    /// leave a batch here.
    CallbackFailed,
}

impl BatchState {
    /// Its name on the wire: `open`, `closed`, `done`, `callback_failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Done => "done",
            Self::CallbackFailed => "callback_failed",
        }
    }

    /// The state named `s` ([`BatchState::as_str`]).
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Open, Self::Closed, Self::Done, Self::CallbackFailed]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Why a batch's callbacks could not be enqueued, and when they are tried next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallbackFailure {
    /// The last try's error.
    pub reason: String,
    /// Tries so far.
    pub attempts: u32,
    /// The next try, ms since the epoch (store clock).
    pub next_try_ms: u64,
}

/// How long after its `n`-th failed try (from 1) a batch's callbacks are tried again: one
/// second doubled per try, at most five minutes.
pub fn callback_retry_in(n: u32) -> Duration {
    let ms = 1_000u64.saturating_mul(1 << n.saturating_sub(1).min(16));
    Duration::from_millis(ms.min(300_000))
}

/// How a job of a batch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Acknowledged.
    Succeeded,
    /// Dead-lettered (attempts used up, expired, or failed for good).
    Dead,
    /// Cancelled before it ended otherwise.
    Cancelled,
}

/// How a batch's jobs stand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchCounts {
    /// Jobs not ended yet.
    pub pending: u64,
    /// Jobs acknowledged.
    pub succeeded: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
}

impl BatchCounts {
    /// Every job that joined.
    pub fn total(&self) -> u64 {
        self.pending + self.succeeded + self.dead + self.cancelled
    }

    /// These plus `other` (a batch's counts are kept per shard on Redis).
    pub fn plus(self, other: BatchCounts) -> BatchCounts {
        BatchCounts {
            pending: self.pending + other.pending,
            succeeded: self.succeeded + other.succeeded,
            dead: self.dead + other.dead,
            cancelled: self.cancelled + other.cancelled,
        }
    }

    /// The count of `ending` raised by one.
    pub fn count(&mut self, ending: Ending) {
        match ending {
            Ending::Succeeded => self.succeeded += 1,
            Ending::Dead => self.dead += 1,
            Ending::Cancelled => self.cancelled += 1,
        }
    }
}

/// A batch as read.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchInfo {
    /// Its id.
    pub id: BatchId,
    /// Open, closed or done.
    pub state: BatchState,
    /// Its jobs' ends so far.
    pub counts: BatchCounts,
    /// When it was created, ms since the epoch (store clock).
    pub created_ms: u64,
    /// When it was done, ms since the epoch.
    pub done_ms: Option<u64>,
    /// Its callbacks.
    pub spec: BatchSpec,
    /// Why its callbacks could not be enqueued yet ([`BatchState::CallbackFailed`]).
    pub callback_failure: Option<CallbackFailure>,
}

/// What a create or add call did.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchAdded {
    /// The batch's id (the given one or a generated one).
    pub id: BatchId,
    /// Per job, in order: created (it joined), or an existing job's id (it did not).
    pub jobs: Vec<Enqueued>,
}

/// What a create call puts: batch `id` (generated when `None`) with `spec`'s callbacks and
/// `jobs`, closed unless `open` ([`Batches::put_batch`]).
#[derive(Clone, Debug)]
pub struct BatchPut {
    /// The batch's id; `None`: a generated one.
    pub id: Option<BatchId>,
    /// Its callbacks (kept when the batch exists and is open: the spec is not changed).
    pub spec: BatchSpec,
    /// The jobs to enqueue into it, already validated.
    pub jobs: Vec<NewJob>,
    /// Leave it open for more jobs ([`Batches::add_to_batch`]); `false` closes it.
    pub open: bool,
}

/// What an add call puts into the open batch `id`: `jobs`, then it closes the batch when
/// `close` ([`Batches::add_to_batch`]).
#[derive(Clone, Debug)]
pub struct BatchAdd {
    /// The batch.
    pub id: BatchId,
    /// The jobs to enqueue into it, already validated.
    pub jobs: Vec<NewJob>,
    /// Close it after them.
    pub close: bool,
}

/// Batches of one store. Every method is safe to retry: a job joins once (by its id), a
/// callback is enqueued once (by its id, with a dedupe window).
pub trait Batches: Clone + Send + Sync + 'static {
    /// Creates batch `put.id` (generated when `None`) of `queue` with `put.spec` — or, when
    /// it exists and is open, adds to it (its spec unchanged) — and enqueues `put.jobs` into
    /// it; closes it unless `put.open`. A job whose id exists does not join (`created:
    /// false`). Fails with [`crate::Error::Conflict`] when the batch exists and is closed.
    fn put_batch(
        &self,
        queue: &QueueName,
        put: BatchPut,
    ) -> impl Future<Output = Result<BatchAdded>> + Send;

    /// Enqueues `add.jobs` into the open batch `add.id`, then closes it when `add.close`.
    /// Fails with [`crate::Error::Conflict`] when it is closed; `None` when there is no such
    /// batch.
    fn add_to_batch(
        &self,
        queue: &QueueName,
        add: BatchAdd,
    ) -> impl Future<Output = Result<Option<BatchAdded>>> + Send;

    /// Closes batch `id` (no job may join it any more; closing a closed batch changes
    /// nothing). `None` when there is no such batch.
    fn close_batch(
        &self,
        queue: &QueueName,
        id: &BatchId,
    ) -> impl Future<Output = Result<Option<BatchInfo>>> + Send;

    /// One batch, `None` when there is none (a done batch is kept for [`BATCH_KEPT`]).
    fn batch(
        &self,
        queue: &QueueName,
        id: &BatchId,
    ) -> impl Future<Output = Result<Option<BatchInfo>>> + Send;

    /// Up to `limit` batches of `queue` not done yet, oldest first.
    fn open_batches(
        &self,
        queue: &QueueName,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<BatchInfo>>> + Send;

    /// Finishes batches whose jobs have all ended and enqueues their callbacks; returns how
    /// many it finished. A store that finishes a batch in the step that ends its last job
    /// (the embedded one) has nothing to do here; on Redis, where a batch's jobs may be on
    /// several shards, every `delayq serve` and `delayq worker` runs it ([`BatchSweeper`]):
    /// it looks at the batches whose last job in a shard ended since the last look, and with
    /// `thorough` at every closed batch (what a crash between two steps left) and forgets
    /// done batches past [`BATCH_KEPT`].
    fn finish_batches(&self, thorough: bool) -> impl Future<Output = Result<usize>> + Send;
}

/// How long a done batch stays readable.
pub const BATCH_KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often a [`BatchSweeper`] looks for batches to finish.
pub const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// Every how many looks a [`BatchSweeper`]'s look is thorough (the first one is too).
pub const THOROUGH_EVERY: u64 = 20;

/// The callbacks of a done batch: `(queue, job)` pairs, each job's payload its callback's
/// with `batch: {id, total, succeeded, dead, cancelled[, results, results_left_out]}` added
/// (`results`: job id → its result, JSON when it parses as JSON, else text; at most a
/// [`ResultRoom`]'s worth, the rest counted in `results_left_out`).
pub fn callbacks(
    id: &BatchId,
    spec: &BatchSpec,
    counts: BatchCounts,
    kept: &KeptResults,
) -> Vec<(QueueName, NewJob)> {
    let mut out = Vec::new();
    let mut end = serde_json::json!({
        "id": id.as_str(),
        "total": counts.total(),
        "succeeded": counts.succeeded,
        "dead": counts.dead,
        "cancelled": counts.cancelled,
    });
    if spec.include_results {
        let mut map = serde_json::Map::new();
        let mut room = ResultRoom::default();
        let mut left_out = kept.left_out;
        for (job, r) in &kept.results {
            if !room.take(r.len()) {
                left_out += 1;
                continue;
            }
            let v = serde_json::from_slice(r)
                .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(r).into()));
            map.insert(job.as_str().to_owned(), v);
        }
        end["results"] = serde_json::Value::Object(map);
        if left_out > 0 {
            end["results_left_out"] = left_out.into();
        }
    }
    let success = counts.dead == 0;
    let pairs = [
        (spec.on_complete.as_ref(), id.complete_job()),
        (
            spec.on_success.as_ref().filter(|_| success),
            id.success_job(),
        ),
    ];
    for (cb, job_id) in pairs {
        let Some(cb) = cb else { continue };
        let mut payload = cb.payload.clone();
        if let Some(obj) = payload.as_object_mut() {
            obj.insert("batch".into(), end.clone());
        }
        let job = NewJob::new(serde_json::to_vec(&payload).unwrap_or_default())
            .id(job_id)
            .due(Due::Delay(Duration::from_millis(cb.delay_ms)))
            .retention(Retention {
                keep_done_ms: 0,
                dedupe_ms: CALLBACK_DEDUPE.as_millis() as u64,
            });
        out.push((cb.queue.clone(), job));
    }
    out
}

/// Runs [`Batches::finish_batches`] every [`SWEEP_EVERY`] until dropped (errors are logged
/// and retried: a batch waits, nothing is lost).
pub struct BatchSweeper<S> {
    store: S,
    every: Duration,
}

impl<S: Batches> BatchSweeper<S> {
    /// A sweeper of `store`.
    pub fn new(store: S) -> Self {
        Self {
            store,
            every: SWEEP_EVERY,
        }
    }

    /// Looks this often instead.
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    /// Sweeps forever.
    pub async fn run(self) {
        for round in 0u64.. {
            let thorough = round % THOROUGH_EVERY == 0;
            if let Err(e) = self.store.finish_batches(thorough).await {
                tracing::warn!(error = %e, "finishing batches failed; retrying");
            }
            tokio::time::sleep(self.every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_are_retried_ever_later_up_to_five_minutes() {
        let s = |n| callback_retry_in(n).as_secs();
        assert_eq!([s(1), s(2), s(3), s(9)], [1, 2, 4, 256]);
        assert_eq!(s(10), 300);
        assert_eq!(s(u32::MAX), 300);
    }

    #[test]
    fn a_result_room_takes_what_fits() {
        let mut room = ResultRoom::default();
        assert!(!room.take(MAX_CALLBACK_RESULT_BYTES + 1));
        assert!(room.take(MAX_CALLBACK_RESULT_BYTES - 10));
        assert!(!room.take(11));
        assert!(room.take(10));
        assert_eq!(room.count, MAX_CALLBACK_RESULTS - 2);
        let mut full = ResultRoom {
            count: 0,
            bytes: 100,
        };
        assert!(!full.take(1));
    }

    #[test]
    fn every_callback_id_is_reserved_and_only_those() {
        for b in ["b", "x-complete", "1", &"y".repeat(MAX_BATCH_ID_BYTES)] {
            let b = BatchId::new(b).unwrap();
            assert!(is_callback_id(&b.complete_job()), "{b}");
            assert!(is_callback_id(&b.success_job()), "{b}");
        }
        for free in [
            "batch-",
            "batch--complete",
            "my-batch-1-complete",
            "batch-1-done",
        ] {
            assert!(!is_callback_id(&JobId::new(free).unwrap()), "{free}");
        }
    }
}
