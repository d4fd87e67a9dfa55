//! `POST /v1/claim`: one claim over several queues. The acks of any of them go first (each
//! names its queue); then due jobs come from the queues that have some — each its weight's
//! share of the claim, the queue furthest behind first (`fair.rs`), and the answer interleaved
//! by weight; or in the order given with `strict` — and when none has any, one long poll waits
//! on all of them: each queue's claim loop serves it like any other poll, the first to hand
//! over jobs answers and the others give theirs back unstarted.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use delayq::{Ack, AckOutcome, Backend, ClaimRequest as Claim, Inspect, QueueName};
use delayq_wire::lease::{ClaimManyRequest, ClaimResponse, ClaimedJob};
use tokio::time::Instant;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::ApiJson;
use crate::lease::{acks_of, claim_shape};
use crate::polls::Waiting;
use crate::state::AppState;

/// Most queues one claim names.
pub const MAX_QUEUES: usize = 32;

/// Lease up to `max` due jobs from several queues, waiting up to `wait_ms` on all of them.
#[utoipa::path(
    post, path = "/v1/claim", tag = "consumers",
    request_body = ClaimManyRequest,
    responses((status = 200, body = ClaimResponse), (status = "4XX", body = ErrorBody))
)]
pub async fn claim_many<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ext: axum::http::Extensions,
    ApiJson(req): ApiJson<ClaimManyRequest>,
) -> Result<Json<ClaimResponse>, ApiError> {
    let bad = |m: String| ApiError::new(ErrorCode::InvalidBatch, m);
    if req.queues.is_empty() || req.queues.len() > MAX_QUEUES {
        return Err(bad(format!(
            "{} queues: a claim names 1-{MAX_QUEUES}",
            req.queues.len()
        )));
    }
    let max_weight = delayq::consumer::MAX_WEIGHT;
    let mut queues: Vec<(QueueName, u32)> = Vec::with_capacity(req.queues.len());
    for q in &req.queues {
        let name = QueueName::new(q.name.clone())?;
        let w = q.weight.unwrap_or(1);
        if !(1..=max_weight).contains(&w) {
            return Err(bad(format!(
                "queue {name}: weight {w} is outside 1-{max_weight}"
            )));
        }
        if queues.iter().any(|(n, _)| *n == name) {
            return Err(bad(format!("queue {name} is named twice")));
        }
        queues.push((name, w));
    }
    let (max, lease, wait, poll_id) = claim_shape(req.poll)?;
    // Every ack checked before any is applied.
    let (names, acks): (Vec<String>, Vec<_>) = req.acks.into_iter().map(|a| a.split()).unzip();
    let acks: Vec<(QueueName, Ack)> = names
        .into_iter()
        .map(QueueName::new)
        .zip(acks_of(acks)?)
        .map(|(q, a)| Ok((q?, a)))
        .collect::<Result<_, ApiError>>()?;
    for (q, _) in &queues {
        st.note(q);
    }
    let _slot = if wait.is_zero() {
        None
    } else {
        Some(st.long_lived(crate::budget::Kind::LongPoll, &ext)?)
    };
    // Registered before the first claim (a cut that overtakes it still ends the poll), under
    // the first queue: the client cuts it there.
    let cut = poll_id.as_deref().filter(|_| !wait.is_zero()).map(|id| {
        let caller = crate::budget::caller_key(&ext);
        st.inner.cuts.watch(&caller, &queues[0].0, id)
    });
    let deadline = Instant::now() + wait;
    let outcomes = delayq::backend::ack_each(st.backend(), acks).await?;

    let weighted = !req.strict && queues.len() > 1;
    let order = if weighted {
        st.inner.fair.order(&queues)
    } else {
        (0..queues.len()).collect()
    };
    // Weighted: each queue asked for its weight's share of `max` first, then — a second pass —
    // the queues that filled their share for what the others left; strict: each queue in turn
    // for all that is left.
    let total_weight: u64 = queues.iter().map(|(_, w)| u64::from(*w)).sum();
    let mut asked = vec![false; queues.len()];
    let mut got = vec![0; queues.len()];
    let mut from: Vec<Vec<delayq::Job>> = (0..queues.len()).map(|_| Vec::new()).collect();
    let mut next_due: Option<Duration> = None;
    let mut left = max;
    for pass in 0..if weighted { 2 } else { 1 } {
        for &i in &order {
            if left == 0 {
                break;
            }
            let share = || (max as u64 * u64::from(queues[i].1)).div_ceil(total_weight) as usize;
            let want = match (weighted, pass) {
                (false, _) => left,
                (true, 0) => share().min(left),
                // A queue that gave less than it was asked has nothing more due.
                (true, _) if got[i] < share() => continue,
                (true, _) => left,
            };
            asked[i] = true;
            let batch = st
                .backend()
                .claim(
                    &queues[i].0,
                    Claim {
                        max: want,
                        lease,
                        acks: Vec::new(),
                    },
                )
                .await?;
            next_due = match (next_due, batch.next_due_in) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            got[i] += batch.jobs.len();
            left -= batch.jobs.len();
            from[i].extend(batch.jobs);
        }
    }
    if weighted {
        st.inner.fair.claimed(&queues, &asked, &got);
    }
    let jobs = if weighted {
        let weights: Vec<u32> = queues.iter().map(|(_, w)| *w).collect();
        interleave(from, &weights)
    } else {
        from.into_iter().flatten().collect()
    };
    let mut shutdown = st.inner.shutdown.clone();
    if !jobs.is_empty() || wait.is_zero() || *shutdown.borrow() {
        let next_due_in_ms = jobs
            .is_empty()
            .then_some(next_due)
            .flatten()
            .map(|d| d.as_millis() as u64);
        return Ok(Json(answer(jobs, outcomes, next_due_in_ms)));
    }
    // Nothing due anywhere: wait with each queue's other polls.
    let mut waiting: Vec<Waiting<B>> = queues
        .iter()
        .map(|(q, _)| Waiting::join(&st, q, max, lease, deadline))
        .collect();
    let jobs = loop {
        if waiting.is_empty() {
            break Vec::new();
        }
        let first = {
            let each: Vec<_> = waiting.iter_mut().map(|w| Box::pin(w.jobs())).collect();
            tokio::select! {
                (jobs, i, _) = futures_util::future::select_all(each) => Some((jobs, i)),
                () = tokio::time::sleep_until(deadline) => None,
                _ = shutdown.changed() => None,
                () = async { cut.as_ref().expect("guarded").cut().await }, if cut.is_some() => None,
            }
        };
        match first {
            Some((jobs, _)) if !jobs.is_empty() => break jobs,
            // That queue's loop ended without serving this poll: wait on the others.
            Some((_, i)) => {
                waiting.remove(i);
            }
            None => break Vec::new(),
        }
    };
    // The other polls stop here; whatever their loops handed them goes back unstarted.
    drop(waiting);
    if weighted && !jobs.is_empty() {
        let got: Vec<usize> = queues
            .iter()
            .map(|(q, _)| jobs.iter().filter(|j| j.queue == *q).count())
            .collect();
        st.inner
            .fair
            .claimed(&queues, &vec![false; queues.len()], &got);
    }
    Ok(Json(answer(jobs, outcomes, None)))
}

