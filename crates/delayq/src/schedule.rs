//! Schedules without a leader: a schedule (a cron expression in a time zone, or a fixed
//! interval) stored per queue, and the [`Schedules`] trait a store implements; "schedule" means
//! only this in delayq (a job's own due time is [`crate::Due`]; a schedule "fires"). Any number of
//! processes may run a [`crate::Ticker`]: each fire is enqueued exactly once with the id
//! `NAME@<fire time ms>` and the due time of the fire, because a store's [`Schedules::fire`]
//! enqueues it only while the schedule's stored next fire is the one the ticker read, and
//! stores the following fire in the same atomic step (compare-and-set). (On Redis, a queue of
//! several shards does it in two atomic steps: its fires land in other hash slots.)
//!
//! Time zones and daylight saving are `jiff`'s (with the time-zone database built in, so the
//! host's `/usr/share/zoneinfo` is not needed); cron expressions are `croner`'s: 5 fields, or
//! 6 with seconds first. A daily 02:30 job fires once on a spring-forward day, at the first
//! valid time after the gap (03:00), and once on a fall-back day (the first 02:30).

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backoff::Backoff;
use crate::error::{InvalidInput, Result};
use crate::job::{Due, NewJob};
use crate::name::{JobId, QueueName};

/// Longest schedule name, in bytes (the fire ids `NAME@<ms>` stay well inside the id limit).
pub const MAX_NAME_BYTES: usize = 128;
/// Most missed fires enqueued at once by `catch_up: all`.
pub const MAX_CATCH_UP: usize = 100;
/// A fire later than this is *missed* (the processes were down or stalled): `catch_up` says
/// what happens to it. A fire noticed within it always runs.
pub const MISFIRE_MS: u64 = 60_000;
/// Shortest `every_ms`.
pub const MIN_EVERY_MS: u64 = 1_000;

/// When a schedule fires.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Timing {
    /// A cron expression (5 fields, or 6 with seconds first) in an IANA time zone.
    Cron {
        /// The expression, e.g. `*/5 * * * *`.
        cron: String,
        /// The time zone, e.g. `Europe/Paris` (default `UTC`).
        #[serde(default = "utc")]
        tz: String,
    },
    /// Every so many ms, the first fire one interval after the schedule is created.
    Every {
        /// The interval in ms (at least 1,000).
        every_ms: u64,
    },
}

fn utc() -> String {
    "UTC".to_owned()
}

/// What happens to fires missed while no process ran (later than [`MISFIRE_MS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Skip them; the schedule goes on from now.
    #[default]
    None,
    /// Run the latest of them once.
    One,
    /// Run each of them (the latest [`MAX_CATCH_UP`]).
    All,
}

/// A schedule: when it fires and the job each fire enqueues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    /// When it fires.
    #[serde(flatten)]
    pub timing: Timing,
    /// The payload of every fire's job.
    pub payload: Vec<u8>,
    /// Missed fires.
    #[serde(default)]
    pub catch_up: CatchUp,
    /// `max_attempts` of each job.
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Retry backoff of each job.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Lease length of each job, ms.
    #[serde(default)]
    pub lease_ms: Option<u64>,
    /// Timeout of each attempt, ms.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// HTTP push target of each job (a periodic webhook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::Target>,
    /// Trace context every fire's job carries (the one the schedule was set under).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::TraceContext>,
}

/// A stored schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleInfo {
    /// Its name (unique in its queue).
    pub name: String,
    /// What it does.
    pub spec: ScheduleSpec,
    /// The next fire, ms since the epoch.
    pub next_ms: u64,
}

/// One atomic step of a ticker: enqueue `fires` and move the schedule's next fire from
/// `expected` to `next`, only while it is still `expected`.
#[derive(Clone, Debug)]
pub struct Firing {
    /// The next fire the ticker read.
    pub expected: u64,
    /// The fire times to enqueue (ascending; may be empty when every missed fire is skipped).
    pub fires: Vec<u64>,
    /// The next fire after them.
    pub next: u64,
    /// The job each fire enqueues (its id and due time are set per fire).
    pub job: NewJob,
}

