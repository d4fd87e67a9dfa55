//! `delayq worker --exec CMD`: runs a shell command for every due job (see `exec`).

use std::sync::Arc;
use std::time::Duration;

use crate::backend::AnyBackend;
use delayq::{
    Completion, Consumer, ConsumerOptions, Failure, Handler, Inspect, Job, QueueName, QueueOrder,
};
use tokio::sync::Notify;

use crate::args::{QueueSpec, WorkerArgs};
use crate::exec::{ExecHandler, missing_program};

/// The benchmark handler: optionally sleeps, then appends `id,completion_ms` to a file with
/// one `write` per line (atomic under `O_APPEND`), so a SIGKILL loses no recorded line.
struct RecordHandler {
    file: std::sync::Mutex<std::fs::File>,
    sleep: Duration,
}

impl Handler for RecordHandler {
    async fn handle(&self, job: Job) -> Result<Completion, Failure> {
        use std::io::Write;
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        }
        let line = format!("{},{}\n", job.id, delayq::job::system_now_ms());
        self.file
            .lock()
            .map_err(|_| Failure::retry("record file lock poisoned"))?
            .write_all(line.as_bytes())
            .map_err(Failure::retry)?;
        Ok(Completion::default())
    }
}

/// Runs the worker until SIGTERM or SIGINT, then drains. SIGHUP (a closed terminal, a
/// `systemctl reload`, a reload sent to every delayq process) is logged and ignored: a
/// worker's settings apply at its start, and dying on it would orphan its `--exec` programs.
pub(crate) async fn run(
    backend: AnyBackend,
    queues: Vec<QueueSpec>,
    a: WorkerArgs,
    pg: Option<delayq_postgres::PgOptions>,
) -> anyhow::Result<u8> {
    ignore_hangups();
    let served: Vec<(QueueName, u32)> = queues
        .iter()
        .map(|q| (q.name.clone(), q.weight.unwrap_or(1)))
        .collect();
    let names: Vec<QueueName> = served.iter().map(|(q, _)| q.clone()).collect();
    let shown = match &queues[..] {
        [one] => format!("queue {}", one.name),
        several => format!(
            "queues {} ({})",
            several
                .iter()
                .map(|q| format!("{}:{}", q.name, q.weight.unwrap_or(1)))
                .collect::<Vec<_>>()
                .join(", "),
            if a.strict {
                "strict order"
            } else {
                "by weight"
            }
        ),
    };
    let opts = ConsumerOptions {
        concurrency: a.concurrency,
        lease: a.lease,
        shutdown_grace: a.grace,
        prefetch: a.prefetch,
        trace_mode: crate::otlp::trace_mode(),
        // A cancelled command has --kill-after to stop on SIGTERM before its SIGKILL; the
        // handler is given a little more, so that it reports what became of the command.
        cancel_grace: a.kill_after + Duration::from_secs(1),
        ..ConsumerOptions::default()
    };
    // The worker fires its queue's due schedules too (unless a `delayq serve` owns the store:
    // the server does).
    let (stop_ticker, mut ticker_stopped) = tokio::sync::watch::channel(false);
    let remote = matches!(backend, AnyBackend::Remote(_));
    let on_redis = matches!(backend, AnyBackend::Redis(_));
    // Jobs enqueued in PostgreSQL transactions, relayed into the store (any queue's), and the
    // cold tier's jobs moved in when due.
    let (backend, relay) = crate::postgres::companion(backend, pg)?;
    let ticker = (!remote).then(|| {
        let t = delayq::Ticker::new(backend.clone()).queues(names.clone());
        tokio::spawn(t.run(async move {
            let _ = ticker_stopped.wait_for(|s| *s).await;
        }))
    });
    // On Redis every worker finishes batches whose jobs have all ended too (the embedded
    // store finishes each in the step that ends its last job; a server finishes its own).
    let sweeper =
        on_redis.then(|| tokio::spawn(delayq::batch::BatchSweeper::new(backend.clone()).run()));
    let order = if a.strict {
        QueueOrder::Strict
    } else {
        QueueOrder::Weighted
    };
    if a.keep_output {
        warn_where_output_is_kept_nowhere(backend.inner(), &names).await;
    }
    let consumer = Consumer::over(backend, served, order, opts)
        .map_err(|e| crate::config::ConfigError::new(format!("--queue: {e}")))?;
    let report = match (a.exec, a.bench_record) {
        (Some(cmd), _) => {
            if let Some(why) = missing_program(&cmd) {
                eprintln!("error: --exec {cmd:?} cannot run: {why}; no job was touched");
                return Ok(2);
            }
            eprintln!(
                "delayq worker: {shown}, concurrency {}, running: {cmd}",
                a.concurrency
            );
            let signal = shutdown_signal();
            let broken = Arc::new(Notify::new());
            let handler = ExecHandler {
                cmd: cmd.clone(),
                quiet: a.quiet,
                format: a.log_format,
                broken: broken.clone(),
                keep_output: a.keep_output,
                kill_after: a.kill_after,
            };
            // A remote backend's long poll in flight is cut by the engine when this completes
            // (Backend::stop_polling).
            let stop = async move {
                tokio::select! {
                    _ = signal => {}
                    _ = broken.notified() => {}
                }
            };
            let report = consumer.run(handler, stop).await?;
            if report.given_back > 0 {
                eprintln!(
                    "error: --exec {cmd:?} could not be run (exit 126/127); the worker stopped \
                     and gave {} job(s) back without counting an attempt",
                    report.given_back
                );
                return Ok(2);
            }
            report
        }
        (None, Some(path)) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            let handler = RecordHandler {
                file: std::sync::Mutex::new(file),
                sleep: Duration::from_millis(a.bench_sleep_ms),
            };
            consumer.run(handler, shutdown_signal()).await?
        }
        (None, None) => anyhow::bail!("give --exec CMD"),
    };
    if let Some(s) = sweeper {
        s.abort();
    }
    if let Some(r) = relay {
        r.stop().await;
    }
    let _ = stop_ticker.send(true);
    if let Some(t) = ticker {
        let _ = t.await;
    }
    eprintln!(
        "delayq worker stopped: {} acked, {} retried, {} dead, {} lease lost, {} aborted",
        report.acked, report.retried, report.dead, report.lease_lost, report.aborted
    );
    Ok(0)
}

