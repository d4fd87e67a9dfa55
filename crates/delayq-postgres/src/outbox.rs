//! The outbox: a row `delayq.enqueue` wrote in an application's transaction, and the job it
//! becomes. A row reads as the body of an HTTP enqueue (`delayq_wire::EnqueueRequest`: its
//! options, then its id, payload and due time), so it is checked by the same rules, once.

use std::collections::BTreeMap;

use delayq::{NewJob, QueueName, Retention};
use delayq_wire::EnqueueRequest;

/// Takes the oldest committed rows no other relay holds (`$1`: how many) by deleting them:
/// the delete commits with the batch (the store has its jobs by then) or rolls back with it
/// (a relay killed, the store unreachable), and until then other relays skip the rows.
/// `due_at` is rounded up to the ms (a job never runs before the time it was given).
pub(crate) const TAKE: &str = "DELETE FROM delayq.outbox WHERE seq IN \
     (SELECT seq FROM delayq.outbox ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED) \
     RETURNING seq, queue, id, payload::text, \
     ceil(extract(epoch FROM due_at) * 1000)::int8, options::text, \
     due_at::text, enqueued_at::text";

/// Puts back a row taken but left for a later batch (`$1`…`$7`: seq, queue, id, payload,
/// options, due_at and enqueued_at as taken).
pub(crate) const PUT_BACK: &str = "INSERT INTO delayq.outbox \
     (seq, queue, id, payload, options, due_at, enqueued_at) \
     VALUES ($1, $2, $3, $4::text::jsonb, $5::text::jsonb, $6::text::timestamptz, $7::text::timestamptz)";

/// Keeps a row the store refused in `delayq.rejected` (`$1`…`$7` as [`PUT_BACK`], `$8` the
/// reason).
pub(crate) const REJECT: &str = "INSERT INTO delayq.rejected \
     (seq, queue, id, payload, options, due_at, enqueued_at, error) \
     VALUES ($1, $2, $3, $4::text::jsonb, $5::text::jsonb, $6::text::timestamptz, $7::text::timestamptz, $8)";

/// How long the id of a relayed job due soon stays refused after it ends, at least: a relay
/// that wrote a job to the store but did not get to delete its row (killed, its connection
/// lost) leaves the row to be relayed again — within a second by another relay, or once
/// PostgreSQL is back — and by then a job that was due may have run and ended. Jobs due later
/// than this after their relay are still in the store when the row is relayed again (the id
/// refuses it) and pay nothing.
pub const REPLAY_GUARD_MS: u64 = 5 * 60 * 1000;

/// One committed row of `delayq.outbox`.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    /// Its place in commit order (a `bigserial`).
    pub seq: i64,
    /// The queue.
    pub queue: String,
    /// The job id.
    pub id: String,
    /// The payload as PostgreSQL writes the `jsonb` (`None`: SQL NULL, an empty payload).
    pub payload: Option<String>,
    /// Due time, ms since the epoch.
    pub due_at_ms: i64,
    /// The options object's text.
    pub options: String,
    /// `due_at` and `enqueued_at` as PostgreSQL wrote them (put back as they were).
    pub(crate) stamps: (String, String),
}

impl OutboxRow {
    /// A row as [`TAKE`] returns it.
    pub(crate) fn from_row(r: &tokio_postgres::Row) -> Self {
        Self {
            seq: r.get(0),
            queue: r.get(1),
            id: r.get(2),
            payload: r.get(3),
            due_at_ms: r.get(4),
            options: r.get(5),
            stamps: (r.get(6), r.get(7)),
        }
    }

    /// Runs `sql` ([`PUT_BACK`] or [`REJECT`]) with this row's columns and `extra`.
    pub(crate) async fn write(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        sql: &str,
        extra: Option<&str>,
    ) -> Result<(), tokio_postgres::Error> {
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            &self.seq,
            &self.queue,
            &self.id,
            &self.payload,
            &self.options,
            &self.stamps.0,
            &self.stamps.1,
        ];
        if let Some(e) = &extra {
            params.push(e);
        }
        tx.execute(sql, &params).await.map(drop)
    }

    /// The job it enqueues, or why it cannot be one (the text `delayq.rejected` keeps).
    pub fn job(&self) -> Result<(QueueName, NewJob), String> {
        let queue = QueueName::new(self.queue.clone()).map_err(|e| e.to_string())?;
        let mut body: BTreeMap<String, serde_json::Value> = serde_json::from_str(&self.options)
            .map_err(|e| format!("options are not a JSON object: {e}"))?;
        body.insert("id".into(), self.id.clone().into());
        body.insert("run_at".into(), self.due_at_ms.max(0).into());
        let mut text = serde_json::to_string(&body).map_err(|e| e.to_string())?;
        match &self.payload {
            // The payload is kept as written (raw JSON), so it goes in as text.
            Some(p) => text = format!("{{\"payload\":{p},{}", &text[1..]),
            // SQL NULL: an empty payload.
            None => text = format!("{{\"payload_b64\":\"\",{}", &text[1..]),
        }
        let req: EnqueueRequest = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let job = req.into_job(&queue).map_err(|e| e.message)?;
        Ok((queue, job))
    }
}