/// A store's schedules. Every method is atomic on the store.
pub trait Schedules: Clone + Send + Sync + 'static {
    /// Stores (creates or replaces) a schedule with its next fire.
    fn put_schedule(
        &self,
        queue: &QueueName,
        info: ScheduleInfo,
    ) -> impl Future<Output = Result<()>> + Send;

    /// One schedule (a queue has few: found among [`Schedules::schedules`]).
    fn schedule(
        &self,
        queue: &QueueName,
        name: &str,
    ) -> impl Future<Output = Result<Option<ScheduleInfo>>> + Send {
        async move {
            Ok(self
                .schedules(queue)
                .await?
                .into_iter()
                .find(|s| s.name == name))
        }
    }

    /// The queue's schedules, by name.
    fn schedules(
        &self,
        queue: &QueueName,
    ) -> impl Future<Output = Result<Vec<ScheduleInfo>>> + Send;

    /// Deletes a schedule (jobs it already enqueued stay); whether it existed.
    fn delete_schedule(
        &self,
        queue: &QueueName,
        name: &str,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Queues that have schedules.
    fn scheduled_queues(&self) -> impl Future<Output = Result<Vec<QueueName>>> + Send;

    /// The store's clock, ms since the Unix epoch (Redis `TIME`; the embedded store's own
    /// clock): fire times are planned on it, as due times are, so a host whose clock is off
    /// neither skips nor doubles a fire.
    fn clock_ms(&self) -> impl Future<Output = Result<u64>> + Send;

    /// Enqueues `f.fires` as jobs `NAME@<fire ms>` due at their fire times and stores `f.next`
    /// as the schedule's next fire — only when its stored next fire is `f.expected` (else
    /// nothing: another process fired it, or the schedule changed). Returns whether it did.
    fn fire(
        &self,
        queue: &QueueName,
        name: &str,
        f: Firing,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// Checks a schedule name: 1–128 characters of `[A-Za-z0-9._-]` (it is a URL segment and the
/// prefix of its fire ids).
pub fn check_name(name: &str) -> std::result::Result<(), InvalidInput> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(InvalidInput::Schedule(format!(
            "name {name:?}: must be 1-{MAX_NAME_BYTES} characters from [A-Za-z0-9._-]"
        )))
    }
}

/// The id of the job a schedule's fire at `fire_ms` enqueues.
pub fn fire_id(name: &str, fire_ms: u64) -> JobId {
    JobId::new(format!("{name}@{fire_ms}")).expect("a checked name makes a valid id")
}

fn bad(msg: String) -> InvalidInput {
    InvalidInput::Schedule(msg)
}

fn parse_cron(expr: &str) -> std::result::Result<croner::Cron, InvalidInput> {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .build()
        .parse(expr)
        .map_err(|e| bad(format!("cron {expr:?}: {e}")))
}

fn parse_tz(tz: &str) -> std::result::Result<jiff::tz::TimeZone, InvalidInput> {
    jiff::tz::TimeZone::get(tz).map_err(|_| bad(format!("unknown time zone {tz:?}")))
}

impl Timing {
    /// Checks the expression, the time zone and the interval.
    pub fn validate(&self) -> std::result::Result<(), InvalidInput> {
        match self {
            Timing::Cron { cron, tz } => {
                parse_cron(cron)?;
                parse_tz(tz)?;
                Ok(())
            }
            Timing::Every { every_ms } => {
                let max = crate::limits::MAX_DELAY.as_millis() as u64;
                if (MIN_EVERY_MS..=max).contains(every_ms) {
                    Ok(())
                } else {
                    Err(bad(format!(
                        "every_ms {every_ms} is outside {MIN_EVERY_MS}-{max}"
                    )))
                }
            }
        }
    }

    /// The first fire strictly after `after_ms` for a cron timing; for an interval, `after_ms`
    /// plus the interval.
    pub fn next_after(&self, after_ms: u64) -> std::result::Result<u64, InvalidInput> {
        match self {
            Timing::Every { every_ms } => Ok(after_ms + every_ms),
            Timing::Cron { cron, tz } => {
                let cron = parse_cron(cron)?;
                let tz = parse_tz(tz)?;
                let at = jiff::Timestamp::from_millisecond(after_ms as i64)
                    .map_err(|e| bad(format!("time {after_ms}: {e}")))?
                    .to_zoned(tz);
                let next = cron
                    .find_next_occurrence(&at, false)
                    .map_err(|e| bad(format!("no next fire: {e}")))?;
                Ok(next.timestamp().as_millisecond() as u64)
            }
        }
    }
}

impl CatchUp {
    /// Its name on the wire (`none`, `one`, `all`), as [`FromStr`] reads it.
    pub const fn as_str(self) -> &'static str {
        match self {
            CatchUp::None => "none",
            CatchUp::One => "one",
            CatchUp::All => "all",
        }
    }
}

impl FromStr for CatchUp {
    type Err = InvalidInput;

    fn from_str(s: &str) -> std::result::Result<Self, InvalidInput> {
        match s {
            "none" => Ok(CatchUp::None),
            "one" => Ok(CatchUp::One),
            "all" => Ok(CatchUp::All),
            _ => Err(bad(format!("catch_up {s:?}: none, one or all"))),
        }
    }
}

