//! The conformance suite every backend runs unchanged (the `delayq-testkit` crate, a
//! dev-dependency of the stores, kept out of the library that ships): each function checks one
//! guarantee of DESIGN.md against a backend and panics when it does not hold.
//! [`crate::conformance_tests!`] turns them into `#[tokio::test]`s.

mod batches;
mod cancel_running;
pub mod chaos;
pub mod chaos_batches;
pub mod chaos_deps;
mod console;
pub mod deadlines;
pub mod deps;
pub mod faulty;
pub mod history;
pub mod key_jobs;
pub mod keys;
pub mod model;
pub mod priority;
pub mod push;
pub mod queues;
pub mod results;
pub mod retention;
pub mod schedule;
pub mod throttle;
pub mod trace;

pub use batches::{
    bad_batches_are_refused, batch_callbacks_cannot_be_squatted,
    batch_jobs_count_once_however_they_end, batch_results_are_bounded,
    batches_call_back_once_when_done, batches_count_a_job_cancelled_while_it_runs,
    batches_on_a_sharded_queue, one_bad_batch_touches_only_itself,
    open_batches_take_jobs_until_closed,
};
pub use cancel_running::{
    cancel_running_leaves_dead_and_done_jobs, cancelled_running_jobs_free_their_key,
    consumers_stop_cancelled_handlers, parked_keyed_jobs_are_cancelled, running_jobs_are_cancelled,
};
pub use console::{
    counts_match_listings, dead_delete_and_cancel_all, listings_page_stably, pause_stops_leasing,
    series_count_transitions,
};
pub use deadlines::{
    expired_jobs_are_never_started, replace_on_conflict, timeouts_travel_with_the_job,
};
pub use deps::{
    a_chain_runs_in_order, a_consumer_runs_a_chain_step_after_step,
    a_dependents_own_due_time_still_counts, dependencies_that_ended_before_count_as_ended,
    done_dependencies_count_and_results_are_bounded, each_failure_policy,
    fan_in_waits_for_every_dependency, results_ride_on_the_dependents_claim,
    waiting_jobs_are_cancelled_rescheduled_and_checked,
};
pub use faulty::{FaultPoint, Faulty, Injected};
pub use history::{Event, History, Recording, Report};
pub use key_jobs::{
    a_job_replaced_under_another_key_moves_with_it, a_key_is_cancelled_in_one_call,
    a_key_is_rescheduled_in_one_call, a_keys_jobs_across_shards, a_keys_jobs_are_listed,
    a_keys_parked_jobs_are_listed_cancelled_and_moved,
};
pub use keys::{
    key_limits_hold_each_key, key_slots_come_back_when_leases_end, keys_on_a_sharded_queue,
    keys_pause_and_resume, keys_share_claims_round_robin,
};
pub use priority::{
    due_listing_follows_claim_order, low_priorities_age, priorities_order_due_jobs,
};
pub use push::{bad_targets_are_refused, delivery_decides_what_a_queue_takes, push_targets_travel};
pub use queues::{
    several_queues_in_strict_order, several_queues_share_claims_by_weight,
    several_queues_wake_and_pause_each,
};
pub use results::{handlers_return_results, results_ride_on_claims, results_stay_with_done_jobs};
pub use retention::{per_job_retention, retention_and_dedupe};
pub use schedule::{bad_schedules_are_refused, schedules_fire_once};
pub use throttle::{
    bad_throttles_are_refused, max_in_flight_in_the_claim, rate_limit_in_the_claim,
};
pub use trace::traces_travel_with_the_job;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::{
    AckOutcome, Backend, Backoff, CancelOutcome, ClaimRequest, Consumer, ConsumerOptions, Due,
    Error, Failure, Inspect, InvalidInput, Job, JobId, JobState, LeaseRef, ListState, Nack,
    NackOutcome, NewJob, Producer, QueueName, QueueStats, TestClock,
};

