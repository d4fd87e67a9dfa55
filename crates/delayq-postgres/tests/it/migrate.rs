//! The schema's versions: made once, kept, and a newer one refused.

use delayq_postgres::{Error, LATEST, Migrated, migrate, schema_version};
use delayq_test_support::shared;

#[tokio::test]
async fn a_fresh_database_is_migrated_once_and_a_newer_schema_is_refused() {
    let pg = shared::postgres();
    let db = pg.database();
    let opts = delayq_postgres::PgOptions::new(pg.url(&db));
    let mut c = opts.connect(None).await.unwrap();
    assert_eq!(schema_version(&c).await.unwrap(), 0);
    assert_eq!(
        migrate(&mut c).await.unwrap(),
        Migrated {
            from: 0,
            to: LATEST
        }
    );
    assert_eq!(schema_version(&c).await.unwrap(), LATEST);
    // Again: nothing to do (several processes start together: the advisory lock orders them).
    let (a, b) = tokio::join!(
        async {
            let mut c = opts.connect(None).await.unwrap();
            migrate(&mut c).await.unwrap()
        },
        async {
            let mut c = opts.connect(None).await.unwrap();
            migrate(&mut c).await.unwrap()
        }
    );
    assert_eq!(
        a,
        Migrated {
            from: LATEST,
            to: LATEST
        }
    );
    assert_eq!(
        b,
        Migrated {
            from: LATEST,
            to: LATEST
        }
    );
    // A newer delayq migrated this database: this build must not write it.
    pg.psql(
        &db,
        "INSERT INTO delayq.schema_version (version) VALUES (999)",
    )
    .unwrap();
    let e = migrate(&mut c).await.unwrap_err();
    assert!(
        matches!(e, Error::NewerSchema { found: 999, known } if known == LATEST),
        "{e}"
    );
    assert!(matches!(
        schema_version(&c).await,
        Err(Error::NewerSchema { .. })
    ));
}

#[tokio::test]
async fn two_fresh_processes_migrate_a_database_together() {
    let pg = shared::postgres();
    let db = pg.database();
    let opts = delayq_postgres::PgOptions::new(pg.url(&db));
    let runs = (0..4).map(|_| {
        let opts = opts.clone();
        tokio::spawn(async move {
            let mut c = opts.connect(None).await.unwrap();
            migrate(&mut c).await.unwrap()
        })
    });
    let mut from_zero = 0;
    for r in runs {
        let m = r.await.unwrap();
        assert_eq!(m.to, LATEST);
        from_zero += usize::from(m.from == 0);
    }
    assert_eq!(
        from_zero, 1,
        "one process made the schema, the others found it"
    );
    let versions = pg
        .psql(
            &db,
            "SELECT string_agg(version::text, ',') FROM delayq.schema_version",
        )
        .unwrap();
    let want: Vec<String> = (1..=LATEST).map(|v| v.to_string()).collect();
    assert_eq!(versions, want.join(","));
}

/// A database at version 1 (the outbox only) with a committed row: migrated to the cold tier's
/// version, the row is still there and relayed as before.
#[tokio::test]
async fn a_database_of_the_previous_version_is_migrated_with_its_rows() {
    let pg = shared::postgres();
    let db = pg.database();
    let opts = delayq_postgres::PgOptions::new(pg.url(&db));
    let mut c = opts.connect(None).await.unwrap();
    let m = migrate::migrate_to(&mut c, 1).await.unwrap();
    assert_eq!(m, Migrated { from: 0, to: 1 });
    assert!(
        pg.psql(&db, "SELECT to_regclass('delayq.cold')")
            .unwrap()
            .is_empty()
    );
    c.execute("SELECT delayq.enqueue('orders', 'kept', '{}')", &[])
        .await
        .unwrap();
    assert_eq!(
        migrate(&mut c).await.unwrap(),
        Migrated {
            from: 1,
            to: LATEST
        }
    );
    assert_eq!(
        pg.psql(&db, "SELECT id FROM delayq.outbox").unwrap(),
        "kept"
    );
    assert_eq!(
        pg.psql(&db, "SELECT to_regclass('delayq.cold')::text")
            .unwrap(),
        "delayq.cold"
    );
    let b = crate::common::redis().await;
    let relay = delayq_postgres::Relay::new(b.clone(), opts.clone());
    relay.relay_batch(&mut c).await.unwrap();
    assert!(
        delayq::Inspect::get(&b, &crate::common::q("orders"), &crate::common::id("kept"))
            .await
            .unwrap()
            .is_some()
    );
}

/// A database at version 2 (the cold tier without keys) with cold rows: migrated, each row
/// has the key of its body, and a key's listing finds it.
#[tokio::test]
async fn cold_rows_of_version_2_get_their_keys() {
    let pg = shared::postgres();
    let db = pg.database();
    let opts = delayq_postgres::PgOptions::new(pg.url(&db));
    let mut c = opts.connect(None).await.unwrap();
    migrate::migrate_to(&mut c, 2).await.unwrap();
    c.batch_execute(
        "SELECT delayq.cold_partition(now() + interval '40 days');
         INSERT INTO delayq.cold (queue, id, due_at, body) VALUES
           ('orders', 'keyed', now() + interval '40 days', '{\"payload\": \"a\", \"key\": \"u42\"}'),
           ('orders', 'plain', now() + interval '40 days', '{\"payload\": \"b\"}');
         INSERT INTO delayq.cold_queues VALUES ('orders', 3600000);",
    )
    .await
    .unwrap();
    assert_eq!(migrate(&mut c).await.unwrap().to, LATEST);
    assert_eq!(
        pg.psql(
            &db,
            "SELECT id || '=' || coalesce(key, '-') FROM delayq.cold ORDER BY id"
        )
        .unwrap(),
        "keyed=u42\nplain=-"
    );
    let orders = crate::common::q("orders");
    let t = delayq_postgres::Tiered::new(crate::common::redis().await, opts.pool(2).unwrap());
    let page = delayq::Inspect::key_jobs(
        &t,
        &orders,
        &delayq::JobKey::new("u42").unwrap(),
        delayq::KeyJobsRequest {
            state: None,
            limit: 10,
            after: None,
        },
    )
    .await
    .unwrap();
    let ids: Vec<&str> = page.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["keyed"]);
    assert!(page.jobs[0].cold);
}