/// Takes SIGHUP off the default action (which ends the process) for the rest of the
/// process's life: each is logged, and the worker runs on.
fn ignore_hangups() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            eprintln!(
                "delayq worker: SIGHUP ignored: a worker's settings apply at its start; \
                 restart it (SIGTERM drains) to apply changed ones"
            );
        }
    });
}

/// Completes on SIGTERM or SIGINT. The handlers are installed when this is called, not when
/// the future is first polled: a signal that arrives early must not kill the process with
/// jobs unacknowledged.
pub(crate) fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}

/// `--keep-output` keeps a command's output as its job's result, which lives as long as the
/// done job is kept: says so at start for each queue that keeps no done jobs (only jobs
/// enqueued with their own `keep_done_ms` keep their output there).
async fn warn_where_output_is_kept_nowhere(backend: &AnyBackend, queues: &[QueueName]) {
    for q in queues {
        match backend.settings(q).await {
            Ok(s) if s.retention.keep_done_ms == 0 => eprintln!(
                "warning: --keep-output: queue {q} keeps no done jobs, so outputs are dropped \
                 as jobs end (only jobs enqueued with their own keep_done_ms keep theirs); \
                 keep them with: delayq queue set {q} --keep-done 1h"
            ),
            Ok(_) => {}
            Err(e) => tracing::debug!(queue = %q, error = %e, "reading a queue's retention"),
        }
    }
}
