//! Who may call the API: bearer tokens (compared in constant time) and their scopes, the
//! metrics token, the browser guard of the tokenless mode, and the security headers of every
//! response (a strict Content-Security-Policy for the console).

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;

/// What a token may do. Every scope may read; `admin` may do everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Browse jobs and read stats, series and events.
    Read,
    /// Also enqueue, cancel and reschedule jobs.
    Produce,
    /// Also claim, ack, nack, extend and release leases.
    Consume,
    /// Everything: the console's actions (run now, requeue, delete, purge, bulk cancel, pause,
    /// resume) and queue settings.
    Admin,
}

impl Scope {
    /// Every scope, in the order `--token` names them.
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Produce, Scope::Consume, Scope::Admin];

    /// Its name in `--token SCOPE:TOKEN`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Produce => "produce",
            Scope::Consume => "consume",
            Scope::Admin => "admin",
        }
    }

    /// Whether a token of this scope may do what `needed` requires.
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Admin || needed == Scope::Read || self == needed
    }

    /// The scope a request needs, by method and route.
    pub fn needed(method: &Method, route: &str) -> Scope {
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return Scope::Read;
        }
        match (method.as_str(), route) {
            ("POST", "/v1/queues/{q}/jobs" | "/v1/flows")
            | ("DELETE" | "PATCH", "/v1/queues/{q}/jobs/{id}") => Scope::Produce,
            (
                "POST",
                "/v1/queues/{q}/batches"
                | "/v1/queues/{q}/batches/{id}/jobs"
                | "/v1/queues/{q}/batches/{id}/close"
                | "/v1/queues/{q}/keys/{key}/cancel"
                | "/v1/queues/{q}/keys/{key}/reschedule",
            ) => Scope::Produce,
            (
                "POST",
                "/v1/queues/{q}/claim"
                | "/v1/queues/{q}/acks"
                | "/v1/claim"
                | "/v1/leases/cancelled",
            )
            | ("DELETE", "/v1/queues/{q}/polls/{poll_id}")
            | (
                "POST",
                "/v1/queues/{q}/jobs/{id}/ack"
                | "/v1/queues/{q}/jobs/{id}/nack"
                | "/v1/queues/{q}/jobs/{id}/extend"
                | "/v1/queues/{q}/jobs/{id}/release",
            ) => Scope::Consume,
            _ => Scope::Admin,
        }
    }
}

/// A bearer token and what it may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The secret the client sends.
    pub secret: String,
    /// Its scope; `None`: every scope (a bare `--token TOKEN`).
    pub scope: Option<Scope>,
}

impl Token {
    /// A token of every scope.
    pub fn all(secret: impl Into<String>) -> Self {
        Self {
            secret: secret.into(),
            scope: None,
        }
    }

    /// Parses `SCOPE:TOKEN` — a scope of `read`, `produce`, `consume`, `admin`, or `all` for
    /// every scope — or a bare `TOKEN` holding no `:` (every scope; the command line's short
    /// form). Whatever precedes a `:` must be one of those scopes exactly (lower case, no
    /// spaces): a mistyped scope (`reed:x`, `Read:x`, `read :x`) is refused, never taken as
    /// a token of every scope. Errors never repeat the token.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(_) => Self::parse_scoped(s),
            None => Self::checked(s, None),
        }
    }

    /// Parses a line of a token file: always `SCOPE:TOKEN` (`all:TOKEN` for every scope), so
    /// a line cannot grant every scope by a typo.
    pub fn parse_scoped(s: &str) -> Result<Self, String> {
        let Some((name, secret)) = s.split_once(':') else {
            return Err(
                "expected SCOPE:TOKEN (read, produce, consume, admin, or all: for every scope)"
                    .into(),
            );
        };
        let scope = match name {
            "all" => None,
            _ => Some(
                Scope::ALL
                    .into_iter()
                    .find(|sc| sc.as_str() == name)
                    .ok_or_else(|| {
                        "the scope before `:` is not read, produce, consume, admin or all \
                         (lower case, no spaces)"
                            .to_owned()
                    })?,
            ),
        };
        Self::checked(secret, scope)
    }

    fn checked(secret: &str, scope: Option<Scope>) -> Result<Self, String> {
        if secret.is_empty() {
            return Err("a token may not be empty".into());
        }
        if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("a token may not hold spaces or control characters".into());
        }
        Ok(Self {
            secret: secret.to_owned(),
            scope,
        })
    }

    fn allows(&self, needed: Scope) -> bool {
        Caller(self.scope).allows(needed)
    }
}

