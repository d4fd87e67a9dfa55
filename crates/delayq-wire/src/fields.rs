//! The field blocks that several bodies share, each declared once and flattened into them
//! (`#[serde(flatten)]`): what a job carries to its attempts ([`Carried`]), how its attempts
//! run ([`RunOptions`]: an enqueue and a schedule's jobs), the facts of a stored job
//! ([`JobFacts`]: a job as read and as claimed), when a schedule fires ([`ScheduleTiming`])
//! and how a claim leases and waits ([`ClaimPoll`]: one queue's and several queues'). Two rules keep flattening exact: a payload or
//! a result (raw JSON, kept byte for byte) never sits in a flattened block (serde hands a
//! flattened block buffered values, and raw JSON must be read from the document itself), and
//! no flattened block flattens another (a body that refuses unknown fields would then refuse
//! the inner block's fields): a body flattens each block it has side by side.

use delayq::schedule::Timing;
use delayq::{Backoff, Target, TraceContext};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ErrorCode, Invalid};
use crate::jobs::TargetView;

/// What a job carries to every attempt besides its payload: where a pusher sends it, and the
/// trace it continues.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone, PartialEq, Eq)]
pub struct Carried {
    /// Deliver by HTTP: a pusher (`delayq serve --push`) sends the payload to this target at
    /// the due time (`timeout_ms` is then the dispatch deadline: default 30 s, at most 30 min).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetView>,
    /// W3C trace context carried to every attempt (in a request it wins over the request's
    /// `traceparent` header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// W3C `tracestate` that goes with `traceparent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl Carried {
    /// The fields of `target` and `trace`.
    pub fn of(target: Option<Target>, trace: Option<&TraceContext>) -> Self {
        Self {
            target: target.map(Into::into),
            traceparent: trace.map(|t| t.traceparent().to_owned()),
            tracestate: trace.and_then(|t| t.tracestate().map(str::to_owned)),
        }
    }

    /// A request's: its target, and its trace context checked (malformed, or a `tracestate`
    /// alone, is `invalid_trace`).
    pub fn checked(self) -> Result<(Option<Target>, Option<TraceContext>), Invalid> {
        let trace = match (self.traceparent.as_deref(), self.tracestate.as_deref()) {
            (Some(tp), ts) => Some(TraceContext::new(tp, ts)?),
            (None, Some(_)) => {
                return Err(Invalid::new(
                    ErrorCode::InvalidTrace,
                    "tracestate without traceparent",
                ));
            }
            (None, None) => None,
        };
        Ok((self.target.map(Into::into), trace))
    }

    /// An answer's: its target, and its trace context when it parses (tracing never fails a
    /// job).
    pub fn read(self) -> (Option<Target>, Option<TraceContext>) {
        let trace =
            TraceContext::from_headers(self.traceparent.as_deref(), self.tracestate.as_deref());
        (self.target.map(Into::into), trace)
    }
}

/// How the attempts of a job run: what an enqueue sets for its job and a schedule for each
/// job it fires.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
pub struct RunOptions {
    /// Deliveries before dead-lettering (1-10000, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Retry backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Lease length of each attempt, overriding the consumer's (10 ms - 24 h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Longest one attempt may run (10 ms - 24 h): the library's consumer cancels the
    /// handler then and the attempt fails with `timeout`; HTTP consumers read it from the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// The facts of a stored job that a job read (`GET …/jobs/{id}`, listings) and a job claimed
/// both answer.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
pub struct JobFacts {
    /// Deliveries so far (of a claimed job: this delivery's number, 1 for the first).
    pub attempt: u32,
    /// Deliveries allowed.
    pub max_attempts: u32,
    /// Due time, ms since the epoch.
    pub due_at: u64,
    /// Creation time, ms since the epoch.
    pub created_at: u64,
    /// Error of the last failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Longest one attempt may run, ms: a consumer stops the work and nacks with `timeout`
    /// after it (and stops extending the lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// When the job expires unstarted, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Priority among due jobs (0-9, default 5).
    pub priority: u8,
    /// Its key (a tenant, a customer, an upstream host), if it carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// When a schedule fires: `cron` (in `tz`) or every `every_ms`.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
pub struct ScheduleTiming {
    /// Cron expression: 5 fields, or 6 with seconds first (e.g. `*/5 * * * *`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// IANA time zone of `cron` (default `UTC`), e.g. `Europe/Paris`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// Instead of `cron`: a fire every so many ms (at least 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
}

impl ScheduleTiming {
    /// The fields of `timing`.
    pub fn of(timing: Timing) -> Self {
        match timing {
            Timing::Cron { cron, tz } => Self {
                cron: Some(cron),
                tz: Some(tz),
                every_ms: None,
            },
            Timing::Every { every_ms } => Self {
                every_ms: Some(every_ms),
                ..Self::default()
            },
        }
    }

