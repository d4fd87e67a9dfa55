//! Verifying the requests `delayq serve --push` sends (Standard Webhooks): a receiver checks
//! that a request comes from its delayq, was not altered and is recent, with the pusher's own
//! signing code (`delayq_push::signing`).

use delayq_push::signing::{self, DEFAULT_TOLERANCE_S, Secret};

use crate::error::Error;

/// A push request whose signature checked out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookMessage {
    /// Its `webhook-id`: the job id, the same on every retry — deduplicate on it.
    pub id: String,
    /// When it was signed (`webhook-timestamp`, seconds since the epoch).
    pub timestamp: u64,
    /// The body as received (the job's payload).
    pub payload: Vec<u8>,
}

impl WebhookMessage {
    /// The payload parsed as JSON into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.payload)
    }
}

/// Checks a push request now: `secrets` (`whsec_…`; several during a rotation), the request's
/// headers (names in any case) and its raw body. Answers the verified [`WebhookMessage`] (id,
/// timestamp, payload) or [`Error::InvalidSignature`].
pub fn verify_webhook<'h>(
    secrets: &[impl AsRef<str>],
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    body: &[u8],
) -> Result<WebhookMessage, Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    verify_webhook_at(secrets, headers, body, now)
}

/// [`verify_webhook`] at `now_s` (seconds since the epoch), with 5 minutes' tolerance.
pub fn verify_webhook_at<'h>(
    secrets: &[impl AsRef<str>],
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    body: &[u8],
    now_s: u64,
) -> Result<WebhookMessage, Error> {
    let bad = |m: String| Error::InvalidSignature(m);
    let keys = secrets
        .iter()
        .map(|s| Secret::parse(s.as_ref()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    let (mut id, mut ts, mut sig) = ("", "", "");
    for (name, value) in headers {
        if name.eq_ignore_ascii_case(signing::ID_HEADER) {
            id = value;
        } else if name.eq_ignore_ascii_case(signing::TIMESTAMP_HEADER) {
            ts = value;
        } else if name.eq_ignore_ascii_case(signing::SIGNATURE_HEADER) {
            sig = value;
        }
    }
    signing::verify(&keys, id, ts, sig, body, now_s, DEFAULT_TOLERANCE_S)
        .map_err(|e| bad(e.to_string()))?;
    let timestamp = ts
        .trim()
        .parse()
        .map_err(|_| bad("webhook-timestamp is not a number".into()))?;
    Ok(WebhookMessage {
        id: id.to_owned(),
        timestamp,
        payload: body.to_vec(),
    })
}
