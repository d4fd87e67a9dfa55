//! The fast part of the chaos suite on Redis (`delayq_testkit::chaos`): producers and
//! consumers run while consumers are killed (tasks aborted: leases held, nothing acknowledged
//! or released), writes are paused (`CLIENT PAUSE WRITE`), the server sleeps (`DEBUG SLEEP`),
//! and Redis is SIGKILLed and restarted (`appendfsync always`); after a final drain the history
//! checker must find nothing lost, unexpected or early and no stale ack accepted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::connect_retrying;
use delayq::QueueName;
use delayq_redis::RedisBackend;
use delayq_test_support::{RedisServer, command_on};
use delayq_testkit::chaos::{self, Plan, fault};
use delayq_testkit::history::Report;

/// Nothing lost outside an unsynced window, nothing unexpected or early, no stale ack
/// accepted, and something completed after every fault.
fn assert_clean(report: &Report) {
    eprintln!("{}", report.table());
    assert!(report.lost.is_empty(), "lost: {:?}", report.lost);
    assert!(
        report.unexpected.is_empty(),
        "unexpected: {:?}",
        report.unexpected
    );
    assert_eq!(report.early, 0, "started before due");
    assert_eq!(report.stale_acks_accepted, 0);
    for (fault, first) in &report.recovery {
        assert!(first.is_some(), "nothing completed after {fault}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_pauses_sleeps_and_restarts_lose_nothing_acknowledged() {
    let server = Arc::new(Mutex::new(RedisServer::start_for_faults().unwrap()));
    let url = server.lock().unwrap().url();
    let port = server.lock().unwrap().port();
    let s = server.clone();
    let plan = Plan {
        jobs: 2000,
        consumers: 3,
        kills: 5,
        faults: vec![
            (
                600,
                fault("CLIENT PAUSE 1500 WRITE", move || {
                    assert_eq!(
                        command_on(port, &["CLIENT", "PAUSE", "1500", "WRITE"]),
                        "OK"
                    );
                }),
            ),
            (
                1000,
                fault("redis SIGKILL + restart", move || {
                    s.lock().unwrap().restart()
                }),
            ),
            (
                1400,
                fault("DEBUG SLEEP 1", move || {
                    // In the background: the server stops answering for a second mid-run.
                    std::thread::spawn(move || command_on(port, &["DEBUG", "SLEEP", "1"]));
                }),
            ),
        ],
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(60),
        rate: None,
        max_delay: Duration::from_secs(1),
        via: None,
    };
    let q = QueueName::new("chaos").unwrap();
    let report = chaos::run(
        q.clone(),
        || async { RedisBackend::connect(&url).await.unwrap() },
        plan,
    )
    .await;
    let b = RedisBackend::connect(&url).await.unwrap();
    for id in &report.lost {
        let info = delayq::Inspect::get(&b, &q, &delayq::JobId::new(id.clone()).unwrap()).await;
        eprintln!("lost {id}: {info:?}");
    }
    assert_clean(&report);
    assert!(
        report.completed >= 2000 - report.unknown_absent,
        "{report:?}"
    );
}

/// Network faults between every client and Redis, through a proxy: connections stalled (open,
/// carrying nothing), all connections reset, new connections refused for a while, and every
/// packet delayed. The checker must find nothing lost, unexpected or early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_stalls_resets_and_delays_lose_nothing_acknowledged() {
    use delayq_test_support::proxy::Proxy;
    let server = RedisServer::start_durable();
    let proxy = Arc::new(Proxy::start(server.port()));
    let url = format!("redis://127.0.0.1:{}", proxy.port());
    let (p1, p2, p3, p4, p5) = (
        proxy.clone(),
        proxy.clone(),
        proxy.clone(),
        proxy.clone(),
        proxy.clone(),
    );
    let plan = Plan {
        jobs: 1500,
        consumers: 3,
        kills: 0,
        faults: vec![
            (
                300,
                fault("stall every connection", move || p1.stall_existing()),
            ),
            (600, fault("reset every connection", move || p2.reset_all())),
            (
                800,
                fault("refuse connections 0.5 s", move || {
                    p3.refuse(true);
                    p3.reset_all();
                    // The fault's own duration (real time: the clients' reconnects meet it).
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(500));
                        p3.refuse(false);
                    });
                }),
            ),
            (
                1000,
                fault("delay 20 ms per packet for 1 s", move || {
                    p4.delay(Duration::from_millis(20));
                    // The fault's own duration.
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs(1));
                        p5.delay(Duration::ZERO);
                    });
                }),
            ),
        ],
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(60),
        rate: None,
        max_delay: Duration::from_secs(1),
        via: None,
    };
    let q = QueueName::new("net").unwrap();
    let report = chaos::run(q, || connect_retrying(&url), plan).await;
    assert_clean(&report);
}

