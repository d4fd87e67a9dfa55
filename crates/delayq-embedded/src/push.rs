//! Push queues on the embedded store (the `push_queues` table): which queues HTTP pushers
//! deliver, and each one's default target.

use delayq::{Error, QueueName, Result, Target};
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::sql;

/// Lists `q` among the push queues (in the transaction that writes its targeted job).
pub(crate) fn mark(c: &Connection, q: &str) -> Result<()> {
    c.prepare_cached("INSERT OR IGNORE INTO push_queues (queue) VALUES (?1)")
        .map_err(sql)?
        .execute(params![q])
        .map_err(sql)?;
    Ok(())
}

/// Stores the queue's default target (`None` removes it; the queue stays a push queue, its
/// targeted jobs still need a pusher).
pub(crate) fn set_target(c: &Connection, q: &str, target: Option<&Target>) -> Result<()> {
    match target {
        Some(t) => c
            .prepare_cached(
                "INSERT INTO push_queues (queue, target) VALUES (?1, ?2) \
                 ON CONFLICT (queue) DO UPDATE SET target = excluded.target",
            )
            .map_err(sql)?
            .execute(params![q, t.to_json()]),
        None => c
            .prepare_cached("UPDATE push_queues SET target = NULL WHERE queue = ?1")
            .map_err(sql)?
            .execute(params![q]),
    }
    .map_err(sql)?;
    Ok(())
}

/// The queue's default target.
pub(crate) fn target(c: &Connection, q: &str) -> Result<Option<Target>> {
    let t: Option<Option<String>> = c
        .prepare_cached("SELECT target FROM push_queues WHERE queue = ?1")
        .map_err(sql)?
        .query_row(params![q], |r| r.get(0))
        .optional()
        .map_err(sql)?;
    t.flatten()
        .map(|t| Target::from_json(t.as_bytes()).map_err(|e| Error::Backend(e.to_string())))
        .transpose()
}

/// Every push queue, by name.
pub(crate) fn queues(c: &Connection) -> Result<Vec<QueueName>> {
    crate::rows::queue_names(c, "SELECT queue FROM push_queues ORDER BY queue")
}