/// Every test of the suite, for [`crate::conformance_tests!`].
pub const ALL: &[&str] = &[
    "idempotent_enqueue",
    "never_early",
    "one_owner_and_fencing",
    "ack_deletes",
    "nack_retries_then_dead_letters",
    "expired_leases_come_back",
    "cancel_outcomes",
    "reschedule",
    "release_undoes_the_attempt",
    "dead_letter_tools",
    "bad_input_writes_nothing",
    "wakeups_for_earlier_jobs",
    "consumer_handles_each_job_once",
    "long_errors_are_cut_on_a_character_boundary",
    "counts_match_listings",
    "listings_page_stably",
    "dead_delete_and_cancel_all",
    "pause_stops_leasing",
    "series_count_transitions",
];

/// A clock that follows Tokio's clock of the runtime it was made in — paused and advanced by
/// `tokio::time` in tests — also when read from another thread (a store thread). With it, a
/// store and the consumer engine agree on time while a test skips hours at once.
#[derive(Clone, Debug)]
pub struct TokioClock {
    handle: tokio::runtime::Handle,
    base: tokio::time::Instant,
    base_us: u64,
}

impl TokioClock {
    /// Starts at this host's time now; must be called inside a Tokio runtime.
    pub fn new() -> Self {
        Self {
            handle: tokio::runtime::Handle::current(),
            base: tokio::time::Instant::now(),
            base_us: delayq::clock::system_now_us(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl delayq::Clock for TokioClock {
    fn now_us(&self) -> u64 {
        let _runtime = self.handle.enter();
        self.base_us + self.base.elapsed().as_micros() as u64
    }
}

/// Time as a conformance test drives it.
#[derive(Clone, Debug)]
pub enum Time {
    /// The store reads this host's clock (Redis: `TIME` of a server on this host): time passes
    /// by sleeping.
    Real,
    /// The store reads this clock: time passes at once, by advancing it.
    Driven(TestClock),
}

impl Time {
    /// Now on the store's clock, in ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        match self {
            Time::Real => delayq::job::system_now_ms(),
            Time::Driven(c) => delayq::Clock::now_ms(c),
        }
    }

    /// Lets `d` pass on the store's clock.
    pub async fn pass(&self, d: Duration) {
        match self {
            Time::Real => tokio::time::sleep(d).await,
            Time::Driven(c) => c.advance(d),
        }
    }
}

pub(crate) fn q() -> QueueName {
    QueueName::new("conformance").expect("valid")
}

pub(crate) fn id(s: &str) -> JobId {
    JobId::new(s).expect("valid")
}

pub(crate) fn job(name: &str, delay_ms: u64) -> NewJob {
    NewJob::new(name.as_bytes().to_vec())
        .id(id(name))
        .delay(Duration::from_millis(delay_ms))
}

pub(crate) fn req(max: usize, lease_ms: u64) -> ClaimRequest {
    ClaimRequest {
        max,
        lease: Duration::from_millis(lease_ms),
        acks: Vec::new(),
    }
}

/// Guarantee 4: an existing id creates nothing and says so, also inside one batch.
pub async fn idempotent_enqueue<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q());
    let first = p.enqueue(job("a", 60_000)).await.unwrap();
    let again = p.enqueue(job("a", 1)).await.unwrap();
    assert!(first.created && !again.created);
    assert_eq!(again.due_at_ms, first.due_at_ms);
    let out = p
        .enqueue_batch(vec![job("b", 0), job("a", 0), job("b", 5)])
        .await
        .unwrap();
    assert_eq!(
        out.iter().map(|e| e.created).collect::<Vec<_>>(),
        [true, false, false]
    );
    let info = b.get(&q(), &id("a")).await.unwrap().unwrap();
    assert_eq!(
        (info.state, info.payload.as_slice()),
        (JobState::Scheduled, b"a".as_slice())
    );
    assert_eq!(b.stats(&q()).await.unwrap().waiting(), 2);
    // A repeat due earlier than its first occurrence: still the first is written, and the
    // answers come in the batch's order.
    let out = p
        .enqueue_batch(vec![job("c", 50_000), job("d", 10), job("c", 0)])
        .await
        .unwrap();
    assert_eq!(
        out.iter().map(|e| e.created).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(out[2].due_at_ms, out[0].due_at_ms);
    assert!(out[0].due_at_ms >= out[1].due_at_ms + 49_000, "{out:?}");
    assert_eq!(
        out.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["c", "d", "c"]
    );
    b.cancel(&q(), &id("c")).await.unwrap();
    b.cancel(&q(), &id("d")).await.unwrap();
    // The largest batch, read and written in chunks by a store: an existing id and a repeat
    // far past the first chunk are still found.
    let mut big: Vec<NewJob> = (0..delayq::limits::MAX_BATCH)
        .map(|i| job(&format!("m{i}"), 60_000))
        .collect();
    big[7_777] = job("a", 0);
    big[9_000] = job("m2500", 0);
    let out = p.enqueue_batch(big).await.unwrap();
    let refused: Vec<usize> = (0..out.len()).filter(|&i| !out[i].created).collect();
    assert_eq!(refused, [7_777, 9_000]);
    assert_eq!(out[7_777].due_at_ms, first.due_at_ms);
    assert_eq!(out[9_000].due_at_ms, out[2_500].due_at_ms);
    assert_eq!(
        b.stats(&q()).await.unwrap().waiting(),
        2 + delayq::limits::MAX_BATCH as u64 - 2
    );
}

/// Guarantee 2: never claimed before its due time; the claim says when to come back.
pub async fn never_early<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    let e = p.enqueue(job("later", 400)).await.unwrap();
    let early = b.claim(&q(), req(10, 5000)).await.unwrap();
    if t.now_ms() >= e.due_at_ms {
        // A slow machine got here after the due time: the job must be there, not early.
        assert_eq!(early.jobs.len(), 1);
        return;
    }
    assert!(early.jobs.is_empty(), "claimed early");
    let wait = early.next_due_in.expect("a next due time");
    assert!(wait <= Duration::from_millis(400), "{wait:?}");
    t.pass(wait).await;
    let mut got = b.claim(&q(), req(10, 5000)).await.unwrap();
    if got.jobs.is_empty() {
        t.pass(Duration::from_millis(5)).await;
        got = b.claim(&q(), req(10, 5000)).await.unwrap();
    }
    assert_eq!(got.jobs.len(), 1);
    assert!(t.now_ms() >= e.due_at_ms);
    assert_eq!(got.jobs[0].due_at_ms, e.due_at_ms);
}

