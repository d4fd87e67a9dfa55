//! `delayq chaos`: a named fault scenario against Redis servers it starts itself (one
//! `redis-server`, a Sentinel set or a Cluster), checked by the history checker of
//! `delayq::testkit::chaos`, its table printed — so anyone can reproduce the figures of
//! docs/RELIABILITY.md. The faults of each scenario are built in `chaos_faults`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use clap::{Args, ValueEnum};
use delayq::testkit::chaos::{self, Plan};
use delayq::{Inspect, QueueName, QueueSettings};
use delayq_redis::{ConnectOptions, RedisBackend};

use delayq_test_support::partition;

use crate::chaos_faults::{self, Servers};

/// The scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Scenario {
    /// Consumers killed (`--kills`) while jobs flow.
    WorkerKill,
    /// Redis SIGKILLed and restarted (`--restarts`, with `--fsync`) while jobs flow.
    RedisRestart,
    /// Power cuts (`--restarts`) of a Redis with `appendfsync everysec`: each restarts from
    /// the disk as it was `--window-ms` before the cut.
    PowerLoss,
    /// Network faults (`--faults`) between every client and Redis through a TCP proxy:
    /// stalls, resets, refused connections, delays, in turn.
    Network,
    /// Sentinel failovers (`--failovers`): the master SIGKILLed, its replica promoted, the
    /// old master back as a replica.
    SentinelFailover,
    /// Cluster failovers (`--failovers`) of the master serving the queue's first shard, in
    /// turn a graceful `CLUSTER FAILOVER` and a SIGKILL with automatic promotion.
    ClusterFailover,
    /// Network partitions (`--failovers`, each `--partition-ms` long; iptables in a network
    /// namespace of the run's own): the master cut off from its replica and the sentinel
    /// while every client still reaches it; the sentinel promotes the replica, and when the
    /// partition heals the old master is made its replica.
    SentinelPartition,
    /// Network partitions (`--failovers`, each `--partition-ms` long) of the master serving
    /// the queue's first shard from every other node (the minority side), clients reaching
    /// every node.
    ClusterPartition,
    /// Kills, restarts, `CLIENT PAUSE WRITE` and `DEBUG SLEEP` together.
    Mixed,
}

/// `appendfsync` of the scenarios on one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Fsync {
    /// Every write fsynced before it is acknowledged.
    Always,
    /// Fsynced once a second (a process crash loses nothing; a power cut up to a second).
    Everysec,
}

/// Arguments of `delayq chaos` (`--wait-replicas` is the global option: writes wait for that
/// many replicas; it matters in the failover scenarios).
#[derive(Args, Debug)]
pub(crate) struct ChaosArgs {
    /// What to break.
    #[arg(long, value_enum, default_value = "mixed")]
    pub scenario: Scenario,
    /// Jobs to enqueue.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: usize,
    /// Consumer kills (worker-kill, mixed).
    #[arg(long, default_value_t = 20)]
    pub kills: usize,
    /// Redis restarts or power cuts (redis-restart, power-loss, mixed).
    #[arg(long, default_value_t = 5)]
    pub restarts: usize,
    /// `appendfsync` (redis-restart, worker-kill, mixed; power-loss is always everysec).
    #[arg(long, value_enum, default_value = "always")]
    pub fsync: Fsync,
    /// power-loss: how long before each cut the disk's content is frozen (ms).
    #[arg(long, default_value_t = 1000)]
    pub window_ms: u64,
    /// Network faults (network).
    #[arg(long, default_value_t = 20)]
    pub faults: usize,
    /// Failovers (sentinel-failover, cluster-failover).
    #[arg(long, default_value_t = 3)]
    pub failovers: usize,
    /// Each job is due 0..this many ms after its enqueue. Jobs due within a partition run
    /// on the isolated side and hide its losses: give them longer (e.g. 30,000) to see what a
    /// partition takes from jobs due after it.
    #[arg(long, default_value_t = 1000)]
    pub max_delay_ms: u64,
    /// How long each partition lasts (sentinel-partition, cluster-partition), in ms.
    #[arg(long, default_value_t = 8000)]
    pub partition_ms: u64,
    /// Shards of the queue (cluster-failover, cluster-partition: 4 unless given).
    #[arg(long)]
    pub shards: Option<u32>,
    /// Give the queue the lane with time windows this wide (ms, 100–60,000): the jobs (due
    /// within a second) then wait in windows that the claims move under the faults.
    #[arg(long)]
    pub lane_window: Option<u32>,
    /// Consumers running at once.
    #[arg(long, default_value_t = 4)]
    pub consumers: usize,
    /// Enqueues per second (default: as fast as the store answers). Failovers take 10–30 s
    /// to heal (the old master rejoining): pace the run so they do not pile up at its end.
    #[arg(long)]
    pub rate: Option<f64>,
}

