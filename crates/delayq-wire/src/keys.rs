//! A queue's keys over HTTP: holding one key (`POST /v1/queues/{q}/keys/{key}/pause`, an
//! upstream's `Retry-After`), lifting the hold (`…/resume`), and the busiest keys
//! (`GET /v1/queues/{q}/keys`), and every job of one key (`GET …/keys/{key}/jobs`,
//! `POST …/keys/{key}/cancel`, `POST …/keys/{key}/reschedule`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ErrorCode, Invalid};

/// A hold on one key: `until` (ms since the epoch or RFC 3339) or `for_ms`.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct KeyPauseRequest {
    /// When the hold ends: ms since the epoch, or RFC 3339 text.
    #[schema(value_type = Option<crate::schema::TimeSchema>, example = "2026-12-03T12:00:00Z")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<serde_json::Value>,
    /// How long the hold lasts from now, ms (the store's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_ms: Option<u64>,
}

impl KeyPauseRequest {
    /// The hold asked for: exactly one of `until` and `for_ms`, at most 10 years away.
    pub fn hold(&self) -> Result<delayq::KeyHold, Invalid> {
        let max = delayq::limits::MAX_DELAY;
        match (&self.until, self.for_ms) {
            (Some(at), None) => match crate::payload::run_at(at)? {
                delayq::Due::At(ms) => Ok(delayq::KeyHold::Until(ms)),
                _ => Err(Invalid::new(ErrorCode::InvalidDelay, "until: a time")),
            },
            (None, Some(ms)) if Duration::from_millis(ms) <= max => {
                Ok(delayq::KeyHold::For(Duration::from_millis(ms)))
            }
            (None, Some(ms)) => Err(Invalid::new(
                ErrorCode::InvalidDelay,
                format!("for_ms {ms} is over the 10-year limit"),
            )),
            _ => Err(Invalid::new(
                ErrorCode::InvalidDelay,
                "give until (ms or RFC 3339) or for_ms, one of them",
            )),
        }
    }
}

/// One key's hold after a pause or resume.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct KeyHoldView {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
    /// When the hold ends (ms since the epoch); `null`: not held.
    pub paused_until: Option<u64>,
}

/// One key of a queue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    /// The key.
    pub key: String,
    /// Its jobs leased now.
    pub in_flight: u64,
    /// Its due jobs (on Redis: those waiting on the key's limits or hold, and those among the
    /// first 1,000 due of each shard).
    pub due: u64,
    /// When its hold ends (ms since the epoch); absent: not held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<u64>,
}

/// The busiest keys of a queue.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
pub struct KeyList {
    /// The queue.
    pub queue: String,
    /// Busiest first: most in flight and due, then held.
    pub keys: Vec<KeyView>,
}

/// `?limit=` of the key listing.
#[derive(Deserialize, Serialize, IntoParams, Debug, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KeyQuery {
    /// Most keys (1-1000, default 20).
    pub limit: Option<usize>,
}

/// Query of `GET /v1/queues/{q}/keys/{key}/jobs`.
#[derive(Deserialize, Serialize, IntoParams, Debug, Default)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KeyJobsQuery {
    /// Only jobs in this state: `scheduled`, `due`, `leased` or `dead` (default: all four).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// At most this many (1-1000, default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `POST /v1/queues/{q}/keys/{key}/cancel`: which of the key's jobs go.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct KeyCancelRequest {
    /// Its running jobs too: each ended cancelled at once and its worker told to stop the
    /// handler, as `DELETE …/jobs/{id}?running=true` does. Without it they run on.
    #[serde(default)]
    pub running: bool,
}

/// What a key's cancel did.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct KeyCancelView {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
    /// Jobs cancelled: scheduled, due and (with `running`) running ones.
    pub cancelled: u64,
    /// Of those, the ones that were running (their workers are told to stop).
    pub running: u64,
}

