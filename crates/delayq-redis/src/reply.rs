//! Reading script replies (`redis::Value`) into domain types.

use delayq::{JobId, JobInfo, JobState, Result};
use redis::Value;

use crate::error::shape;

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
/// none) and its record.
pub(crate) fn job_info(id: JobId, state: &str, extra: i64, raw: &[u8]) -> Result<JobInfo> {
    let state = match state {
        "scheduled" => JobState::Scheduled,
        "leased" => JobState::Leased,
        "dead" => JobState::Dead,
        s => return Err(shape(&format!("unknown state {s}"))),
    };
    let r = crate::record::decode(raw)?;
    let extra = (extra >= 0).then_some(extra as u64);
    Ok(JobInfo {
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
        last_error: r.last_error,
        payload: r.payload,
    })
}
