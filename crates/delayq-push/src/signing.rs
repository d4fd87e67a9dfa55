//! Standard Webhooks signatures: `webhook-id` (the job id, stable across retries),
//! `webhook-timestamp` (seconds since the epoch) and `webhook-signature`: `v1,<base64 of
//! HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`, one per secret, separated by spaces (so a
//! receiver keeps verifying while secrets rotate). Secrets are written `whsec_<base64>`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::hmac;

/// Header carrying the message id.
pub const ID_HEADER: &str = "webhook-id";
/// Header carrying the timestamp (seconds since the epoch).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Header carrying the signatures.
pub const SIGNATURE_HEADER: &str = "webhook-signature";
/// How far a timestamp may be from the receiver's clock, by default (5 minutes, as the scheme
/// recommends against replays).
pub const DEFAULT_TOLERANCE_S: u64 = 300;

/// Why a secret or a request was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningError {
    /// A secret that is not `whsec_` followed by base64 of at least 16 bytes.
    #[error("invalid webhook secret: {0}")]
    Secret(String),
    /// A header is missing or malformed.
    #[error("invalid webhook header {0}")]
    Header(&'static str),
    /// The timestamp is too far from now (a replay, or a clock off by more than the
    /// tolerance).
    #[error("webhook timestamp {timestamp} is more than {tolerance_s} s from now ({now})")]
    Stale {
        /// The request's timestamp.
        timestamp: u64,
        /// The receiver's time.
        now: u64,
        /// The tolerance.
        tolerance_s: u64,
    },
    /// No signature matches any of the secrets.
    #[error("no webhook signature matches")]
    Mismatch,
}

/// A signing secret.
#[derive(Clone)]
pub struct Secret {
    key: hmac::Key,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(whsec_…)")
    }
}

impl Secret {
    /// Parses `whsec_<base64>` (the key is the decoded bytes, at least 16 of them).
    pub fn parse(text: &str) -> Result<Self, SigningError> {
        const HOW: &str = "a secret is whsec_ followed by the base64 of at least 16 random \
                           bytes; `delayq push-secret` prints a new one";
        let b64 = text
            .trim()
            .strip_prefix("whsec_")
            .ok_or_else(|| SigningError::Secret(format!("it must start with whsec_ ({HOW})")))?;
        let key = B64.decode(b64).map_err(|e| {
            SigningError::Secret(format!("the part after whsec_ is not base64: {e} ({HOW})"))
        })?;
        if key.len() < 16 {
            return Err(SigningError::Secret(format!(
                "the part after whsec_ decodes to {} bytes: at least 16 are needed ({HOW})",
                key.len()
            )));
        }
        Ok(Self::from_bytes(&key))
    }

    /// A new random secret as text: `whsec_` and the base64 of 32 random bytes.
    pub fn generate() -> String {
        let mut key = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
            .expect("the system's random source");
        format!("whsec_{}", B64.encode(key))
    }

    /// A secret of these key bytes.
    pub fn from_bytes(key: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
        }
    }

    /// Secrets from a comma-separated list (`DELAYQ_PUSH_SECRET`).
    pub fn parse_list(text: &str) -> Result<Vec<Self>, SigningError> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Self::parse)
            .collect()
    }

    fn tag(&self, id: &str, timestamp: u64, body: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        ctx.sign()
    }
}