/// Connects, retrying while the servers are down (a process starting mid-fault would).
fn connector(
    url: String,
    wait_replicas: u32,
) -> impl Fn() -> Pin<Box<dyn Future<Output = RedisBackend> + Send>> {
    move || {
        let mut o = ConnectOptions::new(url.clone());
        o.wait_replicas = wait_replicas;
        Box::pin(async move {
            loop {
                match RedisBackend::connect_with(o.clone()).await {
                    Ok(b) => return b,
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        })
    }
}

/// Runs the scenario; exit 1 when the checker finds a loss outside an unsynced window, an
/// early start, an unexpected job or a stale ack accepted.
pub(crate) async fn run(a: ChaosArgs, wait_replicas: u32) -> anyhow::Result<u8> {
    let partitions = matches!(
        a.scenario,
        Scenario::SentinelPartition | Scenario::ClusterPartition
    );
    if partitions && !partition::in_namespace() {
        // The rules go in a network namespace of the run's own: the host's network is never
        // touched, and they vanish with the run however it ends.
        let code = partition::enter_namespace().map_err(anyhow::Error::msg)?;
        return Ok(u8::try_from(code).unwrap_or(1));
    }
    if partitions {
        partition::loopback_up().map_err(anyhow::Error::msg)?;
    }
    let servers = Servers::start(&a)?;
    let url = servers.url();
    let q = QueueName::new("chaos")?;
    let shards = match (a.shards, a.scenario) {
        (Some(n), _) => n,
        (None, Scenario::ClusterFailover | Scenario::ClusterPartition) => 4,
        (None, _) => 1,
    };
    let connect = connector(url.clone(), wait_replicas);
    if shards > 1 || a.lane_window.is_some() {
        let mut s = QueueSettings::with_shards(shards);
        if let Some(w) = a.lane_window {
            s.set_lane(Some(true), Some(w));
        }
        // A replica may still be syncing when the servers report ready: with
        // --wait-replicas the first write waits for it.
        let b = connect().await;
        let mut tries = 0;
        while let Err(e) = b.configure(&q, s.clone()).await {
            tries += 1;
            if tries == 30 {
                return Err(e.into());
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let (faults, kills) = chaos_faults::build(&a, &servers, &q, shards, wait_replicas);
    eprintln!(
        "delayq chaos: {:?}, {} jobs, {} consumers, {kills} consumer kills, {} other faults, \
         {shards} shard(s){}, --wait-replicas {wait_replicas}, {}",
        a.scenario,
        a.jobs,
        a.consumers,
        faults.len(),
        a.lane_window
            .map_or(String::new(), |w| format!(", lane with {w}-ms windows")),
        delayq_redis::mask(&url)
    );
    let plan = Plan {
        jobs: a.jobs,
        consumers: a.consumers,
        kills,
        faults,
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(180),
        rate: a.rate,
        max_delay: Duration::from_millis(a.max_delay_ms),
    };
    let report = chaos::run(q, connect, plan).await;
    print!("{}", report.table());
    let bad = !report.lost.is_empty()
        || !report.unexpected.is_empty()
        || report.early > 0
        || report.stale_acks_accepted > 0;
    drop(servers);
    Ok(u8::from(bad))
}
