//! Periodic schedules over HTTP: `PUT / GET / DELETE /v1/queues/{q}/schedules/{name}` and
//! `GET /v1/queues/{q}/schedules` (see `delayq::schedule`). The server's ticker fires them.

use axum::Json;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use delayq::schedule::{self, CatchUp, ScheduleInfo, ScheduleSpec, Schedules, Timing};
use delayq::{Backend, Backoff, Inspect, QueueName};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::extract::ApiJson;
use crate::model::{Outcome, PayloadOut};
use crate::state::AppState;

/// A schedule to store: `cron` (+ `tz`) or `every_ms`, and the job each fire enqueues.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// Cron expression: 5 fields, or 6 with seconds first (e.g. `*/5 * * * *`).
    pub cron: Option<String>,
    /// IANA time zone of `cron` (default `UTC`), e.g. `Europe/Paris`.
    pub tz: Option<String>,
    /// Instead of `cron`: a fire every so many ms (at least 1,000).
    pub every_ms: Option<u64>,
    /// Payload of each fire's job, as JSON.
    #[schema(value_type = Object)]
    pub payload: Option<Box<RawValue>>,
    /// Payload as base64 bytes.
    pub payload_b64: Option<String>,
    /// Fires missed while no process ran (over 60 s late): `none` (default, skip them),
    /// `one` (run the latest once) or `all` (each, the latest 100).
    pub catch_up: Option<String>,
    /// `max_attempts` of each job.
    pub max_attempts: Option<u32>,
    /// Retry backoff of each job.
    #[schema(value_type = Object)]
    pub backoff: Option<Backoff>,
    /// Lease length of each job, ms.
    pub lease_ms: Option<u64>,
    /// Timeout of each attempt, ms.
    pub timeout_ms: Option<u64>,
    /// HTTP push target of each fire's job (a periodic webhook: `delayq serve --push` sends
    /// it).
    pub target: Option<crate::push_model::TargetView>,
}

impl ScheduleBody {
    fn into_spec(self) -> Result<ScheduleSpec, ApiError> {
        let bad = |m: &str| ApiError::new(ErrorCode::InvalidSchedule, m);
        let timing = match (self.cron, self.every_ms, self.tz) {
            (Some(cron), None, tz) => Timing::Cron {
                cron,
                tz: tz.unwrap_or_else(|| "UTC".into()),
            },
            (None, Some(every_ms), None) => Timing::Every { every_ms },
            (None, Some(_), Some(_)) => return Err(bad("tz goes with cron, not every_ms")),
            (Some(_), Some(_), _) => return Err(bad("give cron or every_ms, not both")),
            (None, None, _) => return Err(bad("cron or every_ms is required")),
        };
        let payload = crate::model::payload_bytes(self.payload, self.payload_b64)?;
        let catch_up = match self.catch_up.as_deref() {
            None => CatchUp::None,
            Some(c) => c.parse::<CatchUp>()?,
        };
        Ok(ScheduleSpec {
            timing,
            payload,
            catch_up,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            lease_ms: self.lease_ms,
            timeout_ms: self.timeout_ms,
            target: self.target.map(Into::into),
        })
    }
}

/// A stored schedule.
#[derive(Serialize, ToSchema, Debug)]
pub struct ScheduleView {
    /// Its name.
    pub name: String,
    /// Cron expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// Time zone of `cron`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// Interval in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// `none`, `one` or `all`.
    pub catch_up: String,
    /// Next fire, ms since the epoch; its job will have the id `NAME@<this>`.
    pub next_fire: u64,
    /// `max_attempts` of each job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Retry backoff of each job.
    #[schema(value_type = Object)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// Lease length of each job, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// Timeout of each attempt, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// HTTP push target of each fire's job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<crate::push_model::TargetView>,
    /// The payload of each fire's job.
    #[serde(flatten)]
    pub payload: PayloadOut,
}

