//! A chaos run any backend can host: producers enqueue `jobs` jobs (each with an id, due in
//! `max_delay`) while consumers run; at chosen points a consumer is killed (its task aborted: leases
//! held, nothing acknowledged or released — a SIGKILL as the store sees it) or a fault the
//! caller supplies strikes (a server restart, a pause…); then everything heals, consumers
//! drain, and the [`History`] checker reports. Used by the Redis chaos test and `delayq chaos`.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::history::{Event, History, Recording, Report};
use delayq::{
    Backend, Consumer, ConsumerOptions, Failure, Inspect, Job, JobId, NewJob, Producer, QueueName,
};

/// A fault the caller injects: given the history (to record when it strikes), it strikes
/// and may leave a task running (a fault that strikes later, or heals later); the run waits
/// for that task before it heals. Build one with [`fault`], [`windowed`] or [`held`].
pub type Fault = Box<
    dyn FnOnce(History) -> Pin<Box<dyn Future<Output = Option<tokio::task::JoinHandle<()>>> + Send>>
        + Send,
>;

/// A fault that strikes at once: records [`Event::Fault`] `name`, runs `f` on a blocking
/// thread; the run carries on when `f` returns.
pub fn fault(name: impl Into<String>, f: impl FnOnce() + Send + 'static) -> Fault {
    let name = name.into();
    Box::new(move |h: History| {
        Box::pin(async move {
            h.record(Event::Fault(name));
            let _ = tokio::task::spawn_blocking(f).await;
            None
        })
    })
}

/// A fault that strikes and then takes its time to heal (a failover): `strike` runs (e.g. a
/// SIGKILL), [`Event::Fault`] `name` is recorded as it lands, then `heal` runs (the promotion,
/// the old master's return) — both on a blocking thread while the run carries on.
pub fn background(
    name: impl Into<String>,
    strike: impl FnOnce() + Send + 'static,
    heal: impl FnOnce() + Send + 'static,
) -> Fault {
    windowed(name, None, || {}, strike, heal)
}

/// A fault preceded by a window in which acknowledged writes may be lost: with `window`
/// given, [`Event::Unsynced`] `name` opens it, `open` runs (e.g. the disk's durable state is
/// frozen), and the run carries on for `window`; then `strike` runs, [`Event::Fault`] `name`
/// is recorded as it lands, and `heal` runs — all while the run carries on. Losses of enqueues
/// acknowledged inside the window are reported apart ([`Report::lost_unsynced`]).
pub fn windowed(
    name: impl Into<String>,
    window: Option<Duration>,
    open: impl FnOnce() + Send + 'static,
    strike: impl FnOnce() + Send + 'static,
    heal: impl FnOnce() + Send + 'static,
) -> Fault {
    held(
        name,
        window.unwrap_or_default(),
        window.is_some(),
        open,
        strike,
        heal,
    )
}

/// A fault held for a while (a partition): `open` runs (the network is cut), the run
/// carries on for `hold`, then `strike` runs (the cut ends), [`Event::Fault`] `name` is
/// recorded, and `heal` runs (waiting until the servers settle) — all while the run carries
/// on. With `unsynced`, the hold is an [`Event::Unsynced`] window: losses of enqueues
/// acknowledged in it are reported apart (an isolated master acknowledging what it cannot
/// replicate).
pub fn held(
    name: impl Into<String>,
    hold: Duration,
    unsynced: bool,
    open: impl FnOnce() + Send + 'static,
    strike: impl FnOnce() + Send + 'static,
    heal: impl FnOnce() + Send + 'static,
) -> Fault {
    let name = name.into();
    Box::new(move |h: History| {
        Box::pin(async move {
            if unsynced {
                // The window opens before `open` starts: a write acknowledged while it runs
                // may or may not be in what it froze.
                h.record(Event::Unsynced(name.clone()));
            }
            let _ = tokio::task::spawn_blocking(open).await;
            Some(tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                let _ = tokio::task::spawn_blocking(strike).await;
                h.record(Event::Fault(name));
                let _ = tokio::task::spawn_blocking(heal).await;
            }))
        })
    })
}

/// How a run goes.
pub struct Plan {
    /// Jobs to enqueue.
    pub jobs: usize,
    /// Consumers running at once.
    pub consumers: usize,
    /// Consumer kills, spread evenly over the enqueues.
    pub kills: usize,
    /// Other faults, each after this many enqueues.
    pub faults: Vec<(usize, Fault)>,
    /// Lease of the consumers (a killed consumer's jobs come back after it).
    pub lease: Duration,
    /// Longest final drain.
    pub drain: Duration,
    /// Enqueues per second (`None`: as fast as the store answers) — faults that take their
    /// time to heal (a failover) need a run long enough to space them.
    pub rate: Option<f64>,
    /// Each job is due in 0..`max_delay` (uniform) after its enqueue.
    pub max_delay: Duration,
    /// Another way in for some of the jobs (`None`: every job through a [`Producer`]).
    pub via: Option<Via>,
}

