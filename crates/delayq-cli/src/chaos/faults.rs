//! The servers each `delayq chaos` scenario starts, and the faults it strikes them with
//! (spread evenly over the enqueues).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::QueueName;
use delayq_test_support::cluster::RedisCluster;
use delayq_test_support::partition;
use delayq_test_support::proxy::Proxy;
use delayq_test_support::sentinel::SentinelSet;
use delayq_test_support::{RedisServer, command_on};
use delayq_testkit::chaos::{Fault, background, fault, held, windowed};

use super::args::{ChaosArgs, Fsync, Scenario};

/// The servers of a run; dropping them stops every process.
pub(crate) enum Servers {
    /// One `redis-server`, behind a proxy in the network scenario.
    One {
        server: Arc<Mutex<RedisServer>>,
        proxy: Option<Arc<Proxy>>,
    },
    /// Master, replica and sentinel.
    Sentinel(Arc<Mutex<SentinelSet>>),
    /// Three masters with a replica each.
    Cluster(Arc<Mutex<RedisCluster>>),
}

impl Servers {
    /// Starts what `a.scenario` needs.
    pub(crate) fn start(a: &ChaosArgs) -> anyhow::Result<Self> {
        Ok(match a.scenario {
            Scenario::SentinelFailover => {
                Self::Sentinel(Arc::new(Mutex::new(SentinelSet::start())))
            }
            Scenario::SentinelPartition => {
                Self::Sentinel(Arc::new(Mutex::new(SentinelSet::start_partitionable())))
            }
            Scenario::ClusterFailover => {
                Self::Cluster(Arc::new(Mutex::new(RedisCluster::start(3, 1))))
            }
            Scenario::ClusterPartition => Self::Cluster(Arc::new(Mutex::new(
                RedisCluster::start_partitionable(3, 1),
            ))),
            s => {
                let fsync = if s == Scenario::PowerLoss || a.fsync == Fsync::Everysec {
                    "everysec"
                } else {
                    "always"
                };
                let server =
                    RedisServer::start_for_faults_with(fsync).map_err(anyhow::Error::msg)?;
                let proxy = (s == Scenario::Network).then(|| Arc::new(Proxy::start(server.port())));
                Self::One {
                    server: Arc::new(Mutex::new(server)),
                    proxy,
                }
            }
        })
    }