impl From<ScheduleInfo> for ScheduleView {
    fn from(i: ScheduleInfo) -> Self {
        let (cron, tz, every_ms) = match i.spec.timing {
            Timing::Cron { cron, tz } => (Some(cron), Some(tz), None),
            Timing::Every { every_ms } => (None, None, Some(every_ms)),
        };
        Self {
            name: i.name,
            cron,
            tz,
            every_ms,
            catch_up: serde_json::to_value(i.spec.catch_up)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            next_fire: i.next_ms,
            max_attempts: i.spec.max_attempts,
            backoff: i.spec.backoff,
            lease_ms: i.spec.lease_ms,
            timeout_ms: i.spec.timeout_ms,
            target: i.spec.target.map(Into::into),
            payload: PayloadOut::new(i.spec.payload),
        }
    }
}

/// The schedules of a queue.
#[derive(Serialize, ToSchema, Debug)]
pub struct ScheduleList {
    /// By name.
    pub schedules: Vec<ScheduleView>,
}

/// The `{q}` and `{name}` path segments, validated.
pub struct SchedulePath(pub QueueName, pub String);

impl<S: Send + Sync> FromRequestParts<S> for SchedulePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(segments) = Path::<Vec<String>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::new(ErrorCode::InvalidSchedule, e.body_text()))?;
        let mut it = segments.into_iter();
        let q = QueueName::new(it.next().unwrap_or_default())?;
        let name = it.next().unwrap_or_default();
        schedule::check_name(&name)?;
        Ok(SchedulePath(q, name))
    }
}

fn missing(q: &QueueName, name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no schedule {name} in queue {q}"),
    )
}

/// Creates or changes a schedule. A change of its timing takes effect from now; a change of
/// anything else keeps the next fire and applies from it.
#[utoipa::path(
    put, path = "/v1/queues/{q}/schedules/{name}", tag = "schedules",
    params(("q" = String, Path), ("name" = String, Path)), request_body = ScheduleBody,
    responses((status = 200, body = ScheduleView), (status = "4XX", body = ErrorBody))
)]
pub async fn put<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    SchedulePath(q, name): SchedulePath,
    ApiJson(body): ApiJson<ScheduleBody>,
) -> Result<Json<ScheduleView>, ApiError> {
    let spec = body.into_spec()?;
    // The first fire is planned on the store's clock, as the ticker plans the others.
    let now = st.backend().clock_ms().await?;
    let info = schedule::put(st.backend(), &q, &name, spec, st.config().max_payload, now).await?;
    Ok(Json(info.into()))
}

/// One schedule with its next fire.
#[utoipa::path(
    get, path = "/v1/queues/{q}/schedules/{name}", tag = "schedules",
    params(("q" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = ScheduleView), (status = "4XX", body = ErrorBody))
)]
pub async fn get<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    SchedulePath(q, name): SchedulePath,
) -> Result<Json<ScheduleView>, ApiError> {
    match st.backend().schedule(&q, &name).await? {
        Some(i) => Ok(Json(i.into())),
        None => Err(missing(&q, &name)),
    }
}

/// Deletes a schedule (jobs it already enqueued stay).
#[utoipa::path(
    delete, path = "/v1/queues/{q}/schedules/{name}", tag = "schedules",
    params(("q" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = Outcome), (status = "4XX", body = ErrorBody))
)]
pub async fn delete<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    SchedulePath(q, name): SchedulePath,
) -> Result<Json<Outcome>, ApiError> {
    if st.backend().delete_schedule(&q, &name).await? {
        Ok(Json(Outcome {
            outcome: "deleted".into(),
            ..Outcome::default()
        }))
    } else {
        Err(missing(&q, &name))
    }
}

/// The queue's schedules, by name, with their next fires.
#[utoipa::path(
    get, path = "/v1/queues/{q}/schedules", tag = "schedules",
    params(("q" = String, Path)),
    responses((status = 200, body = ScheduleList), (status = "4XX", body = ErrorBody))
)]
pub async fn list<B: Backend + Inspect + Schedules>(
    State(st): State<AppState<B>>,
    crate::extract::QueuePath(q): crate::extract::QueuePath,
) -> Result<Json<ScheduleList>, ApiError> {
    let schedules = st.backend().schedules(&q).await?;
    Ok(Json(ScheduleList {
        schedules: schedules.into_iter().map(Into::into).collect(),
    }))
}
