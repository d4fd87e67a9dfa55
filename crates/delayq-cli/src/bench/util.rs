//! Pieces every workload uses: the docs/BENCHMARKS.md payload and ids, nearest-rank percentiles,
//! an in-process consumer that records what it ran, and `delayq worker` processes.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::{Consumer, ConsumerOptions, Due, Failure, Job, JobId, NewJob, QueueName};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

use super::env::Env;
pub(crate) use super::env::queue;
use crate::backend::AnyBackend;

/// `orderId` of job `i`: "1" and `i` zero-padded to 19 digits.
pub(crate) fn order_id(i: usize) -> String {
    format!("1{i:019}")
}

/// `--prefetch`: the consumers' prefetch.
pub(crate) static PREFETCH: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(delayq::consumer::DEFAULT_PREFETCH);

/// The prefetch the bench's consumers use.
pub(crate) fn prefetch() -> usize {
    PREFETCH.load(std::sync::atomic::Ordering::Relaxed)
}

/// `--one-delay`: every job of W1, W2 and W4 gets the middle of its workload's delay range.
pub(crate) static ONE_DELAY: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// `--result-bytes`: in-process consumers return a result of this many bytes per job.
pub(crate) static RESULT_BYTES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// `--priorities`: job `i` gets the priority `i % 10`.
pub(crate) static PRIORITIES: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Job `i` of docs/BENCHMARKS.md: 100 bytes of compact JSON, its orderId as the job id.
pub(crate) fn job(i: usize, schedule: Due) -> NewJob {
    let id = order_id(i);
    let payload = format!(
        r#"{{"orderId":"{id}","action":"cancel","pad":"{}"}}"#,
        "x".repeat(39)
    );
    debug_assert_eq!(payload.len(), 100);
    let job = NewJob::new(payload.into_bytes())
        .id(JobId::new(id).expect("valid id"))
        .due(schedule);
    if PRIORITIES.load(std::sync::atomic::Ordering::Relaxed) {
        job.priority((i % 10) as u8)
    } else {
        job
    }
}

/// The index `i` of an orderId.
pub(crate) fn index_of(id: &str) -> Option<usize> {
    id.get(1..)?.parse().ok()
}

/// This host's time in ms since the epoch, with sub-ms precision.
pub(crate) fn now_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

pub(crate) use crate::percentiles::percentiles;

/// A progress bar for `n` steps (hidden when stderr is not a terminal).
pub(crate) fn bar(n: usize, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(n as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_owned());
    pb
}

/// Enqueues jobs `range` with `schedule(i)` in batches of 1,000.
pub(crate) async fn fill(
    b: &AnyBackend,
    range: std::ops::Range<usize>,
    what: &str,
    schedule: impl Fn(usize) -> Due,
) -> anyhow::Result<()> {
    fill_in(b, &queue(), range, what, schedule).await
}

/// [`fill`] into queue `q`.
pub(crate) async fn fill_in(
    b: &AnyBackend,
    q: &QueueName,
    range: std::ops::Range<usize>,
    what: &str,
    schedule: impl Fn(usize) -> Due,
) -> anyhow::Result<()> {
    let p = delayq::Producer::new(b.clone(), q.clone());
    let pb = bar(range.len(), what);
    let mut i = range.start;
    while i < range.end {
        let end = (i + 1000).min(range.end);
        p.enqueue_batch((i..end).map(|k| job(k, schedule(k))).collect())
            .await?;
        pb.inc((end - i) as u64);
        i = end;
    }
    pb.finish_and_clear();
    Ok(())
}

/// One handled job: index, handler start (ms, bench clock), due (ms).
pub(crate) type Record = (usize, f64, u64);

/// An in-process consumer with a no-op handler that records each job.
pub(crate) struct Recorder {
    pub records: Arc<Mutex<Vec<Record>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<delayq::Result<delayq::RunReport>>,
    /// When it was started (ms, bench clock).
    pub started_ms: f64,
}

impl Recorder {
    /// Starts a consumer with `concurrency` on its own connection.
    pub(crate) async fn start(b: AnyBackend, concurrency: usize) -> anyhow::Result<Self> {
        let opts = ConsumerOptions {
            concurrency,
            lease: Duration::from_secs(30),
            prefetch: prefetch(),
            ..ConsumerOptions::default()
        };
        let c = Consumer::new(b, queue(), opts)?;
        let records: Arc<Mutex<Vec<Record>>> = Arc::new(Mutex::new(Vec::with_capacity(100_000)));
        let r = records.clone();
        let (stop, rx) = watch::channel(false);
        let started_ms = now_ms_f64();
        let result_bytes = RESULT_BYTES.load(std::sync::atomic::Ordering::Relaxed);
        let task = tokio::spawn(c.run(
            move |job: Job| {
                let at = now_ms_f64();
                if let Some(i) = index_of(job.id.as_str()) {
                    r.lock().expect("records").push((i, at, job.due_at_ms));
                }
                let done = if result_bytes == 0 {
                    delayq::Completion::default()
                } else {
                    delayq::Completion::result(vec![b'7'; result_bytes])
                };
                std::future::ready(Ok::<delayq::Completion, Failure>(done))
            },
            async move {
                let mut rx = rx;
                let _ = rx.wait_for(|v| *v).await;
            },
        ));
        Ok(Self {
            records,
            stop,
            task,
            started_ms,
        })
    }

