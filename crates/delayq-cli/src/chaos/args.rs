//! The arguments of `delayq chaos`: which scenario, how many jobs and faults.

use clap::{Args, ValueEnum};

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
