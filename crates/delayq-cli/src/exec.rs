//! The `--exec` handler of `delayq worker`: a shell command per job, checked before the
//! worker starts (a missing program is a configuration error, not the jobs' failure), and one
//! log line per job outcome (text or JSON lines on stderr; `--quiet` turns them off).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use delayq::{Completion, Failure, Handler, Job};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use crate::output::format_ms;

/// How per-job lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// `TIME id attempt N/M outcome duration` lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Longest part of a failing command's stderr kept as the job's `last_error`.
const ERROR_TAIL: usize = 512;

/// How long a command stopped with SIGTERM (the job's timeout, or the end of the shutdown
/// grace) has before SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);

/// A running command (in its own process group). Dropped before it exited — the consumer
/// dropped the handler at the job's `timeout_ms` or at the end of the shutdown grace — the
/// group gets SIGTERM at once and SIGKILL after [`KILL_GRACE`] if it is still there.
struct Running(Option<tokio::process::Child>);

impl Running {
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let status = self.0.as_mut().expect("waited once").wait().await;
        self.0 = None;
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        let Some(pid) = child.id() else {
            return; // already exited
        };
        // The group the command leads (`process_group(0)` at spawn). The child is not reaped
        // yet (we still own it), so its id cannot have been reused.
        let Some(group) = rustix::process::Pid::from_raw(pid as i32) else {
            return;
        };
        let signal = move |sig| {
            let _ = rustix::process::kill_process_group(group, sig);
        };
        signal(rustix::process::Signal::TERM);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if tokio::time::timeout(KILL_GRACE, child.wait())
                    .await
                    .is_err()
                {
                    signal(rustix::process::Signal::KILL);
                    let _ = child.wait().await;
                }
            });
        } else {
            let _ = child.start_kill();
        }
    }
}

/// Shell words that are not programs on the PATH.
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "break", "case", "cd", "command", "continue", "echo", "eval", "exec",
    "exit", "export", "false", "for", "if", "printf", "read", "set", "test", "true", "ulimit",
    "umask", "unset", "until", "wait", "while", "trap", "shift", "times", "type", "{", "(",
];

/// Why `cmd` cannot run, when its program is clearly missing: the first word (after `VAR=…`
/// assignments) is a path that does not exist or is not executable, or a name on no `PATH`
/// directory. Anything the shell could still resolve (builtins, `$VAR`, quoting) passes.
pub(crate) fn missing_program(cmd: &str) -> Option<String> {
    let word = cmd
        .split_whitespace()
        .find(|w| !w.contains('=') || w.starts_with('='))?;
    if SHELL_WORDS.contains(&word) || word.contains(['$', '`', '"', '\'', '\\', '*', '?']) {
        return None;
    }
    if word.contains('/') {
        let p = Path::new(word);
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(_) => {
                let cwd = std::env::current_dir().unwrap_or_default();
                return Some(format!(
                    "{word} does not exist (looked in {})",
                    cwd.display()
                ));
            }
        };
        use std::os::unix::fs::PermissionsExt;
        if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
            return Some(format!("{word} is not executable (chmod +x {word}?)"));
        }
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| d.join(word).is_file());
    (!found).then(|| format!("{word} is not a program on PATH"))
}

/// Runs the command through `sh -c` with the payload on stdin and the job in the environment.
pub(crate) struct ExecHandler {
    /// The shell command.
    pub cmd: String,
    /// Per-job lines off.
    pub quiet: bool,
    /// Their format.
    pub format: LogFormat,
    /// Notified when the command cannot be started at all (exit 126/127): the worker stops.
    pub broken: Arc<Notify>,
    /// Keep the command's standard output as the job's result (`--keep-output`).
    pub keep_output: bool,
    /// A job cancelled while its command runs: SIGTERM to the command's group, SIGKILL after
    /// this (`--kill-after`).
    pub kill_after: Duration,
}

/// Reads `out` to its end, keeping at most `MAX_RESULT_BYTES + 1` bytes (enough to tell an
/// output over the limit) and discarding the rest, so a chatty command never blocks on a
/// full pipe nor fills the worker's memory.
async fn read_bounded(out: &mut tokio::process::ChildStdout, kept: &mut Vec<u8>) -> usize {
    let limit = delayq::limits::MAX_RESULT_BYTES + 1;
    let mut total = 0;
    let mut buf = [0u8; 8192];
    while let Ok(n) = out.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    total
}

impl ExecHandler {
    fn log(
        &self,
        job: &Job,
        process: Option<&delayq::TraceContext>,
        outcome: &str,
        started: Instant,
        detail: Option<&str>,
    ) {
        if self.quiet {
            return;
        }
        let ms = started.elapsed().as_millis() as u64;
        let now = delayq::job::system_now_ms();
        match self.format {
            LogFormat::Json => {
                let mut v = serde_json::json!({
                    "ts": format_ms(now), "queue": job.queue.as_str(), "id": job.id.as_str(),
                    "attempt": job.attempt, "max_attempts": job.max_attempts,
                    "outcome": outcome, "duration_ms": ms,
                });
                if let Some(d) = detail {
                    v["error"] = d.into();
                }
                if let Some(p) = process {
                    v["trace_id"] = p.trace_id().into();
                    v["span_id"] = p.span_id().into();
                }
                eprintln!("{v}");
            }
            LogFormat::Text => eprintln!(
                "{} {} attempt {}/{} {outcome} {ms} ms{}",
                format_ms(now),
                job.id,
                job.attempt,
                job.max_attempts,
                detail.map(|d| format!(": {d}")).unwrap_or_default()
            ),
        }
    }
}