    /// The connection string of the run's clients.
    pub(crate) fn url(&self) -> String {
        match self {
            Self::One { proxy: Some(p), .. } => format!("redis://127.0.0.1:{}", p.port()),
            Self::One { server, .. } => lock(server).url(),
            Self::Sentinel(s) => lock(s).url(),
            Self::Cluster(c) => lock(c).url(None),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `k`-th of `n` points spread evenly over `jobs` enqueues.
fn at(jobs: usize, k: usize, n: usize) -> usize {
    jobs * (2 * k + 1) / (2 * n.max(1))
}

/// The faults of the scenario (each after so many enqueues) and the consumer kills.
pub(crate) fn build(
    a: &ChaosArgs,
    servers: &Servers,
    q: &QueueName,
    shards: u32,
    wait_replicas: u32,
) -> (Vec<(usize, Fault)>, usize) {
    let mut faults: Vec<(usize, Fault)> = Vec::new();
    let kills = match a.scenario {
        Scenario::WorkerKill | Scenario::Mixed => a.kills,
        _ => 0,
    };
    match (a.scenario, servers) {
        (Scenario::RedisRestart | Scenario::Mixed, Servers::One { server, .. }) => {
            for k in 0..a.restarts {
                let s = server.clone();
                faults.push((
                    at(a.jobs, k, a.restarts),
                    fault(format!("redis SIGKILL + restart #{}", k + 1), move || {
                        lock(&s).restart();
                    }),
                ));
            }
            if a.scenario == Scenario::Mixed {
                let port = lock(server).port();
                faults.push((
                    a.jobs / 3,
                    fault("CLIENT PAUSE 1500 WRITE", move || {
                        command_on(port, &["CLIENT", "PAUSE", "1500", "WRITE"]);
                    }),
                ));
                faults.push((
                    2 * a.jobs / 3,
                    fault("DEBUG SLEEP 1", move || {
                        std::thread::spawn(move || command_on(port, &["DEBUG", "SLEEP", "1"]));
                    }),
                ));
            }
        }
        (Scenario::PowerLoss, Servers::One { server, .. }) => {
            let window = Duration::from_millis(a.window_ms);
            for k in 0..a.restarts {
                let (s1, s2, s3) = (server.clone(), server.clone(), server.clone());
                let disk = Arc::new(Mutex::new(None));
                let d2 = disk.clone();
                faults.push((
                    at(a.jobs, k, a.restarts),
                    windowed(
                        format!(
                            "power cut #{} (disk as of {} ms before)",
                            k + 1,
                            a.window_ms
                        ),
                        Some(window),
                        move || *lock(&disk) = Some(lock(&s1).disk_snapshot()),
                        move || {
                            let snapshot = lock(&d2).take().expect("snapshot taken");
                            lock(&s2).power_cut(snapshot.path());
                        },
                        move || lock(&s3).restart(),
                    ),
                ));
            }
        }
        (Scenario::Network, Servers::One { proxy: Some(p), .. }) => {
            for k in 0..a.faults {
                let p = p.clone();
                let f = match k % 4 {
                    0 => fault("stall every open connection", move || p.stall_existing()),
                    1 => fault("reset every connection", move || p.reset_all()),
                    2 => fault("refuse connections for 1 s", move || {
                        p.refuse(true);
                        p.reset_all();
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_secs(1));
                            p.refuse(false);
                        });
                    }),
                    _ => fault("delay every packet 20 ms for 2 s", move || {
                        p.delay(Duration::from_millis(20));
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_secs(2));
                            p.delay(Duration::ZERO);
                        });
                    }),
                };
                faults.push((at(a.jobs, k, a.faults), f));
            }
        }
        (Scenario::SentinelFailover, Servers::Sentinel(set)) => {
            for k in 0..a.failovers {
                let (s1, s2) = (set.clone(), set.clone());
                let name = format!("sentinel failover #{} (master SIGKILLed)", k + 1);
                let strike = move || lock(&s1).kill_master();
                let heal = move || lock(&s2).recover();
                faults.push((
                    at(a.jobs, k, a.failovers),
                    replicated(name, wait_replicas, strike, heal),
                ));
            }
        }
        (Scenario::SentinelPartition, Servers::Sentinel(set)) => {
            for k in 0..a.failovers {
                faults.push((
                    at(a.jobs, k, a.failovers),
                    sentinel_partition(k, a.partition_ms, wait_replicas, set.clone()),
                ));
            }
        }
        (Scenario::ClusterPartition, Servers::Cluster(c)) => {
            let slot = lock(c).slot_of(&first_shard_key(q, shards));
            for k in 0..a.failovers {
                faults.push((
                    at(a.jobs, k, a.failovers),
                    cluster_partition(k, a.partition_ms, wait_replicas, c.clone(), slot),
                ));
            }
        }
        (Scenario::ClusterFailover, Servers::Cluster(c)) => {
            let slot = lock(c).slot_of(&first_shard_key(q, shards));
            for k in 0..a.failovers {
                let (c1, c2) = (c.clone(), c.clone());
                let f = if k % 2 == 0 {
                    // Graceful: the replica catches up before it takes over; nothing is lost
                    // with or without --wait-replicas.
                    background(
                        format!("CLUSTER FAILOVER #{} (graceful)", k + 1),
                        move || lock(&c1).failover(slot),
                        || {},
                    )
                } else {
                    let name = format!("cluster failover #{} (master SIGKILLed)", k + 1);
                    let strike = move || lock(&c1).kill_master_of(slot);
                    let heal = move || lock(&c2).recover(slot);
                    replicated(name, wait_replicas, strike, heal)
                };
                faults.push((at(a.jobs, k, a.failovers), f));
            }
        }
        _ => {}
    }
    (faults, kills)
}

