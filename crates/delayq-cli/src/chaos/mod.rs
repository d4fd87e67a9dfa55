//! `delayq chaos`: a named fault scenario against Redis servers it starts itself (one
//! `redis-server`, a Sentinel set or a Cluster), checked by the history checker of
//! `delayq_testkit::chaos`, its table printed — so anyone can reproduce the figures of
//! docs/RELIABILITY.md. The faults of each scenario are built in `faults`, its arguments are `args`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use delayq::{Inspect, QueueName, QueueSettings};
use delayq_redis::{ConnectOptions, RedisBackend};
use delayq_testkit::chaos::{self, Plan};

use delayq_test_support::partition;

mod args;
mod faults;

pub(crate) use args::ChaosArgs;
use args::Scenario;
use faults::Servers;

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
    let (faults, kills) = faults::build(&a, &servers, &q, shards, wait_replicas);
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
        via: None,
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