/// Gives `job`, relayed at `now_ms`, the [`REPLAY_GUARD_MS`] dedupe window when it is due
/// within it (keeping the queue's `retention`, or its own, where longer).
pub(crate) fn guard(job: &mut NewJob, queue_retention: Retention, now_ms: u64) {
    let due = match job.due {
        delayq::Due::At(ms) => ms,
        delayq::Due::Now => now_ms,
        delayq::Due::Delay(d) => now_ms + d.as_millis() as u64,
    };
    if due > now_ms + REPLAY_GUARD_MS {
        return;
    }
    let own = job.retention.unwrap_or(queue_retention);
    if own.dedupe_ms >= REPLAY_GUARD_MS {
        return;
    }
    job.retention = Some(Retention {
        keep_done_ms: own.keep_done_ms,
        dedupe_ms: REPLAY_GUARD_MS,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(payload: Option<&str>, options: &str) -> OutboxRow {
        OutboxRow {
            seq: 1,
            queue: "orders".into(),
            id: "cancel-42".into(),
            payload: payload.map(str::to_owned),
            due_at_ms: 1_900_000_000_000,
            options: options.into(),
            stamps: (String::new(), String::new()),
        }
    }

    #[test]
    fn a_row_reads_as_an_enqueue_body() {
        let (q, job) = row(
            Some(r#"{"order": 42}"#),
            r#"{"max_attempts": 3, "key": "user-7", "priority": 8}"#,
        )
        .job()
        .unwrap();
        assert_eq!(q.as_str(), "orders");
        assert_eq!(job.id.as_ref().unwrap().as_str(), "cancel-42");
        assert_eq!(job.payload, br#"{"order": 42}"#);
        assert_eq!(job.due, delayq::Due::At(1_900_000_000_000));
        assert_eq!(job.max_attempts, Some(3));
        assert_eq!(job.priority, Some(8));
        assert_eq!(job.key.as_ref().map(|k| k.as_str()), Some("user-7"));
        let (_, empty) = row(None, "{}").job().unwrap();
        assert!(empty.payload.is_empty());
    }

    #[test]
    fn a_bad_option_value_says_which() {
        let e = row(None, r#"{"max_attempts": "three"}"#).job().unwrap_err();
        assert!(
            e.contains("max_attempts") || e.contains("invalid type"),
            "{e}"
        );
        let e = row(None, r#"{"priority": 12}"#).job();
        // Limits are the producer's: the row parses, the store's producer refuses it.
        assert!(e.is_ok() || e.unwrap_err().contains("priority"));
        let e = row(None, r#"{"colour": "red"}"#).job().unwrap_err();
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn only_jobs_due_within_the_guard_get_its_dedupe_window() {
        let now = 1_000_000;
        let mut soon = NewJob::new("x").due(delayq::Due::At(now + 1_000));
        guard(&mut soon, Retention::default(), now);
        assert_eq!(soon.retention.unwrap().dedupe_ms, REPLAY_GUARD_MS);
        let mut kept = NewJob::new("x").due(delayq::Due::Now);
        let queue = Retention {
            keep_done_ms: 60_000,
            dedupe_ms: 0,
        };
        guard(&mut kept, queue, now);
        assert_eq!(
            kept.retention.unwrap(),
            Retention {
                keep_done_ms: 60_000,
                dedupe_ms: REPLAY_GUARD_MS
            }
        );
        let mut later = NewJob::new("x").due(delayq::Due::At(now + REPLAY_GUARD_MS + 1));
        guard(&mut later, Retention::default(), now);
        assert!(later.retention.is_none());
        let mut long = NewJob::new("x").due(delayq::Due::Now);
        long.retention = Some(Retention {
            keep_done_ms: 0,
            dedupe_ms: 10 * REPLAY_GUARD_MS,
        });
        guard(&mut long, Retention::default(), now);
        assert_eq!(long.retention.unwrap().dedupe_ms, 10 * REPLAY_GUARD_MS);
    }
}
