//! The relay's faults: a store write whose row was not deleted (the relay killed or its
//! connection lost between the two), a relay stuck holding rows, PostgreSQL restarted, the
//! store unreachable; a move abandoned by an error; a partition made by a write that failed.
//! Nothing committed is lost; nothing runs twice.

use delayq::{Backend, Inspect, JobState};
use delayq_postgres::{PgOptions, Relay};
use delayq_testkit::faulty::{FaultPoint, Faulty};

use crate::common::{
    claim_one, database, eventually, id, outbox_rows, q, redis, start, stored, tiered,
};

/// The store took the job but the relay never deleted its row: the row is relayed again —
/// after the job already ran and ended — and the job does not run twice.
#[tokio::test]
async fn a_job_written_but_its_row_kept_runs_once() {
    let (_pg, opts, mut c) = database().await;
    let store = redis().await;
    let b = Faulty::new(store.clone());
    let orders = q("orders");
    c.execute("SELECT delayq.enqueue('orders', 'pay-1', '{}')", &[])
        .await
        .unwrap();
    let relay = Relay::new(b.clone(), opts.clone());
    // Call 1 reads the queue's settings, call 2 enqueues: it writes, then fails.
    b.fail_call(2, FaultPoint::After);
    let mut relay_conn = opts.connect(None).await.unwrap();
    relay.relay_batch(&mut relay_conn).await.unwrap_err();
    assert!(b.take_injected().is_some());
    assert_eq!(outbox_rows(&c).await, 1, "the row stays for another try");
    // The job ran and ended meanwhile.
    let batch = store.claim(&orders, claim_one()).await.unwrap();
    assert_eq!(batch.jobs.len(), 1);
    let lease = batch.jobs[0].lease_ref();
    store
        .ack(&orders, vec![delayq::Ack::from(lease)])
        .await
        .unwrap();
    let again = relay.relay_batch(&mut relay_conn).await.unwrap();
    assert_eq!(again.relayed, 1);
    assert_eq!(outbox_rows(&c).await, 0);
    let job = store
        .get(&orders, &id("pay-1"))
        .await
        .unwrap()
        .expect("kept");
    assert_eq!(
        job.state,
        JobState::Done,
        "remembered as done, not enqueued again"
    );
    let none = store.claim(&orders, claim_one()).await.unwrap();
    assert!(none.jobs.is_empty(), "it does not run twice");
    let _ = &mut c;
}