    /// The timing they give: `cron` (+ `tz`, default UTC) or `every_ms`, exactly one of them
    /// (`invalid_schedule` otherwise).
    pub fn timing(self) -> Result<Timing, Invalid> {
        let bad = |m: &str| Invalid::new(ErrorCode::InvalidSchedule, m);
        match (self.cron, self.every_ms, self.tz) {
            (Some(cron), None, tz) => Ok(Timing::Cron {
                cron,
                tz: tz.unwrap_or_else(|| "UTC".into()),
            }),
            (None, Some(every_ms), None) => Ok(Timing::Every { every_ms }),
            (None, Some(_), Some(_)) => Err(bad("tz goes with cron, not every_ms")),
            (Some(_), Some(_), _) => Err(bad("give cron or every_ms, not both")),
            (None, None, _) => Err(bad("cron or every_ms is required")),
        }
    }
}

/// How much a claim leases and how long it waits.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default, Clone)]
pub struct ClaimPoll {
    /// Most jobs to lease (1-1000, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<usize>,
    /// Lease length in ms (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// How long to wait for a due job (0-60000 ms, default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// A name for this long poll (1-64 characters of `[A-Za-z0-9._-]`, unique per client), so
    /// the client can end it early with `DELETE /v1/queues/{q}/polls/{poll_id}` (for a claim
    /// over several queues: on the first of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use crate::{EnqueueRequest, ScheduleBody};

    #[test]
    fn flattened_blocks_take_their_fields_and_unknown_fields_are_refused() {
        let body = r#"{"payload":{"b": 1,  "a":2},"max_attempts":3,"lease_ms":500,
            "target":{"url":"https://example.com/hook"},
            "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","key":"k"}"#;
        let e: EnqueueRequest = serde_json::from_str(body).unwrap();
        assert_eq!((e.run.max_attempts, e.run.lease_ms), (Some(3), Some(500)));
        assert_eq!(
            e.carried.target.as_ref().unwrap().url,
            "https://example.com/hook"
        );
        assert!(e.carried.traceparent.is_some());
        assert_eq!(e.key.as_deref(), Some("k"));
        // The payload is kept byte for byte beside the flattened blocks.
        assert_eq!(e.payload.as_ref().unwrap().get(), r#"{"b": 1,  "a":2}"#);
        // Written back flat: no block's name appears on the wire.
        let v: serde_json::Value = serde_json::to_value(&e).unwrap();
        assert_eq!(v["max_attempts"], 3);
        assert_eq!(v["target"]["url"], "https://example.com/hook");
        assert!(v.get("run").is_none() && v.get("carried").is_none(), "{v}");

        for bad in [
            r#"{"payload":1,"max_atempts":3}"#,
            r#"{"payload":1,"run":{"max_attempts":3}}"#,
        ] {
            let err = serde_json::from_str::<EnqueueRequest>(bad).unwrap_err();
            assert!(err.to_string().contains("unknown field"), "{bad}: {err}");
        }
        let schedule = r#"{"every_ms":60000,"payload":1,"timeout_ms":10,
            "target":{"url":"https://example.com/"}}"#;
        let s: ScheduleBody = serde_json::from_str(schedule).unwrap();
        assert_eq!(s.run.timeout_ms, Some(10));
        assert!(s.carried.target.is_some());
        let err = serde_json::from_str::<ScheduleBody>(r#"{"every_ms":60000,"tarjet":{}}"#);
        assert!(
            err.unwrap_err()
                .to_string()
                .contains("unknown field `tarjet`")
        );
    }
}
