//! What the tests share: a database of their own, a store, and waiting for the relay.

use std::future::Future;
use std::time::{Duration, Instant};

use delayq::{Inspect, JobId, JobInfo, QueueName};
use delayq_postgres::{PgOptions, Tiered};
use delayq_redis::RedisBackend;
use delayq_test_support::postgres::PgServer;
use delayq_test_support::shared;
use tokio_postgres::Client;

/// A fresh database on the run's PostgreSQL, its options and a connected client (migrated).
pub(crate) async fn database() -> (&'static PgServer, PgOptions, Client) {
    let pg = shared::postgres();
    let db = pg.database();
    let opts = PgOptions::new(pg.url(&db));
    let mut client = opts.connect(None).await.expect("connect");
    delayq_postgres::migrate(&mut client)
        .await
        .expect("migrate");
    (pg, opts, client)
}

/// A Redis backend in a namespace of its own on the run's server.
pub(crate) async fn redis() -> RedisBackend {
    let mut o = delayq_redis::ConnectOptions::new(shared::redis().url());
    o.namespace = Some(shared::namespace());
    RedisBackend::connect_with(o).await.expect("redis")
}

pub(crate) fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

pub(crate) fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// Polls `check` until it answers `Some` (10 s at most): the relay works on its own time.
pub(crate) async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The job, once it is in the store.
pub(crate) async fn stored<B: Inspect>(b: &B, queue: &QueueName, job: &str) -> JobInfo {
    eventually(&format!("{queue}/{job} in the store"), || async {
        b.get(queue, &id(job)).await.unwrap()
    })
    .await
}

/// Rows left in the outbox.
pub(crate) async fn outbox_rows(c: &Client) -> i64 {
    c.query_one("SELECT count(*) FROM delayq.outbox", &[])
        .await
        .unwrap()
        .get(0)
}

/// Runs a relay into `backend` (sweeping every 200 ms) until the returned sender says stop.
pub(crate) fn start<B>(
    backend: B,
    opts: &PgOptions,
) -> (
    tokio::sync::watch::Sender<bool>,
    delayq_postgres::RelayStatus,
)
where
    B: delayq::Backend + Inspect + Clone + Send + Sync + 'static,
{
    let relay =
        delayq_postgres::Relay::new(backend, opts.clone()).sweep_every(Duration::from_millis(200));
    let status = relay.status();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(relay.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    (stop, status)
}

/// A claim of one job under a 30-s lease.
pub(crate) fn claim_one() -> delayq::ClaimRequest {
    delayq::ClaimRequest {
        max: 1,
        lease: Duration::from_secs(30),
        acks: vec![],
    }
}

/// A store with a cold tier (a database of its own), `queue` keeping jobs due more than
/// `window_ms` ahead cold; and a client of that database.
pub(crate) async fn tiered(window_ms: u64, queue: &QueueName) -> (Tiered<RedisBackend>, Client) {
    let (_pg, opts, c) = database().await;
    let t = Tiered::new(redis().await, opts.pool(4).unwrap());
    t.cold()
        .unwrap()
        .set_cold_after(queue, Some(window_ms))
        .await
        .unwrap();
    (t, c)
}
