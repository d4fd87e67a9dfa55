//! Reading script replies (`redis::Value`) into domain types, and [`Reply`]: the one set of
//! outcome codes every script returns (the Lua prelude defines them from this enum).

use delayq::{Error, JobId, JobInfo, JobState, Result};
use redis::Value;

use crate::error::shape;

/// An outcome code of a script. The Lua prelude defines `R_<NAME>` for each (see
/// [`crate::scripts`]); a test checks that every `R_…` a script uses is one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i64)]
pub(crate) enum Reply {
    /// The transition happened (acked, cancelled, extended, rescheduled, requeued, created).
    Ok = 1,
    /// Nack: the job is scheduled for a retry.
    Retry = 2,
    /// Nack: the job was dead-lettered.
    Buried = 3,
    /// Enqueue: the id exists; nothing was written.
    Exists = 4,
    /// Enqueue with replace: the existing scheduled job was replaced.
    Replaced = 5,
    /// No such job; nothing changed.
    Missing = -1,
    /// The job exists but the token is not its current lease; nothing changed.
    LeaseLost = -2,
    /// Refused: the job is scheduled.
    Scheduled = -3,
    /// Refused: the job is leased.
    Leased = -4,
    /// Refused: the job is dead.
    Dead = -5,
    /// Refused: the job is done and kept (enqueue inside its dedupe window).
    Done = -6,
    /// Refused: the batch is closed (no job joins it).
    Closed = -7,
    /// Cancel with `running`: the leased job was ended cancelled.
    Cancelling = 6,
    /// Refused: the lease was cancelled while its job ran.
    Cancelled = -8,
}

impl Reply {
    /// Every code, with the name the Lua prelude gives it.
    pub(crate) const ALL: [(Reply, &'static str); 14] = [
        (Reply::Ok, "R_OK"),
        (Reply::Retry, "R_RETRY"),
        (Reply::Buried, "R_BURIED"),
        (Reply::Exists, "R_EXISTS"),
        (Reply::Replaced, "R_REPLACED"),
        (Reply::Missing, "R_MISSING"),
        (Reply::LeaseLost, "R_LOST"),
        (Reply::Scheduled, "R_SCHEDULED"),
        (Reply::Leased, "R_LEASED"),
        (Reply::Dead, "R_DEAD"),
        (Reply::Done, "R_DONE"),
        (Reply::Closed, "R_CLOSED"),
        (Reply::Cancelling, "R_CANCELLING"),
        (Reply::Cancelled, "R_CANCELLED"),
    ];

    /// The refusal this code means for `id`, when the operation needed `expected`.
    pub(crate) fn refusal(self, id: &JobId, expected: JobState) -> Error {
        let wrong = |state| Error::WrongState {
            id: id.clone(),
            state,
            expected,
        };
        match self {
            Reply::LeaseLost => Error::LeaseLost { id: id.clone() },
            Reply::Cancelled => Error::Cancelled { id: id.clone() },
            Reply::Scheduled => wrong(JobState::Scheduled),
            Reply::Leased => wrong(JobState::Leased),
            Reply::Dead => wrong(JobState::Dead),
            Reply::Done => wrong(JobState::Done),
            Reply::Missing => Error::NotFound { id: id.clone() },
            other => shape(&format!("{other:?} is not a refusal")),
        }
    }
}

impl TryFrom<i64> for Reply {
    type Error = Error;

    fn try_from(code: i64) -> Result<Self> {
        Self::ALL
            .iter()
            .map(|(r, _)| *r)
            .find(|r| *r as i64 == code)
            .ok_or_else(|| shape(&format!("unknown reply code {code}")))
    }
}

/// The [`Reply`] in `v`.
pub(crate) fn reply(v: &Value) -> Result<Reply> {
    Reply::try_from(int(v)?)
}

/// The state a store code names.
pub(crate) fn state(code: i64) -> Result<JobState> {
    JobState::from_code(code).ok_or_else(|| shape(&format!("unknown state code {code}")))
}

pub(crate) fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| shape("integer expected")),
        _ => Err(shape("integer expected")),
    }
}

pub(crate) fn bytes(v: Value) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::Nil => Ok(Vec::new()),
        _ => Err(shape("bytes expected")),
    }
}

pub(crate) fn string(v: Value) -> Result<String> {
    String::from_utf8(bytes(v)?).map_err(|_| shape("UTF-8 expected"))
}

pub(crate) fn array(v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Array(a) => Ok(a),
        Value::Nil => Ok(Vec::new()),
        _ => Err(shape("array expected")),
    }
}

pub(crate) fn job_id(v: Value) -> Result<JobId> {
    JobId::new(string(v)?).map_err(|e| shape(&e.to_string()))
}

/// A job from its state, the score that goes with it (lease deadline or failed-at, -1 for
/// none) and its record; with the record's lease token.
pub(crate) fn job_info(
    id: JobId,
    state: JobState,
    extra: i64,
    raw: &[u8],
) -> Result<(JobInfo, u64)> {
    job_info_deps(id, state, extra, raw).map(|(i, t, _)| (i, t))
}

/// A job that waits for others: its failure policy's code and whether it wants their
/// results (record extra X_DEPS).
pub(crate) type DepsFlags = Option<(u8, bool)>;

/// [`job_info`], and whether the job waits (or waited) for others ([`DepsFlags`]).
pub(crate) fn job_info_deps(
    id: JobId,
    state: JobState,
    extra: i64,
    raw: &[u8],
) -> Result<(JobInfo, u64, DepsFlags)> {
    let r = crate::record::decode(raw)?;
    let deps = r.deps;
    let extra = (extra >= 0).then_some(extra as u64);
    let expires_at_ms = r.expires_at_ms();
    let target = r.target_value()?;
    let trace = r.trace_value();
    let key = r.key_value();
    let info = JobInfo {
        id,
        state,
        attempt: r.attempt,
        max_attempts: r.max_attempts,
        due_at_ms: r.due_ms,
        created_at_ms: r.created_ms,
        lease_deadline_ms: if state == JobState::Leased {
            extra
        } else {
            None
        },
        failed_at_ms: if state == JobState::Dead { extra } else { None },
        completed_at_ms: r.done.map(|(at, _)| at),
        last_error: r.last_error,
        timeout_ms: r.timeout_ms.map(u64::from),
        expires_at_ms,
        priority: r.priority.unwrap_or(delayq::DEFAULT_PRIORITY),
        target,
        trace,
        key,
        payload: r.payload,
        result: r.result,
        dependencies: Vec::new(),
        dependents: Vec::new(),
        cold: false,
    };
    Ok((info, r.token, deps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_both_ways_and_is_unique() {
        let mut codes = std::collections::HashSet::new();
        for (r, name) in Reply::ALL {
            assert!(codes.insert(r as i64), "{name} twice");
            assert_eq!(Reply::try_from(r as i64).unwrap(), r);
            assert!(name.starts_with("R_"));
        }
        assert!(Reply::try_from(99).is_err());
        assert!(
            Reply::Ok
                .refusal(&JobId::new("x").unwrap(), JobState::Dead)
                .to_string()
                .contains("unexpected")
        );
    }
}
