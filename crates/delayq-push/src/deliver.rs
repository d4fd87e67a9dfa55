//! One delivery: the request a due job becomes (method, URL, headers, signature, body), sent
//! within its dispatch deadline, and what its answer means for the job — acknowledged, retried
//! after the server's `Retry-After`, retried by the job's backoff, or dead-lettered — with the
//! metrics and the delivery log written on the way.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq::{Delivery, DeliveryLog, Failure, Job, Target, TraceContext, telemetry};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::client::{self, check_literal};
use crate::hosts::Hosts;
use crate::signing;

/// Header: the attempt number (1 for the first request of a job).
pub const ATTEMPT_HEADER: &str = "delayq-attempt";
/// Header: the job's due time, RFC 3339 with milliseconds (UTC).
pub const DUE_AT_HEADER: &str = "delayq-due-at";
/// Header: the job's queue.
pub const QUEUE_HEADER: &str = "delayq-queue";
/// Bytes of a failed response's body kept in `last_error`.
pub const ERROR_BODY_BYTES: usize = 200;
/// Longest `Retry-After` honoured; longer ones are cut to it.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What every delivery shares.
pub(crate) struct Shared {
    /// The HTTP client; a reload with another CA file replaces it.
    pub client: std::sync::RwLock<reqwest::Client>,
    pub secrets: Arc<signing::SecretSet>,
    pub allow_private: bool,
    pub hosts: Hosts,
    pub log: Arc<DeliveryLog>,
    /// Longest a 429 holds a key ([`crate::PusherOptions::max_key_hold`]).
    pub max_key_hold: Duration,
}

/// How one request ended.
struct Ended {
    outcome: &'static str,
    status: Option<StatusCode>,
    result: Result<(), Failure>,
}

impl Ended {
    fn failed(outcome: &'static str, status: Option<StatusCode>, f: Failure) -> Self {
        Self {
            outcome,
            status,
            result: Err(f),
        }
    }
}

/// What one delivery did: the attempt's result and, when the target answered 429 with a
/// `Retry-After`, how long it asked to be left alone (its job's key may be held that long).
pub(crate) struct Delivered {
    pub result: Result<(), Failure>,
    pub too_many: Option<Duration>,
}

/// Delivers `job` to `target`: acquires the host's limits, sends, classifies, records.
pub(crate) async fn deliver(shared: &Shared, job: &Job, target: &Target) -> Delivered {
    let started_wall = now_ms();
    let started = Instant::now();
    // The URL parsed once: the request's, and the host its limits and metrics go by.
    let url = reqwest::Url::parse(&target.url);
    let host = url
        .as_ref()
        .ok()
        .and_then(|u| u.host_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let ended = match url {
        Ok(url) => {
            use tracing::Instrument;
            let span = client_span(target, &url, &host);
            let ended = send(shared, job, target, url, &host)
                .instrument(span.clone())
                .await;
            if let Some(s) = ended.status {
                span.record("http.response.status_code", s.as_u16());
            }
            if ended.result.is_err() {
                span.record("error.type", ended.outcome);
                span.record("otel.status_code", "ERROR");
            }
            ended
        }
        Err(e) => Ended::failed(
            "invalid",
            None,
            Failure::dead(format!("invalid target url {:?}: {e}", target.url)),
        ),
    };
    let took = started.elapsed();
    let class = ended.status.map_or("none", |s| match s.as_u16() / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    });
    metrics::counter!(telemetry::PUSH_REQUESTS, "queue" => job.queue.to_string(),
        "outcome" => ended.outcome, "status_class" => class)
    .increment(1);
    if ended.status.is_some() {
        metrics::histogram!(telemetry::PUSH_RESPONSE, "host" => host.clone())
            .record(took.as_secs_f64());
    }
    let error = ended.result.as_ref().err().map(|f| f.message().to_owned());
    if let Some(e) = &error {
        tracing::info!(queue = %job.queue, id = %job.id, attempt = job.attempt, %host,
            outcome = ended.outcome, error = %e, "push delivery failed");
    }
    shared.log.record(
        &job.queue,
        &job.id,
        Delivery {
            attempt: job.attempt,
            at_ms: started_wall,
            duration_ms: took.as_millis() as u64,
            status: ended.status.map(|s| s.as_u16()),
            outcome: ended.outcome.to_owned(),
            error,
        },
    );
    let too_many = match (ended.status, &ended.result) {
        (Some(StatusCode::TOO_MANY_REQUESTS), Err(f)) => f.retry_delay(),
        _ => None,
    };
    Delivered {
        result: ended.result,
        too_many,
    }
}

async fn send(shared: &Shared, job: &Job, target: &Target, url: reqwest::Url, host: &str) -> Ended {
    let invalid = |m: String| Ended::failed("invalid", None, Failure::dead(m));
    if let Err(r) = check_literal(&url, shared.allow_private) {
        return Ended::failed("refused", None, Failure::dead(format!("refused: {r}")));
    }
    let method = match reqwest::Method::from_bytes(target.method.as_bytes()) {
        Ok(m) => m,
        Err(_) => return invalid(format!("invalid target method {:?}", target.method)),
    };
    let headers = match headers(shared, job, target) {
        Ok(h) => h,
        Err(m) => return invalid(m),
    };
    let deadline = dispatch_deadline(job);
    let _slot = shared.hosts.acquire(host).await;
    let client = match shared.client.read() {
        Ok(c) => c.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    let sent = client
        .request(method, url)
        .headers(headers)
        .timeout(deadline)
        .body(job.payload.clone())
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => return request_error(&e, deadline),
    };
    let status = resp.status();
    if status.is_success() {
        return Ended {
            outcome: "delivered",
            status: Some(status),
            result: Ok(()),
        };
    }
    let retry_after = if matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        resp.headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()))
    } else {
        None
    };
    let body = first_bytes(resp).await;
    let mut message = format!("HTTP {}", status.as_u16());
    if !body.is_empty() {
        message.push_str(": ");
        message.push_str(&body);
    }
    match retry_after {
        Some(d) => Ended::failed(
            "throttled",
            Some(status),
            Failure::retry_in(format!("{message} (Retry-After {} ms)", d.as_millis()), d),
        ),
        None => Ended::failed("http_error", Some(status), Failure::retry(message)),
    }
}

