//! Who may call the API: bearer tokens (compared in constant time), the browser guard of the
//! tokenless mode, and the security headers of every response.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderValue, Method};
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
        // The scheme is case-insensitive (RFC 9110 §11.1).
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
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

/// Whether `host` (a `Host` value or an origin's host, with or without port) is this machine.
fn is_loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, p)| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                h
            } else {
                host
            }
        })
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Without tokens, the API trusts whoever reaches it: keep browsers out of that trust. A
/// state-changing request whose `Origin` is another site is refused (a page elsewhere cannot
/// requeue or purge), and with [`crate::HttpConfig::loopback_hosts_only`] a `Host` that is not
/// this machine is refused (DNS rebinding).
pub async fn browser_guard<B: Send + Sync + 'static>(
    State(st): State<AppState<B>>,
    req: Request,
    next: Next,
) -> Response {
    if !st.inner.config.tokens.is_empty() {
        return next.run(req).await;
    }
    let host = header(&req, axum::http::header::HOST).unwrap_or_default();
    let origin = header(&req, axum::http::header::ORIGIN);
    if st.inner.config.loopback_hosts_only && !is_loopback(&host) {
        return ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "Host {host:?} is not this machine: without tokens the API answers only to localhost"
            ),
        )
        .into_response();
    }
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && let Some(origin) = origin {
        let host = origin
            .split_once("://")
            .map_or(origin.as_str(), |(_, h)| h)
            .trim_end_matches('/');
        if !is_loopback(host) {
            return ApiError::new(
                ErrorCode::Forbidden,
                format!("a browser request from {origin} may not change state on a server without tokens"),
            )
            .into_response();
        }
    }
    next.run(req).await
}

fn header(req: &Request, name: axum::http::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Headers on every response: no MIME sniffing, no framing (clickjacking of the dashboard), no
/// referrer.
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "content-security-policy",
        HeaderValue::from_static("frame-ancestors 'none'"),
    );
    resp
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
