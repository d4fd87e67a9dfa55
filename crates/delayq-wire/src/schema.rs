//! The exact OpenAPI schemas of the core's types that travel in the bodies (a backoff, a time,
//! the enums of states and outcomes) and of the error codes. The core does not derive
//! `ToSchema`; a body's field names one of these with `#[schema(value_type = …)]`, so the
//! document says exactly what the server reads and writes. Nothing is ever built from them.
//! Where JSON is free by design — a payload, a result — the field says `value_type = Value`
//! (any JSON value).

#![allow(dead_code, clippy::large_enum_variant)] // schema-only types: utoipa reads them, none is built

use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use crate::error::ErrorCode;

/// Retry backoff of a job: `fixed` waits `delay_ms` after every failure; `exponential` waits
/// `base_ms`, doubling each time up to `cap_ms`; `exponential_jitter` picks uniformly in the
/// upper half of that.
#[derive(Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[schema(as = Backoff)]
pub enum BackoffSchema {
    /// The same delay every time.
    Fixed {
        /// The delay, ms.
        delay_ms: u64,
    },
    /// Doubling delays up to a cap.
    Exponential {
        /// The first delay, ms.
        base_ms: u64,
        /// The largest delay, ms.
        cap_ms: u64,
    },
    /// Doubling delays up to a cap, with equal jitter.
    ExponentialJitter {
        /// The first delay, ms.
        base_ms: u64,
        /// The largest delay, ms.
        cap_ms: u64,
    },
}

/// A point in time: ms since the epoch (a number), or RFC 3339 text
/// (`2026-12-03T12:00:00Z`).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = Time)]
pub enum TimeSchema {
    /// Ms since the epoch.
    Ms(u64),
    /// RFC 3339 text.
    Text(String),
}

/// What an enqueue does with an id that exists: `keep` (write nothing) or `replace` (a
/// scheduled job takes the new payload, due time and options).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = OnConflict)]
pub enum OnConflictSchema {
    /// Write nothing; answer `created: false`.
    Keep,
    /// Replace a scheduled job.
    Replace,
}

/// Where a job is: `scheduled` (waiting for its due time, or due), `leased`, `dead` or
/// `done` (kept after it completed).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = JobState)]
pub enum JobStateSchema {
    /// Waiting for its due time, or due and not claimed yet.
    Scheduled,
    /// Claimed under a lease.
    Leased,
    /// In the dead letters.
    Dead,
    /// Completed and kept.
    Done,
}

/// A job's state as a read answers it: a job state, or `due` in a listing of due jobs.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ListedState)]
pub enum ListedStateSchema {
    /// Waiting for its due time.
    Scheduled,
    /// Due now, waiting for a consumer (listings of due jobs).
    Due,
    /// Claimed under a lease.
    Leased,
    /// In the dead letters.
    Dead,
    /// Completed and kept.
    Done,
}

/// How an ack went: `acked`, `lease_lost` (the job is under another lease, or none) or
/// `not_found`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = AckOutcome)]
pub enum AckOutcomeSchema {
    /// Done.
    Acked,
    /// Another lease holds the job, or none does.
    LeaseLost,
    /// No such job (done and gone, or cancelled).
    NotFound,
}

/// How a queue's due jobs are delivered: `pull` (workers claim them) or `push` (a pusher
/// sends each to its target).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = DeliveryMode)]
pub enum DeliveryModeSchema {
    /// Workers claim them.
    Pull,
    /// A pusher sends each to its HTTP target.
    Push,
}

/// What `POST /v1/queues/{q}/jobs` takes: one job, or an array of jobs (a batch, all or
/// nothing).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = EnqueueBody)]
pub enum EnqueueBodySchema {
    /// One job.
    One(crate::jobs::EnqueueRequest),
    /// A batch.
    Many(Vec<crate::jobs::EnqueueRequest>),
}

/// What `POST /v1/queues/{q}/jobs` answers: one outcome for one job, an array for a batch (in
/// its order).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = EnqueueAnswer)]
pub enum EnqueueAnswerSchema {
    /// One job's.
    One(crate::jobs::EnqueueResponse),
    /// A batch's.
    Many(Vec<crate::jobs::EnqueueResponse>),
}

/// The schema of an error's `code`: one of the API's codes (docs/API.md, "Errors").
pub fn error_code() -> impl Into<RefOr<Schema>> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(
            "Stable machine-readable code (docs/API.md, \"Errors\").",
        ))
        .enum_values(Some(ErrorCode::ALL.iter().map(|c| c.as_str())))
        .build()
}
