//! HTTP push targets: where a job is delivered when a pusher (`delayq serve --push`,
//! `delayq_push::Pusher`) runs it instead of a worker — the [`Target`] a job or a queue
//! carries, its checks, and the dispatch-deadline bounds.
//!
//! The store keeps a target as its JSON text; only the pusher interprets it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;

/// Dispatch deadline of a pushed job that sets no `timeout`: how long its request may take.
pub const DEFAULT_DISPATCH_DEADLINE: Duration = Duration::from_secs(30);
/// Longest dispatch deadline (a pushed job's `timeout`).
pub const MAX_DISPATCH_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// Longest target URL, bytes.
pub const MAX_URL_LEN: usize = 2048;
/// Most headers a target may set.
pub const MAX_HEADERS: usize = 32;
/// Longest header value, bytes.
pub const MAX_HEADER_VALUE: usize = 4096;
/// Methods a target may use.
pub const METHODS: &[&str] = &["POST", "PUT", "PATCH", "DELETE", "GET", "HEAD", "OPTIONS"];
/// Header names a target may not set: the pusher writes them (signature, attempt, due time,
/// body framing) or the connection owns them.
pub const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
];
/// Header name prefixes a target may not set (`webhook-*` is the signature, `delayq-*` the
/// delivery facts).
pub const RESERVED_PREFIXES: &[&str] = &["webhook-", "delayq-"];

/// Where and how a job is delivered by HTTP: the job's payload is the request body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Request method, `POST` when absent.
    #[serde(default = "default_method")]
    pub method: String,
    /// Extra request headers (e.g. `authorization`); names are case-insensitive.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

fn default_method() -> String {
    "POST".to_owned()
}

impl Target {
    /// A `POST` to `url` with no extra headers.
    pub fn post(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            method: default_method(),
            headers: BTreeMap::new(),
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Checks the URL (absolute http/https with a host, no credentials, no fragment), the
    /// method and the headers. Whether the host may be reached is the pusher's question (SSRF
    /// rules apply to the address it resolves to).
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let bad = |m: String| Err(InvalidInput::Target(m));
        if self.url.len() > MAX_URL_LEN {
            return bad(format!("url is over {MAX_URL_LEN} bytes"));
        }
        // The URL parser drops tabs and line breaks silently: refuse them (and every other
        // control character) rather than store a URL that is not the one delivered.
        if self.url.chars().any(char::is_control) {
            return bad(format!(
                "url {:?} contains control characters (CR, LF, tab, …)",
                self.url
            ));
        }
        let url = url::Url::parse(&self.url).map_err(|e| {
            InvalidInput::Target(format!("url {:?} is not an absolute URL: {e}", self.url))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return bad(format!(
                "url scheme must be http or https, not {}",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return bad("url has no host".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return bad("url may not carry credentials: set an authorization header".into());
        }
        if url.fragment().is_some() {
            return bad("url may not have a #fragment".into());
        }
        if !METHODS.contains(&self.method.as_str()) {
            return bad(format!(
                "method {:?} is not one of {}",
                self.method,
                METHODS.join(", ")
            ));
        }
        if self.headers.len() > MAX_HEADERS {
            return bad(format!("more than {MAX_HEADERS} headers"));
        }
        for (name, value) in &self.headers {
            let lower = name.to_ascii_lowercase();
            if name.is_empty() || !name.bytes().all(is_token_byte) {
                return bad(format!("header name {name:?} is not a valid token"));
            }
            if RESERVED_HEADERS.contains(&lower.as_str())
                || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
            {
                return bad(format!("header {name:?} is set by the pusher"));
            }
            // RFC 9110 field values: visible characters, spaces and tabs — no other control.
            if value.len() > MAX_HEADER_VALUE || value.chars().any(|c| c.is_control() && c != '\t')
            {
                return bad(format!(
                    "header {name:?} has a value over {MAX_HEADER_VALUE} bytes or with control \
                     characters (CR, LF, NUL, …)"
                ));
            }
        }
        Ok(())
    }

    /// The JSON text the stores keep.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a target serializes")
    }

    /// Reads what [`Target::to_json`] wrote.
    pub fn from_json(s: &[u8]) -> Result<Self, InvalidInput> {
        serde_json::from_slice(s).map_err(|e| InvalidInput::Target(e.to_string()))
    }
}

/// Checks a pushed job's dispatch deadline against [`MAX_DISPATCH_DEADLINE`].
pub fn validate_dispatch_deadline(timeout: Option<Duration>) -> Result<(), InvalidInput> {
    match timeout {
        Some(t) if t > MAX_DISPATCH_DEADLINE => Err(InvalidInput::Deadline(format!(
            "a pushed job's timeout (its dispatch deadline) of {} ms is over {} ms (30 min)",
            t.as_millis(),
            MAX_DISPATCH_DEADLINE.as_millis()
        ))),
        _ => Ok(()),
    }
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_targets_pass() {
        let t = Target::post("https://example.com/hook?x=1").header("Authorization", "Bearer x");
        t.validate().unwrap();
        let back = Target::from_json(t.to_json().as_bytes()).unwrap();
        assert_eq!(back, t);
        let t: Target = serde_json::from_str(r#"{"url":"http://10.0.0.1:8080/x"}"#).unwrap();
        assert_eq!(t.method, "POST");
        t.validate().unwrap();
    }

    #[test]
    fn bad_targets_are_refused() {
        for url in [
            "ftp://example.com/",
            "example.com/x",
            "https://user:pw@example.com/",
            "https://example.com/#frag",
            "http://",
            "",
            "https://example.com/a\r\nHost: evil",
            "https://example.com/\tx",
            "https://exa\nmple.com/",
        ] {
            assert!(
                matches!(Target::post(url).validate(), Err(InvalidInput::Target(_))),
                "{url}"
            );
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert!(Target::post(long).validate().is_err());
        let mut t = Target::post("https://example.com/");
        t.method = "post".into();
        assert!(t.validate().is_err(), "methods are upper case");
        t.method = "TRACE".into();
        assert!(t.validate().is_err());
        for (k, v) in [
            ("Host", "x"),
            ("content-length", "1"),
            ("Webhook-Signature", "v1,x"),
            ("delayq-attempt", "1"),
            ("bad name", "x"),
            ("x-ok", "a\r\nb"),
        ] {
            let t = Target::post("https://example.com/").header(k, v);
            assert!(t.validate().is_err(), "{k}: {v}");
        }
        assert!(serde_json::from_str::<Target>(r#"{"url":"https://a.b","nope":1}"#).is_err());
    }

    #[test]
    fn dispatch_deadline_is_bounded() {
        assert!(validate_dispatch_deadline(None).is_ok());
        assert!(validate_dispatch_deadline(Some(MAX_DISPATCH_DEADLINE)).is_ok());
        assert!(
            validate_dispatch_deadline(Some(MAX_DISPATCH_DEADLINE + Duration::from_secs(1)))
                .is_err()
        );
    }
}