    /// Distinct jobs recorded so far.
    pub(crate) fn unique(&self) -> usize {
        let r = self.records.lock().expect("records");
        let mut seen = vec![false; r.iter().map(|x| x.0 + 1).max().unwrap_or(0)];
        r.iter()
            .filter(|x| !std::mem::replace(&mut seen[x.0], true))
            .count()
    }

    /// Waits until `n` distinct jobs are recorded or `timeout` passes.
    pub(crate) async fn wait_for(&self, n: usize, timeout: Duration, what: &str) -> bool {
        let pb = bar(n, what);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let len = self.records.lock().expect("records").len();
            pb.set_position(len.min(n) as u64);
            if len >= n && self.unique() >= n {
                pb.finish_and_clear();
                return true;
            }
            if tokio::time::Instant::now() > deadline {
                pb.finish_and_clear();
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the consumer (it flushes its acks) and returns the records.
    pub(crate) async fn stop(self) -> anyhow::Result<Vec<Record>> {
        let _ = self.stop.send(true);
        self.task.await??;
        Ok(std::mem::take(&mut *self.records.lock().expect("records")))
    }
}

/// A `delayq worker` process with the recording handler.
pub(crate) struct WorkerProcess {
    pub child: Child,
    pub file: PathBuf,
}

impl WorkerProcess {
    /// Starts `delayq worker --bench-record FILE`.
    pub(crate) fn start(
        env: &Env,
        file: &Path,
        concurrency: usize,
        lease: &str,
        sleep_ms: u64,
    ) -> anyhow::Result<Self> {
        let child = env
            .client_command(&env.exe)
            .args(env.backend_args())
            .args(["--queue", queue().as_str(), "worker"])
            .args(["--concurrency", &concurrency.to_string(), "--lease", lease])
            .args(["--prefetch", &prefetch().to_string()])
            .arg("--bench-record")
            .arg(file)
            .args(["--bench-sleep-ms", &sleep_ms.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self {
            child,
            file: file.to_owned(),
        })
    }

    /// SIGTERM, then wait (SIGKILL after 10 s).
    pub(crate) fn stop(mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..1000 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lines `id,ms` of worker files as `(index, ms)`.
pub(crate) fn read_records(files: &[PathBuf]) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    for f in files {
        for l in std::fs::read_to_string(f).unwrap_or_default().lines() {
            let mut parts = l.split(',');
            if let (Some(id), Some(ms)) = (parts.next(), parts.next())
                && let (Some(i), Ok(ms)) = (index_of(id), ms.parse::<f64>())
            {
                out.push((i, ms));
            }
        }
    }
    out
}

/// `(unique, duplicates, missing)` of indices against `0..n`.
pub(crate) fn tally(indices: impl Iterator<Item = usize>, n: usize) -> (usize, usize, usize) {
    let mut count = vec![0u32; n];
    let mut total = 0;
    for i in indices {
        if i < n {
            count[i] += 1;
            total += 1;
        }
    }
    let unique = count.iter().filter(|c| **c > 0).count();
    (unique, total - unique, n - unique)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_100_bytes() {
        assert_eq!(job(0, Due::Now).payload.len(), 100);
        assert_eq!(job(99_999_999, Due::Now).payload.len(), 100);
        assert_eq!(order_id(7), "10000000000000000007");
        assert_eq!(index_of(&order_id(12345)), Some(12345));
    }

    #[test]
    fn nearest_rank() {
        let p = percentiles((1..=100).map(f64::from).collect());
        assert_eq!(
            (p.p50, p.p90, p.p99, p.max, p.min),
            (50.0, 90.0, 99.0, 100.0, 1.0)
        );
        let p = percentiles(vec![3.0, 1.0, 2.0]);
        assert_eq!((p.p50, p.p99), (2.0, 3.0));
    }

    #[test]
    fn tallies() {
        assert_eq!(tally([0, 1, 1, 3].into_iter(), 4), (3, 1, 1));
    }
}
