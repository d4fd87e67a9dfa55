//! `delayq chaos`: a named fault scenario against a redis-server it starts itself
//! (`appendfsync always`), checked by the history checker of `delayq::testkit::chaos`, its
//! table printed — so anyone can reproduce the figures of docs/RELIABILITY.md.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args, ValueEnum};
use delayq::QueueName;
use delayq::testkit::chaos::{self, Fault, Plan};
use delayq_redis::RedisBackend;
use delayq_test_support::{RedisServer, command_on};

/// The scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Scenario {
    /// Consumers killed (`--kills`) while jobs flow.
    WorkerKill,
    /// Redis SIGKILLed and restarted (`--restarts`) while jobs flow.
    RedisRestart,
    /// Kills, restarts, `CLIENT PAUSE WRITE` and `DEBUG SLEEP` together.
    Mixed,
}

/// Arguments of `delayq chaos`.
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
    /// Redis restarts (redis-restart, mixed).
    #[arg(long, default_value_t = 5)]
    pub restarts: usize,
    /// Consumers running at once.
    #[arg(long, default_value_t = 4)]
    pub consumers: usize,
}

fn fault<F: FnOnce() + Send + 'static>(name: String, f: F) -> Fault {
    (
        name,
        Box::new(move || {
            Box::pin(async move {
                let _ = tokio::task::spawn_blocking(f).await;
            })
        }),
    )
}

/// Runs the scenario; exit 1 when the checker finds a loss, an early start, an unexpected job
/// or a stale ack accepted.
pub(crate) async fn run(a: ChaosArgs) -> anyhow::Result<u8> {
    let server = RedisServer::start_for_faults().map_err(anyhow::Error::msg)?;
    let url = server.url();
    let port = server.port();
    let server = Arc::new(Mutex::new(server));
    let kills = match a.scenario {
        Scenario::RedisRestart => 0,
        _ => a.kills,
    };
    let restarts = match a.scenario {
        Scenario::WorkerKill => 0,
        _ => a.restarts,
    };
    let mut faults = Vec::new();
    for r in 0..restarts {
        let at = a.jobs * (2 * r + 1) / (2 * restarts);
        let s = server.clone();
        faults.push((
            at,
            fault(format!("redis SIGKILL + restart #{}", r + 1), move || {
                s.lock().expect("server lock").restart();
            }),
        ));
    }
    if a.scenario == Scenario::Mixed {
        faults.push((
            a.jobs / 3,
            fault("CLIENT PAUSE 1500 WRITE".into(), move || {
                command_on(port, &["CLIENT", "PAUSE", "1500", "WRITE"]);
            }),
        ));
        faults.push((
            2 * a.jobs / 3,
            fault("DEBUG SLEEP 1".into(), move || {
                std::thread::spawn(move || command_on(port, &["DEBUG", "SLEEP", "1"]));
            }),
        ));
    }
    eprintln!(
        "delayq chaos: {:?}, {} jobs, {kills} consumer kills, {restarts} Redis restarts, redis-server {}",
        a.scenario, a.jobs, url
    );
    let plan = Plan {
        jobs: a.jobs,
        consumers: a.consumers,
        kills,
        faults,
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(120),
    };
    let q = QueueName::new("chaos")?;
    let report = chaos::run(
        q,
        || async { RedisBackend::connect(&url).await.expect("connect") },
        plan,
    )
    .await;
    print!("{}", report.table());
    let bad = !report.lost.is_empty()
        || !report.unexpected.is_empty()
        || report.early > 0
        || report.stale_acks_accepted > 0;
    Ok(u8::from(bad))
}