impl ScheduleSpec {
    /// A schedule firing every `every_ms` with `payload`, every other field at its default
    /// (missed fires skipped, the queue's attempts, backoff, lease and no timeout or target).
    pub fn every(every_ms: u64, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            timing: Timing::Every { every_ms },
            payload: payload.into(),
            catch_up: CatchUp::None,
            max_attempts: None,
            backoff: None,
            lease_ms: None,
            timeout_ms: None,
            target: None,
            trace: None,
        }
    }

    /// The spec as stores keep it (JSON).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a spec serializes")
    }

    /// A spec a store kept; a store error when it does not parse.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| crate::Error::Backend(format!("stored schedule: {e}")))
    }

    /// Checks the timing and the job fields.
    pub fn validate(&self, max_payload: usize) -> std::result::Result<(), InvalidInput> {
        self.timing.validate()?;
        self.job(0).validate(max_payload, 0)
    }

    /// The job a fire enqueues (id and due time set by the caller per fire).
    pub fn job(&self, fire_ms: u64) -> NewJob {
        let mut job = NewJob::new(self.payload.clone()).due(Due::At(fire_ms));
        job.max_attempts = self.max_attempts;
        job.backoff = self.backoff;
        job.lease = self.lease_ms.map(Duration::from_millis);
        job.timeout = self.timeout_ms.map(Duration::from_millis);
        job.target = self.target.clone();
        job.trace = self.trace.clone();
        job
    }

    /// What a ticker does with a schedule whose next fire `next_ms` is due at `now_ms`: the
    /// fires to enqueue and the next fire after now. Fires within [`MISFIRE_MS`] of now always
    /// run; older ones by `catch_up`.
    pub fn plan(&self, next_ms: u64, now_ms: u64) -> std::result::Result<Firing, InvalidInput> {
        let mut fires = Vec::new();
        let mut missed = std::collections::VecDeque::new();
        let mut t = next_ms;
        // Walk the fires up to now (an interval arithmetically: a long downtime of a 1-s
        // schedule is not walked second by second).
        if let Timing::Every { every_ms } = self.timing
            && now_ms > t + MISFIRE_MS + every_ms * (MAX_CATCH_UP as u64 + 1)
        {
            let skip = (now_ms - MISFIRE_MS - t) / every_ms - MAX_CATCH_UP as u64;
            t += skip * every_ms;
            missed.push_back(t - every_ms); // stands for the skipped ones (catch_up: one)
        }
        let mut steps = 0u64;
        while t <= now_ms {
            if now_ms - t <= MISFIRE_MS {
                fires.push(t);
            } else {
                missed.push_back(t);
                if missed.len() > MAX_CATCH_UP {
                    missed.pop_front();
                }
            }
            t = self.timing.next_after(t)?;
            steps += 1;
            if steps > 10_000_000 {
                return Err(bad("too many fires to walk".into()));
            }
        }
        let caught: Vec<u64> = match self.catch_up {
            CatchUp::None => Vec::new(),
            CatchUp::One => missed.back().copied().into_iter().collect(),
            CatchUp::All => missed.into_iter().collect(),
        };
        let mut all = caught;
        all.extend(fires);
        Ok(Firing {
            expected: next_ms,
            fires: all,
            next: t,
            job: self.job(0),
        })
    }
}