/// The jobs of several queues (`from[i]`: queue `i`'s, weight `weights[i]`) in the order a
/// consumer should start them: by weight, smooth round-robin (weights 3 and 1 give a a b a a
/// a b a …), so one that starts them in order — holding the rest — serves each queue its share
/// from the first job on.
fn interleave<T>(mut from: Vec<Vec<T>>, weights: &[u32]) -> Vec<T> {
    for list in &mut from {
        list.reverse();
    }
    let mut credit = vec![0i64; from.len()];
    let mut out = Vec::with_capacity(from.iter().map(Vec::len).sum());
    loop {
        let live: Vec<usize> = (0..from.len()).filter(|i| !from[*i].is_empty()).collect();
        let total: i64 = live.iter().map(|i| i64::from(weights[*i])).sum();
        for &i in &live {
            credit[i] += i64::from(weights[i]);
        }
        // The most credit; the first queue given on a tie.
        let Some(best) = live
            .iter()
            .copied()
            .max_by_key(|&i| (credit[i], std::cmp::Reverse(i)))
        else {
            return out;
        };
        credit[best] -= total;
        out.extend(from[best].pop());
    }
}

fn answer(
    jobs: Vec<delayq::Job>,
    acks: Vec<AckOutcome>,
    next_due_in_ms: Option<u64>,
) -> ClaimResponse {
    ClaimResponse {
        jobs: jobs
            .into_iter()
            .map(|j| {
                let queue = j.queue.to_string();
                ClaimedJob {
                    queue: Some(queue),
                    ..j.into()
                }
            })
            .collect(),
        acks,
        next_due_in_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::interleave;

    #[test]
    fn jobs_are_interleaved_by_weight_and_the_rest_follows() {
        let heavy: Vec<String> = (0..7).map(|n| format!("h{n}")).collect();
        let light: Vec<String> = (0..4).map(|n| format!("l{n}")).collect();
        let got = interleave(vec![heavy, light], &[3, 1]);
        assert_eq!(
            got.join(" "),
            "h0 h1 l0 h2 h3 h4 l1 h5 h6 l2 l3",
            "each queue's jobs keep their order, shares 3:1 while both have some"
        );
        assert!(interleave::<u8>(vec![vec![], vec![]], &[1, 1]).is_empty());
    }
}
