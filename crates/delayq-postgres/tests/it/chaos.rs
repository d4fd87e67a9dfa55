//! The relay under faults, checked by the history checker (`delayq_testkit::chaos`): half the
//! jobs are committed in PostgreSQL (`delayq.enqueue`, each its own transaction) and relayed
//! by three relays, half enqueued into Redis directly, while relays are killed mid-batch
//! (their tasks aborted: the connection dies with its transaction open, as with a SIGKILL),
//! PostgreSQL is SIGKILLed and restarted, and Redis is SIGKILLed and restarted (`appendfsync
//! always`). No consumer is killed, so at-least-once owes no repeat: every committed job runs
//! exactly once, none before the due time the application gave. `DELAYQ_PG_CHAOS_JOBS` makes
//! the run longer (docs/RELIABILITY.md).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::QueueName;
use delayq_postgres::{PgOptions, Relay};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use delayq_test_support::postgres::PgServer;
use delayq_testkit::chaos::{self, Plan, Via, ViaOutcome, fault};
use tokio::task::JoinHandle;

/// The relays running now.
type Relays = Arc<Mutex<Vec<JoinHandle<()>>>>;

fn relay(rt: &tokio::runtime::Handle, url: &str, pg: &PgOptions) -> JoinHandle<()> {
    let (url, pg) = (url.to_owned(), pg.clone());
    rt.spawn(async move {
        let b = connect(&url).await;
        Relay::new(b, pg)
            .sweep_every(Duration::from_millis(200))
            .run(std::future::pending())
            .await;
    })
}

async fn connect(url: &str) -> RedisBackend {
    let mut o = delayq_redis::ConnectOptions::new(url);
    o.connect_timeout = Some(Duration::from_secs(30));
    RedisBackend::connect_retrying(o, |_| {}).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_jobs_run_once_through_relay_kills_and_postgres_and_redis_restarts() {
    let jobs: usize = std::env::var("DELAYQ_PG_CHAOS_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let redis = Arc::new(Mutex::new(RedisServer::start_for_faults().unwrap()));
    let url = redis.lock().unwrap().url();
    let pg = Arc::new(Mutex::new(PgServer::start()));
    let db = pg.lock().unwrap().database();
    let opts = PgOptions::new(pg.lock().unwrap().url(&db));
    delayq_postgres::migrate(&mut opts.connect(None).await.unwrap())
        .await
        .unwrap();
    let rt = tokio::runtime::Handle::current();
    let relays: Relays = Arc::new(Mutex::new(
        (0..3).map(|_| relay(&rt, &url, &opts)).collect(),
    ));

    // The application: each job its own transaction, reconnecting after an error.
    let app: Arc<tokio::sync::Mutex<Option<tokio_postgres::Client>>> = Arc::default();
    let app_opts = opts.clone();
    let via = Via {
        every: 2,
        enqueue: Box::new(move |id, due| {
            let (app, opts) = (app.clone(), app_opts.clone());
            Box::pin(async move {
                let mut c = app.lock().await;
                if c.as_ref().is_none_or(|c| c.is_closed()) {
                    *c = opts.connect(None).await.ok();
                }
                let Some(client) = c.as_ref() else {
                    return ViaOutcome::Refused;
                };
                let due = due as f64;
                match client
                    .execute(
                        "SELECT delayq.enqueue('chaos', $1, '{}', to_timestamp($2::float8 / 1000))",
                        &[&id, &due],
                    )
                    .await
                {
                    Ok(_) => ViaOutcome::Committed,
                    // The statement never ran (the server refused it): nothing committed.
                    Err(e) if e.as_db_error().is_some() => ViaOutcome::Refused,
                    // The connection broke: the commit may or may not have happened.
                    Err(_) => {
                        *c = None;
                        ViaOutcome::Unknown
                    }
                }
            })
        }),
    };

    let kill_relay = |at: usize| {
        let (relays, rt, url, opts) = (relays.clone(), rt.clone(), url.clone(), opts.clone());
        (
            at,
            fault("relay killed mid-batch", move || {
                let mut r = relays.lock().unwrap();
                r.remove(0).abort();
                r.push(relay(&rt, &url, &opts));
            }),
        )
    };
    let (p1, p2, r1) = (pg.clone(), pg.clone(), redis.clone());
    let mut faults: Vec<_> = (1..=6).map(|k| kill_relay(k * jobs / 8)).collect();
    faults.push((
        jobs * 3 / 8,
        fault("postgres SIGKILL + restart", move || {
            p1.lock().unwrap().restart()
        }),
    ));
    faults.push((
        jobs * 5 / 8,
        fault("redis SIGKILL + restart", move || {
            r1.lock().unwrap().restart()
        }),
    ));
    faults.push((
        jobs * 6 / 8,
        fault("postgres SIGKILL + restart", move || {
            p2.lock().unwrap().restart()
        }),
    ));
    let plan = Plan {
        jobs,
        consumers: 2,
        kills: 0,
        faults,
        lease: Duration::from_secs(2),
        drain: Duration::from_secs(90),
        rate: Some(400.0),
        max_delay: Duration::from_secs(1),
        via: Some(via),
    };
    let report = chaos::run(QueueName::new("chaos").unwrap(), || connect(&url), plan).await;
    eprintln!("{}", report.table());
    for r in relays.lock().unwrap().drain(..) {
        r.abort();
    }
    assert!(report.lost.is_empty(), "lost: {:?}", report.lost);
    assert!(
        report.unexpected.is_empty(),
        "unexpected: {:?}",
        report.unexpected
    );
    assert_eq!(report.duplicated, 0, "a committed job ran twice");
    assert_eq!(report.early, 0, "started before due");
    assert_eq!(report.stale_acks_accepted, 0);
    assert!(
        report.completed + report.unknown_absent >= jobs,
        "{report:?}"
    );
}
