//! `delayq.enqueue` in an application's transaction and the relay that moves committed rows
//! into the store: commit and rollback, a retried transaction, bad input refused in the
//! application's own statement, a row the store refuses set aside, dependencies of one
//! transaction relayed in order, several relays sharing the outbox, TLS and a password apart.

use std::time::Duration;

use delayq::{Backend, Inspect, JobState};
use delayq_postgres::PgOptions;

use crate::common::{database, eventually, id, outbox_rows, q, redis, start, stored};

async fn committed_and_rolled_back<B>(b: B)
where
    B: Backend + Inspect + Clone + Send + Sync + 'static,
{
    let (_pg, opts, mut c) = database().await;
    let (_stop, _) = start(b.clone(), &opts);
    let orders = q("orders");
    // The application's transaction: its own row, and the job, or neither.
    c.batch_execute("CREATE TABLE orders (id int PRIMARY KEY)")
        .await
        .unwrap();
    let tx = c.transaction().await.unwrap();
    tx.execute("INSERT INTO orders VALUES (2)", &[])
        .await
        .unwrap();
    tx.execute(
        "SELECT delayq.enqueue('orders', 'cancel-2', '{\"order\": 2}', now() + interval '30 minutes')",
        &[],
    )
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    let tx = c.transaction().await.unwrap();
    tx.execute("INSERT INTO orders VALUES (1)", &[])
        .await
        .unwrap();
    let due: i64 = tx
        .query_one(
            "SELECT ceil(extract(epoch FROM now() + interval '30 minutes') * 1000)::int8",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    tx.execute(
        "SELECT delayq.enqueue('orders', 'cancel-1', '{\"order\": 1}', now() + interval '30 minutes', \
         '{\"max_attempts\": 3, \"key\": \"user-7\", \"priority\": 8}')",
        &[],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let job = stored(&b, &orders, "cancel-1").await;
    assert_eq!(job.state, JobState::Scheduled);
    assert_eq!(job.due_at_ms, due as u64);
    assert_eq!(job.max_attempts, 3);
    assert_eq!(job.priority, 8);
    assert_eq!(job.key.as_ref().map(|k| k.as_str()), Some("user-7"));
    assert_eq!(job.payload, br#"{"order": 1}"#);
    eventually("the outbox emptied", || async {
        (outbox_rows(&c).await == 0).then_some(())
    })
    .await;
    assert!(b.get(&orders, &id("cancel-2")).await.unwrap().is_none());
    // Due now by default: the relay's enqueue makes it due at the transaction's time.
    c.execute("SELECT delayq.enqueue('orders', 'now-1', NULL)", &[])
        .await
        .unwrap();
    let now_job = stored(&b, &orders, "now-1").await;
    assert!(now_job.payload.is_empty());
    assert_eq!(b.stats(&orders).await.unwrap().due, 1);
}

#[tokio::test]
async fn a_committed_job_reaches_redis_and_a_rolled_back_one_never() {
    committed_and_rolled_back(redis().await).await;
}

#[tokio::test]
async fn a_committed_job_reaches_the_embedded_store_and_a_rolled_back_one_never() {
    let dir = tempfile::tempdir().unwrap();
    let b = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
    committed_and_rolled_back(b).await;
}

#[tokio::test]
async fn a_retried_transaction_enqueues_once_and_rows_from_before_the_relay_started_go_too() {
    let (_pg, opts, c) = database().await;
    let b = redis().await;
    let orders = q("orders");
    // Committed before any relay runs: the first sweep finds them.
    for attempt in 0..2 {
        c.execute(
            "SELECT delayq.enqueue('orders', 'once', $1::text::jsonb, now() + interval '1 hour')",
            &[&serde_json::json!({ "attempt": attempt }).to_string()],
        )
        .await
        .unwrap();
    }
    for n in 0..10 {
        c.execute(
            "SELECT delayq.enqueue('orders', 'early-' || $1::text, '{}', now() + interval '1 hour')",
            &[&n.to_string()],
        )
        .await
        .unwrap();
    }
    let (_stop, status) = start(b.clone(), &opts);
    eventually("every row relayed", || async {
        (status.totals().relayed == 12).then_some(())
    })
    .await;
    assert_eq!(outbox_rows(&c).await, 0);
    let job = stored(&b, &orders, "once").await;
    assert_eq!(
        job.payload, br#"{"attempt": 0}"#,
        "the first commit's job, once"
    );
    assert_eq!(b.stats(&orders).await.unwrap().scheduled, 11);
}

#[tokio::test]
async fn bad_input_fails_the_applications_own_statement_and_writes_nothing() {
    let (_pg, _opts, c) = database().await;
    let cases = [
        ("'bad queue!', 'a', '{}'", "queue"),
        ("'..', 'a', '{}'", "queue"),
        ("NULL, 'a', '{}'", "queue"),
        ("'q', '', '{}'", "id"),
        ("'q', NULL, '{}'", "id"),
        ("'q', E'a\\nb', '{}'", "id"),
        ("'q', 'a', '{}', NULL", "due_at"),
        (
            "'q', 'a', '{}', now(), '[1]'",
            "options must be a JSON object",
        ),
        (
            "'q', 'a', '{}', now(), '{\"colour\": 1}'",
            "unknown option colour",
        ),
        ("'q', 'a', '{}', now(), '{\"run_at\": 1}'", "argument"),
        ("'q', 'a', '{}', now(), '{\"payload\": 1}'", "argument"),
    ];
    for (args, says) in cases {
        let e = c
            .execute(&format!("SELECT delayq.enqueue({args})"), &[])
            .await
            .unwrap_err();
        let db = e.as_db_error().unwrap_or_else(|| panic!("{args}: {e}"));
        assert_eq!(
            db.code(),
            &tokio_postgres::error::SqlState::INVALID_PARAMETER_VALUE,
            "{args}"
        );
        assert!(db.message().contains(says), "{args}: {}", db.message());
    }
    assert_eq!(outbox_rows(&c).await, 0);
}

/// The option names `delayq.enqueue` takes are the HTTP enqueue's fields but its arguments
/// (`clients/openapi.json`, derived from the wire types): a field added there must be added to
/// the function (by a migration), or this fails.
#[test]
fn the_options_are_the_enqueue_fields_but_the_arguments() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/clients/openapi.json")).unwrap(),
    )
    .unwrap();
    let schemas = &doc["components"]["schemas"];
    let mut fields: Vec<String> = Vec::new();
    for part in schemas["EnqueueRequest"]["allOf"].as_array().unwrap() {
        let part = match part["$ref"].as_str() {
            Some(r) => &schemas[r.rsplit('/').next().unwrap()],
            None => part,
        };
        fields.extend(part["properties"].as_object().unwrap().keys().cloned());
    }
    fields
        .retain(|f| !["id", "payload", "payload_b64", "delay_ms", "run_at"].contains(&f.as_str()));
    fields.sort();
    let sql = include_str!("../../sql/0001_outbox.sql");
    let list = sql
        .split("ARRAY[")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    let mut options: Vec<String> = list
        .split(',')
        .map(|s| s.trim().trim_matches('\'').to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    options.sort();
    assert_eq!(options, fields);
}

#[tokio::test]
async fn a_row_the_store_refuses_is_set_aside_with_the_reason_and_the_rest_go_on() {
    let (_pg, opts, c) = database().await;
    let b = redis().await;
    let orders = q("orders");
    c.batch_execute(
        "SELECT delayq.enqueue('orders', 'fine-1', '{}');
         SELECT delayq.enqueue('orders', 'too-urgent', '{}', now(), '{\"priority\": 12}');
         SELECT delayq.enqueue('orders', 'not-a-number', '{}', now(), '{\"max_attempts\": \"x\"}');
         SELECT delayq.enqueue('orders', 'fine-2', '{}');",
    )
    .await
    .unwrap();
    let (_stop, status) = start(b.clone(), &opts);
    stored(&b, &orders, "fine-2").await;
    stored(&b, &orders, "fine-1").await;
    eventually("both refused rows set aside", || async {
        (status.totals().rejected == 2).then_some(())
    })
    .await;
    assert_eq!(outbox_rows(&c).await, 0);
    let rows = c
        .query("SELECT id, error FROM delayq.rejected ORDER BY seq", &[])
        .await
        .unwrap();
    let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "too-urgent");
    assert!(got[0].1.contains("priority"), "{}", got[0].1);
    assert_eq!(got[1].0, "not-a-number");
    assert!(
        got[1].1.contains("max_attempts") || got[1].1.contains("invalid type"),
        "{}",
        got[1].1
    );
    assert!(b.get(&orders, &id("too-urgent")).await.unwrap().is_none());
}

#[tokio::test]
async fn jobs_of_one_transaction_that_wait_for_each_other_are_relayed_dependencies_first() {
    let (_pg, opts, c) = database().await;
    let b = redis().await;
    // The dependent first, its dependencies after (another queue among them).
    c.batch_execute(
        "BEGIN;
         SELECT delayq.enqueue('mail', 'email', '{}', now(),
             '{\"depends_on\": [{\"queue\": \"images\", \"id\": \"thumbs\"}, {\"queue\": \"images\", \"id\": \"resize\"}]}');
         SELECT delayq.enqueue('images', 'thumbs', '{}', now(), '{\"depends_on\": [\"resize\"]}');
         SELECT delayq.enqueue('images', 'resize', '{}');
         COMMIT;",
    )
    .await
    .unwrap();
    let (_stop, _) = start(b.clone(), &opts);
    let email = stored(&b, &q("mail"), "email").await;
    assert_eq!(
        email.state,
        JobState::Waiting,
        "it waits: its dependencies exist"
    );
    assert_eq!(
        stored(&b, &q("images"), "thumbs").await.state,
        JobState::Waiting
    );
    assert_eq!(
        stored(&b, &q("images"), "resize").await.state,
        JobState::Scheduled
    );
}

#[tokio::test]
async fn several_relays_share_the_outbox_each_row_once() {
    let (_pg, opts, c) = database().await;
    let b = redis().await;
    let statuses: Vec<_> = (0..3).map(|_| start(b.clone(), &opts)).collect();
    for t in 0..20 {
        c.execute(
            "SELECT delayq.enqueue('bulk', 'j-' || $1::text || '-' || n, '{}', now() + interval '1 hour')
             FROM generate_series(1, 100) AS n",
            &[&t.to_string()],
        )
        .await
        .unwrap();
    }
    let total = || {
        statuses
            .iter()
            .map(|(_, s)| s.totals().relayed)
            .sum::<u64>()
    };
    eventually("2,000 rows relayed", || async {
        (total() >= 2000).then_some(())
    })
    .await;
    // Give a relay that would take a row twice the time to do it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        total(),
        2000,
        "each row is deleted by the relay that enqueued it, once"
    );
    assert_eq!(outbox_rows(&c).await, 0);
    assert_eq!(b.stats(&q("bulk")).await.unwrap().scheduled, 2000);
    let busy = statuses
        .iter()
        .filter(|(_, s)| s.totals().relayed > 0)
        .count();
    assert!(busy >= 1);
}

#[tokio::test]
async fn tls_with_the_servers_ca_and_a_password_kept_apart() {
    let pg = delayq_test_support::shared::postgres();
    let db = pg.database();
    let tls = PgOptions::new(format!("{}?sslmode=require", pg.url_without_password(&db)))
        .password(Some(delayq_test_support::postgres::PG_PASSWORD.into()))
        .ca(Some(pg.ca()));
    let c = tls
        .connect(None)
        .await
        .map_err(|e| format!("{e:?}"))
        .expect("TLS with the CA");
    let ssl: bool = c
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl);
    // The system's roots do not know the test CA: refused, not downgraded.
    let e = PgOptions::new(format!("{}?sslmode=require", pg.url(&db)))
        .connect(None)
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("certificate") || e.to_string().contains("tls"),
        "{e}"
    );
    let e = PgOptions::new(pg.url_without_password(&db))
        .password(Some("wrong".into()))
        .connect(None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("password"), "{e}");
}
