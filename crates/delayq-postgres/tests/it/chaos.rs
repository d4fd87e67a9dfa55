//! The relay and the cold tier under faults, checked by the history checker
//! (`delayq_testkit::chaos`). One queue keeps jobs due more than 300 ms ahead cold (a window
//! only a test sets: the setting's least is a minute), so the run mixes plain jobs (due sooner,
//! straight into Redis), cold ones (through `Tiered` into PostgreSQL, moved into Redis by two
//! movers every 100 ms), and transactional ones (every other job: `delayq.enqueue` in its own
//! transaction, relayed by three relays through `Tiered` — the far ones going cold too). While
//! it runs, relays and movers are killed mid-batch (their tasks aborted: the connection dies
//! with its transaction open, as with a SIGKILL), PostgreSQL is SIGKILLed and restarted twice,
//! and Redis once (`appendfsync always`). No consumer is killed, so at-least-once owes no
//! repeat: every committed job runs exactly once, none before the due time its producer meant
//! (this host's clock at the enqueue plus its delay). `DELAYQ_PG_CHAOS_JOBS` makes the run
//! longer (docs/RELIABILITY.md).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::QueueName;
use delayq_postgres::{PgOptions, Relay, Tiered};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use delayq_test_support::postgres::PgServer;
use delayq_testkit::chaos::{self, Plan, Via, ViaOutcome, fault};
use tokio::task::JoinHandle;

/// Tasks running now (relays, movers): a fault aborts the oldest and starts another.
type Tasks = Arc<Mutex<Vec<JoinHandle<()>>>>;

/// The cold window of the run's queue (ms).
const WINDOW_MS: i64 = 300;

fn relay(rt: &tokio::runtime::Handle, url: &str, pg: &PgOptions) -> JoinHandle<()> {
    let (url, pg) = (url.to_owned(), pg.clone());
    rt.spawn(async move {
        let t = tiered(&url, &pg).await;
        Relay::new(t, pg)
            .sweep_every(Duration::from_millis(200))
            .run(std::future::pending())
            .await;
    })
}

fn mover(rt: &tokio::runtime::Handle, url: &str, pg: &PgOptions) -> JoinHandle<()> {
    let (url, pg) = (url.to_owned(), pg.clone());
    rt.spawn(async move {
        tiered(&url, &pg)
            .await
            .run_mover(Duration::from_millis(100), std::future::pending())
            .await;
    })
}

async fn tiered(url: &str, pg: &PgOptions) -> Tiered<RedisBackend> {
    Tiered::new(connect(url).await, pg.pool(4).unwrap())
}

async fn connect(url: &str) -> RedisBackend {
    let mut o = delayq_redis::ConnectOptions::new(url);
    o.connect_timeout = Some(Duration::from_secs(30));
    RedisBackend::connect_retrying(o, |_| {}).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_and_cold_jobs_run_once_through_relay_and_mover_kills_and_restarts() {
    let jobs: usize = std::env::var("DELAYQ_PG_CHAOS_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    let redis = Arc::new(Mutex::new(RedisServer::start_for_faults().unwrap()));
    let url = redis.lock().unwrap().url();
    let pg = Arc::new(Mutex::new(PgServer::start()));
    let db = pg.lock().unwrap().database();
    let opts = PgOptions::new(pg.lock().unwrap().url(&db));
    let mut c = opts.connect(None).await.unwrap();
    delayq_postgres::migrate(&mut c).await.unwrap();
    c.execute(
        "INSERT INTO delayq.cold_queues (queue, cold_after_ms) VALUES ('chaos', $1)",
        &[&WINDOW_MS],
    )
    .await
    .unwrap();
    // Which jobs went cold (the run must have some of each kind).
    c.batch_execute(
        "CREATE TABLE public.went_cold (id text NOT NULL);
         CREATE FUNCTION public.went_cold() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN INSERT INTO public.went_cold VALUES (NEW.id); RETURN NULL; END $$;
         CREATE TRIGGER went_cold AFTER INSERT ON delayq.cold
           FOR EACH ROW EXECUTE FUNCTION public.went_cold();",
    )
    .await
    .unwrap();
    drop(c);
    let rt = tokio::runtime::Handle::current();
    let relays: Tasks = Arc::new(Mutex::new(
        (0..3).map(|_| relay(&rt, &url, &opts)).collect(),
    ));
    let movers: Tasks = Arc::new(Mutex::new(
        (0..2).map(|_| mover(&rt, &url, &opts)).collect(),
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

    type Start = fn(&tokio::runtime::Handle, &str, &PgOptions) -> JoinHandle<()>;
    let kill = |at: usize, what: &'static str, tasks: &Tasks, start: Start| {
        let (tasks, rt, url, opts) = (tasks.clone(), rt.clone(), url.clone(), opts.clone());
        (
            at,
            fault(what, move || {
                let mut r = tasks.lock().unwrap();
                r.remove(0).abort();
                r.push(start(&rt, &url, &opts));
            }),
        )
    };
    let (p1, p2, r1) = (pg.clone(), pg.clone(), redis.clone());
    let mut faults: Vec<_> = (1..=6)
        .map(|k| kill(k * jobs / 8, "relay killed mid-batch", &relays, relay))
        .collect();
    faults
        .extend([1, 3, 5, 7].map(|k| kill(k * jobs / 9, "mover killed mid-move", &movers, mover)));
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
        // Most jobs due past the window: cold first.
        max_delay: Duration::from_secs(3),
        via: Some(via),
    };
    let report = chaos::run(
        QueueName::new("chaos").unwrap(),
        || tiered(&url, &opts),
        plan,
    )
    .await;
    eprintln!("{}", report.table());
    for r in relays.lock().unwrap().drain(..) {
        r.abort();
    }
    for m in movers.lock().unwrap().drain(..) {
        m.abort();
    }
    let c = opts.connect(None).await.unwrap();
    let row = c
        .query_one(
            "SELECT count(DISTINCT id), \
                    count(DISTINCT id) FILTER (WHERE substr(id, 2)::int % 2 = 0) \
             FROM public.went_cold",
            &[],
        )
        .await
        .unwrap();
    let (cold, cold_tx): (i64, i64) = (row.get(0), row.get(1));
    eprintln!("went cold: {cold} jobs, {cold_tx} of them transactional");
    assert!(
        cold as usize > jobs / 2 && cold_tx as usize > jobs / 4,
        "cold {cold}, of them transactional {cold_tx}"
    );
    // Where each lost job is now (to read a failure by).
    let t = tiered(&url, &opts).await;
    let chaos = QueueName::new("chaos").unwrap();
    for id in &report.lost {
        let job = delayq::JobId::new(id.clone()).unwrap();
        let went = c
            .query_one("SELECT count(*) FROM public.went_cold WHERE id = $1", &[id])
            .await
            .map(|r| r.get::<_, i64>(0));
        eprintln!(
            "lost {id}: went cold {went:?}; now {:?}",
            delayq::Inspect::get(&t, &chaos, &job).await
        );
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