/// Guarantee 3: one owner while the lease is valid; stale, foreign and unknown tokens are
/// refused and change nothing.
pub async fn one_owner_and_fencing<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue_batch(vec![job("f", 0), job("g", 0)])
        .await
        .unwrap();
    let first = b.claim(&q(), req(1, 1000)).await.unwrap();
    let stale = first.jobs[0].lease_ref();
    let other = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs[0].lease_ref();
    assert_ne!(stale.id, other.id);
    assert!(
        b.claim(&q(), req(10, 1000)).await.unwrap().jobs.is_empty(),
        "one owner"
    );
    t.pass(Duration::from_millis(1100)).await;
    let again = b.claim(&q(), req(10, 30_000)).await.unwrap();
    assert_eq!(again.jobs.len(), 1);
    assert_eq!(
        (again.jobs[0].id.clone(), again.jobs[0].attempt),
        (stale.id.clone(), 2)
    );
    let fresh = again.jobs[0].lease_ref();
    refused_everywhere(&b, &stale, AckOutcome::LeaseLost).await;
    let forged = LeaseRef {
        id: fresh.id.clone(),
        token: other.token,
    };
    assert_eq!(
        b.ack(&q(), vec![delayq::Ack::from(forged)]).await.unwrap(),
        [AckOutcome::LeaseLost]
    );
    let unknown = LeaseRef {
        id: id("nope"),
        token: fresh.token,
    };
    refused_everywhere(&b, &unknown, AckOutcome::NotFound).await;
    let info = b.get(&q(), &fresh.id).await.unwrap().unwrap();
    assert_eq!((info.state, info.attempt), (JobState::Leased, 2));
    assert!(
        b.extend(&q(), fresh.clone(), Duration::from_secs(60))
            .await
            .is_ok()
    );
    assert_eq!(
        b.ack(&q(), vec![delayq::Ack::from(fresh.clone())])
            .await
            .unwrap(),
        [AckOutcome::Acked]
    );
    assert_eq!(
        b.ack(&q(), vec![delayq::Ack::from(fresh)]).await.unwrap(),
        [AckOutcome::NotFound],
        "an acked job is gone"
    );
}

