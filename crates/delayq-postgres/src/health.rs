//! What `delayq doctor` reads of the PostgreSQL companion: the server, the schema's version,
//! the outbox's backlog and the rows the store refused.

use crate::{Error, PgOptions};

/// The companion's state as one look finds it.
#[derive(Debug, Clone)]
pub struct Health {
    /// `server_version` of PostgreSQL.
    pub server_version: String,
    /// The `delayq` schema's version (0: none yet).
    pub schema: i32,
    /// Committed rows not relayed yet.
    pub outbox: i64,
    /// How long the oldest of them has waited, ms.
    pub oldest_ms: Option<i64>,
    /// Rows the store refused (`delayq.rejected`).
    pub rejected: i64,
}

/// Looks (reads only).
pub async fn health(pg: &PgOptions) -> Result<Health, Error> {
    let client = pg.connect(None).await?;
    let server_version: String = client.query_one("SHOW server_version", &[]).await?.get(0);
    let schema = crate::schema_version(&client).await?;
    if schema == 0 {
        return Ok(Health {
            server_version,
            schema,
            outbox: 0,
            oldest_ms: None,
            rejected: 0,
        });
    }
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM delayq.outbox),
                    (SELECT (extract(epoch FROM now() - min(enqueued_at)) * 1000)::int8
                       FROM delayq.outbox),
                    (SELECT count(*) FROM delayq.rejected)",
            &[],
        )
        .await?;
    Ok(Health {
        server_version,
        schema,
        outbox: row.get(0),
        oldest_ms: row.get(1),
        rejected: row.get(2),
    })
}