/// Whom `require_token` let through, for the handlers: the scope of its token (`None`: a bare
/// token, or a server without tokens — every scope).
#[derive(Clone, Copy, Debug)]
pub struct Caller(pub Option<Scope>);

impl Caller {
    /// Whether it may do what `needed` requires.
    pub fn allows(self, needed: Scope) -> bool {
        self.0.is_none_or(|s| s.allows(needed))
    }
}

/// The bearer token of a request ("" when there is none).
pub(crate) fn bearer(req: &Request) -> &str {
    req.headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110 §11.1).
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map_or("", |(_, t)| t.trim())
}

/// The configured token `given` is, compared with every one of them whatever matched, so
/// timing says nothing about which one.
fn find<'t>(tokens: &'t [Token], given: &str) -> Option<&'t Token> {
    tokens.iter().fold(None, |found, t| {
        let eq = ct_eq(t.secret.as_bytes(), given.as_bytes());
        if eq && found.is_none() {
            Some(t)
        } else {
            found
        }
    })
}

fn unauthorized() -> Response {
    ApiError::new(
        ErrorCode::Unauthorized,
        "a valid `Authorization: Bearer <token>` is required",
    )
    .into_response()
}

/// Lets a request through when no token is configured, or when its bearer token is one of
/// them and its scope allows the route (403 `forbidden` otherwise).
pub async fn require_token<B: Send + Sync + 'static>(
    State(st): State<AppState<B>>,
    mut req: Request,
    next: Next,
) -> Response {
    let creds = st.credentials();
    let tokens = &creds.tokens;
    if tokens.is_empty() {
        return next.run(req).await;
    }
    let Some(token) = find(tokens, bearer(&req)) else {
        return unauthorized();
    };
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("", MatchedPath::as_str);
    let needed = Scope::needed(req.method(), route);
    if !token.allows(needed) {
        let scope = token.scope.map_or("all", Scope::as_str);
        return ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "this token's scope ({scope}) does not allow {} {route}: it needs {}",
                req.method(),
                needed.as_str()
            ),
        )
        .into_response();
    }
    req.extensions_mut().insert(Caller(token.scope));
    // Budgets count per token: the one that matched, however its header was spelled.
    let at = tokens
        .iter()
        .position(|t| std::ptr::eq(t, token))
        .unwrap_or_default();
    req.extensions_mut()
        .insert(crate::budget::CallerKey(format!("token {at}")));
    next.run(req).await
}

pub use delayq_wire::Whoami;

/// `GET /v1/whoami`: the caller's scope and what it allows.
#[utoipa::path(
    get, path = "/v1/whoami", tag = "auth",
    responses((status = 200, body = Whoami), (status = 401, body = ErrorBody))
)]
pub async fn whoami<B: Send + Sync + 'static>(
    State(st): State<AppState<B>>,
    caller: Option<Extension<Caller>>,
) -> Json<Whoami> {
    // Without tokens `require_token` lets every request through as it is: every scope.
    let caller = caller.map_or(Caller(None), |Extension(c)| c);
    Json(Whoami {
        scope: caller.0.map_or("all", Scope::as_str).to_owned(),
        allows: Scope::ALL
            .into_iter()
            .filter(|&needed| caller.allows(needed))
            .map(|s| s.as_str().to_owned())
            .collect(),
        tokens_required: !st.credentials().tokens.is_empty(),
    })
}