/// Ack, nack and extend under `lease` are all refused as `want` says (`LeaseLost`: the job
/// exists under another lease or none; `NotFound`: no such job).
async fn refused_everywhere<B: Backend>(b: &B, lease: &LeaseRef, want: AckOutcome) {
    let as_want = |e: Error| match (e, want) {
        (Error::LeaseLost { .. }, AckOutcome::LeaseLost) => true,
        (Error::NotFound { .. }, AckOutcome::NotFound) => true,
        (e, _) => panic!("{e} where {want:?} was expected"),
    };
    assert_eq!(
        b.ack(&q(), vec![delayq::Ack::from(lease.clone())])
            .await
            .unwrap(),
        [want]
    );
    let nack = b.nack(&q(), lease.clone(), Nack::error("x")).await;
    assert!(nack.map_or_else(as_want, |o| panic!("nack accepted: {o:?}")));
    let extend = b.extend(&q(), lease.clone(), Duration::from_secs(1)).await;
    assert!(extend.map_or_else(as_want, |d| panic!("extend accepted: {d}")));
}

/// An ack deletes the job; acks ride on a claim.
pub async fn ack_deletes<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue_batch(vec![job("x", 0), job("y", 0)])
        .await
        .unwrap();
    let got = b.claim(&q(), req(1, 30_000)).await.unwrap();
    let mut r = req(1, 30_000);
    r.acks = vec![got.jobs[0].to_ack()];
    let next = b.claim(&q(), r).await.unwrap();
    assert_eq!(next.acks, [AckOutcome::Acked]);
    assert_eq!(next.jobs.len(), 1);
    assert_eq!(
        b.ack(&q(), vec![next.jobs[0].to_ack()]).await.unwrap(),
        [AckOutcome::Acked]
    );
    let s = b.stats(&q()).await.unwrap();
    assert_eq!((s.waiting(), s.leased, s.dead), (0, 0, 0));
    assert!(b.get(&q(), &id("x")).await.unwrap().is_none());
}

/// Retries by backoff until max_attempts, then dead with the last error; `dead` at once.
pub async fn nack_retries_then_dead_letters<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(
        job("r", 0)
            .max_attempts(2)
            .backoff(Backoff::Fixed { delay_ms: 500 }),
    )
    .await
    .unwrap();
    let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
    let before = t.now_ms();
    match b
        .nack(&q(), j.lease_ref(), Nack::error("boom 1"))
        .await
        .unwrap()
    {
        NackOutcome::Retrying { due_at_ms } => {
            assert!(due_at_ms >= before + 499 && due_at_ms <= t.now_ms() + 501)
        }
        o => panic!("{o:?}"),
    }
    assert!(
        b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.is_empty(),
        "backoff respected"
    );
    t.pass(Duration::from_millis(550)).await;
    let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
    assert_eq!((j.attempt, j.last_error.as_deref()), (2, Some("boom 1")));
    assert!(matches!(
        b.nack(&q(), j.lease_ref(), Nack::error("boom 2"))
            .await
            .unwrap(),
        NackOutcome::Dead { .. }
    ));
    let d = b.get(&q(), &id("r")).await.unwrap().unwrap();
    assert_eq!(
        (d.state, d.attempt, d.last_error.as_deref()),
        (JobState::Dead, 2, Some("boom 2"))
    );
    assert_eq!(d.payload, b"r");
    p.enqueue(job("k", 0)).await.unwrap();
    let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
    let nack = Nack {
        dead: true,
        ..Nack::error("invalid")
    };
    assert!(matches!(
        b.nack(&q(), j.lease_ref(), nack).await.unwrap(),
        NackOutcome::Dead { .. }
    ));
}