/// Stores a schedule for `queue`: validated, with its next fire — kept when the timing did
/// not change (a new payload or catch-up takes effect at the next fire), else the first fire
/// after `now_ms`.
pub async fn put<S: Schedules>(
    store: &S,
    queue: &QueueName,
    name: &str,
    spec: ScheduleSpec,
    max_payload: usize,
    now_ms: u64,
) -> Result<ScheduleInfo> {
    check_name(name)?;
    spec.validate(max_payload)?;
    let next_ms = match store.schedule(queue, name).await? {
        // Same timing: a change of anything else keeps the next fire.
        Some(old) if old.spec.timing == spec.timing => old.next_ms,
        _ => spec.timing.next_after(now_ms)?,
    };
    let info = ScheduleInfo {
        name: name.to_owned(),
        spec,
        next_ms,
    };
    store.put_schedule(queue, info.clone()).await?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond() as u64
    }

    fn cron(expr: &str, tz: &str) -> Timing {
        Timing::Cron {
            cron: expr.into(),
            tz: tz.into(),
        }
    }

    /// Fires of `t` from `from` (exclusive) to `to` (inclusive).
    fn fires(t: &Timing, from: u64, to: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut x = t.next_after(from).unwrap();
        while x <= to {
            out.push(x);
            x = t.next_after(x).unwrap();
        }
        out
    }

    #[test]
    fn a_daily_job_fires_once_across_spring_forward() {
        // Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
        let t = cron("30 2 * * *", "Europe/Paris");
        let got = fires(&t, ms("2026-03-27T12:00:00Z"), ms("2026-03-31T12:00:00Z"));
        assert_eq!(
            got,
            [
                ms("2026-03-28T01:30:00Z"), // 02:30 CET
                ms("2026-03-29T01:00:00Z"), // the gap: the first valid time, 03:00 CEST
                ms("2026-03-30T00:30:00Z"), // 02:30 CEST
                ms("2026-03-31T00:30:00Z"),
            ]
        );
    }

    #[test]
    fn a_daily_job_fires_once_across_fall_back() {
        // Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
        let t = cron("30 2 * * *", "Europe/Paris");
        let got = fires(&t, ms("2026-10-23T12:00:00Z"), ms("2026-10-27T12:00:00Z"));
        assert_eq!(
            got,
            [
                ms("2026-10-24T00:30:00Z"), // 02:30 CEST
                ms("2026-10-25T00:30:00Z"), // the first 02:30 (CEST) only
                ms("2026-10-26T01:30:00Z"), // 02:30 CET
                ms("2026-10-27T01:30:00Z"),
            ]
        );
    }

    #[test]
    fn seconds_field_and_bad_input() {
        let t = cron("*/2 * * * * *", "UTC");
        t.validate().unwrap();
        let from = ms("2026-01-01T00:00:00Z");
        assert_eq!(
            fires(&t, from, from + 6_000),
            [from + 2000, from + 4000, from + 6000]
        );
        assert!(cron("61 * * * *", "UTC").validate().is_err());
        assert!(cron("not cron", "UTC").validate().is_err());
        assert!(cron("* * * * *", "Mars/Olympus").validate().is_err());
        assert!(Timing::Every { every_ms: 10 }.validate().is_err());
        assert!(check_name("a@b").is_err());
        assert!(check_name("nightly-report").is_ok());
    }

    #[test]
    fn the_untagged_forms_parse() {
        let s: ScheduleSpec =
            serde_json::from_str(r#"{"cron":"0 9 * * *","tz":"Europe/Paris","payload":[1]}"#)
                .unwrap();
        assert_eq!(s.timing, cron("0 9 * * *", "Europe/Paris"));
        let s: ScheduleSpec =
            serde_json::from_str(r#"{"every_ms":5000,"payload":[],"catch_up":"all"}"#).unwrap();
        assert_eq!(s.timing, Timing::Every { every_ms: 5000 });
        assert_eq!(s.catch_up, CatchUp::All);
    }

    fn every(ms: u64, catch_up: CatchUp) -> ScheduleSpec {
        ScheduleSpec {
            timing: Timing::Every { every_ms: ms },
            payload: vec![],
            catch_up,
            max_attempts: None,
            backoff: None,
            lease_ms: None,
            timeout_ms: None,
            target: None,
            trace: None,
        }
    }

    #[test]
    fn catch_up_decides_what_missed_fires_do() {
        let s = 1_000;
        // Down for 5 minutes with a fire every minute: 4 fires missed, 1 within the grace.
        let next = 1_000_000;
        let now = next + 5 * 60_000 - s;
        let none = every(60_000, CatchUp::None).plan(next, now).unwrap();
        assert_eq!(none.fires, [next + 4 * 60_000], "only the recent one");
        assert_eq!(none.next, next + 5 * 60_000);
        let one = every(60_000, CatchUp::One).plan(next, now).unwrap();
        assert_eq!(one.fires, [next + 3 * 60_000, next + 4 * 60_000]);
        let all = every(60_000, CatchUp::All).plan(next, now).unwrap();
        assert_eq!(all.fires.len(), 5);
        assert_eq!(all.fires[0], next);
        // A day down with a fire every second: at most 100 caught up, found arithmetically.
        let all = every(s, CatchUp::All)
            .plan(next, next + 86_400_000)
            .unwrap();
        assert_eq!(
            all.fires.len(),
            MAX_CATCH_UP + 61,
            "100 missed + the last minute's"
        );
        assert_eq!(all.next, next + 86_400_000 + s);
        assert!(all.fires.windows(2).all(|w| w[0] < w[1]));
        // Not due yet: nothing.
        let early = every(s, CatchUp::All).plan(next, next - 1).unwrap();
        assert!(early.fires.is_empty());
        assert_eq!(early.next, next);
    }
}
