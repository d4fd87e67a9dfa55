//! The exact OpenAPI schemas of what the bodies carry that no Rust type here declares: a time
//! (ms or RFC 3339, kept as the JSON it came as), the state a read answers (`due` included),
//! the error codes, and the one-or-many body of an enqueue. A body's field names one of these
//! with `#[schema(value_type = …)]`, so the document says exactly what the server reads and
//! writes; nothing is ever built from them. (The core's own enums — `Backoff`, `JobState`,
//! `OnConflict`, `AckOutcome`, `DeliveryMode` — derive their schemas with its `schema`
//! feature.)
//! Where JSON is free by design — a payload, a result — the field says `value_type = Value`
//! (any JSON value).

#![allow(dead_code, clippy::large_enum_variant)] // schema-only types: utoipa reads them, none is built

use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use crate::error::ErrorCode;

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

/// A batch's state.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = BatchState)]
pub enum BatchStateSchema {
    /// Jobs may join.
    Open,
    /// Waiting for its jobs.
    Closed,
    /// Every job ended and the callbacks were enqueued.
    Done,
    /// Every job ended but the callbacks could not be enqueued (tried again with a backoff).
    CallbackFailed,
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
    /// Waiting for its dependencies to end.
    Waiting,
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
