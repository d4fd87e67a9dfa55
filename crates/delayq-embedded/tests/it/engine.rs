//! The consumer engine under a paused Tokio clock: lease extension, shutdown, retries and
//! backend failures are checked over minutes of virtual time in a fraction of a second. The
//! store reads the same clock (`TokioClock`), so its due times and leases agree with the
//! engine's sleeps. Paused time jumps whenever every task waits, also on the store thread, so
//! a ticker makes virtual time flow at a steady pace instead (`flow`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use delayq::{
    AckOutcome, Backend, Backoff, CancelOutcome, ClaimBatch, ClaimRequest, Consumer,
    ConsumerOptions, Due, Enqueued, Failure, Inspect, Job, JobId, JobState, LeaseRef, Nack,
    NackOutcome, NewJob, Producer, QueueName, RunReport, Wakeups,
};
use delayq_embedded::EmbeddedBackend;
use delayq_testkit::{FaultPoint, Faulty, TokioClock};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::sleep;

fn q() -> QueueName {
    QueueName::new("engine").unwrap()
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// Starts the ticker that makes paused time flow. A paused clock would jump to the next timer
/// whenever every task waits — also while one waits for the store thread, which then sees
/// minutes pass during one operation. The ticker advances time 10 ms for every 50 µs of real
/// time (a 20 ms fsync is 4 s of virtual time) and never lets the runtime idle, so tests
/// simply sleep.
fn flow() -> JoinHandle<()> {
    tokio::spawn(async {
        loop {
            std::thread::sleep(Duration::from_micros(50));
            tokio::time::advance(Duration::from_millis(10)).await;
            tokio::task::yield_now().await;
        }
    })
}

/// A store on the flowing paused clock, holding `job`.
async fn open_with(job: NewJob) -> (tempfile::TempDir, EmbeddedBackend) {
    drop(flow());
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open_with_clock(dir.path(), Arc::new(TokioClock::new())).unwrap();
    Producer::new(b.clone(), q()).enqueue(job).await.unwrap();
    (dir, b)
}

/// Waits (up to `within` of virtual time) until the job is gone: acknowledged. A loaded machine
/// makes store operations take longer in virtual time, so tests wait for the outcome instead
/// of a fixed time.
async fn until_gone(b: &EmbeddedBackend, job: &JobId, within: Duration) {
    let end = tokio::time::Instant::now() + within;
    while b.get(&q(), job).await.unwrap().is_some() && tokio::time::Instant::now() < end {
        sleep(Duration::from_secs(1)).await;
    }
}

/// Starts a consumer; the sender stops it.
fn start<B: Backend, F, Fut>(
    b: B,
    opts: ConsumerOptions,
    handler: F,
) -> (watch::Sender<bool>, JoinHandle<RunReport>)
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Failure>> + Send + 'static,
{
    let (stop, mut rx) = watch::channel(false);
    let c = Consumer::new(b, q(), opts).unwrap();
    let run = tokio::spawn(async move {
        c.run(handler, async move {
            let _ = rx.wait_for(|v| *v).await;
        })
        .await
        .unwrap()
    });
    (stop, run)
}

#[tokio::test(start_paused = true)]
async fn a_handler_ten_times_longer_than_its_lease_keeps_it() {
    let (_dir, b) = open_with(NewJob::new("x").id(id("long"))).await;
    let opts = ConsumerOptions {
        concurrency: 1,
        lease: Duration::from_secs(30),
        ..Default::default()
    };
    let (stop, run) = start(b.clone(), opts, |_job: Job| async {
        sleep(Duration::from_secs(300)).await;
        Ok(())
    });
    sleep(Duration::from_secs(150)).await;
    let info = b.get(&q(), &id("long")).await.unwrap().unwrap();
    assert_eq!((info.state, info.attempt), (JobState::Leased, 1));
    let req = ClaimRequest {
        max: 10,
        lease: Duration::from_secs(30),
        acks: vec![],
    };
    assert!(
        b.claim(&q(), req).await.unwrap().jobs.is_empty(),
        "still owned"
    );
    until_gone(&b, &id("long"), Duration::from_secs(600)).await;
    stop.send(true).unwrap();
    let report = run.await.unwrap();
    assert_eq!((report.claimed, report.acked, report.lease_lost), (1, 1, 0));
    assert!(b.get(&q(), &id("long")).await.unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn shutdown_aborts_after_the_grace_period_and_releases_the_lease() {
    let (_dir, b) = open_with(NewJob::new("x").id(id("stuck"))).await;
    let opts = ConsumerOptions {
        shutdown_grace: Duration::from_secs(5),
        ..Default::default()
    };
    let (stop, run) = start(b.clone(), opts, |_job: Job| async {
        sleep(Duration::from_secs(3600)).await;
        Ok(())
    });
    sleep(Duration::from_secs(1)).await;
    stop.send(true).unwrap();
    let report = run.await.unwrap();
    assert_eq!((report.claimed, report.aborted, report.acked), (1, 1, 0));
    let info = b.get(&q(), &id("stuck")).await.unwrap().unwrap();
    assert_eq!(
        info.state,
        JobState::Scheduled,
        "released, due again at once"
    );
}

#[tokio::test(start_paused = true)]
async fn failures_retry_by_backoff_then_dead_letter() {
    let job = NewJob::new("x")
        .id(id("bad"))
        .max_attempts(3)
        .backoff(Backoff::Fixed { delay_ms: 120_000 });
    let (_dir, b) = open_with(job).await;
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let (stop, run) = start(b.clone(), ConsumerOptions::default(), move |_job: Job| {
        c.fetch_add(1, Ordering::SeqCst);
        async { Err(Failure::retry("nope")) }
    });
    sleep(Duration::from_secs(60)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the backoff is respected");
    // Two more attempts 2 minutes apart, then dead: wait for it (at most 20 minutes).
    let end = tokio::time::Instant::now() + Duration::from_secs(1200);
    while calls.load(Ordering::SeqCst) < 3 && tokio::time::Instant::now() < end {
        sleep(Duration::from_secs(1)).await;
    }
    sleep(Duration::from_secs(1)).await;
    stop.send(true).unwrap();
    let report = run.await.unwrap();
    assert_eq!((report.retried, report.dead), (2, 1));
    let info = b.get(&q(), &id("bad")).await.unwrap().unwrap();
    assert_eq!((info.state, info.attempt), (JobState::Dead, 3));
    assert_eq!(info.last_error.as_deref(), Some("nope"));
}

/// A claim that fails before the store is retried; one whose answer is lost after the store
/// leased the job leaves it leased until the lease expires, then it runs (attempt 2).
#[tokio::test(start_paused = true)]
async fn failed_claims_are_retried_and_lost_answers_cost_one_lease() {
    for (point, attempt) in [(FaultPoint::Before, 1), (FaultPoint::After, 2)] {
        let (_dir, inner) = open_with(NewJob::new("x").id(id("j"))).await;
        let b = Faulty::new(inner.clone());
        b.fail_call(1, point);
        let seen = Arc::new(AtomicU32::new(0));
        let s = seen.clone();
        let opts = ConsumerOptions {
            lease: Duration::from_secs(30),
            ..Default::default()
        };
        let (stop, run) = start(b.clone(), opts, move |job: Job| {
            s.store(job.attempt, Ordering::SeqCst);
            async { Ok(()) }
        });
        until_gone(&inner, &id("j"), Duration::from_secs(300)).await;
        stop.send(true).unwrap();
        let report = run.await.unwrap();
        assert_eq!(b.take_injected().map(|f| f.method), Some("claim"));
        assert_eq!(seen.load(Ordering::SeqCst), attempt, "{point:?}");
        assert_eq!(report.acked, 1, "{point:?}");
        assert!(inner.get(&q(), &id("j")).await.unwrap().is_none());
    }
}

/// Waits until job `last` is done and nothing is leased, then stops the consumer.
async fn drained(
    b: &EmbeddedBackend,
    last: &str,
    stop: watch::Sender<bool>,
    run: JoinHandle<RunReport>,
) -> RunReport {
    until_gone(b, &id(last), Duration::from_secs(600)).await;
    while b.stats(&q()).await.unwrap().leased > 0 {
        sleep(Duration::from_millis(100)).await;
    }
    stop.send(true).unwrap();
    run.await.unwrap()
}

/// A store on the flowing paused clock holding due jobs `first`, then `j0`…`j{n-2}`: `n` in
/// all.
async fn due_jobs(n: usize) -> (tempfile::TempDir, EmbeddedBackend) {
    let (dir, b) = open_with(NewJob::new("x").id(id("first"))).await;
    let jobs = (0..n - 1)
        .map(|i| NewJob::new("x").id(id(&format!("j{i}"))))
        .collect();
    Producer::new(b.clone(), q())
        .enqueue_batch(jobs)
        .await
        .unwrap();
    (dir, b)
}

/// One handler slot with `prefetch` (the prefetch tests' consumer).
fn one_slot(prefetch: usize) -> ConsumerOptions {
    ConsumerOptions {
        concurrency: 1,
        prefetch,
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn prefetch_serves_several_jobs_per_claim() {
    let (_dir, b) = due_jobs(100).await;
    let opts = one_slot(16);
    let (stop, run) = start(b.clone(), opts, |_job: Job| async { Ok(()) });
    let r = drained(&b, "j98", stop, run).await;
    assert_eq!((r.claimed, r.acked, r.released), (100, 100, 0));
    // One job (no pace known yet), then 17, then refills of ~8 as the held jobs run down to
    // half: ~12 claims, not 100.
    assert!(r.claims <= 16, "{} claims for 100 jobs", r.claims);
}

#[tokio::test(start_paused = true)]
async fn handlers_slower_than_the_budget_get_no_prefetch() {
    let (_dir, b) = due_jobs(20).await;
    let opts = one_slot(16);
    // 200 ms a job: four times the budget, so holding even one would idle it.
    let (stop, run) = start(b.clone(), opts, |_job: Job| async {
        sleep(Duration::from_millis(200)).await;
        Ok(())
    });
    let r = drained(&b, "j18", stop, run).await;
    assert_eq!((r.claimed, r.acked, r.released), (20, 20, 0));
    assert!(
        r.claims >= 20,
        "one job per claim (nothing held): {} claims",
        r.claims
    );
}

#[tokio::test(start_paused = true)]
async fn held_jobs_are_given_back_when_a_handler_is_slow_and_at_shutdown() {
    let (_dir, b) = due_jobs(5).await;
    let opts = ConsumerOptions {
        lease: Duration::from_secs(30),
        ..one_slot(3)
    };
    // The first job is instant (the pace says: prefetch), the next one far slower than a
    // held job's patience (a third of its lease).
    let (stop, run) = start(b.clone(), opts, |job: Job| async move {
        if job.id.as_str() != "first" {
            sleep(Duration::from_secs(60)).await;
        }
        Ok(())
    });
    sleep(Duration::from_secs(15)).await;
    // j0 runs; j1-j3 were held, then given back after 10 s with their attempt not counted,
    // and not leased again while j0 runs.
    assert_eq!(
        b.get(&q(), &id("j0")).await.unwrap().unwrap().state,
        JobState::Leased
    );
    for j in ["j1", "j2", "j3"] {
        let info = b.get(&q(), &id(j)).await.unwrap().unwrap();
        assert_eq!((info.state, info.attempt), (JobState::Scheduled, 0), "{j}");
    }
    stop.send(true).unwrap();
    let r = run.await.unwrap();
    assert_eq!(r.released, 3, "held jobs given back: {r:?}");
    assert_eq!(r.lease_lost, 0);
    let st = b.stats(&q()).await.unwrap();
    assert_eq!(st.leased, 0, "{st:?}");
    for j in ["j1", "j2", "j3"] {
        let info = b.get(&q(), &id(j)).await.unwrap().unwrap();
        assert_eq!(
            (info.state, info.attempt),
            (JobState::Scheduled, 0),
            "{j}: released, never started"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_consumer_holds_at_most_the_budget_of_its_own_pace() {
    let (_dir, b) = due_jobs(60).await;
    // The default prefetch (64), concurrency 1, 20 ms a job: the budget (50 ms of work per
    // slot) allows 2 held jobs beside the running one, whatever the option says, so another
    // consumer of the queue finds the rest due and free (fairness between consumers).
    let opts = one_slot(delayq::consumer::DEFAULT_PREFETCH);
    let (stop, run) = start(b.clone(), opts, |_job: Job| async {
        sleep(Duration::from_millis(20)).await;
        Ok(())
    });
    let mut most = 0;
    while b.get(&q(), &id("j58")).await.unwrap().is_some() {
        most = most.max(b.stats(&q()).await.unwrap().leased);
        sleep(Duration::from_millis(5)).await;
    }
    let r = drained(&b, "j58", stop, run).await;
    assert_eq!(r.acked, 60);
    assert!(
        most <= 3,
        "{most} jobs leased at once: 1 running + at most 2 held"
    );
    assert!(
        most >= 2,
        "a job was held while one ran: {most} leased at most"
    );
}

/// The embedded store behind a server's long poll, as `delayq worker --server` sees it: a
/// claim that leases nothing answers only after `LONG_POLL` (the poll waited for a due job),
/// and every answer says "claim again at once" (the server does the waiting). With a flag,
/// every other claim waits `LONG_POLL` and then fails without reaching the store (a request
/// lost on the way), so the engine's retry carries its acks again.
#[derive(Clone)]
struct LongPoll(EmbeddedBackend, Option<Arc<std::sync::atomic::AtomicBool>>);

const LONG_POLL: Duration = Duration::from_secs(5);

impl Backend for LongPoll {
    async fn enqueue(&self, q: &QueueName, jobs: Vec<NewJob>) -> delayq::Result<Vec<Enqueued>> {
        self.0.enqueue(q, jobs).await
    }
    async fn claim(&self, q: &QueueName, req: ClaimRequest) -> delayq::Result<ClaimBatch> {
        let asked = req.max;
        if let Some(flip) = &self.1
            && asked > 0
            && !flip.fetch_xor(true, Ordering::Relaxed)
        {
            sleep(LONG_POLL).await;
            return Err(delayq::Error::Unavailable("lost on the way".into()));
        }
        let mut batch = self.0.claim(q, req).await?;
        if asked > 0 && batch.jobs.is_empty() {
            sleep(LONG_POLL).await;
        }
        batch.next_due_in = Some(Duration::ZERO);
        Ok(batch)
    }
    async fn ack(&self, q: &QueueName, a: Vec<delayq::Ack>) -> delayq::Result<Vec<AckOutcome>> {
        self.0.ack(q, a).await
    }
    async fn nack(&self, q: &QueueName, l: LeaseRef, n: Nack) -> delayq::Result<NackOutcome> {
        self.0.nack(q, l, n).await
    }
    async fn extend(&self, q: &QueueName, l: LeaseRef, len: Duration) -> delayq::Result<u64> {
        self.0.extend(q, l, len).await
    }
    async fn release(&self, q: &QueueName, l: Vec<LeaseRef>, undo: bool) -> delayq::Result<()> {
        self.0.release(q, l, undo).await
    }
    async fn cancel(&self, q: &QueueName, id: &JobId) -> delayq::Result<CancelOutcome> {
        self.0.cancel(q, id).await
    }
    async fn cancel_running(&self, q: &QueueName, id: &JobId) -> delayq::Result<CancelOutcome> {
        self.0.cancel_running(q, id).await
    }
    async fn cancelled(&self, q: &QueueName, l: Vec<LeaseRef>) -> delayq::Result<Vec<bool>> {
        self.0.cancelled(q, l).await
    }
    async fn reschedule(&self, q: &QueueName, id: &JobId, s: Due) -> delayq::Result<u64> {
        self.0.reschedule(q, id, s).await
    }
    async fn wakeups(&self, q: &QueueName) -> delayq::Result<Wakeups> {
        self.0.wakeups(q).await
    }
}

/// Held jobs start while a claim is in flight: a refill claim that long-polls (nothing else
/// is due) does not keep the free slot idle with jobs waiting in it.
#[tokio::test(start_paused = true)]
async fn held_jobs_run_while_a_claim_long_polls() {
    let (_dir, b) = due_jobs(30).await;
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = starts.clone();
    let (stop, run) = start(LongPoll(b.clone(), None), one_slot(16), move |_job: Job| {
        seen.lock().unwrap().push(tokio::time::Instant::now());
        async {
            sleep(Duration::from_millis(10)).await;
            Ok(())
        }
    });
    let r = drained(&b, "j28", stop, run).await;
    assert_eq!((r.claimed, r.acked), (30, 30));
    let starts = starts.lock().unwrap();
    let span = *starts.last().unwrap() - starts[0];
    assert!(
        span < LONG_POLL,
        "30 jobs of 10 ms started over {span:?}: held jobs waited for a long poll"
    );
}

/// Acks survive a slow claim that fails: the engine sends the failed call's acks again with
/// those of the jobs that finished beside it, so every job runs once (a lost ack would let
/// its lease expire and the job run again).
#[tokio::test(start_paused = true)]
async fn acks_survive_a_slow_claim_that_fails() {
    let (_dir, b) = due_jobs(30).await;
    let runs = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let seen = runs.clone();
    let flaky = LongPoll(b.clone(), Some(Arc::default()));
    let (stop, run) = start(flaky, one_slot(16), move |job: Job| {
        *seen.lock().unwrap().entry(job.id).or_insert(0) += 1;
        async {
            sleep(Duration::from_millis(10)).await;
            Ok(())
        }
    });
    let r = drained(&b, "j28", stop, run).await;
    assert_eq!((r.acked, r.lease_lost), (30, 0), "{r:?}");
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), 30);
    assert!(runs.values().all(|&n| n == 1), "a job ran twice: {runs:?}");
}

/// A long poll does not keep finished jobs leased: the acks of jobs that finish while a claim
/// long-polls reach the store long before it returns (they waited for it: ~5 s).
#[tokio::test(start_paused = true)]
async fn acks_do_not_wait_for_a_long_poll() {
    let (_dir, b) = due_jobs(30).await;
    let ends = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = ends.clone();
    let (stop, run) = start(LongPoll(b.clone(), None), one_slot(16), move |_job: Job| {
        let seen = seen.clone();
        async move {
            sleep(Duration::from_millis(10)).await;
            seen.lock().unwrap().push(tokio::time::Instant::now());
            Ok(())
        }
    });
    let end = tokio::time::Instant::now() + Duration::from_secs(600);
    let acked_at = loop {
        let s = b.stats(&q()).await.unwrap();
        if ends.lock().unwrap().len() == 30 && s.leased == 0 && s.due == 0 {
            break tokio::time::Instant::now();
        }
        assert!(tokio::time::Instant::now() < end, "not drained: {s:?}");
        sleep(Duration::from_millis(10)).await;
    };
    let last_end = *ends.lock().unwrap().iter().max().unwrap();
    let lag = acked_at - last_end;
    assert!(
        lag < LONG_POLL / 5,
        "the last job stayed leased {lag:?} after its handler returned"
    );
    stop.send(true).unwrap();
    let r = run.await.unwrap();
    assert_eq!((r.claimed, r.acked, r.lease_lost), (30, 30, 0), "{r:?}");
}

/// A prefetching consumer acknowledges finished jobs within a bound (`ACK_WITHIN`) even while
/// it holds jobs and no claim is due: here the one slot's fifth job never ends, so no claim
/// would carry the first four's acks until the held jobs went stale (a third of the 10-minute
/// lease) — a consumer killed meanwhile would have them run again.
#[tokio::test(start_paused = true)]
async fn finished_jobs_are_acknowledged_while_held_jobs_wait() {
    let (_dir, b) = due_jobs(30).await;
    let opts = ConsumerOptions {
        lease: Duration::from_secs(600),
        ..one_slot(16)
    };
    let started = Arc::new(AtomicU32::new(0));
    let count = started.clone();
    let (stop, run) = start(b.clone(), opts, move |_job: Job| {
        let n = count.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 4 {
                std::future::pending::<()>().await;
            }
            Ok(())
        }
    });
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    let left = || async {
        let s = b.stats(&q()).await.unwrap();
        s.waiting() + s.leased
    };
    while left().await > 26 && tokio::time::Instant::now() < end {
        sleep(Duration::from_secs(1)).await;
    }
    let s = b.stats(&q()).await.unwrap();
    assert_eq!(
        s.waiting() + s.leased,
        26,
        "the 4 finished jobs are acknowledged within 60 s: {s:?}"
    );
    assert!(s.leased > 1, "jobs are held beside the stuck one: {s:?}");
    assert_eq!(started.load(Ordering::SeqCst), 5);
    stop.send(true).unwrap();
    let r = run.await.unwrap();
    assert_eq!(r.acked, 4);
}
