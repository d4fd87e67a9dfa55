//! Formatting of times and jobs for people: stored text (payloads, errors, results — written
//! by handlers and push receivers) is shown with its control characters escaped, so none of
//! it runs in the operator's terminal.

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
        s += &format!("last_error: {}\n", one_line(e));
    }
    if let Some(r) = &j.result {
        s += &format!(
            "result: {}\n",
            one_line(String::from_utf8_lossy(r).trim_end())
        );
    }
    s += &format!(
        "payload: {}",
        escaped(&String::from_utf8_lossy(&j.payload), true)
    );
    s
}

/// Stored text on one line: every control character escaped (`\x1b`, `\r`, `\n`, `\t`).
pub(crate) fn one_line(text: &str) -> String {
    escaped(text, false)
}

/// `text` with its control characters — and the bidirectional overrides that reorder what a
/// terminal shows — escaped as `\xNN` / `\u{NNNN}` (`\r`, `\t`, `\n` by name); newlines kept
/// when `newlines`.
pub(crate) fn escaped(text: &str, newlines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' if newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x100 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control()
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c) =>
            {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// A job as one JSON object, in the HTTP API's shape (`due_at`, `created_at`, … in ms; the
/// payload as JSON when it is JSON, else `payload_b64`), so scripts read one shape from both.
pub(crate) fn job_json(j: &JobInfo) -> serde_json::Value {
    serde_json::to_value(delayq_http::model::JobView::from(j.clone())).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_never_sent_to_the_terminal() {
        assert_eq!(one_line("a\u{1b}]0;X\u{7}b"), "a\\x1b]0;X\\x07b");
        assert_eq!(one_line("x\r\ny\tz"), "x\\r\\ny\\tz");
        assert_eq!(escaped("{\n  \"a\": 1\n}", true), "{\n  \"a\": 1\n}");
        assert_eq!(one_line("\u{202e}evil"), "\\u{202e}evil");
        assert_eq!(one_line("back\\slash é"), "back\\\\slash é");
    }
}
