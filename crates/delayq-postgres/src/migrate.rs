//! The `delayq` schema's versions: each migration is a SQL file applied once, in order, in one
//! transaction that holds an advisory lock (so processes starting together migrate once), and
//! recorded in `delayq.schema_version`. A database whose schema is newer than this build's is
//! refused: an older delayq must not write tables it does not know.

use tokio_postgres::Client;

use crate::Error;

/// The migrations, in order: version, SQL.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../sql/0001_outbox.sql")),
    (2, include_str!("../sql/0002_cold.sql")),
    (3, include_str!("../sql/0003_cold_keys.sql")),
];

/// The newest schema version this build knows.
pub const LATEST: i32 = MIGRATIONS[MIGRATIONS.len() - 1].0;

/// The advisory lock every migration holds (an arbitrary constant: "dlyq").
const LOCK: i64 = 0x646c_7971;

/// What a migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The version found (0: no schema).
    pub from: i32,
    /// The version now.
    pub to: i32,
}

/// Creates or updates the `delayq` schema to [`LATEST`]; refuses a newer one.
pub async fn migrate(client: &mut Client) -> Result<Migrated, Error> {
    migrate_to(client, LATEST).await
}

/// Migrates to `target` (the tests start from an older version).
#[doc(hidden)]
pub async fn migrate_to(client: &mut Client, target: i32) -> Result<Migrated, Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await?;
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS delayq;
         CREATE TABLE IF NOT EXISTS delayq.schema_version (
             version    integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         );",
    )
    .await?;
    let from: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM delayq.schema_version",
            &[],
        )
        .await?
        .get(0);
    if from > LATEST {
        return Err(Error::NewerSchema {
            found: from,
            known: LATEST,
        });
    }
    for (version, sql) in MIGRATIONS {
        if *version <= from || *version > target {
            continue;
        }
        tx.batch_execute(sql).await?;
        tx.execute(
            "INSERT INTO delayq.schema_version (version) VALUES ($1)",
            &[version],
        )
        .await?;
        tracing::info!("postgres: delayq schema migrated to version {version}");
    }
    tx.commit().await?;
    Ok(Migrated {
        from,
        to: from.max(target.min(LATEST)),
    })
}

/// The schema's version (0: none), refusing one newer than this build's.
pub async fn schema_version(client: &Client) -> Result<i32, Error> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('delayq.schema_version') IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: i32 = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM delayq.schema_version",
            &[],
        )
        .await?
        .get(0);
    if v > LATEST {
        return Err(Error::NewerSchema {
            found: v,
            known: LATEST,
        });
    }
    Ok(v)
}
