//! Queues' delivery on the embedded store (the `push_queues` table): which queues HTTP
//! pushers deliver, and each one's default target.

use delayq::{DeliveryMode, DeliveryRule, Error, QueueName, Result, Target};
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::sql;

/// Stores the queue's delivery and default target (`None` removes it).
pub(crate) fn set(
    c: &Connection,
    q: &str,
    delivery: DeliveryMode,
    target: Option<&Target>,
) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO push_queues (queue, target, delivery) VALUES (?1, ?2, ?3) \
         ON CONFLICT (queue) DO UPDATE SET target = excluded.target, \
         delivery = excluded.delivery",
    )
    .map_err(sql)?
    .execute(params![q, target.map(Target::to_json), delivery.as_str()])
    .map_err(sql)?;
    Ok(())
}

/// The queue's delivery and default target.
pub(crate) fn settings(c: &Connection, q: &str) -> Result<(DeliveryMode, Option<Target>)> {
    let row: Option<(Option<String>, Option<String>)> = c
        .prepare_cached("SELECT delivery, target FROM push_queues WHERE queue = ?1")
        .map_err(sql)?
        .query_row(params![q], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(sql)?;
    let Some((delivery, target)) = row else {
        return Ok((DeliveryMode::Pull, None));
    };
    let target = target
        .map(|t| Target::from_json(t.as_bytes()).map_err(|e| Error::Backend(e.to_string())))
        .transpose()?;
    let delivery = DeliveryMode::stored(delivery.as_deref(), target.is_some())?;
    Ok((delivery, target))
}

/// What an enqueue on `q` checks its jobs' targets against.
pub(crate) fn delivery(c: &Connection, q: &str) -> Result<DeliveryRule> {
    let (mode, target) = settings(c, q)?;
    Ok(DeliveryRule {
        mode,
        default_target: target.is_some(),
    })
}

/// Every push queue, by name.
pub(crate) fn queues(c: &Connection) -> Result<Vec<QueueName>> {
    crate::rows::queue_names(
        c,
        "SELECT queue FROM push_queues WHERE delivery = 'push' ORDER BY queue",
    )
}
