//! The job record (format v1; `lua/common.lua` documents the bytes): the client builds the
//! part after the fixed header at enqueue and decodes whole records the scripts return, so the
//! scripts only read and patch the fixed header on the hot paths.

use delayq::{Backoff, NewJob, Result};

use crate::error::shape;

/// Record format version written and read.
pub(crate) const VERSION: u8 = 1;
/// Length of the fixed header.
pub(crate) const HEADER_LEN: usize = 24;
const F_LEASE: u8 = 1;
const F_BACKOFF: u8 = 2;
const F_ERROR: u8 = 4;

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub attempt: u32,
    pub max_attempts: u32,
    pub due_ms: u64,
    pub created_ms: u64,
    pub token: u64,
    pub lease_ms: Option<u32>,
    pub backoff: Option<Backoff>,
    pub last_error: Option<String>,
    pub payload: Vec<u8>,
}

/// `(flags, tail)`: the optional sections and payload of a new job, after the header that the
/// enqueue script writes (it owns the due and created times).
pub(crate) fn tail(job: NewJob) -> (u8, Vec<u8>) {
    let mut flags = 0;
    let mut out = Vec::with_capacity(job.payload.len() + 13);
    if let Some(l) = job.lease {
        flags |= F_LEASE;
        out.extend_from_slice(&(l.as_millis().min(u32::MAX as u128) as u32).to_be_bytes());
    }
    if let Some(b) = job.backoff {
        flags |= F_BACKOFF;
        let (base, cap) = b.base_cap_ms();
        out.push(b.kind_code());
        out.extend_from_slice(&(base.min(u32::MAX as u64) as u32).to_be_bytes());
        out.extend_from_slice(&(cap.min(u32::MAX as u64) as u32).to_be_bytes());
    }
    out.extend_from_slice(&job.payload);
    (flags, out)
}

fn u48(b: &[u8]) -> u64 {
    b.iter().fold(0, |acc, x| (acc << 8) | u64::from(*x))
}

/// Decodes a whole record.
pub(crate) fn decode(b: &[u8]) -> Result<Record> {
    if b.len() < HEADER_LEN {
        return Err(shape("record shorter than its header"));
    }
    if b[0] != VERSION {
        return Err(shape(&format!("unknown record version {}", b[0])));
    }
    let flags = b[1];
    let mut pos = HEADER_LEN;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b
            .get(pos..pos + n)
            .ok_or_else(|| shape("truncated record"))?;
        pos += n;
        Ok(s)
    };
    let lease_ms = if flags & F_LEASE != 0 {
        Some(u48(take(4)?) as u32)
    } else {
        None
    };
    let backoff = if flags & F_BACKOFF != 0 {
        let s = take(9)?;
        Backoff::from_parts(s[0], u48(&s[1..5]), u48(&s[5..9]))
    } else {
        None
    };
    let last_error = if flags & F_ERROR != 0 {
        let n = u48(take(2)?) as usize;
        Some(String::from_utf8_lossy(take(n)?).into_owned())
    } else {
        None
    };
    Ok(Record {
        attempt: u48(&b[2..4]) as u32,
        max_attempts: u48(&b[4..6]) as u32,
        due_ms: u48(&b[6..12]),
        created_ms: u48(&b[12..18]),
        token: u48(&b[18..24]),
        lease_ms,
        backoff,
        last_error,
        payload: b[pos..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn header(flags: u8, attempt: u16, max: u16, due: u64, created: u64, token: u64) -> Vec<u8> {
        let mut h = vec![VERSION, flags];
        h.extend_from_slice(&attempt.to_be_bytes());
        h.extend_from_slice(&max.to_be_bytes());
        for v in [due, created, token] {
            h.extend_from_slice(&v.to_be_bytes()[2..]);
        }
        h
    }

    #[test]
    fn tail_and_header_decode_together() {
        let job = NewJob::new(b"payload".to_vec())
            .lease(Duration::from_millis(1500))
            .backoff(Backoff::Exponential {
                base_ms: 10,
                cap_ms: 90,
            });
        let (flags, tail) = tail(job);
        let mut rec = header(flags, 3, 7, 1_764_000_000_123, 1_764_000_000_000, 42);
        rec.extend(tail);
        let r = decode(&rec).unwrap();
        assert_eq!(
            (r.attempt, r.max_attempts, r.due_ms, r.created_ms, r.token),
            (3, 7, 1_764_000_000_123, 1_764_000_000_000, 42)
        );
        assert_eq!(r.lease_ms, Some(1500));
        assert_eq!(
            r.backoff,
            Some(Backoff::Exponential {
                base_ms: 10,
                cap_ms: 90
            })
        );
        assert_eq!(r.last_error, None);
        assert_eq!(r.payload, b"payload");
    }

    #[test]
    fn error_section_and_bad_records() {
        let mut rec = header(F_ERROR, 1, 1, 5, 5, 0);
        rec.extend_from_slice(&3u16.to_be_bytes());
        rec.extend_from_slice(b"bad");
        rec.extend_from_slice(b"p");
        let r = decode(&rec).unwrap();
        assert_eq!(r.last_error.as_deref(), Some("bad"));
        assert_eq!(r.payload, b"p");
        assert!(decode(&rec[..10]).is_err());
        let mut v2 = rec.clone();
        v2[0] = 2;
        assert!(decode(&v2).is_err());
        let truncated = header(F_ERROR, 1, 1, 5, 5, 0);
        assert!(decode(&truncated).is_err());
    }
}