/// The `webhook-signature` value of a request: `v1,<sig>` per secret, space-separated.
pub fn sign(secrets: &[Secret], id: &str, timestamp: u64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| format!("v1,{}", B64.encode(s.tag(id, timestamp, body).as_ref())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Checks a request as a receiver does: the timestamp within `tolerance_s` of `now` (seconds
/// since the epoch), then any `v1` signature matching any secret (compared in constant time).
pub fn verify(
    secrets: &[Secret],
    id: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: u64,
    tolerance_s: u64,
) -> Result<(), SigningError> {
    if id.is_empty() {
        return Err(SigningError::Header(ID_HEADER));
    }
    let ts: u64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SigningError::Header(TIMESTAMP_HEADER))?;
    if ts.abs_diff(now) > tolerance_s {
        return Err(SigningError::Stale {
            timestamp: ts,
            now,
            tolerance_s,
        });
    }
    let mut content = Vec::with_capacity(id.len() + body.len() + 24);
    content.extend_from_slice(id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(ts.to_string().as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    let given: Vec<Vec<u8>> = signature
        .split_whitespace()
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|s| B64.decode(s).ok())
        .collect();
    if given.is_empty() {
        return Err(SigningError::Header(SIGNATURE_HEADER));
    }
    let ok = secrets.iter().any(|s| {
        given
            .iter()
            .any(|g| hmac::verify(&s.key, &content, g).is_ok())
    });
    if ok {
        Ok(())
    } else {
        Err(SigningError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: u64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;

    /// The scheme's published example, also what Python's `hmac` computes for it.
    #[test]
    fn the_published_example_signs_and_verifies() {
        let s = [Secret::parse(SECRET).unwrap()];
        let sig = sign(&s, ID, TS, BODY);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        verify(
            &s,
            ID,
            &TS.to_string(),
            &sig,
            BODY,
            TS + 10,
            DEFAULT_TOLERANCE_S,
        )
        .unwrap();
    }

    #[test]
    fn tampering_another_secret_and_old_timestamps_fail() {
        let s = [Secret::parse(SECRET).unwrap()];
        let sig = sign(&s, ID, TS, BODY);
        let ts = TS.to_string();
        let check = |secrets: &[Secret], id: &str, body: &[u8], now: u64| {
            verify(secrets, id, &ts, &sig, body, now, DEFAULT_TOLERANCE_S)
        };
        assert_eq!(check(&s, ID, b"{}", TS), Err(SigningError::Mismatch));
        assert_eq!(
            check(&s, "msg_other", BODY, TS),
            Err(SigningError::Mismatch)
        );
        let other = [Secret::from_bytes(b"another secret of 32 bytes......")];
        assert_eq!(check(&other, ID, BODY, TS), Err(SigningError::Mismatch));
        assert!(matches!(
            check(&s, ID, BODY, TS + 301),
            Err(SigningError::Stale { .. })
        ));
        assert_eq!(
            verify(&s, ID, "soon", &sig, BODY, TS, 300),
            Err(SigningError::Header(TIMESTAMP_HEADER))
        );
        assert_eq!(
            verify(&s, ID, &ts, "v2,abc", BODY, TS, 300),
            Err(SigningError::Header(SIGNATURE_HEADER))
        );
    }

    /// While secrets rotate, a request carries one signature per secret; a receiver that knows
    /// either accepts it.
    #[test]
    fn rotation_signs_with_every_secret() {
        let old = Secret::parse(SECRET).unwrap();
        let new = Secret::from_bytes(b"the new secret, 32 bytes long...");
        let sig = sign(&[new.clone(), old.clone()], ID, TS, BODY);
        assert_eq!(sig.split(' ').count(), 2);
        for receiver in [vec![old], vec![new]] {
            verify(&receiver, ID, &TS.to_string(), &sig, BODY, TS, 300).unwrap();
        }
    }

    #[test]
    fn secrets_parse_strictly() {
        assert!(
            Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err(),
            "no prefix"
        );
        assert!(Secret::parse("whsec_not*base64").is_err());
        assert!(Secret::parse("whsec_c2hvcnQ=").is_err(), "5 bytes");
        assert_eq!(
            Secret::parse_list(&format!(" {SECRET}, {SECRET} ,"))
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            format!("{:?}", Secret::parse(SECRET).unwrap()),
            "Secret(whsec_…)"
        );
    }
}

/// The signing secrets a running pusher uses, replaceable while it runs (a reload rotates
/// them: list the old and the new one until every receiver knows the new one).
#[derive(Debug, Default)]
pub struct SecretSet(std::sync::RwLock<std::sync::Arc<Vec<Secret>>>);

impl SecretSet {
    /// A set holding `secrets`.
    pub fn new(secrets: Vec<Secret>) -> Self {
        Self(std::sync::RwLock::new(std::sync::Arc::new(secrets)))
    }

    /// The secrets now; a request signs with one snapshot.
    pub fn get(&self) -> std::sync::Arc<Vec<Secret>> {
        match self.0.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the secrets; requests signed from now on use the new ones.
    pub fn replace(&self, secrets: Vec<Secret>) {
        let new = std::sync::Arc::new(secrets);
        match self.0.write() {
            Ok(mut s) => *s = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
    }
}
