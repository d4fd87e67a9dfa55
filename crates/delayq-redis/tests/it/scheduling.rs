//! Issue 13's features that need real time and several consumers, on Redis: rate and
//! concurrency limits shared by 10 consumers, handlers cancelled at their timeout.

async fn backend() -> (delayq_test_support::RedisServer, delayq_redis::RedisBackend) {
    let server = delayq_test_support::RedisServer::start();
    let b = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    (server, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_ten_consumers() {
    let (_server, b) = backend().await;
    delayq_testkit::throttle::throttles_hold_across_consumers(b, 1).await;
}

/// A queue of 4 shards: each keeps its share of the limits (rate 25/s, burst 2, 1 in flight),
/// so the queue's figures hold together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_limits_hold_across_ten_consumers() {
    let (_server, b) = backend().await;
    delayq_testkit::throttle::throttles_hold_across_consumers(b, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_past_their_timeout_are_cancelled() {
    let (_server, b) = backend().await;
    delayq_testkit::deadlines::handlers_past_their_timeout_are_cancelled(b).await;
}

/// Aging on Redis, white-box (ten minutes cannot pass in a test): a priority-0 job whose due
/// time is ten minutes back is claimed ahead of fresh priority-9 jobs; one due two minutes back
/// is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_priority_job_ages_ahead_of_fresh_high_ones() {
    use delayq::{Backend, ClaimRequest, JobId, NewJob, Producer, QueueName};
    use std::time::Duration;
    let (server, b) = backend().await;
    let q = QueueName::new("aging").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let id = |s: &str| JobId::new(s).unwrap();
    p.enqueue(
        NewJob::new("o")
            .id(id("old"))
            .priority(0)
            .delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    p.enqueue(
        NewJob::new("m")
            .id(id("mid"))
            .priority(0)
            .delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    let fresh = (0..20).map(|i| NewJob::new("n").id(id(&format!("n{i}"))).priority(9));
    p.enqueue_batch(fresh.collect()).await.unwrap();
    let now: u64 = server
        .command(&["TIME"])
        .lines()
        .next()
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1000;
    let back = |min: u64| (now - min * 60_000).to_string();
    server.command(&["ZADD", "dq:{aging}:sched", &back(10), "old"]);
    server.command(&["ZADD", "dq:{aging}:sched", &back(2), "mid"]);
    let claim = |n| ClaimRequest {
        max: n,
        lease: Duration::from_secs(60),
        acks: vec![],
    };
    let first = b.claim(&q, claim(1)).await.unwrap().jobs;
    assert_eq!(first[0].id.as_str(), "old", "10 min waited beats 9 levels");
    let rest = b.claim(&q, claim(21)).await.unwrap().jobs;
    assert_eq!(rest.len(), 21);
    assert_eq!(rest[20].id.as_str(), "mid", "2 min waited does not");
}

/// Schedules on a queue of 4 shards: a fire's job lands in the shard its id hashes to; racing
/// tickers enqueue it once, and a ticker that repeats a fire another one already enqueued (as
/// after a crash between enqueuing and storing the next fire) enqueues nothing, even after the
/// job ran and was acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_fire_once_on_a_sharded_queue() {
    use delayq::schedule::{self, ScheduleSpec, Schedules};
    use delayq::{Backend, ClaimRequest, Inspect, QueueName, QueueSettings, Ticker};
    use std::time::Duration;
    let (_server, b) = backend().await;
    let q = QueueName::new("spread").unwrap();
    b.configure(&q, QueueSettings::with_shards(4))
        .await
        .unwrap();
    let spec = ScheduleSpec::every(1000, "tick");
    let now = delayq::job::system_now_ms();
    let info = schedule::put(&b, &q, "tick", spec.clone(), 1 << 20, now)
        .await
        .unwrap();
    // The first fire falls due: the store's clock (scripts and tickers) moves, nobody waits.
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    clock.advance(Duration::from_millis(1100));
    let tickers: Vec<_> = (0..3)
        .map(|_| Ticker::new(b.clone()).queues(vec![q.clone()]))
        .collect();
    let fired: usize = futures::future::join_all(tickers.iter().map(|t| t.tick()))
        .await
        .into_iter()
        .map(|r| r.unwrap().0)
        .sum();
    assert_eq!(fired, 1);
    let id = schedule::fire_id("tick", info.next_ms);
    assert!(b.get(&q, &id).await.unwrap().is_some());
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 1);
    // The job runs and is acknowledged (its record is gone) ...
    let got = b
        .claim(
            &q,
            ClaimRequest {
                max: 10,
                lease: Duration::from_secs(30),
                acks: vec![],
            },
        )
        .await
        .unwrap()
        .jobs;
    assert_eq!(got.len(), 1);
    b.ack(&q, vec![got[0].to_ack()]).await.unwrap();
    // ... then a ticker repeats that fire: nothing is enqueued again.
    let again = spec.plan(info.next_ms, info.next_ms).unwrap();
    assert!(!b.fire(&q, "tick", again).await.unwrap());
    assert!(b.get(&q, &id).await.unwrap().is_none());
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 0);
}

/// Priorities on a queue of 8 shards: a shard claims its own jobs by priority, a claim that
/// takes from several shards returns them in the queue's order (priority, then due time), and
/// a claim goes to the due shards in turn, so a high-priority job waits at most one claim per
/// shard — here 8 priority-9 jobs enqueued after 200 of the default priority (which leaves
/// most shards without a priority of their own) all come out in the first round of claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_on_a_sharded_queue() {
    use delayq::{
        Backend, ClaimRequest, Inspect, JobId, NewJob, Producer, QueueName, QueueSettings,
    };
    use std::time::Duration;
    let (_server, b) = backend().await;
    let q = QueueName::new("prio8").unwrap();
    b.configure(&q, QueueSettings::with_shards(8))
        .await
        .unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let id = |s: &str| JobId::new(s).unwrap();
    let plain = (0..200).map(|i| NewJob::new("p").id(id(&format!("p{i}"))));
    p.enqueue_batch(plain.collect()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let high = (0..8).map(|i| NewJob::new("h").id(id(&format!("h{i}"))).priority(9));
    p.enqueue_batch(high.collect()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let key = |j: &delayq::Job| j.due_at_ms as i64 - i64::from(j.priority) * 60_000;
    let (mut claims, mut seen, mut high_in) = (0, 0, Vec::new());
    while seen < 208 {
        let got = b
            .claim(
                &q,
                ClaimRequest {
                    max: 32,
                    lease: Duration::from_secs(60),
                    acks: vec![],
                },
            )
            .await
            .unwrap()
            .jobs;
        assert!(!got.is_empty() && claims < 20, "{seen} of 208 claimed");
        for w in got.windows(2) {
            assert!(
                key(&w[0]) <= key(&w[1]),
                "{:?} before {:?}",
                w[0].id,
                w[1].id
            );
        }
        for j in &got {
            if j.id.as_str().starts_with('h') {
                high_in.push(claims);
            }
        }
        seen += got.len();
        claims += 1;
    }
    assert_eq!(high_in.len(), 8);
    let round = 8usize.div_ceil(2); // a claim of 32 asks 2 shards (16 each)
    assert!(high_in.iter().all(|&c| c < round), "{high_in:?}");
}