/// Guarantee 1 and crash recovery: an expired lease is delivered again (or dies when its
/// attempts are used up) inside the normal claim.
pub async fn expired_leases_come_back<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("again", 0).max_attempts(3)).await.unwrap();
    p.enqueue(job("last", 0).max_attempts(1)).await.unwrap();
    assert_eq!(b.claim(&q(), req(10, 100)).await.unwrap().jobs.len(), 2);
    t.pass(Duration::from_millis(180)).await;
    let got = b.claim(&q(), req(10, 30_000)).await.unwrap();
    assert_eq!(got.jobs.len(), 1);
    assert_eq!((got.jobs[0].id.as_str(), got.jobs[0].attempt), ("again", 2));
    assert!(
        got.jobs[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("lease expired")
    );
    let d = b.get(&q(), &id("last")).await.unwrap().unwrap();
    assert_eq!(d.state, JobState::Dead);
}

/// Cancel says who won the race.
pub async fn cancel_outcomes<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue_batch(vec![job("s", 60_000), job("l", 0)])
        .await
        .unwrap();
    assert_eq!(p.cancel(&id("s")).await.unwrap(), CancelOutcome::Cancelled);
    assert_eq!(p.cancel(&id("s")).await.unwrap(), CancelOutcome::NotFound);
    let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
    assert_eq!(p.cancel(&id("l")).await.unwrap(), CancelOutcome::Leased);
    let nack = Nack {
        dead: true,
        ..Nack::error("x")
    };
    b.nack(&q(), j.lease_ref(), nack).await.unwrap();
    assert_eq!(p.cancel(&id("l")).await.unwrap(), CancelOutcome::Dead);
    assert_eq!(
        p.cancel(&id("never")).await.unwrap(),
        CancelOutcome::NotFound
    );
}

/// Reschedule moves only scheduled jobs; a time in the past means now.
pub async fn reschedule<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    let e = p.enqueue(job("m", 60_000)).await.unwrap();
    let due = p
        .reschedule(&id("m"), Due::Delay(Duration::from_secs(600)))
        .await
        .unwrap();
    assert!(due > e.due_at_ms + 500_000);
    let now = p.reschedule(&id("m"), Due::At(1)).await.unwrap();
    assert!(now <= t.now_ms() && now + 1000 >= t.now_ms());
    assert!(matches!(
        p.reschedule(&id("zz"), Due::Now).await,
        Err(Error::NotFound { .. })
    ));
    b.claim(&q(), req(1, 30_000)).await.unwrap();
    assert!(matches!(
        p.reschedule(&id("m"), Due::Now).await,
        Err(Error::WrongState {
            state: JobState::Leased,
            ..
        })
    ));
}

/// Releasing a lease that never started does not count an attempt.
pub async fn release_undoes_the_attempt<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("u", 0)).await.unwrap();
    let j = b.claim(&q(), req(1, 60_000)).await.unwrap().jobs.remove(0);
    b.release(&q(), vec![j.lease_ref()], true).await.unwrap();
    let info = b.get(&q(), &id("u")).await.unwrap().unwrap();
    assert_eq!((info.state, info.attempt), (JobState::Scheduled, 0));
    assert_eq!(
        b.claim(&q(), req(1, 60_000)).await.unwrap().jobs[0].attempt,
        1
    );
}

