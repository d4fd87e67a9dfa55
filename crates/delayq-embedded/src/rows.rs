//! Reading and writing `jobs` rows: the state codes (bound as parameters, never written into
//! SQL), the column list, the row type and the small queries every operation shares.

use delayq::{Backoff, Due, Error, JobId, JobInfo, JobState, LeaseRef, Result};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::store::sql;

/// State codes of the `state` column: `JobState::code`, the same codes the Redis scripts use.
pub(crate) const SCHEDULED: i64 = JobState::Scheduled.code() as i64;
pub(crate) const LEASED: i64 = JobState::Leased.code() as i64;
pub(crate) const DEAD: i64 = JobState::Dead.code() as i64;
pub(crate) const DONE: i64 = JobState::Done.code() as i64;
pub(crate) const WAITING: i64 = JobState::Waiting.code() as i64;

/// The claim order of a due job of a queue with priorities in SQL
/// (`delayq::limits::claim_order_key`: its due time less a level per `PRIORITY_AGING`), with
/// the default priority bound to `?{p}` and the aging in ms to `?{p + 1}`.
pub(crate) fn claim_order_sql(p: usize) -> String {
    format!("score - COALESCE(priority, ?{p}) * ?{}", p + 1)
}

/// Every column, in the order [`row`] reads them.
pub(crate) const COLS: &str = "id, state, score, due, created, attempt, max_attempts, \
                               backoff_kind, backoff_base, backoff_cap, lease_ms, token, \
                               last_error, payload, timeout_ms, expires_at, priority, \
                               completed_at, target, trace, result, key, batch";

/// One row of `jobs`.
pub(crate) struct RowData {
    pub id: String,
    pub state: i64,
    pub score: i64,
    pub due: i64,
    pub created: i64,
    pub attempt: i64,
    pub max_attempts: i64,
    pub backoff: Option<Backoff>,
    pub lease_ms: Option<i64>,
    pub token: i64,
    pub last_error: Option<String>,
    pub payload: Vec<u8>,
    pub timeout_ms: Option<i64>,
    pub expires_at: Option<i64>,
    pub priority: Option<i64>,
    pub completed_at: Option<i64>,
    pub target: Option<String>,
    pub trace: Option<String>,
    pub result: Option<Vec<u8>>,
    /// Its key ('' or NULL: none).
    pub key: Option<String>,
    /// Its batch, until it ends (batches.rs).
    pub batch: Option<String>,
}

/// Reads a row selected with [`COLS`].
pub(crate) fn row(r: &Row<'_>) -> rusqlite::Result<RowData> {
    let kind: Option<i64> = r.get(7)?;
    let base: Option<i64> = r.get(8)?;
    let cap: Option<i64> = r.get(9)?;
    Ok(RowData {
        id: r.get(0)?,
        state: r.get(1)?,
        score: r.get(2)?,
        due: r.get(3)?,
        created: r.get(4)?,
        attempt: r.get(5)?,
        max_attempts: r.get(6)?,
        backoff: match (kind, base, cap) {
            (Some(k), Some(b), Some(c)) => Backoff::from_parts(k as u8, b as u64, c as u64),
            _ => None,
        },
        lease_ms: r.get(10)?,
        token: r.get(11)?,
        last_error: r.get(12)?,
        payload: r.get(13)?,
        timeout_ms: r.get(14)?,
        expires_at: r.get(15)?,
        priority: r.get(16)?,
        completed_at: r.get(17)?,
        target: r.get(18)?,
        trace: r.get(19)?,
        result: r.get(20)?,
        key: r.get(21)?,
        batch: r.get(22)?,
    })
}

/// The queue names a `SELECT queue …` lists, in its order (unparsable names skipped).
pub(crate) fn queue_names(c: &Connection, select: &str) -> Result<Vec<delayq::QueueName>> {
    let names: Vec<String> = c
        .prepare_cached(select)
        .map_err(sql)?
        .query_map([], |r| r.get(0))
        .map_err(sql)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql)?;
    Ok(names
        .into_iter()
        .filter_map(|n| delayq::QueueName::new(n).ok())
        .collect())
}

/// The state of a stored code.
pub(crate) fn state(code: i64) -> Result<JobState> {
    JobState::from_code(code).ok_or_else(|| Error::Backend(format!("unknown state code {code}")))
}

pub(crate) fn job_id(id: String) -> Result<JobId> {
    JobId::new(id).map_err(|e| Error::Backend(e.to_string()))
}

impl RowData {
    /// The push target, parsed.
    pub(crate) fn target_value(&self) -> Result<Option<delayq::Target>> {
        self.target
            .as_deref()
            .map(|t| {
                delayq::Target::from_json(t.as_bytes()).map_err(|e| Error::Backend(e.to_string()))
            })
            .transpose()
    }

    /// The trace context, parsed (one that no longer parses is dropped: tracing must never
    /// fail a job).
    pub(crate) fn trace_value(&self) -> Option<delayq::TraceContext> {
        self.trace
            .as_deref()
            .and_then(|t| delayq::TraceContext::from_bytes(t.as_bytes()).ok())
    }

