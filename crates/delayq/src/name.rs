//! Validated names: [`QueueName`] and [`JobId`]. Every key and every wire format is built from
//! these, so invalid names are rejected once, at the edge, and never reach a backend.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::limits::{MAX_ID_BYTES, MAX_QUEUE_NAME_BYTES};

/// A queue name: 1–128 characters from `[A-Za-z0-9._-]`.
///
/// The restricted alphabet keeps names safe inside Redis keys (no braces, so the hash tag stays
/// ours; no colons, so key prefixes cannot collide) and inside URL paths.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct QueueName(String);

impl QueueName {
    /// Validates `name`.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidInput> {
        let name = name.into();
        let ok_len = !name.is_empty() && name.len() <= MAX_QUEUE_NAME_BYTES;
        let ok_chars = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        // `.` and `..` are dot segments: browsers, curl and proxies rewrite them out of a path
        // (`/v1/queues/../jobs`), so such a queue could never be reached by its URL.
        if name == "." || name == ".." {
            return Err(InvalidInput::QueueName(format!(
                "{name:?}: a dot segment, which URL normalisers remove from a path"
            )));
        }
        if ok_len && ok_chars {
            Ok(Self(name))
        } else {
            Err(InvalidInput::QueueName(format!(
                "{name:?}: must be 1-{MAX_QUEUE_NAME_BYTES} characters from [A-Za-z0-9._-]"
            )))
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for QueueName {
    type Error = InvalidInput;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<QueueName> for String {
    fn from(n: QueueName) -> String {
        n.0
    }
}

impl std::str::FromStr for QueueName {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// A job id: 1–256 bytes of UTF-8 without control characters.
///
/// Producers choose ids to make enqueue idempotent (an order id, say); when they do not, the
/// producer generates a random one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// Validates `id`.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidInput> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return Err(InvalidInput::JobId(format!(
                "length {} is outside 1-{MAX_ID_BYTES} bytes",
                id.len()
            )));
        }
        if id.chars().any(char::is_control) {
            return Err(InvalidInput::JobId(format!(
                "{id:?} contains control characters"
            )));
        }
        Ok(Self(id))
    }

    /// A fresh random id (128 random bits, 26 characters of Crockford base32).
    pub fn generate() -> Self {
        const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
        let mut bits: u128 = rand::random();
        let mut s = String::with_capacity(26);
        for _ in 0..26 {
            s.push(ALPHABET[(bits & 31) as usize] as char);
            bits >>= 5;
        }
        Self(s)
    }

    /// A fresh random id for a job of `key`: [`JobId::generate`]'s, then `~k` and the key's
    /// [`JobKey::hash64`] in 16 hex digits, which a sharded store places the job by
    /// ([`placement_hash`]), so every job of a key with a generated id shares the key's shard.
    pub fn generate_for(key: &JobKey) -> Self {
        Self(format!("{}~k{:016x}", Self::generate().0, key.hash64()))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// FNV-1a (64-bit) of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The hash a sharded store places job `id` by (its shard: this modulo the shard count): the
/// key hash an id from [`JobId::generate_for`] ends with (`~k` and 16 lower-case hex digits),
/// else FNV-1a (64-bit) of the id's bytes. Stable across versions and processes: every client
/// finds a job in the same shard.
pub fn placement_hash(id: &str) -> u64 {
    let b = id.as_bytes();
    if b.len() >= 18 && &b[b.len() - 18..b.len() - 16] == b"~k" {
        let hex = &b[b.len() - 16..];
        if hex
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            && let Ok(h) = u64::from_str_radix(&id[id.len() - 16..], 16)
        {
            return h;
        }
    }
    fnv1a(b)
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for JobId {
    type Error = InvalidInput;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<JobId> for String {
    fn from(n: JobId) -> String {
        n.0
    }
}

impl std::str::FromStr for JobId {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// A job's fairness key: the tenant, customer or upstream host it belongs to (1-128 bytes of
/// text without control characters). A queue shares its claims among the keys with due jobs
/// round-robin and can bound each key's in-flight jobs and start rate
/// ([`crate::QueueSettings::key_max_in_flight`], [`crate::QueueSettings::key_rate`]); a key can
/// be paused on its own. Jobs without a key share one turn among the keys.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobKey(String);

impl JobKey {
    /// Validates `key`.
    pub fn new(key: impl Into<String>) -> Result<Self, InvalidInput> {
        let key = key.into();
        if key.is_empty() || key.len() > crate::limits::MAX_KEY_BYTES {
            return Err(InvalidInput::Key(format!(
                "length {} is outside 1-{} bytes",
                key.len(),
                crate::limits::MAX_KEY_BYTES
            )));
        }
        if key.chars().any(char::is_control) {
            return Err(InvalidInput::Key(format!(
                "{key:?} contains control characters"
            )));
        }
        Ok(Self(key))
    }

    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// FNV-1a (64-bit) of the key's bytes: a sharded store keeps the key's jobs with generated
    /// ids ([`JobId::generate_for`]) in shard `hash64 % shards`.
    pub fn hash64(&self) -> u64 {
        fnv1a(self.0.as_bytes())
    }
}

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for JobKey {
    type Error = InvalidInput;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(s)
    }
}

impl From<JobKey> for String {
    fn from(n: JobKey) -> String {
        n.0
    }
}

impl std::str::FromStr for JobKey {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        for ok in ["orders", "a", "A.b_c-9", "...", "a..b", &"q".repeat(128)] {
            assert!(QueueName::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "{orders}",
            "a:b",
            "é",
            &"q".repeat(129),
            "a\n",
        ] {
            assert!(QueueName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn job_ids() {
        assert!(JobId::new("order-42").is_ok());
        assert!(JobId::new("with space and {braces}:colons").is_ok());
        assert!(JobId::new("x".repeat(256)).is_ok());
        assert!(JobId::new("x".repeat(257)).is_err());
        assert!(JobId::new("").is_err());
        assert!(JobId::new("a\u{0}b").is_err());
        assert!(JobId::new("a\tb").is_err());
    }

    #[test]
    fn job_keys() {
        assert!(JobKey::new("tenant-7").is_ok());
        assert!(JobKey::new("api.example.com:443").is_ok());
        assert!(JobKey::new("k".repeat(128)).is_ok());
        assert!(JobKey::new("k".repeat(129)).is_err());
        assert!(JobKey::new("").is_err());
        assert!(JobKey::new("a\u{0}b").is_err());
    }

    #[test]
    fn a_keyed_id_is_placed_by_its_key() {
        let k = JobKey::new("tenant-7").unwrap();
        let id = JobId::generate_for(&k);
        assert_eq!(id.as_str().len(), 26 + 18);
        assert_eq!(placement_hash(id.as_str()), k.hash64());
        assert_eq!(placement_hash("order-42"), fnv1a(b"order-42"));
        // Not the suffix's form: placed by the whole id.
        for plain in ["x~k0123456789ABCDEF", "~k0123", "x~k0123456789abcdeg"] {
            assert_eq!(placement_hash(plain), fnv1a(plain.as_bytes()), "{plain}");
        }
        assert_eq!(placement_hash("x~k00000000000000ff"), 255);
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = JobId::generate();
        let b = JobId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 26);
        assert!(JobId::new(a.as_str()).is_ok());
    }
}
