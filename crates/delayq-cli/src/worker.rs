//! `delayq worker --exec CMD`: runs a shell command for every due job.

use std::process::Stdio;

use crate::backend::AnyBackend;
use delayq::{Consumer, ConsumerOptions, Failure, Handler, Job, QueueName};
use tokio::io::AsyncWriteExt;

use crate::args::WorkerArgs;

/// Runs the command through `sh -c` with the payload on stdin and the job in the environment.
struct ExecHandler {
    cmd: String,
}

/// Longest part of a failing command's stderr kept as the job's `last_error`.
const ERROR_TAIL: usize = 512;

impl Handler for ExecHandler {
    async fn handle(&self, job: Job) -> Result<(), Failure> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.cmd)
            .env("DELAYQ_JOB_ID", job.id.as_str())
            .env("DELAYQ_QUEUE", job.queue.as_str())
            .env("DELAYQ_ATTEMPT", job.attempt.to_string())
            .env("DELAYQ_DUE_AT_MS", job.due_at_ms.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            // Aborted at the end of the shutdown grace period: the command dies with us.
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Failure::retry(format!("cannot start sh: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            let payload = job.payload;
            // A command that does not read its stdin must not block us.
            tokio::spawn(async move {
                let _ = stdin.write_all(&payload).await;
            });
        }
        let out = child
            .wait_with_output()
            .await
            .map_err(|e| Failure::retry(format!("waiting for the command: {e}")))?;
        if !out.stderr.is_empty() {
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
        }
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        // The last ERROR_TAIL bytes, starting on a character boundary.
        let mut start = err.len().saturating_sub(ERROR_TAIL);
        while !err.is_char_boundary(start) {
            start += 1;
        }
        let tail = err[start..].trim();
        Err(Failure::retry(format!("{}: {tail}", out.status)))
    }
}

/// The benchmark handler: optionally sleeps, then appends `id,completion_ms` to a file with
/// one `write` per line (atomic under `O_APPEND`), so a SIGKILL loses no recorded line.
struct RecordHandler {
    file: std::sync::Mutex<std::fs::File>,
    sleep: std::time::Duration,
}

impl Handler for RecordHandler {
    async fn handle(&self, job: Job) -> Result<(), Failure> {
        use std::io::Write;
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        }
        let line = format!("{},{}\n", job.id, delayq::job::system_now_ms());
        self.file
            .lock()
            .map_err(|_| Failure::retry("record file lock poisoned"))?
            .write_all(line.as_bytes())
            .map_err(Failure::retry)
    }
}

/// Runs the worker until SIGTERM or SIGINT, then drains.
pub(crate) async fn run(
    backend: AnyBackend,
    queue: QueueName,
    a: WorkerArgs,
) -> anyhow::Result<u8> {
    let opts = ConsumerOptions {
        concurrency: a.concurrency,
        lease: a.lease,
        shutdown_grace: a.grace,
        ..ConsumerOptions::default()
    };
    let consumer = Consumer::new(backend, queue.clone(), opts)?;
    let report = match (a.exec, a.bench_record) {
        (Some(cmd), _) => {
            eprintln!(
                "delayq worker: queue {queue}, concurrency {}, running: {cmd}",
                a.concurrency
            );
            consumer.run(ExecHandler { cmd }, shutdown_signal()).await?
        }
        (None, Some(path)) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            let handler = RecordHandler {
                file: std::sync::Mutex::new(file),
                sleep: std::time::Duration::from_millis(a.bench_sleep_ms),
            };
            consumer.run(handler, shutdown_signal()).await?
        }
        (None, None) => anyhow::bail!("give --exec CMD"),
    };
    eprintln!(
        "delayq worker stopped: {} acked, {} retried, {} dead, {} lease lost, {} aborted",
        report.acked, report.retried, report.dead, report.lease_lost, report.aborted
    );
    Ok(0)
}

/// Completes on SIGTERM or SIGINT.
pub(crate) async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