/// A relay that took rows and stopped answering holds them only while its connection lives;
/// the others skip them meanwhile and take them after.
#[tokio::test]
async fn rows_a_stuck_relay_holds_go_once_its_connection_ends() {
    let (_pg, opts, c) = database().await;
    let b = redis().await;
    c.execute("SELECT delayq.enqueue('orders', 'held', '{}')", &[])
        .await
        .unwrap();
    let mut stuck = opts.connect(None).await.unwrap();
    let tx = stuck.transaction().await.unwrap();
    let held = tx
        .query("SELECT seq FROM delayq.outbox FOR UPDATE SKIP LOCKED", &[])
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    let (_stop, status) = start(b.clone(), &opts);
    c.execute("SELECT delayq.enqueue('orders', 'free', '{}')", &[])
        .await
        .unwrap();
    stored(&b, &q("orders"), "free").await;
    assert!(b.get(&q("orders"), &id("held")).await.unwrap().is_none());
    assert!(status.problem().is_none());
    drop(tx);
    drop(stuck);
    stored(&b, &q("orders"), "held").await;
    eventually("the outbox emptied", || async {
        (outbox_rows(&c).await == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn postgres_restarted_the_relay_says_so_and_catches_up() {
    let mut pg = delayq_test_support::postgres::PgServer::start();
    let db = pg.database();
    let opts = PgOptions::new(pg.url(&db));
    let b = redis().await;
    let (_stop, status) = start(b.clone(), &opts);
    let c = opts.connect(None).await.unwrap();
    // Wait for the relay's schema.
    eventually("the schema", || async {
        c.query_one("SELECT to_regclass('delayq.outbox') IS NOT NULL", &[])
            .await
            .ok()
            .and_then(|r| r.get::<_, bool>(0).then_some(()))
    })
    .await;
    c.execute("SELECT delayq.enqueue('orders', 'before', '{}')", &[])
        .await
        .unwrap();
    stored(&b, &q("orders"), "before").await;
    pg.kill();
    let why = eventually("the relay to notice", || async { status.problem() }).await;
    assert!(why.contains("delayq.outbox"), "{why}");
    // Plain jobs keep flowing meanwhile.
    delayq::Producer::new(b.clone(), q("orders"))
        .enqueue(delayq::NewJob::new("x").id(id("plain")))
        .await
        .unwrap();
    pg.restart();
    let c = opts.connect(None).await.unwrap();
    c.execute("SELECT delayq.enqueue('orders', 'after', '{}')", &[])
        .await
        .unwrap();
    stored(&b, &q("orders"), "after").await;
    eventually("the relay to be well", || async {
        status.problem().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_store_that_cannot_be_reached_leaves_the_rows_until_it_is_back() {
    let mut redis = delayq_test_support::RedisServer::start_durable();
    let b = delayq_redis::RedisBackend::connect(&redis.url())
        .await
        .unwrap();
    let (_pg, opts, c) = database().await;
    let (_stop, status) = start(b.clone(), &opts);
    c.execute("SELECT delayq.enqueue('orders', 'first', '{}')", &[])
        .await
        .unwrap();
    stored(&b, &q("orders"), "first").await;
    redis.kill();
    c.execute("SELECT delayq.enqueue('orders', 'while-down', '{}')", &[])
        .await
        .unwrap();
    let why = eventually("the relay to notice", || async { status.problem() }).await;
    assert!(why.contains("relaying"), "{why}");
    assert_eq!(outbox_rows(&c).await, 1);
    redis.restart();
    stored(&b, &q("orders"), "while-down").await;
    eventually("the outbox emptied", || async {
        (outbox_rows(&c).await == 0).then_some(())
    })
    .await;
    eventually("the relay to be well", || async {
        status.problem().is_none().then_some(())
    })
    .await;
}

/// A dependent whose dependency another relay holds waits in the outbox (put back, its
/// due time and order kept) until the dependency is in the store: relayed first, it would
/// find its dependency gone and run at once.
#[tokio::test]
async fn a_dependent_waits_in_the_outbox_while_its_dependency_is_held_elsewhere() {
    let (_pg, opts, c) = database().await;
    let b = redis().await;
    c.batch_execute(
        "SELECT delayq.enqueue('img', 'resize', '{}');
         SELECT delayq.enqueue('img', 'thumbs', '{}', now(), '{\"depends_on\": [\"resize\"]}');",
    )
    .await
    .unwrap();
    let mut stuck = opts.connect(None).await.unwrap();
    let tx = stuck.transaction().await.unwrap();
    tx.query(
        "SELECT seq FROM delayq.outbox WHERE id = 'resize' FOR UPDATE",
        &[],
    )
    .await
    .unwrap();
    let (_stop, status) = start(b.clone(), &opts);
    eventually("the dependent put back", || async {
        (status.totals().deferred >= 2).then_some(())
    })
    .await;
    assert!(b.get(&q("img"), &id("thumbs")).await.unwrap().is_none());
    assert_eq!(
        outbox_rows(&c).await,
        2,
        "both rows are still in the outbox"
    );
    drop(tx);
    drop(stuck);
    assert_eq!(
        stored(&b, &q("img"), "thumbs").await.state,
        JobState::Waiting
    );
    assert_eq!(
        stored(&b, &q("img"), "resize").await.state,
        JobState::Scheduled
    );
}

/// A move abandoned by an error after it took its rows (the store failed) leaves no half-done
/// transaction on the pooled connection: the next write through that connection commits only
/// its own work, the job is still cold, and the next move moves it. (Before `cold::Open`, the
/// connection went back to the pool inside the take, and the next commit on it deleted the
/// job for good.)
#[tokio::test]
async fn a_move_abandoned_by_an_error_leaves_its_rows_cold() {
    let (_pg, opts, c) = database().await;
    let store = redis().await;
    let orders = q("orders");
    let t = delayq_postgres::Tiered::new(store.clone(), opts.pool(2).unwrap());
    let cold = t.cold().unwrap();
    cold.set_cold_after(&orders, Some(3_600_000)).await.unwrap();
    let far = delayq::job::system_now_ms() + 2 * 3_600_000;
    delayq::Producer::new(t.clone(), orders.clone())
        .enqueue(
            delayq::NewJob::new("x")
                .id(id("far"))
                .due(delayq::Due::At(far)),
        )
        .await
        .unwrap();
    // The window widened over it: a move takes it. This mover has one pooled connection.
    cold.set_cold_after(&orders, Some(3 * 3_600_000))
        .await
        .unwrap();
    let b = Faulty::new(store.clone());
    let mover = delayq_postgres::Tiered::new(b.clone(), opts.pool(1).unwrap());
    // Call 1 reads the queue's settings, after the rows were taken.
    b.fail_call(1, FaultPoint::Before);
    mover.move_due().await.unwrap_err();
    assert!(b.take_injected().is_some());
    // The pool's one connection again, in a transaction that commits.
    assert_eq!(
        mover.cancel(&orders, &id("other")).await.unwrap(),
        delayq::CancelOutcome::NotFound
    );
    let rows: i64 = c
        .query_one("SELECT count(*) FROM delayq.cold WHERE id = 'far'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "the abandoned take was rolled back");
    assert_eq!(mover.move_due().await.unwrap(), 1);
    assert_eq!(stored(&store, &orders, "far").await.due_at_ms, far);
}

/// A partition made by a tier write that then fails goes with its rolled-back transaction:
/// the tier does not remember that month as made, and the next job due in it makes it again
/// (remembered as made, that job's insert would find no partition for its row).
#[tokio::test]
async fn a_partition_made_by_a_write_that_failed_is_made_again() {
    let orders = q("orders");
    let (t, c) = tiered(3_600_000, &orders).await;
    // The tier's insert of the job `boom` fails, after its month's partition was made.
    c.batch_execute(
        "CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN IF NEW.id = 'boom' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER refuse BEFORE INSERT ON delayq.cold
           FOR EACH ROW EXECUTE FUNCTION public.refuse();",
    )
    .await
    .unwrap();
    let partitions = || async {
        c.query_one(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'delayq.cold'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    let before = partitions().await;
    // Three years ahead: a month no partition holds yet.
    let far = delayq::job::system_now_ms() + 3 * 365 * 86_400_000;
    let p = delayq::Producer::new(t.clone(), orders.clone());
    let job = |name: &str| {
        delayq::NewJob::new("x")
            .id(id(name))
            .due(delayq::Due::At(far))
    };
    p.enqueue(job("boom")).await.unwrap_err();
    assert_eq!(
        partitions().await,
        before,
        "the partition went with the write"
    );
    p.enqueue(job("ok")).await.unwrap();
    assert_eq!(partitions().await, before + 1);
    let got = t.get(&orders, &id("ok")).await.unwrap().unwrap();
    assert!(got.cold && got.due_at_ms == far);
    assert!(t.get(&orders, &id("boom")).await.unwrap().is_none());
}
