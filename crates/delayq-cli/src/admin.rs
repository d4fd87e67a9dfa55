//! `delayq get | cancel | reschedule | stats | dead …`: the admin commands.

use crate::backend::AnyBackend;
use delayq::{Backend, CancelOutcome, Inspect, JobId, Producer, Schedule};

use crate::args::DeadCommand;
use crate::output::{format_ms, job_json, job_text};

/// `delayq get ID`: exits with 3 when the job does not exist.
pub async fn get(p: &Producer<AnyBackend>, id: &JobId, json: bool) -> anyhow::Result<u8> {
    match p.get(id).await? {
        Some(j) if json => println!("{}", job_json(&j)),
        Some(j) => println!("{}", job_text(&j)),
        None => {
            eprintln!("job {id} not found");
            return Ok(3);
        }
    }
    Ok(0)
}

/// `delayq cancel ID`: exit 0 only when this call removed the job.
pub async fn cancel(p: &Producer<AnyBackend>, id: &JobId) -> anyhow::Result<u8> {
    let out = p.cancel(id).await?;
    let (text, code) = match out {
        CancelOutcome::Cancelled => ("cancelled", 0),
        CancelOutcome::Leased => ("not cancelled: a consumer is running it", 4),
        CancelOutcome::Dead => ("not cancelled: it is dead-lettered", 4),
        CancelOutcome::NotFound => ("not found (done, cancelled or never enqueued)", 3),
    };
    println!("{id}\t{text}");
    Ok(code)
}

/// `delayq reschedule ID`.
pub async fn reschedule(p: &Producer<AnyBackend>, id: &JobId, s: Schedule) -> anyhow::Result<u8> {
    let due = p.reschedule(id, s).await?;
    println!("{id}\tdue {}", format_ms(due));
    Ok(0)
}

/// `delayq stats`.
pub async fn stats(p: &Producer<AnyBackend>, json: bool) -> anyhow::Result<u8> {
    let s = p.backend().stats(p.queue()).await?;
    if json {
        println!("{}", serde_json::to_string(&s)?);
    } else {
        println!("queue               {}", p.queue());
        println!("scheduled           {}", s.scheduled);
        println!("  due now           {}", s.due);
        println!("  due next minute   {}", s.due_next_minute);
        println!("leased              {}", s.leased);
        println!("dead                {}", s.dead);
        println!("oldest overdue      {} ms", s.oldest_overdue_ms);
    }
    Ok(0)
}

/// `delayq dead …`.
pub async fn dead<B: Backend + Inspect>(
    b: &B,
    q: &delayq::QueueName,
    cmd: DeadCommand,
) -> anyhow::Result<u8> {
    match cmd {
        DeadCommand::List {
            offset,
            limit,
            json,
        } => {
            for j in b.dead_list(q, offset, limit).await? {
                if json {
                    println!("{}", job_json(&j));
                } else {
                    println!(
                        "{}\tattempts {}\tfailed {}\t{}",
                        j.id,
                        j.attempt,
                        j.failed_at_ms.map(format_ms).unwrap_or_default(),
                        j.last_error.unwrap_or_default()
                    );
                }
            }
        }
        DeadCommand::Requeue { id: Some(id), .. } => {
            b.dead_requeue(q, &id).await?;
            println!("{id}\trequeued");
        }
        DeadCommand::Requeue { id: None, .. } => {
            println!("requeued {}", b.dead_requeue_all(q).await?);
        }
        DeadCommand::Purge => println!("purged {}", b.dead_purge(q).await?),
    }
    Ok(0)
}