/// A key of the queue's first shard (its slot is the one the cluster scenarios strike).
fn first_shard_key(q: &QueueName, shards: u32) -> String {
    if shards > 1 {
        format!("dq:{{{q}#0}}:sched")
    } else {
        format!("dq:{{{q}}}:sched")
    }
}

/// The `k`-th Sentinel partition: the master the sentinel names is cut off from its replica
/// and the sentinel for `ms`; clients still reach it. The sentinel promotes the replica;
/// once the cut ends it makes the old master a replica, which throws away what the old
/// master took meanwhile. Without `--wait-replicas` every enqueue it acknowledged from the
/// cut until it was demoted may be lost (an unsynced window, as Jepsen found); with it,
/// nothing acknowledged may be.
fn sentinel_partition(
    k: usize,
    ms: u64,
    wait_replicas: u32,
    set: Arc<Mutex<SentinelSet>>,
) -> Fault {
    let s2 = set.clone();
    cut_off(
        format!(
            "partition #{} ({ms} ms): master cut from replica and sentinel",
            k + 1
        ),
        ms,
        wait_replicas,
        move || lock(&set).sides().expect("a partitionable sentinel set"),
        |port| {
            // The old master takes writes until the sentinel demotes it: the window lasts
            // until then.
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while !command_on(port, &["INFO", "replication"]).contains("role:slave") {
                assert!(
                    std::time::Instant::now() < deadline,
                    "old master not demoted"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        },
        move |_| lock(&s2).wait_settled(),
    )
}

/// The `k`-th Cluster partition: the master serving `slot` is cut off from every other node
/// (the minority side) for `ms`; clients reach every node. The majority promotes its replica
/// after the node timeout; the old master refuses writes once it has seen no majority for
/// the node timeout, and rejoins as a replica when the cut ends. Without `--wait-replicas`
/// what it acknowledged in between may be lost.
fn cluster_partition(
    k: usize,
    ms: u64,
    wait_replicas: u32,
    c: Arc<Mutex<RedisCluster>>,
    slot: u16,
) -> Fault {
    let c2 = c.clone();
    cut_off(
        format!(
            "partition #{} ({ms} ms): the queue's master on the minority side",
            k + 1
        ),
        ms,
        wait_replicas,
        move || lock(&c).sides(slot).expect("a partitionable cluster"),
        |_| {},
        move |port| lock(&c2).wait_rejoined(port),
    )
}

/// A partition: the process `sides` names first is cut off from every other it names for
/// `ms`; then the cut ends, `ended` runs (given the isolated process's port: what must happen
/// before the isolated side stops taking writes), the fault is recorded, and `settle` waits
/// until the servers agree again. Without `--wait-replicas` the partition up to the fault is
/// an unsynced window: enqueues the isolated master acknowledged may be lost.
fn cut_off(
    name: String,
    ms: u64,
    wait_replicas: u32,
    sides: impl FnOnce() -> (partition::Endpoint, Vec<partition::Endpoint>) + Send + 'static,
    ended: impl FnOnce(u16) + Send + 'static,
    settle: impl FnOnce(u16) + Send + 'static,
) -> Fault {
    let isolated = Arc::new(Mutex::new(0u16));
    let (i2, i3) = (isolated.clone(), isolated.clone());
    held(
        name,
        Duration::from_millis(ms),
        wait_replicas == 0,
        move || {
            let (master, others) = sides();
            *lock(&isolated) = master.ports[0];
            for o in &others {
                partition::cut(&master, o).unwrap_or_else(|e| panic!("{e}"));
            }
        },
        move || {
            partition::heal().unwrap_or_else(|e| panic!("{e}"));
            ended(*lock(&i2));
        },
        move || settle(*lock(&i3)),
    )
}

/// A master lost without warning: with `--wait-replicas` nothing acknowledged may be lost;
/// without, writes acknowledged in the second before may be (asynchronous replication).
fn replicated(
    name: String,
    wait_replicas: u32,
    strike: impl FnOnce() + Send + 'static,
    heal: impl FnOnce() + Send + 'static,
) -> Fault {
    let window = (wait_replicas == 0).then_some(Duration::from_secs(1));
    windowed(name, window, || {}, strike, heal)
}
