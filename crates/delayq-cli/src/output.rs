//! Formatting of times and jobs for people.

use std::time::{Duration, UNIX_EPOCH};

use delayq::JobInfo;

/// ms since the epoch as RFC 3339 UTC with milliseconds.
pub(crate) fn format_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// A job as `key: value` lines.
pub(crate) fn job_text(j: &JobInfo) -> String {
    let mut s = format!(
        "id: {}\nstate: {}\nattempt: {}/{}\ndue_at: {}\ncreated_at: {}\n",
        j.id,
        j.state,
        j.attempt,
        j.max_attempts,
        format_ms(j.due_at_ms),
        format_ms(j.created_at_ms)
    );
    if let Some(d) = j.lease_deadline_ms {
        s += &format!("lease_deadline: {}\n", format_ms(d));
    }
    if let Some(d) = j.failed_at_ms {
        s += &format!("failed_at: {}\n", format_ms(d));
    }
    if let Some(d) = j.completed_at_ms {
        s += &format!("completed_at: {}\n", format_ms(d));
    }
    if let Some(k) = &j.key {
        s += &format!("key: {k}\n");
    }
    if let Some(e) = &j.last_error {
        s += &format!("last_error: {e}\n");
    }
    if let Some(r) = &j.result {
        s += &format!("result: {}\n", String::from_utf8_lossy(r).trim_end());
    }
    s += &format!("payload: {}", String::from_utf8_lossy(&j.payload));
    s
}

/// A job as one JSON object, in the HTTP API's shape (`due_at`, `created_at`, … in ms; the
/// payload as JSON when it is JSON, else `payload_b64`), so scripts read one shape from both.
pub(crate) fn job_json(j: &JobInfo) -> serde_json::Value {
    serde_json::to_value(delayq_http::model::JobView::from(j.clone())).unwrap_or_default()
}