/// Another way in for every `every`-th job: an enqueue inside a database transaction that a
/// relay moves into the store, say. Given the job's id and its due time (ms since the epoch,
/// this host's clock), it commits the job or says why not. Like every job of the run, one that
/// starts before the due time given here counts as [`Report::early`] (the way in must keep it).
pub struct Via {
    /// Which jobs: those whose number is a multiple of this.
    pub every: usize,
    /// Commits one job.
    pub enqueue: ViaEnqueue,
}

/// How a [`Via`] commits a job: given its id and due time (ms since the epoch).
pub type ViaEnqueue =
    Box<dyn Fn(String, u64) -> Pin<Box<dyn Future<Output = ViaOutcome> + Send>> + Send + Sync>;

/// What a [`Via`] enqueue came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViaOutcome {
    /// Committed: the job must run.
    Committed,
    /// Refused: nothing written.
    Refused,
    /// Unknown (the commit's answer was lost): it may run.
    Unknown,
}

fn start<B: Backend>(
    b: B,
    h: &History,
    q: &QueueName,
    lease: Duration,
    label: usize,
) -> (usize, tokio::task::JoinHandle<()>) {
    let task = worker(Recording::labelled(b, h.clone(), label), q, lease);
    (label, task)
}

/// A consumer of `q` (concurrency 8, leases of `lease`) whose jobs take 2 ms, running until its
/// task is aborted.
pub(crate) fn worker<B: Backend>(
    b: B,
    q: &QueueName,
    lease: Duration,
) -> tokio::task::JoinHandle<()> {
    let opts = ConsumerOptions {
        concurrency: 8,
        lease,
        max_idle: Duration::from_secs(1),
        shutdown_grace: Duration::from_secs(1),
        ..ConsumerOptions::default()
    };
    let c = Consumer::new(b, q.clone(), opts).expect("valid options");
    tokio::spawn(async move {
        let _ = c
            .run(
                |_job: Job| async {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    Ok::<(), Failure>(())
                },
                std::future::pending(),
            )
            .await;
    })
}