impl Handler for ExecHandler {
    async fn handle(&self, job: Job) -> Result<Completion, Failure> {
        let started = Instant::now();
        // This attempt's process span: the program continues the trace under it (TRACEPARENT
        // / TRACESTATE, the OpenTelemetry environment carrier). Without an exporter the span
        // has no id of its own, so a new one stands for it in the job's trace.
        let process =
            delayq::otel::current().or_else(|| job.trace.as_ref().map(delayq::TraceContext::child));
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.cmd)
            .env("DELAYQ_JOB_ID", job.id.as_str())
            .env("DELAYQ_QUEUE", job.queue.as_str())
            .env("DELAYQ_ATTEMPT", job.attempt.to_string())
            .env("DELAYQ_DUE_AT_MS", job.due_at_ms.to_string())
            .env_remove("TRACEPARENT")
            .env_remove("TRACESTATE");
        if let Some(p) = &process {
            cmd.env("TRACEPARENT", p.traceparent());
            if let Some(s) = p.tracestate() {
                cmd.env("TRACESTATE", s);
            }
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(if self.keep_output {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| Failure::give_back(format!("cannot start sh: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            let payload = job.payload.clone();
            // A command that does not read its stdin must not block us.
            tokio::spawn(async move {
                let _ = stdin.write_all(&payload).await;
            });
        }
        let mut stderr = child.stderr.take();
        let mut stdout = child.stdout.take();
        let group = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
        let mut child = Running(Some(child));
        let mut err_bytes = Vec::new();
        let read_err = async {
            if let Some(e) = stderr.as_mut() {
                let _ = e.read_to_end(&mut err_bytes).await;
            }
        };
        let mut out_bytes = Vec::new();
        let read_out = async {
            match stdout.as_mut() {
                Some(o) => read_bounded(o, &mut out_bytes).await,
                None => 0,
            }
        };
        let (status, (), out_len) = {
            let waited = async { tokio::join!(child.wait(), read_err, read_out) };
            let mut waited = std::pin::pin!(waited);
            tokio::select! {
                r = &mut waited => r,
                () = job.cancellation.cancelled() => {
                    // Cancelled while it runs: SIGTERM to the command's group, SIGKILL after
                    // --kill-after. The job is ended already (nothing is acked or retried).
                    let signal = |sig| {
                        if let Some(g) = group {
                            let _ = rustix::process::kill_process_group(g, sig);
                        }
                    };
                    signal(rustix::process::Signal::TERM);
                    let how = match tokio::time::timeout(self.kill_after, &mut waited).await {
                        Ok(_) => "stopped on SIGTERM",
                        Err(_) => {
                            signal(rustix::process::Signal::KILL);
                            let _ = waited.await;
                            "killed after --kill-after"
                        }
                    };
                    self.log(&job, process.as_ref(), "cancelled", started, Some(how));
                    return Err(Failure::retry(format!("cancelled while it ran: {how}")));
                }
            }
        };
        let status = status.map_err(|e| Failure::retry(format!("waiting for the command: {e}")))?;
        let out = std::process::Output {
            status,
            stdout: out_bytes,
            stderr: err_bytes,
        };
        if !out.stderr.is_empty() {
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
        }
        if out.status.success() {
            if !self.keep_output {
                self.log(&job, process.as_ref(), "acked", started, None);
                return Ok(Completion::default());
            }
            if out_len > delayq::limits::MAX_RESULT_BYTES {
                let message = format!(
                    "--keep-output: the command printed {out_len} bytes, over the result limit \
                     of {} bytes",
                    delayq::limits::MAX_RESULT_BYTES
                );
                self.log(
                    &job,
                    process.as_ref(),
                    "dead-lettered",
                    started,
                    Some(&message),
                );
                return Err(Failure::dead(message));
            }
            self.log(&job, process.as_ref(), "acked", started, None);
            return Ok(Completion::result(out.stdout));
        }
        let err = String::from_utf8_lossy(&out.stderr);
        // The last ERROR_TAIL bytes, starting on a character boundary.
        let mut start = err.len().saturating_sub(ERROR_TAIL);
        while !err.is_char_boundary(start) {
            start += 1;
        }
        let tail = err[start..].trim();
        let message = format!("{}: {tail}", out.status);
        if matches!(out.status.code(), Some(126 | 127)) {
            // The shell could not run the program: not this job's failure.
            self.log(
                &job,
                process.as_ref(),
                "given back",
                started,
                Some(&message),
            );
            self.broken.notify_one();
            return Err(Failure::give_back(message));
        }
        let outcome = if job.attempt >= job.max_attempts {
            "failed, dead-lettered (last attempt)"
        } else {
            "failed, retry by backoff"
        };
        self.log(&job, process.as_ref(), outcome, started, Some(&message));
        Err(Failure::retry(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clearly_missing_programs_are_caught_and_shell_forms_pass() {
        assert!(
            missing_program("./nonexistent.sh")
                .unwrap()
                .contains("does not exist")
        );
        assert!(
            missing_program("X=1 ./nope arg")
                .unwrap()
                .contains("./nope")
        );
        assert!(
            missing_program("no-such-program-xyz --flag")
                .unwrap()
                .contains("PATH")
        );
        let plain = tempfile::NamedTempFile::new().unwrap();
        let plain = plain.path().to_str().unwrap().to_owned();
        assert!(missing_program(&plain).unwrap().contains("not executable"));
        for ok in [
            "cat >> out.txt",
            "echo hi",
            "X=1 sh -c 'exit 0'",
            "$HANDLER",
            "/bin/sh -c true",
        ] {
            assert_eq!(missing_program(ok), None, "{ok}");
        }
    }
}
