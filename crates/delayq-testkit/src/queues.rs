//! Conformance tests of one consumer over several queues (issue 35, item 1): claims shared by
//! weight among backlogged queues, strict order, a wake-up of any queue, a paused queue held
//! while the others are served, and the list of queues checked.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Time, job, q};
use delayq::{
    Backend, Consumer, ConsumerOptions, Error, Failure, Inspect, InvalidInput, Job, NewJob,
    Producer, QueueName, QueueOrder,
};

fn other() -> QueueName {
    QueueName::new("conformance-b").expect("valid")
}

/// One job per claim (concurrency 1, no prefetch): the order of handled jobs is the order of
/// claims.
fn one_at_a_time() -> ConsumerOptions {
    ConsumerOptions {
        concurrency: 1,
        prefetch: 0,
        max_idle: Duration::from_secs(60),
        ..ConsumerOptions::default()
    }
}

async fn fill<B: Backend>(b: &B, queue: &QueueName, prefix: &str, n: usize) {
    let jobs: Vec<NewJob> = (0..n).map(|i| job(&format!("{prefix}{i}"), 0)).collect();
    Producer::new(b.clone(), queue.clone())
        .enqueue_batch(jobs)
        .await
        .unwrap();
}

/// Runs a consumer over `queues` until `stop_after` jobs are handled (or 20 s pass); answers
/// the queue of each handled job, in order. `on_job` sees each job as it is handled.
async fn handled<B: Backend>(
    b: &B,
    queues: Vec<(QueueName, u32)>,
    order: QueueOrder,
    stop_after: usize,
    on_job: impl Fn(&Job, usize) + Send + Sync + 'static,
) -> Vec<String> {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (enough, mut stop) = tokio::sync::watch::channel(false);
    let c = Consumer::over(b.clone(), queues, order, one_at_a_time()).unwrap();
    let log = seen.clone();
    let on_job = Arc::new(on_job);
    let run = tokio::spawn(c.run(
        move |j: Job| {
            let n = {
                let mut s = log.lock().unwrap();
                s.push(j.queue.to_string());
                s.len()
            };
            on_job(&j, n);
            if n >= stop_after {
                let _ = enough.send(true);
            }
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let _ = tokio::time::timeout(Duration::from_secs(20), stop.wait_for(|s| *s)).await;
        },
    ));
    run.await.unwrap().unwrap();
    seen.lock().unwrap().clone()
}

/// Weighted: with both queues backlogged, claims go 3 : 1 by weight (within 10 %), interleaved;
/// a bad list of queues is refused.
pub async fn several_queues_share_claims_by_weight<B: Backend + Inspect>(b: B, _t: Time) {
    let (a, o) = (q(), other());
    let refused =
        |r: delayq::Result<Consumer<B>>| matches!(r, Err(Error::Invalid(InvalidInput::Queues(_))));
    let opts = one_at_a_time;
    let order = QueueOrder::Weighted;
    assert!(refused(Consumer::over(b.clone(), vec![], order, opts())));
    assert!(refused(Consumer::over(
        b.clone(),
        vec![(a.clone(), 0)],
        order,
        opts()
    )));
    assert!(refused(Consumer::over(
        b.clone(),
        vec![(a.clone(), 1), (a.clone(), 2)],
        order,
        opts()
    )));
    fill(&b, &a, "a", 300).await;
    fill(&b, &o, "b", 300).await;
    let seen = handled(
        &b,
        vec![(a.clone(), 3), (o.clone(), 1)],
        order,
        200,
        |_, _| {},
    )
    .await;
    let first: Vec<&String> = seen.iter().take(200).collect();
    let from_a = first.iter().filter(|s| s.as_str() == a.as_str()).count();
    let from_b = first.len() - from_a;
    let ratio = from_a as f64 / from_b.max(1) as f64;
    assert!(
        (2.7..=3.3).contains(&ratio),
        "{from_a} from the weight-3 queue, {from_b} from the weight-1 queue"
    );
    // Interleaved: no run of 10 from one queue while the other is backlogged.
    let longest = first
        .chunk_by(|x, y| x == y)
        .map(<[&String]>::len)
        .max()
        .unwrap_or(0);
    assert!(longest <= 4, "a run of {longest} from one queue");
    // Every handled job was acked in its own queue, and what was leased but not started went
    // back to its own queue: nothing is left leased in either.
    for queue in [&a, &o] {
        let s = b.stats(queue).await.unwrap();
        assert_eq!(s.leased, 0, "{queue}: {s:?}");
    }
}