/// Runs `plan` on `queue`; `connect` makes a backend per consumer and one for the producer
/// (like separate processes). Returns the checker's report after the drain and a final read
/// of the jobs whose last ack had an unknown outcome. A job started before the due time its
/// producer meant (this host's clock at the enqueue plus its delay) counts as early, even when
/// the store was handed a wrong one on the way.
pub async fn run<B, F, Fut>(queue: QueueName, connect: F, mut plan: Plan) -> Report
where
    B: Backend + Inspect,
    F: Fn() -> Fut,
    Fut: Future<Output = B>,
{
    let h = History::default();
    let mut consumers = Vec::new();
    let mut labels = 0..;
    for _ in 0..plan.consumers.max(1) {
        let label = labels.next().expect("endless");
        consumers.push(start(connect().await, &h, &queue, plan.lease, label));
    }
    let mut background: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let producer = Producer::new(connect().await, queue.clone());
    let kill_every = (plan.jobs / (plan.kills + 1)).max(1);
    let mut kills = 0;
    plan.faults.sort_by_key(|(at, _)| *at);
    let mut faults = plan.faults.into_iter().peekable();
    let began = tokio::time::Instant::now();
    // Every job's due time as its producer meant it (this host's clock before the enqueue,
    // plus the delay), to check it never starts before — wherever the job waited on the way
    // (another way in, a cold tier), whatever due time the store was handed.
    let mut given_due: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for i in 0..plan.jobs {
        if let Some(rate) = plan.rate.filter(|r| *r > 0.0) {
            tokio::time::sleep_until(began + Duration::from_secs_f64(i as f64 / rate)).await;
        }
        let id = format!("j{i}");
        let delay = rand::random::<u64>() % (plan.max_delay.as_millis() as u64).max(1);
        if let Some(via) = plan.via.as_ref().filter(|v| i % v.every.max(1) == 0) {
            let due = delayq::job::system_now_ms() + delay;
            given_due.insert(id.clone(), due);
            h.record(Event::Invoke(id.clone()));
            match (via.enqueue)(id.clone(), due).await {
                ViaOutcome::Committed => h.record(Event::Ok(id)),
                ViaOutcome::Refused => h.record(Event::Fail(id)),
                ViaOutcome::Unknown => {
                    h.record(Event::Unknown(id));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        } else {
            given_due.insert(id.clone(), delayq::job::system_now_ms() + delay);
            let job = NewJob::new(id.clone().into_bytes())
                .id(JobId::new(id.clone()).expect("valid id"))
                .delay(Duration::from_millis(delay));
            h.record(Event::Invoke(id.clone()));
            match producer.enqueue(job).await {
                Ok(_) => h.record(Event::Ok(id)),
                Err(e) if e.is_retryable() => {
                    h.record(Event::Unknown(id));
                    // Like any client after an error: pause before the next call, rather than
                    // spend the rest of the jobs on an outage.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(_) => h.record(Event::Fail(id)),
            }
        }
        if kills < plan.kills && (i + 1) % kill_every == 0 {
            kills += 1;
            h.record(Event::Fault(format!("kill consumer after job {i}")));
            let (label, victim) = consumers.remove(0);
            victim.abort();
            let _ = victim.await;
            h.record(Event::Retired(label));
            let label = labels.next().expect("endless");
            consumers.push(start(connect().await, &h, &queue, plan.lease, label));
        }
        while faults.peek().is_some_and(|(at, _)| *at <= i) {
            let (_, f) = faults.next().expect("peeked");
            // One fault at a time: a fault still healing (a failover, a partition) holds the
            // next one back — they would pile up on servers that have not settled — while
            // the producers go on.
            match background.pop().filter(|t| !t.is_finished()) {
                None => background.extend(f(h.clone()).await),
                Some(previous) => {
                    let h = h.clone();
                    background.push(tokio::spawn(async move {
                        let _ = previous.await;
                        if let Some(task) = f(h).await {
                            let _ = task.await;
                        }
                    }));
                }
            }
        }
    }
    for task in background {
        let _ = task.await;
    }
    h.record(Event::Healed);
    // Drain until every acknowledged job is done and the store holds nothing scheduled or
    // leased (a store rolled back by a fault holds jobs the history saw done: they run again).
    let deadline = Instant::now() + plan.drain;
    let inspector = connect().await;
    loop {
        let r = h.check();
        let empty = matches!(
            inspector.stats(&queue).await,
            Ok(s) if s.waiting() == 0 && s.leased == 0
        );
        if (r.lost.len() == r.ack_unknown.len() && empty) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (_, c) in consumers {
        c.abort();
    }
    // The final read: an ack whose answer was lost may have taken effect — the job is gone, or
    // kept as done by its retention.
    let reader = connect().await;
    for id in h.check().ack_unknown {
        let job = JobId::new(id.clone()).expect("valid id");
        let done = match reader.get(&queue, &job).await {
            Ok(None) => true,
            Ok(Some(j)) => j.state == delayq::JobState::Done,
            Err(_) => false,
        };
        if done {
            h.record(Event::Gone(id));
        }
    }
    let mut r = h.check();
    for (_, e) in h.events() {
        if let Event::Start { id, at_ms, .. } = e
            && given_due.get(&id).is_some_and(|due| at_ms < *due)
        {
            r.early += 1;
        }
    }
    if std::env::var_os("DELAYQ_CHAOS_TRACE").is_some() {
        for id in &r.lost {
            for (t, e) in h.events() {
                let mine = match &e {
                    Event::Invoke(i)
                    | Event::Ok(i)
                    | Event::Fail(i)
                    | Event::Unknown(i)
                    | Event::Gone(i) => i == id,
                    Event::Start { id: i, .. }
                    | Event::Ack { id: i, .. }
                    | Event::AckUnknown { id: i, .. } => i == id,
                    _ => true,
                };
                if mine {
                    eprintln!("{:?} {e:?}", t.elapsed());
                }
            }
        }
    }
    r
}

impl Report {
    /// The report as a table for people.
    pub fn table(&self) -> String {
        let mut s = format!(
            "completed      {}\nlost           {}\nlost unsynced  {}\nunexpected     {}\n\
             duplicated     {}\nrecovered      {}\nunknown absent {}\nearly          {}\n\
             stale acks     {}\n",
            self.completed,
            self.lost.len(),
            self.lost_unsynced.len(),
            self.unexpected.len(),
            self.duplicated,
            self.recovered,
            self.unknown_absent,
            self.early,
            self.stale_acks_accepted
        );
        let ms = |d: &Option<Duration>| {
            d.map_or("never".to_owned(), |d| {
                format!("{:.0} ms", d.as_secs_f64() * 1e3)
            })
        };
        for ((fault, first), (_, every)) in self.recovery.iter().zip(&self.consumer_recovery) {
            s += &format!(
                "after {fault}: next completion in {}, every consumer again in {}\n",
                ms(first),
                ms(every)
            );
        }
        s
    }
}
