//! A flow: jobs of any queues that wait for one another ([`crate::deps`]), enqueued in one
//! call ([`enqueue_flow`]) — checked whole first (every job valid, every dependency in the
//! flow or in the store, no cycle), then written dependencies first, so each dependent
//! registers with jobs that exist. Ids make a repeated flow harmless.

use std::collections::HashMap;

use crate::backend::{Backend, Inspect};
use crate::deps::{DepRef, topological};
use crate::error::{InvalidInput, Result};
use crate::job::{Enqueued, NewJob};
use crate::name::QueueName;
use crate::producer::Producer;

/// Most jobs one flow holds.
pub const MAX_FLOW: usize = crate::limits::MAX_BATCH;

fn bad(text: String) -> crate::Error {
    InvalidInput::Flow(text).into()
}

/// Enqueues `jobs` (each with its queue and id) as one flow: refused whole with
/// [`InvalidInput::Flow`] naming the job — a bad job, an id twice, a job without an id, a
/// dependency neither in the flow nor in `backend`, a cycle — before anything is written;
/// then each written after the jobs it waits for. One answer per job, in the order given.
pub async fn enqueue_flow<B: Backend + Inspect>(
    backend: &B,
    jobs: Vec<(QueueName, NewJob)>,
) -> Result<Vec<Enqueued>> {
    if jobs.is_empty() || jobs.len() > MAX_FLOW {
        return Err(bad(format!(
            "a flow holds 1-{MAX_FLOW} jobs, not {}",
            jobs.len()
        )));
    }
    let now = crate::job::system_now_ms();
    let mut at: HashMap<DepRef, usize> = HashMap::new();
    for (i, (q, job)) in jobs.iter().enumerate() {
        let Some(id) = job.id.clone() else {
            return Err(bad(format!("job {i}: a flow's job needs its id")));
        };
        let me = format!("job {i} ({q}/{id})");
        job.validate(crate::limits::DEFAULT_MAX_PAYLOAD_BYTES, now)
            .map_err(|e| bad(format!("{me}: {e}")))?;
        if let Some(d) = &job.depends {
            d.check(q, Some(&id))
                .map_err(|e| bad(format!("{me}: {e}")))?;
        }
        if job.batch.is_some() {
            return Err(bad(format!("{me}: a flow's job joins no batch")));
        }
        let key = DepRef {
            queue: q.clone(),
            id,
        };
        if at.insert(key, i).is_some() {
            return Err(bad(format!("{me} is in the flow twice")));
        }
    }
    let name = |i: usize| {
        let (q, job) = &jobs[i];
        format!(
            "job {i} ({q}/{})",
            job.id.as_ref().map_or("", |i| i.as_str())
        )
    };
    let mut waits_for: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    for (i, (_, job)) in jobs.iter().enumerate() {
        for d in job.depends.iter().flat_map(|d| &d.on) {
            match at.get(d) {
                Some(&j) => waits_for[i].push(j),
                None if backend.get(&d.queue, &d.id).await?.is_none() => {
                    return Err(bad(format!(
                        "{} depends on {d}, neither in the flow nor in the store",
                        name(i)
                    )));
                }
                None => {}
            }
        }
    }
    let order = topological(&waits_for)
        .map_err(|i| bad(format!("{} is in a cycle of dependencies", name(i))))?;
    let mut slots: Vec<Option<(QueueName, NewJob)>> = jobs.into_iter().map(Some).collect();
    let mut out: Vec<Option<Enqueued>> = vec![None; slots.len()];
    for i in order {
        let Some((q, job)) = slots[i].take() else {
            continue;
        };
        out[i] = Some(Producer::new(backend.clone(), q).enqueue(job).await?);
    }
    Ok(out.into_iter().flatten().collect())
}
