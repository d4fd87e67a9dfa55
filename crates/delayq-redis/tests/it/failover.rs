//! Failover and scale-out mid-run: Sentinel promoting a replica after its master is
//! SIGKILLed, `CLUSTER FAILOVER` and a slot migration of one shard under load, and a sharded
//! queue handling 20,000 jobs exactly once with several consumers. Each run records every
//! acknowledged enqueue and every start, then checks: nothing acknowledged is lost, nothing
//! starts early.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::connect_retrying;
use delayq::{Consumer, ConsumerOptions, Inspect, Job, NewJob, Producer, QueueName, QueueSettings};
use delayq_redis::{ConnectOptions, RedisBackend};
use delayq_test_support::RedisServer;
use delayq_test_support::cluster::RedisCluster;
use delayq_test_support::sentinel::SentinelSet;
use tokio::sync::watch;

/// A server's arguments for an ACL that refuses the sentinel's `REPLICAOF` (everything else
/// allowed): a failover that needs it hangs, an old master that should be demoted is not.
const REFUSES_REPLICAOF: &[&str] = &[
    "--user",
    "default",
    "on",
    "nopass",
    "~*",
    "&*",
    "+@all",
    "-replicaof",
    "-slaveof",
];

/// Starts of each job id: (start ms on this host, due ms).
type Starts = Arc<Mutex<HashMap<String, Vec<(u64, u64)>>>>;

