//! `delayq batch`: jobs enqueued together whose ends enqueue a callback once (see
//! `delayq::batch`) — create one from JSON lines on stdin, add to an open one, close it,
//! show one, list those not done.

use delayq::batch::BatchInfo;
use delayq::{BatchId, BatchSpec, Batches, Callback, Producer, QueueName};

use crate::args::BatchCommand;
use crate::enqueue::read_jsonl;
use crate::output::format_ms;
use crate::postgres::Served as AnyBackend;

fn line(i: &BatchInfo) -> String {
    let c = i.counts;
    let state = i.state.as_str();
    let done = i
        .done_ms
        .map_or(String::new(), |d| format!("\tdone {}", format_ms(d)));
    let failed = i.callback_failure.as_ref().map_or(String::new(), |f| {
        format!(
            "\tcallbacks failed {} time(s), next try {}: {}",
            f.attempts,
            format_ms(f.next_try_ms),
            crate::output::one_line(&f.reason)
        )
    });
    format!(
        "{}\t{state}\ttotal {}\tpending {}\tsucceeded {}\tdead {}\tcancelled {}{done}{failed}",
        i.id,
        c.total(),
        c.pending,
        c.succeeded,
        c.dead,
        c.cancelled
    )
}

fn missing(id: &BatchId) -> anyhow::Error {
    anyhow::anyhow!("no batch {id} in this queue")
}

/// Runs `delayq batch …` on the queue of `p`.
pub(crate) async fn run(p: &Producer<AnyBackend>, cmd: BatchCommand) -> anyhow::Result<u8> {
    let (b, q) = (p.backend(), p.queue());
    match cmd {
        BatchCommand::Create {
            id,
            on_complete,
            on_success,
            callback_payload,
            open,
            include_results,
        } => {
            let payload = match callback_payload {
                Some(t) => serde_json::from_str(&t)
                    .map_err(|e| anyhow::anyhow!("--callback-payload: not JSON ({e})"))?,
                None => serde_json::json!({}),
            };
            let cb = |queue: QueueName| Callback {
                queue,
                payload: payload.clone(),
                delay_ms: 0,
            };
            let spec = BatchSpec {
                on_complete: on_complete.map(cb),
                on_success: on_success.map(cb),
                include_results,
            };
            let added = p.create_batch(id, spec, read_jsonl()?, open).await?;
            let joined = added.jobs.iter().filter(|e| e.created).count();
            println!(
                "{}\tcreated with {joined} jobs ({} existed)",
                added.id,
                added.jobs.len() - joined
            );
        }
        BatchCommand::Add { id, close } => {
            let added = p
                .add_to_batch(&id, read_jsonl()?, close)
                .await?
                .ok_or_else(|| missing(&id))?;
            let joined = added.jobs.iter().filter(|e| e.created).count();
            println!(
                "{id}\tadded {joined} jobs ({} existed)",
                added.jobs.len() - joined
            );
        }
        BatchCommand::Close { id } => {
            let i = b.close_batch(q, &id).await?.ok_or_else(|| missing(&id))?;
            println!("{}", line(&i));
        }
        BatchCommand::Get { id, json } => {
            let i = b.batch(q, &id).await?.ok_or_else(|| missing(&id))?;
            if json {
                let c = i.counts;
                let v = serde_json::json!({
                    "id": i.id.as_str(),
                    "queue": q.as_str(),
                    "state": format!("{:?}", i.state).to_lowercase(),
                    "total": c.total(),
                    "pending": c.pending,
                    "succeeded": c.succeeded,
                    "dead": c.dead,
                    "cancelled": c.cancelled,
                    "created_at_ms": i.created_ms,
                    "done_at_ms": i.done_ms,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{}", line(&i));
            }
        }
        BatchCommand::List { limit } => {
            for i in b.open_batches(q, limit.clamp(1, 1000)).await? {
                println!("{}", line(&i));
            }
        }
    }
    Ok(0)
}
