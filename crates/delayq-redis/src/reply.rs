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

pub(crate) fn opt_string(v: Value) -> Result<Option<String>> {
    match v {
        Value::Nil => Ok(None),
        v => Ok(Some(String::from_utf8_lossy(&bytes(v)?).into_owned())),
    }
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

/// A job reply of `get.lua` / `dead_list.lua`:
/// `{ id, state, attempt, max_attempts, due, created, extra, last_error, payload }`.
pub(crate) fn job_info(v: Value) -> Result<JobInfo> {
    let a = array(v)?;
    let [id, state, attempt, max, due, created, extra, err, payload]: [Value; 9] = a
        .try_into()
        .map_err(|_| shape("job info of 9 fields expected"))?;
    let state = match string(state)?.as_str() {
        "scheduled" => JobState::Scheduled,
        "leased" => JobState::Leased,
        "dead" => JobState::Dead,
        s => return Err(shape(&format!("unknown state {s}"))),
    };
    let extra = int(&extra)?;
    let extra = (extra >= 0).then_some(extra as u64);
    Ok(JobInfo {
        id: job_id(id)?,
        state,
        attempt: int(&attempt)? as u32,
        max_attempts: int(&max)? as u32,
        due_at_ms: int(&due)? as u64,
        created_at_ms: int(&created)? as u64,
        lease_deadline_ms: if state == JobState::Leased {
            extra
        } else {
            None
        },
        failed_at_ms: if state == JobState::Dead { extra } else { None },
        last_error: opt_string(err)?,
        payload: bytes(payload)?,
    })
}