    /// The key, parsed ('' is a keyed queue's job without one; one that no longer parses is
    /// dropped).
    pub(crate) fn key_value(&self) -> Option<delayq::JobKey> {
        self.key
            .as_deref()
            .filter(|k| !k.is_empty())
            .and_then(|k| delayq::JobKey::new(k).ok())
    }

    pub(crate) fn info(self) -> Result<JobInfo> {
        let key = self.key_value();
        let state = state(self.state)?;
        let target = self.target_value()?;
        let trace = self.trace_value();
        Ok(JobInfo {
            id: job_id(self.id)?,
            state,
            attempt: self.attempt as u32,
            max_attempts: self.max_attempts as u32,
            due_at_ms: self.due as u64,
            created_at_ms: self.created as u64,
            lease_deadline_ms: (state == JobState::Leased).then_some(self.score as u64),
            failed_at_ms: (state == JobState::Dead).then_some(self.score as u64),
            completed_at_ms: self.completed_at.map(|t| t as u64),
            last_error: self.last_error,
            timeout_ms: self.timeout_ms.map(|t| t as u64),
            expires_at_ms: self.expires_at.map(|t| t as u64),
            priority: self.priority.map_or(delayq::DEFAULT_PRIORITY, |p| p as u8),
            target,
            trace,
            key,
            payload: self.payload,
            result: self.result,
            dependencies: Vec::new(),
            dependents: Vec::new(),
            cold: false,
        })
    }
}

/// The lowest score of `queue`'s jobs in `state`: the head of that "sorted set".
pub(crate) fn head(c: &Connection, q: &str, state: i64) -> Result<Option<i64>> {
    c.prepare_cached(
        "SELECT score FROM jobs WHERE queue = ?1 AND state = ?2 ORDER BY score LIMIT 1",
    )
    .map_err(sql)?
    .query_row(params![q, state], |r| r.get(0))
    .optional()
    .map_err(sql)
}

/// One job's row.
pub(crate) fn get_row(c: &Connection, q: &str, id: &str) -> Result<Option<RowData>> {
    c.prepare_cached(&format!(
        "SELECT {COLS} FROM jobs WHERE queue = ?1 AND id = ?2"
    ))
    .map_err(sql)?
    .query_row(params![q, id], row)
    .optional()
    .map_err(sql)
}

/// One integer column of a job, `None` when the job does not exist.
fn column(c: &Connection, q: &str, id: &str, col: &str) -> Result<Option<i64>> {
    c.prepare_cached(&format!(
        "SELECT {col} FROM jobs WHERE queue = ?1 AND id = ?2"
    ))
    .map_err(sql)?
    .query_row(params![q, id], |r| r.get(0))
    .optional()
    .map_err(sql)
}

/// The state of a job, `None` when it does not exist.
pub(crate) fn state_of(c: &Connection, q: &str, id: &str) -> Result<Option<i64>> {
    column(c, q, id, "state")
}

/// The due time of a job, `None` when it does not exist.
pub(crate) fn due_of(c: &Connection, q: &str, id: &str) -> Result<Option<i64>> {
    column(c, q, id, "due")
}

/// The row of a job leased under `l`'s token (non-zero exactly while leased); otherwise the
/// refusal, told from the same read: lease lost when the job exists, not found when not.
pub(crate) fn leased_row(c: &Connection, q: &str, l: &LeaseRef) -> Result<RowData> {
    match get_row(c, q, l.id.as_str())? {
        Some(r) if r.state == LEASED && r.token != 0 && r.token as u64 == l.token => Ok(r),
        Some(_) => Err(Error::LeaseLost { id: l.id.clone() }),
        None if cancelled_lease(c, q, l)? => Err(Error::Cancelled { id: l.id.clone() }),
        None => Err(Error::NotFound { id: l.id.clone() }),
    }
}

/// Whether lease `l` was ended by a cancel of its running job (`cancelled_leases`): asked only
/// of a lease whose job is gone.
pub(crate) fn cancelled_lease(c: &Connection, q: &str, l: &LeaseRef) -> Result<bool> {
    c.prepare_cached("SELECT 1 FROM cancelled_leases WHERE queue = ?1 AND id = ?2 AND token = ?3")
        .map_err(sql)?
        .exists(params![q, l.id.as_str(), l.token as i64])
        .map_err(sql)
}

/// The refusal of a lease operation whose token did not match: lost when the job exists, not
/// found when it does not.
pub(crate) fn refused(c: &Connection, q: &str, l: &LeaseRef) -> Result<Error> {
    Ok(match state_of(c, q, l.id.as_str())? {
        Some(_) => Error::LeaseLost { id: l.id.clone() },
        None if cancelled_lease(c, q, l)? => Error::Cancelled { id: l.id.clone() },
        None => Error::NotFound { id: l.id.clone() },
    })
}

/// The due time of a schedule, at `now` on the store's clock (a past time means now).
pub(crate) fn due_from(s: Due, now: i64) -> i64 {
    match s {
        Due::Now => now,
        Due::Delay(d) => now + d.as_millis() as i64,
        Due::At(t) => (t as i64).max(now),
    }
}
