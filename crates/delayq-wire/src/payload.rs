//! Payloads and due times as the API writes them: a payload is `payload` (raw JSON, kept byte
//! for byte) or `payload_b64` (any bytes); a due time is `delay_ms` or `run_at` (ms since the
//! epoch, or RFC 3339 text).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use delayq::Due;
use serde_json::value::RawValue;

use crate::error::{ErrorCode, Invalid};

/// The payload bytes of a request body that gives `payload` or `payload_b64`: exactly one.
pub fn payload_bytes(
    payload: Option<&RawValue>,
    payload_b64: Option<&str>,
) -> Result<Vec<u8>, Invalid> {
    match (payload, payload_b64) {
        (Some(raw), None) => Ok(raw.get().as_bytes().to_vec()),
        (None, Some(b)) => B64
            .decode(b.as_bytes())
            .map_err(|e| Invalid::new(ErrorCode::InvalidPayload, format!("payload_b64: {e}"))),
        (Some(_), Some(_)) => Err(Invalid::new(
            ErrorCode::InvalidPayload,
            "give payload or payload_b64, not both",
        )),
        (None, None) => Err(Invalid::new(
            ErrorCode::InvalidPayload,
            "payload or payload_b64 is required",
        )),
    }
}

/// The result an ack carries (`result`: raw JSON, kept byte for byte; `result_b64`: any
/// bytes; neither: none), at most [`delayq::limits::MAX_RESULT_BYTES`].
pub fn result_bytes(
    result: Option<&RawValue>,
    result_b64: Option<&str>,
) -> Result<Option<Vec<u8>>, Invalid> {
    let bytes = match (result, result_b64) {
        (None, None) => return Ok(None),
        (Some(raw), None) => raw.get().as_bytes().to_vec(),
        (None, Some(b)) => B64
            .decode(b.as_bytes())
            .map_err(|e| Invalid::new(ErrorCode::InvalidBody, format!("result_b64: {e}")))?,
        (Some(_), Some(_)) => {
            return Err(Invalid::new(
                ErrorCode::InvalidBody,
                "give result or result_b64, not both",
            ));
        }
    };
    delayq::limits::check_result(&bytes)?;
    Ok(Some(bytes))
}

/// The bytes of an answer's payload fields (neither: empty).
pub fn answer_bytes(
    payload: Option<&RawValue>,
    payload_b64: Option<&str>,
) -> Result<Vec<u8>, Invalid> {
    match (payload, payload_b64) {
        (None, None) => Ok(Vec::new()),
        (p, b) => payload_bytes(p, b),
    }
}

/// How `bytes` go out: as raw JSON (`payload`) only when that reproduces them exactly, else
/// as base64 (`payload_b64`).
pub fn payload_fields(bytes: Vec<u8>) -> (Option<Box<RawValue>>, Option<String>) {
    let len = bytes.len();
    if let Ok(text) = std::str::from_utf8(&bytes)
        && let Ok(raw) = RawValue::from_string(text.to_owned())
        && raw.get().len() == len
    {
        return (Some(raw), None);
    }
    (None, Some(B64.encode(&bytes)))
}

/// `run_at` as ms since the epoch or RFC 3339 text (`Z` or `±HH:MM`).
pub fn run_at(v: &serde_json::Value) -> Result<Due, Invalid> {
    let bad = |m: String| Invalid::new(ErrorCode::InvalidDelay, m);
    match v {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(ms) => Ok(Due::At(ms)),
            None => Err(bad(format!("run_at {n} must be a whole number of ms >= 0"))),
        },
        serde_json::Value::String(s) => delayq::rfc3339::parse_ms(s)
            .map(Due::At)
            .ok_or_else(|| bad(format!("run_at {s:?} is not RFC 3339"))),
        _ => Err(bad("run_at must be a number of ms or RFC 3339 text".into())),
    }
}

/// The due time of a body with `delay_ms` and `run_at` (neither: now).
pub fn due_of(delay_ms: Option<f64>, run_at: Option<&serde_json::Value>) -> Result<Due, Invalid> {
    match (delay_ms, run_at) {
        (Some(_), Some(_)) => Err(Invalid::new(
            ErrorCode::InvalidDelay,
            "give delay_ms or run_at, not both",
        )),
        (Some(ms), None) => Ok(Due::delay_ms(ms)?),
        (None, Some(at)) => self::run_at(at),
        (None, None) => Ok(Due::Now),
    }
}

/// A due time as the two fields of a request: `(delay_ms, run_at)`.
pub fn due_fields(due: Due) -> (Option<f64>, Option<serde_json::Value>) {
    match due {
        Due::Now => (None, None),
        Due::Delay(d) => (Some(d.as_millis() as f64), None),
        Due::At(ms) => (None, Some(ms.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_go_out_byte_exact() {
        let (p, _) = payload_fields(br#"{"a": 1.50, "b":[1,2]}"#.to_vec());
        assert_eq!(p.unwrap().get(), r#"{"a": 1.50, "b":[1,2]}"#);
        assert_eq!(payload_fields(vec![0xff, 0, 1]).1.as_deref(), Some("/wAB"));
        assert_eq!(
            payload_fields(b"not json".to_vec()).1.as_deref(),
            Some("bm90IGpzb24=")
        );
        assert_eq!(
            payload_fields(b" 1".to_vec()).1.as_deref(),
            Some("IDE="),
            "whitespace would be lost as JSON"
        );
    }

    #[test]
    fn payloads_come_back_as_they_went() {
        for bytes in [
            b"{\"a\": 1.50}".to_vec(),
            vec![0xff, 0, 1],
            Vec::new(),
            b" 1".to_vec(),
        ] {
            let (p, b) = payload_fields(bytes.clone());
            assert_eq!(answer_bytes(p.as_deref(), b.as_deref()).unwrap(), bytes);
        }
    }

    #[test]
    fn due_times_round_trip_through_their_fields() {
        for due in [
            Due::Now,
            Due::Delay(std::time::Duration::from_millis(1500)),
            Due::At(1_800_000_000_000),
        ] {
            let (d, r) = due_fields(due);
            assert_eq!(due_of(d, r.as_ref()).unwrap(), due);
        }
        let e = due_of(Some(1.0), Some(&1.into())).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidDelay);
    }
}