/// Dead letters: list with paging, requeue one / all, purge.
pub async fn dead_letter_tools<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    for i in 0..5 {
        p.enqueue(job(&format!("d{i}"), 0)).await.unwrap();
        let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
        let nack = Nack {
            dead: true,
            ..Nack::error(format!("e{i}"))
        };
        b.nack(&q(), j.lease_ref(), nack).await.unwrap();
        t.pass(Duration::from_millis(2)).await;
    }
    let page1 = b
        .list(&q(), delayq::ListRequest::new(ListState::Dead, 3, None))
        .await
        .unwrap();
    let page2 = b
        .list(
            &q(),
            delayq::ListRequest::new(ListState::Dead, 3, page1.next.clone()),
        )
        .await
        .unwrap();
    assert!(page2.next.is_none(), "the second page reaches the end");
    let ids: Vec<String> = page1
        .jobs
        .iter()
        .chain(&page2.jobs)
        .map(|j| j.id.to_string())
        .collect();
    assert_eq!(ids, ["d0", "d1", "d2", "d3", "d4"]);
    // Offset paging over the cursor listing (the API's `/dead?offset=`).
    let middle = delayq::backend::skip_take(&b, &q(), ListState::Dead, 1, 3)
        .await
        .unwrap();
    let middle: Vec<String> = middle.iter().map(|j| j.id.to_string()).collect();
    assert_eq!(middle, ["d1", "d2", "d3"]);
    let tail = delayq::backend::skip_take(&b, &q(), ListState::Dead, 4, 10)
        .await
        .unwrap();
    assert_eq!(tail.len(), 1);
    assert_eq!(page1.jobs[0].last_error.as_deref(), Some("e0"));
    assert!(page1.jobs[0].failed_at_ms.is_some());
    b.dead_requeue(&q(), &id("d0")).await.unwrap();
    assert!(matches!(
        b.dead_requeue(&q(), &id("d0")).await,
        Err(Error::WrongState {
            state: JobState::Scheduled,
            expected: JobState::Dead,
            ..
        })
    ));
    assert!(matches!(
        b.dead_requeue(&q(), &id("zz")).await,
        Err(Error::NotFound { .. })
    ));
    let info = b.get(&q(), &id("d0")).await.unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempt, info.last_error),
        (JobState::Scheduled, 0, None)
    );
    assert_eq!(b.dead_requeue_all(&q()).await.unwrap(), 4);
    assert_eq!(b.stats(&q()).await.unwrap().due, 5);
    for j in b.claim(&q(), req(10, 30_000)).await.unwrap().jobs {
        b.nack(
            &q(),
            j.lease_ref(),
            Nack {
                dead: true,
                ..Nack::error("x")
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(b.dead_purge(&q()).await.unwrap(), 5);
    let s = b.stats(&q()).await.unwrap();
    assert_eq!((s.waiting(), s.leased, s.dead), (0, 0, 0));
}

/// Bad input is refused with a typed error and writes nothing.
pub async fn bad_input_writes_nothing<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q()).with_max_payload(100);
    let bad = [
        NewJob::new(vec![0; 101]),
        NewJob::new("x").delay(Duration::from_secs(11 * 365 * 86_400)),
        NewJob::new("x").max_attempts(0),
        NewJob::new("x").lease(Duration::ZERO),
        NewJob::new("x").backoff(Backoff::Exponential {
            base_ms: 9,
            cap_ms: 1,
        }),
    ];
    for j in bad {
        assert!(matches!(p.enqueue(j).await, Err(Error::Invalid(_))));
    }
    assert!(matches!(
        p.enqueue_batch(vec![job("ok", 0), NewJob::new(vec![0; 500])])
            .await,
        Err(Error::Invalid(InvalidInput::PayloadTooLarge { .. }))
    ));
    assert!(matches!(
        p.enqueue_batch(vec![]).await,
        Err(Error::Invalid(_))
    ));
    // A queue created with settings is listed; it holds no job.
    let queues = b.queues().await.unwrap();
    assert!(
        queues.iter().all(|x| *x == q()),
        "nothing written: {queues:?}"
    );
    assert_eq!(
        b.stats(&q()).await.unwrap(),
        QueueStats::default(),
        "nothing written"
    );
    assert!(
        p.enqueue(job("ok", 0)).await.unwrap().created,
        "still serving"
    );
}

