//! Cron and interval schedules on the wire: `PUT / GET / DELETE /v1/queues/{q}/schedules/{name}`
//! and the list of a queue's schedules (see `delayq::schedule`).

use delayq::schedule::{CatchUp, ScheduleInfo, ScheduleSpec};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::error::Invalid;
use crate::fields::{Carried, RunOptions, ScheduleTiming};
use crate::payload::{answer_bytes, payload_bytes, payload_fields};

/// A schedule to store: `cron` (+ `tz`) or `every_ms`, and the job each fire enqueues.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// `cron` (+ `tz`) or `every_ms`.
    #[serde(flatten)]
    pub timing: ScheduleTiming,
    /// Payload of each fire's job, as JSON.
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// Payload as base64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
    /// Fires missed while no process ran (over 60 s late): `none` (default, skip them),
    /// `one` (run the latest once) or `all` (each, the latest 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// How each fire's job runs.
    #[serde(flatten)]
    pub run: RunOptions,
    /// What each fire's job carries (a target makes the schedule a periodic webhook).
    #[serde(flatten)]
    pub carried: Carried,
}

impl ScheduleBody {
    /// Validates the shape and builds the spec (the name and limits are checked on `PUT`).
    pub fn into_spec(self) -> Result<ScheduleSpec, Invalid> {
        let timing = self.timing.timing()?;
        let payload = payload_bytes(self.payload.as_deref(), self.payload_b64.as_deref())?;
        let catch_up = match self.catch_up.as_deref() {
            None => CatchUp::None,
            Some(c) => c.parse::<CatchUp>()?,
        };
        let run = self.run;
        let (target, trace) = self.carried.checked()?;
        Ok(ScheduleSpec {
            timing,
            payload,
            catch_up,
            max_attempts: run.max_attempts,
            backoff: run.backoff,
            lease_ms: run.lease_ms,
            timeout_ms: run.timeout_ms,
            target,
            trace,
        })
    }
}

/// A stored schedule.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ScheduleView {
    /// Its name.
    pub name: String,
    /// `cron` (+ `tz`) or `every_ms`.
    #[serde(flatten)]
    pub timing: ScheduleTiming,
    /// `none`, `one` or `all`.
    pub catch_up: String,
    /// Next fire, ms since the epoch; its job will have the id `NAME@<this>`.
    pub next_fire: u64,
    /// How each fire's job runs.
    #[serde(flatten)]
    pub run: RunOptions,
    /// What each fire's job carries.
    #[serde(flatten)]
    pub carried: Carried,
    /// The payload of each fire's job when it is valid JSON (byte for byte).
    #[schema(value_type = Option<Value>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// The payload of each fire's job in base64 when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_b64: Option<String>,
}

impl From<ScheduleInfo> for ScheduleView {
    fn from(i: ScheduleInfo) -> Self {
        let (run, carried) = run_of(&i.spec);
        let (payload, payload_b64) = payload_fields(i.spec.payload);
        Self {
            name: i.name,
            timing: ScheduleTiming::of(i.spec.timing),
            catch_up: i.spec.catch_up.as_str().to_owned(),
            next_fire: i.next_ms,
            run,
            carried,
            payload,
            payload_b64,
        }
    }
}

/// The schedules of a queue.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ScheduleList {
    /// By name.
    pub schedules: Vec<ScheduleView>,
}

impl ScheduleBody {
    /// The body that stores `spec`.
    pub fn from_spec(spec: ScheduleSpec) -> Self {
        let (run, carried) = run_of(&spec);
        let (payload, payload_b64) = payload_fields(spec.payload);
        Self {
            timing: ScheduleTiming::of(spec.timing),
            payload,
            payload_b64,
            catch_up: Some(spec.catch_up.as_str().to_owned()),
            run,
            carried,
        }
    }
}

impl TryFrom<ScheduleView> for ScheduleInfo {
    type Error = Invalid;

    fn try_from(v: ScheduleView) -> Result<Self, Invalid> {
        let timing = v.timing.timing()?;
        let (target, trace) = v.carried.read();
        Ok(ScheduleInfo {
            name: v.name,
            spec: ScheduleSpec {
                timing,
                payload: answer_bytes(v.payload.as_deref(), v.payload_b64.as_deref())?,
                catch_up: v.catch_up.parse::<CatchUp>()?,
                max_attempts: v.run.max_attempts,
                backoff: v.run.backoff,
                lease_ms: v.run.lease_ms,
                timeout_ms: v.run.timeout_ms,
                target,
                trace,
            },
            next_ms: v.next_fire,
        })
    }
}

/// How the jobs `spec` fires run and what they carry, as the wire says it.
fn run_of(spec: &ScheduleSpec) -> (RunOptions, Carried) {
    let run = RunOptions {
        max_attempts: spec.max_attempts,
        backoff: spec.backoff,
        lease_ms: spec.lease_ms,
        timeout_ms: spec.timeout_ms,
    };
    (run, Carried::of(spec.target.clone(), spec.trace.as_ref()))
}