/// Strict: the first queue is served while it has due jobs; a job arriving in it is taken
/// while the second queue's backlog is still waiting (not after it).
pub async fn several_queues_in_strict_order<B: Backend + Inspect>(b: B, _t: Time) {
    let (a, o) = (q(), other());
    fill(&b, &a, "a", 5).await;
    fill(&b, &o, "b", 100).await;
    let p = Producer::new(b.clone(), a.clone());
    let late = Arc::new(Mutex::new(None::<tokio::task::JoinHandle<()>>));
    let keep = late.clone();
    let seen = handled(
        &b,
        vec![(a.clone(), 1), (o.clone(), 1)],
        QueueOrder::Strict,
        40,
        move |_, n| {
            // Once ten jobs are handled, a job arrives in the first queue.
            if n == 10 {
                let p = p.clone();
                *keep.lock().unwrap() = Some(tokio::spawn(async move {
                    p.enqueue(job("a-late", 0)).await.unwrap();
                }));
            }
        },
    )
    .await;
    if let Some(h) = late.lock().unwrap().take() {
        h.abort();
    }
    let names: Vec<&str> = seen.iter().map(String::as_str).collect();
    assert!(
        names[..5].iter().all(|n| *n == a.as_str()),
        "the first queue first: {names:?}"
    );
    // Taken as soon as the consumer heard of it (its enqueue and wake-up take a few jobs'
    // time), while 60 or more of the second queue's jobs still wait: without a look at the
    // first queue's wake-ups between claims it would come after all 100.
    assert!(
        names[10..].contains(&a.as_str()),
        "the first queue's late job waited behind the second queue: {names:?}"
    );
}

/// Waits (up to 10 s) until job `id` is among those handled, else fails with `what`.
async fn handled_by(seen: &Mutex<Vec<String>>, id: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.lock().unwrap().iter().any(|s| s == id) {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A consumer idle on two queues wakes for a job on either; a paused queue is held while the
/// other is served, and resuming it serves it.
pub async fn several_queues_wake_and_pause_each<B: Backend + Inspect>(b: B, _t: Time) {
    let (a, o) = (q(), other());
    b.set_paused(&o, true).await.unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let c = Consumer::over(
        b.clone(),
        vec![(a.clone(), 1), (o.clone(), 1)],
        QueueOrder::Weighted,
        one_at_a_time(),
    )
    .unwrap();
    let log = seen.clone();
    let run = tokio::spawn(c.run(
        move |j: Job| {
            log.lock().unwrap().push(j.id.to_string());
            async { Ok::<(), Failure>(()) }
        },
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    // Idle on both (its first claims found nothing): a job on either wakes it.
    Producer::new(b.clone(), a.clone())
        .enqueue(job("a1", 0))
        .await
        .unwrap();
    handled_by(&seen, "a1", "woken by the first queue").await;
    Producer::new(b.clone(), o.clone())
        .enqueue(job("b1", 0))
        .await
        .unwrap();
    Producer::new(b.clone(), a.clone())
        .enqueue(job("a2", 0))
        .await
        .unwrap();
    handled_by(&seen, "a2", "the unpaused queue served").await;
    assert!(
        !seen.lock().unwrap().contains(&"b1".to_owned()),
        "a paused queue is held"
    );
    b.set_paused(&o, false).await.unwrap();
    handled_by(&seen, "b1", "resuming wakes the consumer").await;
    stop.send(true).unwrap();
    run.await.unwrap().unwrap();
}
