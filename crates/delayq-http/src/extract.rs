//! Extractors that answer bad requests with [`ApiError`]s instead of axum's plain-text
//! rejections: JSON bodies, the queue and job path segments, query strings.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use delayq::{JobId, QueueName};
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};

/// A JSON body; bad bodies get `invalid_json`, `invalid_body`, `unsupported_media_type` or
/// `body_too_large`.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(r) => Err(json_rejection(r)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send the body with Content-Type: application/json",
        ),
        JsonRejection::JsonSyntaxError(e) => ApiError::new(ErrorCode::InvalidJson, e.body_text()),
        JsonRejection::JsonDataError(e) => ApiError::new(ErrorCode::InvalidBody, e.body_text()),
        JsonRejection::BytesRejection(e) if e.status().as_u16() == 413 => {
            ApiError::new(ErrorCode::BodyTooLarge, e.body_text())
        }
        other => ApiError::new(ErrorCode::InvalidJson, other.body_text()),
    }
}

/// Parses a JSON document with the same error mapping (for bodies read as raw JSON first).
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, ApiError> {
    serde_json::from_str(text).map_err(|e| ApiError::new(ErrorCode::InvalidBody, e.to_string()))
}

/// The `{q}` path segment, validated.
pub struct QueuePath(pub QueueName);

impl<S: Send + Sync> FromRequestParts<S> for QueuePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(segments) = Path::<Vec<String>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::new(ErrorCode::InvalidQueueName, e.body_text()))?;
        let q = segments.into_iter().next().unwrap_or_default();
        Ok(QueuePath(QueueName::new(q)?))
    }
}

/// The `{q}` path segment, validated, and the one after it (a job id, a batch id, a key, a
/// schedule's name) as it is; `code` answers a path that does not parse.
pub(crate) async fn queue_and<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    code: ErrorCode,
) -> Result<(QueueName, String), ApiError> {
    let Path(segments) = Path::<Vec<String>>::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::new(code, e.body_text()))?;
    let mut it = segments.into_iter();
    let q = QueueName::new(it.next().unwrap_or_default())?;
    Ok((q, it.next().unwrap_or_default()))
}

/// The `{q}` and `{id}` path segments, validated.
pub struct JobPath(pub QueueName, pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let (q, id) = queue_and(parts, state, ErrorCode::InvalidJobId).await?;
        Ok(JobPath(q, JobId::new(id)?))
    }
}

/// A query string; bad ones get `invalid_query`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|e: QueryRejection| ApiError::new(ErrorCode::InvalidQuery, e.body_text()))
    }
}