/// `/metrics` behind a token: with [`crate::HttpConfig::metrics_token`] set, that token (or any
/// API token) is required.
pub async fn require_metrics_token<B: Send + Sync + 'static>(
    State(st): State<AppState<B>>,
    req: Request,
    next: Next,
) -> Response {
    let config = st.credentials();
    let Some(metrics) = &config.metrics_token else {
        return next.run(req).await;
    };
    let given = bearer(&req);
    if ct_eq(metrics.as_bytes(), given.as_bytes()) || find(&config.tokens, given).is_some() {
        next.run(req).await
    } else {
        unauthorized()
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
    if !st.credentials().tokens.is_empty() {
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

/// The Content-Security-Policy of every response: scripts, styles and connections only from
/// this server (no inline script or style), no framing, no plugins, no base or form tricks.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Headers on every response: no MIME sniffing, no framing (clickjacking of the console), no
/// referrer, and [`CSP`].
pub async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
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
    use super::{Scope, Token};
    use axum::http::Method;

    #[test]
    fn a_mistyped_scope_is_refused_never_a_token_of_every_scope() {
        for bad in [
            "reed:x", "Read:x", "read :x", " read:x", "ADMIN:x", "x:y", "read:a b", "all:",
        ] {
            Token::parse(bad).expect_err(bad);
        }
        // A file line needs its scope, `all:` included.
        assert!(Token::parse_scoped("bare").is_err());
        assert_eq!(Token::parse_scoped("all:bare").unwrap(), Token::all("bare"));
        assert_eq!(
            Token::parse_scoped("consume:c").unwrap().scope,
            Some(Scope::Consume)
        );
        // The error never repeats the secret.
        let e = Token::parse("Read:hunter2").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn scopes_by_route() {
        let t = |s: &str| Token::parse(s).unwrap();
        assert_eq!(t("read:abc").scope, Some(Scope::Read));
        assert_eq!(t("abc").scope, None);
        assert_eq!(t("all:x:y"), Token::all("x:y"));
        assert!(Token::parse("admin:").is_err());
        let needed = |m: Method, r: &str| Scope::needed(&m, r);
        assert_eq!(needed(Method::GET, "/v1/queues/{q}/jobs"), Scope::Read);
        assert_eq!(needed(Method::POST, "/v1/queues/{q}/jobs"), Scope::Produce);
        assert_eq!(
            needed(Method::POST, "/v1/queues/{q}/batches"),
            Scope::Produce
        );
        assert_eq!(
            needed(Method::POST, "/v1/queues/{q}/batches/{id}/close"),
            Scope::Produce
        );
        assert_eq!(
            needed(Method::GET, "/v1/queues/{q}/batches/{id}"),
            Scope::Read
        );
        assert_eq!(needed(Method::POST, "/v1/claim"), Scope::Consume);
        assert_eq!(needed(Method::POST, "/v1/leases/cancelled"), Scope::Consume);
        assert_eq!(
            needed(Method::DELETE, "/v1/queues/{q}/jobs/{id}"),
            Scope::Produce,
            "cancel, also with running=true"
        );
        assert_eq!(needed(Method::DELETE, "/v1/queues/{q}/jobs"), Scope::Admin);
        assert_eq!(
            needed(Method::POST, "/v1/queues/{q}/keys/{key}/cancel"),
            Scope::Produce
        );
        assert_eq!(
            needed(Method::POST, "/v1/queues/{q}/keys/{key}/reschedule"),
            Scope::Produce
        );
        assert_eq!(
            needed(Method::POST, "/v1/queues/{q}/keys/{key}/pause"),
            Scope::Admin
        );
        assert_eq!(
            needed(Method::POST, "/v1/queues/{q}/jobs/{id}/ack"),
            Scope::Consume
        );
        assert_eq!(needed(Method::DELETE, "/v1/queues/{q}/dead"), Scope::Admin);
        assert!(!Scope::Consume.allows(Scope::Admin));
        assert!(Scope::Consume.allows(Scope::Read));
        assert!(!Scope::Read.allows(Scope::Produce));
        assert!(Scope::Admin.allows(Scope::Consume));
    }

    #[test]
    fn ct_eq() {
        assert!(super::ct_eq(b"secret", b"secret"));
        assert!(!super::ct_eq(b"secret", b"secreT"));
        assert!(!super::ct_eq(b"secret", b"secret2"));
    }
}