/// Guarantee 6: a job ahead of the head wakes waiting consumers; a consumer sleeping towards
/// a far job handles a near one on time.
pub async fn wakeups_for_earlier_jobs<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("far", 60_000)).await.unwrap();
    let mut w = b.wakeups(&q()).await.unwrap();
    w.borrow_and_update();
    p.enqueue(job("near", 200)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), w.changed())
        .await
        .expect("woken by an earlier job")
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let (stop, rx) = tokio::sync::watch::channel(false);
    let opts = ConsumerOptions {
        concurrency: 1,
        max_idle: Duration::from_secs(60),
        ..Default::default()
    };
    let c = Consumer::new(b.clone(), q(), opts).unwrap();
    let h = tokio::spawn(c.run(
        move |j: Job| {
            s.lock()
                .unwrap()
                .push((j.id.to_string(), t.now_ms(), j.due_at_ms));
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let mut rx = rx;
            let _ = rx.wait_for(|v| *v).await;
        },
    ));
    // The consumer handles "near" (due in 200 ms: real time, on its own timer), then falls
    // asleep towards "far" within a claim's round trip (50 ms: if it is not asleep yet, the
    // test only asks less); a job enqueued then must wake it.
    let t0 = Instant::now();
    while seen.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let e = p.enqueue(job("nearer", 300)).await.unwrap();
    let t = Instant::now();
    while seen.lock().unwrap().len() < 2 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.send(true).unwrap();
    h.await.unwrap().unwrap();
    let seen = seen.lock().unwrap().clone();
    let nearer = seen
        .iter()
        .find(|s| s.0 == "nearer")
        .expect("nearer handled within 5 s");
    assert!(
        nearer.1 >= e.due_at_ms && nearer.1 < e.due_at_ms + 2000,
        "{nearer:?}"
    );
}

/// Guarantees 1 and 2 together: many jobs, several consumers, each job once, none early.
pub async fn consumer_handles_each_job_once<B: Backend + Inspect>(b: B, t: Time) {
    let p = Producer::new(b.clone(), q());
    let n = 600;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| job(&format!("{i}"), (i * 7 % 1000) as u64))
        .collect();
    p.enqueue_batch(jobs).await.unwrap();
    let seen: Arc<Mutex<HashMap<String, (usize, bool)>>> = Arc::default();
    let mut runs = Vec::new();
    let (stop, rx) = tokio::sync::watch::channel(false);
    for _ in 0..3 {
        let s = seen.clone();
        let t = t.clone();
        let opts = ConsumerOptions {
            concurrency: 4,
            ..Default::default()
        };
        let c = Consumer::new(b.clone(), q(), opts).unwrap();
        let mut rx = rx.clone();
        runs.push(tokio::spawn(c.run(
            move |j: Job| {
                let early = t.now_ms() < j.due_at_ms;
                let mut m = s.lock().unwrap();
                let e = m.entry(j.id.to_string()).or_insert((0, false));
                e.0 += 1;
                e.1 |= early;
                async { Ok::<(), Failure>(()) }
            },
            async move {
                let _ = rx.wait_for(|v| *v).await;
            },
        )));
    }
    let t = Instant::now();
    while seen.lock().unwrap().len() < n && t.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    for r in runs {
        r.await.unwrap().unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), n, "every job handled");
    assert!(seen.values().all(|(c, _)| *c == 1), "each exactly once");
    assert!(seen.values().all(|(_, early)| !early), "none early");
    let s = b.stats(&q()).await.unwrap();
    assert_eq!((s.waiting(), s.leased, s.dead), (0, 0, 0));
}

/// `last_error` keeps at most `limits::MAX_ERROR_BYTES` bytes, cut on a character boundary.
pub async fn long_errors_are_cut_on_a_character_boundary<B: Backend + Inspect>(b: B, _t: Time) {
    let p = Producer::new(b.clone(), q());
    p.enqueue(job("long", 0).max_attempts(1)).await.unwrap();
    let j = b.claim(&q(), req(1, 30_000)).await.unwrap().jobs.remove(0);
    // "€" is 3 bytes: a cut at exactly 1,024 bytes would split one.
    let message = "€".repeat(1000);
    b.nack(&q(), j.lease_ref(), Nack::error(message.clone()))
        .await
        .unwrap();
    let info = b.get(&q(), &id("long")).await.unwrap().unwrap();
    let stored = info.last_error.expect("an error is kept");
    assert_eq!(stored, delayq::limits::truncate_error(&message));
    assert_eq!(stored.len(), 1023);
}

