//! `delayq keys jobs|cancel|reschedule`: every job of one key of a queue at once.

use delayq::{Inspect, JobInfo, KeyJobsRequest, KeyMove, ListState, QueueName};

use crate::args::KeysCommand;
use crate::output::{format_ms, job_json, one_line};
use crate::postgres::Served as AnyBackend;

/// Runs one `delayq keys …` command on queue `q`.
pub(crate) async fn run(b: &AnyBackend, q: &QueueName, cmd: KeysCommand) -> anyhow::Result<u8> {
    match cmd {
        KeysCommand::Jobs {
            key,
            state,
            limit,
            cursor,
            json,
        } => {
            let req = KeyJobsRequest {
                state,
                limit,
                after: cursor,
            };
            let page = b.key_jobs(q, &key, req).await?;
            if page.jobs.is_empty() && !json {
                eprintln!("no jobs of key {key} in queue {q}");
            }
            for j in &page.jobs {
                if json {
                    let mut v = job_json(j);
                    if let Some(s) = delayq::key_jobs::listed_as(j, page.now_ms) {
                        v["state"] = s.as_str().into();
                    }
                    println!("{v}");
                } else {
                    println!("{}", row(j, page.now_ms));
                }
            }
            if let Some(next) = page.next {
                eprintln!("more: --cursor {next}");
            }
            Ok(0)
        }
        KeysCommand::Cancel { key, running } => {
            let done = b.cancel_key(q, &key, running).await?;
            if done.running > 0 {
                println!(
                    "{key}\t{} cancelled ({} running: their workers are told to stop them)",
                    done.cancelled, done.running
                );
            } else {
                println!("{key}\t{} cancelled", done.cancelled);
            }
            Ok(0)
        }
        KeysCommand::Reschedule { key, shift, at } => {
            let to = match (shift, at) {
                (Some(ms), _) => KeyMove::Shift(ms),
                (None, Some(t)) => KeyMove::To(
                    t.duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64),
                ),
                (None, None) => anyhow::bail!("give --shift or --at"),
            };
            let n = b.reschedule_key(q, &key, to).await?;
            println!("{key}\t{n} rescheduled");
            Ok(0)
        }
    }
}

/// One job as a line: id, state, when, attempts, last error.
fn row(j: &JobInfo, now_ms: u64) -> String {
    let state = delayq::key_jobs::listed_as(j, now_ms).unwrap_or(ListState::Done);
    let when = match state {
        ListState::Leased => format!(
            "lease until {}",
            j.lease_deadline_ms.map(format_ms).unwrap_or_default()
        ),
        ListState::Dead => format!(
            "failed {}",
            j.failed_at_ms.map(format_ms).unwrap_or_default()
        ),
        _ => format!("due {}", format_ms(j.due_at_ms)),
    };
    format!(
        "{}\t{state}\t{when}\tattempts {}/{}\t{}",
        j.id,
        j.attempt,
        j.max_attempts,
        one_line(j.last_error.as_deref().unwrap_or_default().trim_end())
    )
}