/// `POST /v1/queues/{q}/keys/{key}/reschedule`: `shift_ms` (each job by that much from its
/// own due time; negative: earlier, never before now) or `due_at` (all to one time).
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct KeyRescheduleRequest {
    /// Move each job by this many ms (negative: earlier).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift_ms: Option<i64>,
    /// Move every job to this time: ms since the epoch, or RFC 3339 text.
    #[schema(value_type = Option<crate::schema::TimeSchema>, example = "2026-12-03T12:00:00Z")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at: Option<serde_json::Value>,
}

impl KeyRescheduleRequest {
    /// The move asked for: exactly one of `shift_ms` and `due_at`, within 10 years.
    pub fn to_move(&self) -> Result<delayq::KeyMove, Invalid> {
        let m = match (self.shift_ms, &self.due_at) {
            (Some(ms), None) => delayq::KeyMove::Shift(ms),
            (None, Some(at)) => match crate::payload::run_at(at)
                .map_err(|e| Invalid::new(e.code, e.message.replace("run_at", "due_at")))?
            {
                delayq::Due::At(ms) => delayq::KeyMove::To(ms),
                _ => return Err(Invalid::new(ErrorCode::InvalidDelay, "due_at: a time")),
            },
            _ => {
                return Err(Invalid::new(
                    ErrorCode::InvalidDelay,
                    "give shift_ms or due_at (ms or RFC 3339), one of them",
                ));
            }
        };
        m.check()
            .map_err(|e| Invalid::new(ErrorCode::InvalidDelay, e.to_string()))?;
        Ok(m)
    }

    /// The body of a move.
    pub fn new(to: delayq::KeyMove) -> Self {
        match to {
            delayq::KeyMove::Shift(ms) => Self {
                shift_ms: Some(ms),
                due_at: None,
            },
            delayq::KeyMove::To(at) => Self {
                shift_ms: None,
                due_at: Some(serde_json::Value::from(at)),
            },
        }
    }
}

/// What a key's reschedule did.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq, Eq)]
pub struct KeyRescheduleView {
    /// The queue.
    pub queue: String,
    /// The key.
    pub key: String,
    /// Jobs moved (scheduled and due ones; running and dead jobs stay).
    pub rescheduled: u64,
}

impl From<delayq::KeyStats> for KeyView {
    fn from(k: delayq::KeyStats) -> Self {
        Self {
            key: k.key.to_string(),
            in_flight: k.in_flight,
            due: k.due,
            paused_until: k.paused_until_ms,
        }
    }
}

impl TryFrom<KeyView> for delayq::KeyStats {
    type Error = Invalid;

    fn try_from(k: KeyView) -> Result<Self, Invalid> {
        Ok(Self {
            key: delayq::JobKey::new(k.key)?,
            in_flight: k.in_flight,
            due: k.due,
            paused_until_ms: k.paused_until,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_parse_from_either_field_and_nothing_else() {
        let r = |v: serde_json::Value| serde_json::from_value::<KeyPauseRequest>(v).unwrap();
        assert_eq!(
            r(serde_json::json!({"for_ms": 1500})).hold().unwrap(),
            delayq::KeyHold::For(Duration::from_millis(1500))
        );
        assert_eq!(
            r(serde_json::json!({"until": 1_800_000_000_000u64}))
                .hold()
                .unwrap(),
            delayq::KeyHold::Until(1_800_000_000_000)
        );
        assert_eq!(
            r(serde_json::json!({"until": "2027-01-15T08:00:00Z"}))
                .hold()
                .unwrap(),
            delayq::KeyHold::Until(1_800_000_000_000),
            "the same instant as RFC 3339"
        );
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"for_ms": 5, "until": 5}),
            serde_json::json!({"until": "tomorrow"}),
            serde_json::json!({"for_ms": 400_000_000_000u64}),
        ] {
            let e = r(bad.clone()).hold().unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidDelay, "{bad}");
        }
        assert!(serde_json::from_value::<KeyPauseRequest>(serde_json::json!({"for": 5})).is_err());
    }
}