/// Generates the model check (`testkit::model::run`) as one `#[test]` for the backend an
/// async `$setup` returns as `(guard, backend, time)`.
#[macro_export]
macro_rules! model_tests {
    ($setup:path) => {
        #[test]
        fn backend_matches_the_model() {
            $crate::model::run($setup);
        }
    };
}

/// Generates one `#[tokio::test]` per conformance test. `$setup` is an async fn returning
/// `(guard, backend, time)`; the guard (a server, a temporary directory) lives for the test.
/// `conformance_tests!(@on_existing_queues $setup)`: every test but `bad_input_writes_nothing`
/// (which checks that no queue exists afterwards), for a set-up that creates queues.
/// `@batches`: the batch tests; `@sharded`: the tests of a queue with several shards.
#[macro_export]
macro_rules! conformance_tests {
    ($setup:path) => {
        $crate::conformance_tests!(@each $setup; bad_input_writes_nothing);
        $crate::conformance_tests!(@on_existing_queues $setup);
    };
    (@on_existing_queues $setup:path) => {
        $crate::conformance_tests!(@each $setup;
            idempotent_enqueue, never_early, one_owner_and_fencing, ack_deletes,
            nack_retries_then_dead_letters, expired_leases_come_back, cancel_outcomes,
            reschedule, release_undoes_the_attempt, dead_letter_tools,
            wakeups_for_earlier_jobs, consumer_handles_each_job_once,
            long_errors_are_cut_on_a_character_boundary, listings_page_stably,
            dead_delete_and_cancel_all, pause_stops_leasing, series_count_transitions,
            rate_limit_in_the_claim, max_in_flight_in_the_claim, bad_throttles_are_refused,
            expired_jobs_are_never_started, timeouts_travel_with_the_job, replace_on_conflict,
            schedules_fire_once, bad_schedules_are_refused, retention_and_dedupe,
            per_job_retention, priorities_order_due_jobs, low_priorities_age,
            due_listing_follows_claim_order, counts_match_listings,
            push_targets_travel, bad_targets_are_refused, delivery_decides_what_a_queue_takes,
            traces_travel_with_the_job, several_queues_share_claims_by_weight,
            several_queues_in_strict_order, several_queues_wake_and_pause_each,
            results_stay_with_done_jobs, results_ride_on_claims, handlers_return_results,
            keys_share_claims_round_robin, key_limits_hold_each_key, keys_pause_and_resume,
            key_slots_come_back_when_leases_end, running_jobs_are_cancelled,
            consumers_stop_cancelled_handlers, cancelled_running_jobs_free_their_key,
            parked_keyed_jobs_are_cancelled, cancel_running_leaves_dead_and_done_jobs,
            a_keys_jobs_are_listed, a_key_is_cancelled_in_one_call,
            a_key_is_rescheduled_in_one_call, a_keys_parked_jobs_are_listed_cancelled_and_moved,
            a_job_replaced_under_another_key_moves_with_it);
    };
    (@batches $setup:path) => {
        $crate::conformance_tests!(@each $setup;
            batches_call_back_once_when_done, open_batches_take_jobs_until_closed,
            batch_jobs_count_once_however_they_end, bad_batches_are_refused,
            batch_callbacks_cannot_be_squatted, one_bad_batch_touches_only_itself,
            batch_results_are_bounded, batches_count_a_job_cancelled_while_it_runs);
    };
    (@deps $setup:path) => {
        $crate::conformance_tests!(@each $setup;
            a_chain_runs_in_order, fan_in_waits_for_every_dependency,
            a_dependents_own_due_time_still_counts, each_failure_policy,
            dependencies_that_ended_before_count_as_ended, results_ride_on_the_dependents_claim,
            waiting_jobs_are_cancelled_rescheduled_and_checked,
            a_consumer_runs_a_chain_step_after_step,
            done_dependencies_count_and_results_are_bounded);
    };
    (@sharded $setup:path) => {
        $crate::conformance_tests!(@each $setup;
            keys_on_a_sharded_queue, batches_on_a_sharded_queue, a_keys_jobs_across_shards);
    };
    (@each $setup:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_guard, backend, time) = $setup().await;
                $crate::$name(backend, time).await;
            }
        )*
    };
}