/// The request's dispatch deadline: the job's `timeout`, else the default, at most 30 min.
fn dispatch_deadline(job: &Job) -> Duration {
    job.timeout
        .unwrap_or(delayq::target::DEFAULT_DISPATCH_DEADLINE)
        .min(delayq::target::MAX_DISPATCH_DEADLINE)
}

/// The target's headers, a content type when it sets none, the delivery facts, the signature
/// and the job's trace context (`traceparent`, `tracestate`) when it carries one.
fn headers(shared: &Shared, job: &Job, target: &Target) -> Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    for (k, v) in &target.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("invalid target header name {k:?}"))?;
        let value =
            HeaderValue::from_str(v).map_err(|_| format!("invalid value of target header {k}"))?;
        h.insert(name, value);
    }
    if !h.contains_key(CONTENT_TYPE) {
        let json = serde_json::from_slice::<serde::de::IgnoredAny>(&job.payload).is_ok();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static(if json {
                "application/json"
            } else {
                "application/octet-stream"
            }),
        );
    }
    let ts = now_ms() / 1000;
    let fact = |s: String| HeaderValue::from_str(&s).map_err(|e| e.to_string());
    h.insert(signing::ID_HEADER, fact(job.id.to_string())?);
    h.insert(signing::TIMESTAMP_HEADER, fact(ts.to_string())?);
    let secrets = shared.secrets.get();
    if !secrets.is_empty() {
        let sig = signing::sign(&secrets, job.id.as_str(), ts, &job.payload);
        h.insert(signing::SIGNATURE_HEADER, fact(sig)?);
    }
    h.insert(ATTEMPT_HEADER, fact(job.attempt.to_string())?);
    h.insert(
        DUE_AT_HEADER,
        fact(delayq::rfc3339::format_ms(job.due_at_ms))?,
    );
    h.insert(QUEUE_HEADER, fact(job.queue.to_string())?);
    // The job's trace continues at the target under this request's span (a new span id in
    // the job's trace when no OpenTelemetry layer records the span).
    if let Some(request) =
        delayq::otel::current().or_else(|| job.trace.as_ref().map(TraceContext::child))
    {
        h.insert("traceparent", fact(request.traceparent().to_owned())?);
        if let Some(state) = request.tracestate() {
            h.insert("tracestate", fact(state.to_owned())?);
        }
    }
    Ok(h)
}

/// The CLIENT span of one delivery, by the OpenTelemetry HTTP client conventions: named by
/// the method, `url.full` without credentials and with query values redacted (a target's
/// query may hold a secret).
fn client_span(target: &Target, url: &reqwest::Url, host: &str) -> tracing::Span {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    if shown.query().is_some() {
        let keys: Vec<String> = shown.query_pairs().map(|(k, _)| k.into_owned()).collect();
        shown
            .query_pairs_mut()
            .clear()
            .extend_pairs(keys.iter().map(|k| (k.as_str(), "REDACTED")));
    }
    tracing::info_span!(
        "push request",
        otel.name = %target.method,
        otel.kind = "client",
        http.request.method = %target.method,
        url.full = %shown,
        server.address = %host,
        http.response.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// A request that got no response: refused by the SSRF rules (dead), timed out or failed to
/// connect (retried by backoff).
fn request_error(e: &reqwest::Error, deadline: Duration) -> Ended {
    if let Some(r) = client::refusal(e) {
        return Ended::failed("refused", None, Failure::dead(format!("refused: {r}")));
    }
    if e.is_timeout() {
        return Ended::failed(
            "timeout",
            None,
            Failure::retry(format!(
                "timeout: no response within {} ms",
                deadline.as_millis()
            )),
        );
    }
    Ended::failed(
        "connect_error",
        None,
        Failure::retry(format!("connection error: {}", chain(e))),
    )
}

/// An error with its causes, `a: b: c`.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}

/// The first [`ERROR_BODY_BYTES`] of a response body (lossy UTF-8, trimmed); the rest is not
/// read.
async fn first_bytes(mut resp: reqwest::Response) -> String {
    let mut buf = Vec::new();
    while buf.len() < ERROR_BODY_BYTES {
        match resp.chunk().await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            _ => break,
        }
    }
    buf.truncate(ERROR_BODY_BYTES);
    String::from_utf8_lossy(&buf).trim().to_owned()
}

/// `Retry-After` as seconds or an HTTP date, from `now`; at most [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    let v = v.trim();
    let d = match v.parse::<u64>() {
        Ok(s) => Duration::from_secs(s),
        Err(_) => httpdate::parse_http_date(v)
            .ok()?
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    };
    Some(d.min(MAX_RETRY_AFTER))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("99999999", now), Some(MAX_RETRY_AFTER));
    }
}