struct Consumers {
    starts: Starts,
    stop: watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

fn now_ms() -> u64 {
    delayq::job::system_now_ms()
}

/// `count` consumers (one backend each, like separate processes) of `q`.
async fn consumers(backends: Vec<RedisBackend>, q: &QueueName, concurrency: usize) -> Consumers {
    let starts: Starts = Arc::default();
    let (stop, rx) = watch::channel(false);
    let mut handles = Vec::new();
    for b in backends {
        let opts = ConsumerOptions {
            concurrency,
            lease: Duration::from_secs(5),
            max_idle: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(2),
            ..ConsumerOptions::default()
        };
        let c = Consumer::new(b, q.clone(), opts).unwrap();
        let s = starts.clone();
        let mut rx = rx.clone();
        handles.push(tokio::spawn(async move {
            let _ = c
                .run(
                    move |job: Job| {
                        let s = s.clone();
                        async move {
                            s.lock()
                                .unwrap()
                                .entry(job.id.to_string())
                                .or_default()
                                .push((now_ms(), job.due_at_ms));
                            Ok::<(), delayq::Failure>(())
                        }
                    },
                    async move {
                        let _ = rx.wait_for(|v| *v).await;
                    },
                )
                .await;
        }));
    }
    Consumers {
        starts,
        stop,
        handles,
    }
}

impl Consumers {
    /// Waits until every id in `ids` started at least once (at most `secs`); returns the
    /// ones that did not.
    /// Waits up to `secs` for every job of `ids` to have started; fails the test naming those
    /// that never did.
    async fn all_ran(&self, ids: &HashSet<String>, secs: u64) {
        let missing = self.wait_for(ids, secs).await;
        assert!(
            missing.is_empty(),
            "{} acknowledged jobs never ran: {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
    }

    async fn wait_for(&self, ids: &HashSet<String>, secs: u64) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let missing: Vec<String> = {
                let s = self.starts.lock().unwrap();
                ids.iter()
                    .filter(|i| !s.contains_key(*i))
                    .cloned()
                    .collect()
            };
            if missing.is_empty() || Instant::now() > deadline {
                return missing;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the consumers; returns every start.
    async fn stop(self) -> HashMap<String, Vec<(u64, u64)>> {
        self.stop.send(true).unwrap();
        for h in self.handles {
            let _ = h.await;
        }
        Arc::try_unwrap(self.starts).unwrap().into_inner().unwrap()
    }
}

/// Enqueues `name{i}` for i in `range` (delay 0-`spread_ms`), retrying each until it is
/// acknowledged (same id: idempotent); runs `fault` once, after `fault_at` acknowledged jobs.
async fn produce(
    b: &RedisBackend,
    q: &QueueName,
    name: &str,
    range: std::ops::Range<usize>,
    spread_ms: u64,
    mut faults: Vec<(usize, Box<dyn FnOnce() + Send>)>,
) -> HashSet<String> {
    let p = Producer::new(b.clone(), q.clone());
    let mut acked = HashSet::new();
    for i in range {
        let id = format!("{name}{i}");
        let delay = Duration::from_millis(rand::random::<u64>() % spread_ms.max(1));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let job = NewJob::new(id.clone().into_bytes())
                .id(delayq::JobId::new(id.clone()).unwrap())
                .delay(delay);
            match p.enqueue(job).await {
                Ok(_) => break,
                Err(e) if e.is_retryable() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("enqueue {id}: {e}"),
            }
        }
        acked.insert(id);
        while faults.first().is_some_and(|(at, _)| acked.len() >= *at) {
            let (_, f) = faults.remove(0);
            tokio::task::spawn_blocking(f).await.unwrap();
        }
    }
    acked
}

/// Nothing started before it was due; returns how many starts there were.
fn never_early(starts: &HashMap<String, Vec<(u64, u64)>>) -> usize {
    let mut n = 0;
    for (id, s) in starts {
        for &(at, due) in s {
            assert!(at >= due, "{id} started at {at}, before its due time {due}");
            n += 1;
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_mid_run_loses_no_replicated_job() {
    let set = Arc::new(Mutex::new(SentinelSet::start()));
    let url = set.lock().unwrap().url();
    let replica_port = set.lock().unwrap().replica.port();
    let q = QueueName::new("failover").unwrap();
    let mut durable = ConnectOptions::new(url.clone());
    durable.wait_replicas = 1;
    let p1 = RedisBackend::connect_with(durable).await.unwrap();
    let c = consumers(vec![RedisBackend::connect(&url).await.unwrap()], &q, 8).await;

    // Phase 1: every enqueue waits for the replica; the master dies after the last.
    let s = set.clone();
    let kill: Box<dyn FnOnce() + Send> = Box::new(move || s.lock().unwrap().master.kill());
    let mut acked = produce(&p1, &q, "a", 0..300, 3000, vec![(300, kill)]).await;
    // Phase 2: a producer without replica wait carries on through the promotion.
    // A process starting now may meet sentinels that still name the dead master: it retries.
    let p2 = connect_retrying(&url).await;
    acked.extend(produce(&p2, &q, "b", 0..200, 500, vec![]).await);

    c.all_ran(&acked, 60).await;
    assert_eq!(
        set.lock().unwrap().current_master_port(),
        Some(replica_port),
        "the replica was promoted"
    );
    let starts = c.stop().await;
    assert!(never_early(&starts) >= acked.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_and_slot_migration_mid_run() {
    let cluster = Arc::new(RedisCluster::start(3, 1));
    let url = cluster.url(None);
    let q = QueueName::new("moving").unwrap();
    let b = RedisBackend::connect(&url).await.unwrap();
    b.configure(&q, QueueSettings::with_shards(8))
        .await
        .unwrap();
    let c = consumers(vec![RedisBackend::connect(&url).await.unwrap()], &q, 8).await;

    let slot0 = cluster.slot_of("dq:{moving#0}:sched");
    let slot1 = cluster.slot_of("dq:{moving#1}:sched");
    let (c1, c2) = (cluster.clone(), cluster.clone());
    let faults: Vec<(usize, Box<dyn FnOnce() + Send>)> = vec![
        (400, Box::new(move || c1.failover(slot0))),
        (900, Box::new(move || c2.migrate_slot(slot1))),
    ];
    let acked = produce(&b, &q, "j", 0..1500, 2000, faults).await;

    c.all_ran(&acked, 60).await;
    let starts = c.stop().await;
    assert!(never_early(&starts) >= acked.len());
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.leased, st.dead), (0, 0, 0), "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_queue_handles_each_job_exactly_once() {
    let server = RedisServer::start();
    let q = QueueName::new("wide").unwrap();
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    b.configure(&q, QueueSettings::with_shards(8))
        .await
        .unwrap();
    let mut backends = Vec::new();
    for _ in 0..3 {
        backends.push(RedisBackend::connect(&server.url()).await.unwrap());
    }
    let c = consumers(backends, &q, 16).await;
    let p = Producer::new(b.clone(), q.clone());
    let mut ids = HashSet::new();
    for batch in 0..20 {
        let jobs: Vec<NewJob> = (0..1000)
            .map(|i| {
                let id = format!("w{batch}-{i}");
                ids.insert(id.clone());
                NewJob::new(id.clone().into_bytes())
                    .id(delayq::JobId::new(id).unwrap())
                    .delay(Duration::from_millis(rand::random::<u64>() % 2000))
            })
            .collect();
        p.enqueue_batch(jobs).await.unwrap();
    }
    let missing = c.wait_for(&ids, 120).await;
    assert!(missing.is_empty(), "{} jobs never ran", missing.len());
    let starts = c.stop().await;
    assert_eq!(never_early(&starts), 20_000, "each job exactly once");
    assert!(starts.values().all(|s| s.len() == 1));
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.waiting(), st.leased, st.dead), (0, 0, 0));
}

/// `--wait-replicas N`: an enqueue returns once N replicas have it; with fewer, the call is a
/// retryable error although the master has the job (so a retry with the same id is safe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replicas_confirms_or_says_the_write_is_not_replicated() {
    let q = QueueName::new("waited").unwrap();
    let job = || NewJob::new("x").id(delayq::JobId::new("w1").unwrap());

    let lone = RedisServer::start();
    let mut o = ConnectOptions::new(lone.url());
    o.wait_replicas = 1;
    let b = RedisBackend::connect_with(o).await.unwrap();
    let e = Producer::new(b, q.clone())
        .enqueue(job())
        .await
        .unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    assert!(e.to_string().contains("0 of 1 replicas"), "{e}");
    let plain = RedisBackend::connect(&lone.url()).await.unwrap();
    let stored = plain
        .get(&q, &delayq::JobId::new("w1").unwrap())
        .await
        .unwrap();
    assert!(stored.is_some(), "the master has the job");

    let set = SentinelSet::start();
    let mut o = ConnectOptions::new(set.master.url());
    o.wait_replicas = 1;
    let b = RedisBackend::connect_with(o).await.unwrap();
    let done = Producer::new(b, q.clone()).enqueue(job()).await.unwrap();
    assert!(done.created);
    let on_replica = set.replica.command(&["HEXISTS", "dq:{waited}:jobs", "w1"]);
    assert_eq!(
        on_replica, "1",
        "the replica has it when the enqueue returns"
    );
}

/// A Sentinel master SIGKILLed and restarted right after its replica was promoted calls itself
/// master (empty) until the sentinels make it a replica, up to ~20 s later; whatever it
/// acknowledges meanwhile is lost then. A client must follow the sentinels, never reconnect to
/// the old address by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_old_master_gets_no_writes() {
    let mut set = SentinelSet::start();
    // The client reaches the sentinel through a proxy, to cut it off for a while.
    let proxy = delayq_test_support::proxy::Proxy::start(set.sentinel_port());
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", proxy.port());
    let b = RedisBackend::connect(&url).await.unwrap();
    let q = QueueName::new("stale").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(NewJob::new("x").id(delayq::JobId::new("before").unwrap()))
        .await
        .unwrap();

    set.master.kill();
    let promoted = set.replica.port();
    let deadline = Instant::now() + Duration::from_secs(60);
    while set.current_master_port() != Some(promoted) {
        assert!(Instant::now() < deadline, "no promotion");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The sentinel cannot be asked for a while (a partition, a slow sentinel): the client
    // must wait for it rather than fall back to the old address.
    proxy.refuse(true);
    set.master.restart();
    assert!(
        set.master.info("replication").contains("role:master"),
        "the old master is back as a master (the sentinels have not converted it yet)"
    );
    let thaw = Instant::now() + Duration::from_secs(3);
    let mut thawed = false;
    let mut tries = 0;
    loop {
        tries += 1;
        if !thawed && Instant::now() > thaw {
            proxy.refuse(false);
            thawed = true;
        }
        let job = NewJob::new("y").id(delayq::JobId::new("after").unwrap());
        match p.enqueue(job).await {
            Ok(_) => break,
            Err(e) if e.is_retryable() && tries < 300 => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let on = |s: &RedisServer| s.command(&["HEXISTS", "dq:{stale}:jobs", "after"]);
    assert_eq!(on(&set.master), "0", "written to the restarted old master");
    assert_eq!(
        on(&set.replica),
        "1",
        "written to the master the sentinels name"
    );
}

/// The same race from the other side: the old master comes back while the sentinel is still
/// failing over (it names the promoted replica, but `SENTINEL MASTERS` still lists the old
/// address, no longer down). A client connecting then must wait for the failover to end, not
/// pick the old master because it answers `ROLE` as a master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connecting_mid_failover_waits_for_the_new_master() {
    let mut set = SentinelSet::start();
    let url = set.url();
    set.master.kill();
    let promoted = set.replica.port();
    let deadline = Instant::now() + Duration::from_secs(60);
    while set.current_master_port() != Some(promoted) {
        assert!(Instant::now() < deadline, "no promotion");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    set.master.restart();
    let flags = set.master_flags();
    assert!(
        flags.contains("failover_in_progress"),
        "the failover is still in progress: {flags}"
    );
    let q = QueueName::new("midway").unwrap();
    let mut tries = 0;
    loop {
        tries += 1;
        let attempt = async {
            let b = RedisBackend::connect(&url).await?;
            Producer::new(b, q.clone())
                .enqueue(NewJob::new("x").id(delayq::JobId::new("midway").unwrap()))
                .await
        };
        match attempt.await {
            Ok(_) => break,
            Err(e) if e.is_retryable() && tries < 200 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let on = |s: &RedisServer| s.command(&["HEXISTS", "dq:{midway}:jobs", "midway"]);
    assert_eq!(
        on(&set.master),
        "0",
        "written to the old master mid-failover"
    );
    assert_eq!(on(&set.replica), "1");
}

/// The race behind `a_restarted_old_master_gets_no_writes`' rare failure: a connection's
/// look-up asks the sentinels twice (is a failover under way? which master?) and then connects.
/// When the first question goes unanswered (a sentinel connection dropped) and the second is
/// answered mid-failover, the old address comes back — and the old master, restarted empty,
/// answers `ROLE` as a master. The failover is held in progress here by a replica whose ACL
/// refuses the sentinel's `REPLICAOF NO ONE` (the sentinel waits `failover-timeout`, set to 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_connection_is_made_mid_failover_when_a_sentinel_does_not_answer() {
    let mut set = SentinelSet::start_with_replica(REFUSES_REPLICAOF);
    // The failover hangs until failover-timeout: long enough for a loaded machine.
    set.sentinel_command(&["SENTINEL", "SET", "mymaster", "failover-timeout", "30000"]);
    let proxy = delayq_test_support::proxy::Proxy::start(set.sentinel_port());
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", proxy.port());
    set.master.kill();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !set.master_flags().contains("failover_in_progress") {
        assert!(Instant::now() < deadline, "no failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    set.master.restart();
    // The old master is back (no longer down to the sentinel) while the failover hangs.
    while set.master_flags().contains("s_down") {
        assert!(Instant::now() < deadline, "the old master stays down");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = set.master_flags();
    assert!(before.contains("failover_in_progress"), "{before}");
    // The look-up's first sentinel connection is dropped unanswered.
    proxy.refuse_next(1);
    let attempt = async {
        // One attempt (a connect retries by default, and would then wait the failover out).
        let once = ConnectOptions {
            connect_timeout: Some(Duration::ZERO),
            ..ConnectOptions::new(&url)
        };
        let b = RedisBackend::connect_with(once).await?;
        Producer::new(b, QueueName::new("unanswered").unwrap())
            .enqueue(NewJob::new("x").id(delayq::JobId::new("mid").unwrap()))
            .await
    };
    let outcome = attempt.await;
    let after = set.master_flags();
    assert!(
        after.contains("failover_in_progress"),
        "ended too soon: {after}"
    );
    match outcome {
        Err(e) => assert!(e.is_retryable(), "{e}"),
        Ok(_) => panic!("a connection was made mid-failover"),
    }
    let written = set
        .master
        .command(&["HEXISTS", "dq:{unanswered}:jobs", "mid"]);
    assert_eq!(written, "0", "written to the restarted old master");
}

/// A master the sentinels have replaced but that still answers — cut off from them by a
/// partition while this client reaches it, or here refusing their `REPLICAOF` — gets no more
/// writes once the sentinels name another: the connection asks them every second whether its
/// master is still theirs. Without that it wrote there until the master was demoted (for the
/// whole partition; here for ever), and every such write was lost.
#[tokio::test]
async fn a_master_the_sentinels_replaced_gets_no_more_writes() {
    let set = SentinelSet::start_with_master(REFUSES_REPLICAOF);
    let q = QueueName::new("replaced").unwrap();
    let producer = Producer::new(connect_retrying(&set.url()).await, q.clone());
    let job = |id: &str| NewJob::new("x").id(delayq::JobId::new(id).unwrap());
    producer.enqueue(job("before")).await.unwrap();
    let on = |s: &RedisServer, id: &str| s.command(&["HEXISTS", "dq:{replaced}:jobs", id]) == "1";
    assert!(on(&set.master, "before"));
    set.sentinel_command(&["SENTINEL", "FAILOVER", "mymaster"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while set.current_master_port() != Some(set.replica.port()) || !set.master_flags().eq("master")
    {
        assert!(Instant::now() < deadline, "no failover");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The old master refused to become a replica: it still takes writes.
    assert!(set.master.info("replication").contains("role:master"));
    let mut n = 0;
    loop {
        n += 1;
        let id = format!("after{n}");
        if producer.enqueue(job(&id)).await.is_ok() && on(&set.replica, &id) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writes still go to the replaced master ({n} tries)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // From then on nothing lands on the old master.
    producer.enqueue(job("last")).await.unwrap();
    assert!(on(&set.replica, "last") && !on(&set.master, "last"));
}
