//! Bearer-token authentication, compared in constant time.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// Lets a request through when no token is configured or its bearer token is one of them.
pub async fn require_token<B: Send + Sync + 'static>(
    State(st): State<AppState<B>>,
    req: Request,
    next: Next,
) -> Response {
    let tokens = &st.inner.config.tokens;
    if tokens.is_empty() {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Every token is compared, whatever matched, so timing says nothing about which one.
    let ok = tokens
        .iter()
        .fold(false, |acc, t| acc | ct_eq(t.as_bytes(), given.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        ApiError::new(
            ErrorCode::Unauthorized,
            "a valid `Authorization: Bearer <token>` is required",
        )
        .into_response()
    }
}

/// Constant-time equality for equal lengths (a length mismatch answers at once: lengths are
/// not secret).
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn ct_eq() {
        assert!(super::ct_eq(b"secret", b"secret"));
        assert!(!super::ct_eq(b"secret", b"secreT"));
        assert!(!super::ct_eq(b"secret", b"secret2"));
    }
}