/// `appendfsync everysec`: a SIGKILL loses nothing (the kernel keeps what Redis wrote), while
/// a power cut — simulated by restarting from the append-only files as they were a second
/// before — loses what was acknowledged in that second, and only that: the checker must
/// attribute every loss to the unsynced window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everysec_loses_only_the_unsynced_second_of_a_power_cut() {
    use delayq_testkit::chaos::windowed;
    let server = Arc::new(Mutex::new(
        RedisServer::start_for_faults_with("everysec").unwrap(),
    ));
    let url = server.lock().unwrap().url();
    let (s1, s2, s3, s4) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
    );
    let disk = Arc::new(Mutex::new(None));
    let d2 = disk.clone();
    let plan = Plan {
        jobs: 3000,
        consumers: 3,
        kills: 0,
        faults: vec![
            (
                800,
                fault("redis SIGKILL + restart", move || {
                    s1.lock().unwrap().restart()
                }),
            ),
            (
                1600,
                windowed(
                    "power cut",
                    Some(Duration::from_millis(300)),
                    move || *disk.lock().unwrap() = Some(s2.lock().unwrap().disk_snapshot()),
                    move || {
                        let snapshot = d2.lock().unwrap().take().unwrap();
                        s3.lock().unwrap().power_cut(snapshot.path());
                    },
                    move || s4.lock().unwrap().restart(),
                ),
            ),
        ],
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(60),
        rate: None,
        max_delay: Duration::from_secs(1),
        via: None,
    };
    let report = chaos::run(
        QueueName::new("everysec").unwrap(),
        || connect_retrying(&url),
        plan,
    )
    .await;
    assert_clean(&report);
    assert!(
        !report.lost_unsynced.is_empty(),
        "the power cut lost the writes of its window (else the simulation did nothing)"
    );
}

/// Batches under faults (`delayq_testkit::chaos_batches`) on an 8-shard queue (each batch's
/// jobs over several shards): workers and sweepers killed mid-run (leases held, a batch's
/// finishing steps cut between them) and Redis SIGKILLed and restarted (`appendfsync
/// always`). Every batch calls back once, after its last job, and none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_call_back_once_through_kills_and_restarts() {
    use delayq_testkit::chaos_batches::{self, BatchPlan};
    let server = Arc::new(Mutex::new(RedisServer::start_for_faults().unwrap()));
    let url = server.lock().unwrap().url();
    let q = QueueName::new("bchaos").unwrap();
    let b = RedisBackend::connect(&url).await.unwrap();
    delayq::Inspect::configure(&b, &q, delayq::QueueSettings::with_shards(8))
        .await
        .unwrap();
    let s = server.clone();
    let plan = BatchPlan {
        batches: 40,
        jobs: 25,
        kills: 6,
        fault: Some(Box::new(move || s.lock().unwrap().restart())),
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(60),
    };
    let url2 = url.clone();
    let report = chaos_batches::run(
        q,
        || {
            let url = url2.clone();
            async move { connect_retrying(&url).await }
        },
        plan,
    )
    .await;
    eprintln!("{report:?}");
    assert!(report.early.is_empty(), "early: {:?}", report.early);
    assert!(report.twice.is_empty(), "twice: {:?}", report.twice);
    assert!(report.lost.is_empty(), "lost: {:?}", report.lost);
    assert!(report.called_back >= 40 - report.not_created, "{report:?}");
}

/// Jobs that wait for other jobs under faults (`delayq_testkit::chaos_deps`) on an 8-shard
/// queue (a chain's steps and a fan-in's parts spread over the shards: their ends cross
/// slots through the outboxes): workers and sweepers killed mid-run and Redis SIGKILLed and
/// restarted (`appendfsync always`). No job starts before its dependencies ended, every job
/// runs, none is left waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependents_start_after_their_dependencies_through_kills_and_restarts() {
    use delayq_testkit::chaos_deps::{self, DepsPlan};
    let server = Arc::new(Mutex::new(RedisServer::start_for_faults().unwrap()));
    let url = server.lock().unwrap().url();
    let q = QueueName::new("dchaos").unwrap();
    let b = RedisBackend::connect(&url).await.unwrap();
    delayq::Inspect::configure(&b, &q, delayq::QueueSettings::with_shards(8))
        .await
        .unwrap();
    let s = server.clone();
    let plan = DepsPlan {
        chains: 60,
        fan_ins: 20,
        width: 6,
        kills: 6,
        fault: Some(Box::new(move || s.lock().unwrap().restart())),
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(60),
    };
    let report = chaos_deps::run(
        q,
        || {
            let url = url.clone();
            async move { connect_retrying(&url).await }
        },
        plan,
    )
    .await;
    eprintln!("{report:?}");
    assert!(report.early.is_empty(), "early: {:?}", report.early);
    assert!(report.lost.is_empty(), "lost: {:?}", report.lost);
    assert_eq!(report.waiting, 0, "{report:?}");
    assert!(
        report.ran >= 60 * 3 + 20 * 7 - 10 * report.not_enqueued,
        "{report:?}"
    );
}
