//! The job record, format v1: its layout is defined here (ARCHITECTURE.md has the byte table,
//! checked by a test; the Lua prelude gets the offsets and flags from these constants). The
//! client builds new records at enqueue (`enqueue.lua` writes only their due and created times;
//! the schedule scripts take the part after the header) and decodes whole records the scripts
//! return, so the scripts only read and patch the fixed header on the hot paths.

use delayq::{Backoff, NewJob, Result, Retention};

use crate::error::shape;

/// Record format version written and read.
pub(crate) const VERSION: u8 = 1;
/// Length of the fixed header.
pub(crate) const HEADER_LEN: usize = 24;
/// Flag: a `u32` lease length in ms follows the header.
pub(crate) const F_LEASE: u8 = 1;
/// Flag: a backoff (`u8` kind, `u32` base ms, `u32` cap ms) follows.
pub(crate) const F_BACKOFF: u8 = 2;
/// Flag: a last error (`u16` length, then its bytes) follows.
pub(crate) const F_ERROR: u8 = 4;
/// Flag: a `u32` timeout in ms (longest one attempt may run) follows.
pub(crate) const F_TIMEOUT: u8 = 8;
/// Flag: a `u48` expiry in ms follows: absolute, or with [`F_EXPIRES_REL`] counted from the
/// created time.
pub(crate) const F_EXPIRES: u8 = 16;
/// Flag: the expiry counts from the created time.
pub(crate) const F_EXPIRES_REL: u8 = 32;
/// Flag: extras follow: a `u8` count, then per extra a `u8` tag and its value — [`X_PRIORITY`]
/// (`u8`, always the first extra: the scripts' `rec_kp` relies on it), [`X_KEEP`] and
/// [`X_DEDUPE`] (`u48` ms each), [`X_TARGET`] (`u16` length, then bytes).
pub(crate) const F_EXTRA: u8 = 64;
/// Flag: the job is done and kept (retention): its completion time and the end of its dedupe
/// window follow (`u48` ms each).
pub(crate) const F_DONE: u8 = 128;
/// Extra: priority 0-9.
pub(crate) const X_PRIORITY: u8 = 1;
/// Extra: the job's own `keep_done_ms`.
pub(crate) const X_KEEP: u8 = 2;
/// Extra: the job's own `dedupe_ms`.
pub(crate) const X_DEDUPE: u8 = 3;
/// Extra: the job's HTTP push target, as its JSON text (`delayq::Target::to_json`).
pub(crate) const X_TARGET: u8 = 4;
/// Extras from this tag on carry a `u16` length before their value: a build that does not
/// know one skips it when it reads and keeps it when it rewrites the record.
pub(crate) const X_SIZED: u8 = 16;
/// Extra (sized): the job's W3C trace context (`delayq::TraceContext::to_bytes`).
pub(crate) const X_TRACE: u8 = 16;
/// Extra (sized): the result its handler returned with the ack (`delayq::Completion`), on a
/// job kept as done; at most `delayq::limits::MAX_RESULT_BYTES`, which the `u16` length holds.
pub(crate) const X_RESULT: u8 = 17;
/// Extra (sized): the job's fairness key (`delayq::JobKey`, its bytes; keyed.lua: rec_key).
pub(crate) const X_KEY: u8 = 18;
/// Extra (sized): the batch the job joined (`delayq::BatchId`, its bytes; batch.lua:
/// rec_batch).
pub(crate) const X_BATCH: u8 = 19;
/// Extra (sized, 2 bytes): the job waits for other jobs (`delayq::deps`): its
/// `OnDependencyFailure` code, then 1 when its claim carries their results (deps.lua).
pub(crate) const X_DEPS: u8 = 20;
/// Extra (sized, empty): jobs wait for this one (`dw:<id>` holds them; deps.lua: dep_end).
pub(crate) const X_WATCHED: u8 = 21;

/// The fixed header, big-endian: (field, offset from 0, width in bytes). Lua's `struct`
/// format of it is [`HEADER_FORMAT`]; ARCHITECTURE.md's byte table repeats it (tested).
#[cfg(test)]
pub(crate) const LAYOUT: &[(&str, usize, usize)] = &[
    ("version", 0, 1),
    ("flags", 1, 1),
    ("attempt", 2, 2),
    ("max_attempts", 4, 2),
    ("due_ms", 6, 6),
    ("created_ms", 12, 6),
    ("token", 18, 6),
];
/// Offset of the attempt counter in the header.
pub(crate) const AT_ATTEMPT: usize = 2;
/// Offset of the due time.
pub(crate) const AT_DUE: usize = 6;
/// Offset of the created time.
pub(crate) const AT_CREATED: usize = 12;
/// Offset of the lease token.
pub(crate) const AT_TOKEN: usize = 18;
/// The header as a format of Lua's `struct` library (one letter per [`LAYOUT`] field).
pub(crate) const HEADER_FORMAT: &str = ">BBHHI6I6I6";

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
    pub timeout_ms: Option<u32>,
    /// `(ms, relative to created)`.
    pub expires: Option<(u64, bool)>,
    pub priority: Option<u8>,
    pub retention: Option<Retention>,
    /// The push target's JSON text.
    pub target: Option<Vec<u8>>,
    /// The trace context's stored form.
    pub trace: Option<Vec<u8>>,
    /// The handler's result (a done job only).
    pub result: Option<Vec<u8>>,
    /// The fairness key's bytes.
    pub key: Option<Vec<u8>>,
    /// A job that waits for others: its failure policy's code and whether its claim carries
    /// their results.
    pub deps: Option<(u8, bool)>,
    /// `(completed ms, dedupe until ms)` of a done job.
    pub done: Option<(u64, u64)>,
    pub last_error: Option<String>,
    pub payload: Vec<u8>,
}

impl Record {
    /// The push target, parsed.
    pub(crate) fn target_value(&self) -> Result<Option<delayq::Target>> {
        self.target
            .as_deref()
            .map(|t| delayq::Target::from_json(t).map_err(|e| shape(&e.to_string())))
            .transpose()
    }

    /// The trace context, parsed (a stored one that no longer parses is dropped: tracing must
    /// never fail a job).
    pub(crate) fn trace_value(&self) -> Option<delayq::TraceContext> {
        self.trace
            .as_deref()
            .and_then(|t| delayq::TraceContext::from_bytes(t).ok())
    }

    /// The fairness key, parsed (one that no longer parses is dropped).
    pub(crate) fn key_value(&self) -> Option<delayq::JobKey> {
        self.key
            .as_deref()
            .and_then(|k| std::str::from_utf8(k).ok())
            .and_then(|k| delayq::JobKey::new(k).ok())
    }

    /// The absolute expiry, ms since the epoch.
    pub(crate) fn expires_at_ms(&self) -> Option<u64> {
        self.expires
            .map(|(v, rel)| if rel { self.created_ms + v } else { v })
    }
}

/// The optional sections of a record, in the order they are written (see [`sections`]).
#[derive(Clone, Copy, Default)]
pub(crate) struct Sections<'a> {
    pub lease_ms: Option<u32>,
    pub backoff: Option<Backoff>,
    pub timeout_ms: Option<u32>,
    pub expires: Option<(u64, bool)>,
    pub priority: Option<u8>,
    pub retention: Option<Retention>,
    pub target: Option<&'a [u8]>,
    pub trace: Option<&'a [u8]>,
    pub result: Option<&'a [u8]>,
    pub key: Option<&'a [u8]>,
    pub batch: Option<&'a [u8]>,
    pub deps: Option<[u8; 2]>,
    pub done: Option<(u64, u64)>,
    pub error: Option<&'a str>,
}

/// Appends the optional sections (lease, backoff, timeout, expiry, last error) to `out`;
/// returns their flags. The one writer of the record's variable part: new jobs and whole
/// records use it alike.
fn sections(out: &mut Vec<u8>, s: Sections<'_>) -> u8 {
    let Sections {
        lease_ms,
        backoff,
        timeout_ms,
        expires,
        priority,
        retention,
        target,
        trace,
        result,
        key,
        batch,
        deps,
        done,
        error,
    } = s;
    let mut flags = 0;
    if let Some(l) = lease_ms {
        flags |= F_LEASE;
        out.extend_from_slice(&l.to_be_bytes());
    }
    if let Some(b) = backoff {
        flags |= F_BACKOFF;
        let (base, cap) = b.base_cap_ms();
        out.push(b.kind_code());
        out.extend_from_slice(&(base.min(u32::MAX as u64) as u32).to_be_bytes());
        out.extend_from_slice(&(cap.min(u32::MAX as u64) as u32).to_be_bytes());
    }
    if let Some(t) = timeout_ms {
        flags |= F_TIMEOUT;
        out.extend_from_slice(&t.to_be_bytes());
    }
    if let Some((v, rel)) = expires {
        flags |= F_EXPIRES;
        if rel {
            flags |= F_EXPIRES_REL;
        }
        out.extend_from_slice(&u48_bytes(v));
    }
    let mut extras: Vec<(u8, Vec<u8>)> = Vec::new();
    if let Some(p) = priority {
        extras.push((X_PRIORITY, vec![p]));
    }
    if let Some(r) = retention {
        extras.push((X_KEEP, u48_bytes(r.keep_done_ms).to_vec()));
        extras.push((X_DEDUPE, u48_bytes(r.dedupe_ms).to_vec()));
    }
    // The variable-length extras: a u16 length, then the bytes.
    for (tag, bytes) in [
        (X_TARGET, target),
        (X_TRACE, trace),
        (X_RESULT, result),
        (X_KEY, key),
        (X_BATCH, batch),
        (X_DEPS, deps.as_ref().map(|d| &d[..])),
    ] {
        if let Some(t) = bytes {
            let mut v = (t.len() as u16).to_be_bytes().to_vec();
            v.extend_from_slice(t);
            extras.push((tag, v));
        }
    }
    if !extras.is_empty() {
        flags |= F_EXTRA;
        out.push(extras.len() as u8);
        for (tag, v) in extras {
            out.push(tag);
            out.extend_from_slice(&v);
        }
    }
    if let Some((at, until)) = done {
        flags |= F_DONE;
        out.extend_from_slice(&u48_bytes(at));
        out.extend_from_slice(&u48_bytes(until));
    }
    if let Some(e) = error {
        flags |= F_ERROR;
        out.extend_from_slice(&(e.len() as u16).to_be_bytes());
        out.extend_from_slice(e.as_bytes());
    }
    flags
}

/// `(flags, tail)`: the optional sections and payload of a new job, after the header that the
/// script writes (it owns the due and created times): the form the schedule scripts take.
pub(crate) fn tail(job: NewJob) -> (u8, Vec<u8>) {
    let mut out = Vec::with_capacity(job.payload.len() + 13);
    let flags = write_tail(&mut out, job);
    (flags, out)
}

/// A spec's first byte ([`spec`]), bits [`SPEC_WHEN`]: the due field holds nothing (due now).
pub(crate) const SPEC_NOW: u8 = 1;
/// Bits [`SPEC_WHEN`]: the due field holds a delay in ms.
pub(crate) const SPEC_DELAY: u8 = 2;
/// Bits [`SPEC_WHEN`]: the due field holds an absolute time in ms.
pub(crate) const SPEC_AT: u8 = 3;
/// The bits of a spec's first byte that say how its due field is read.
pub(crate) const SPEC_WHEN: u8 = 3;
/// A spec's first byte: the job replaces a scheduled job of its id. The byte's highest bit:
/// the scripts read it as `mode >= SPEC_REPLACE` and the rest as `mode % SPEC_REPLACE`.
pub(crate) const SPEC_REPLACE: u8 = 4;
const _: () = assert!(
    SPEC_WHEN + 1 == SPEC_REPLACE,
    "the scripts read the byte as said above"
);

/// How a schedule is written for the scripts: [`SPEC_NOW`], [`SPEC_DELAY`] or [`SPEC_AT`], and
/// its time (0, a delay or an absolute ms).
pub(crate) fn when(s: delayq::Due) -> (u8, u64) {
    match s {
        delayq::Due::Now => (SPEC_NOW, 0),
        delayq::Due::Delay(d) => (SPEC_DELAY, d.as_millis().min(u128::from(u64::MAX)) as u64),
        delayq::Due::At(t) => (SPEC_AT, t),
    }
}

/// A new job as `enqueue.lua` takes it: a flags byte (its schedule's [`when`], and
/// [`SPEC_REPLACE`] when it replaces), then the whole record with the schedule's time in its
/// due field and created 0 — the script writes both from its clock, so a job costs it two
/// arguments.
pub(crate) fn spec(job: NewJob) -> Vec<u8> {
    let (when, t) = when(job.due);
    let replace = job.on_conflict == delayq::OnConflict::Replace;
    let mode = when | if replace { SPEC_REPLACE } else { 0 };
    let max = job
        .max_attempts
        .unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS)
        .min(u32::from(u16::MAX)) as u16;
    let mut out = Vec::with_capacity(1 + HEADER_LEN + job.payload.len() + 13);
    out.push(mode);
    write_header(&mut out, 0, 0, max, t, 0, 0);
    out[2] = write_tail(&mut out, job);
    out
}

/// Appends the fixed header ([`LAYOUT`] order; `u48` fields capped).
fn write_header(
    out: &mut Vec<u8>,
    flags: u8,
    attempt: u16,
    max_attempts: u16,
    due: u64,
    created: u64,
    token: u64,
) {
    out.extend_from_slice(&[VERSION, flags]);
    out.extend_from_slice(&attempt.to_be_bytes());
    out.extend_from_slice(&max_attempts.to_be_bytes());
    for v in [due, created, token] {
        out.extend_from_slice(&u48_bytes(v));
    }
}

/// Appends a new job's optional sections and payload to `out`; returns their flags.
fn write_tail(out: &mut Vec<u8>, job: NewJob) -> u8 {
    let target = job.target.as_ref().map(|t| t.to_json());
    let trace = job.trace.as_ref().map(delayq::TraceContext::to_bytes);
    let lease_ms = job
        .lease
        .map(|l| l.as_millis().min(u32::MAX as u128) as u32);
    let flags = sections(
        out,
        Sections {
            lease_ms,
            backoff: job.backoff,
            timeout_ms: job
                .timeout
                .map(|t| t.as_millis().min(u32::MAX as u128) as u32),
            expires: job.expiry_ms(),
            priority: job.priority,
            retention: job.retention,
            target: target.as_deref().map(str::as_bytes),
            trace: trace.as_deref(),
            result: None,
            key: job.key.as_ref().map(|k| k.as_str().as_bytes()),
            batch: job.batch.as_ref().map(|b| b.as_str().as_bytes()),
            deps: job
                .depends
                .as_ref()
                .map(|d| [d.on_failure.code(), u8::from(d.include_results)]),
            done: None,
            error: None,
        },
    );
    out.extend_from_slice(&job.payload);
    flags
}

/// Encodes a whole record (the inverse of [`decode`]; the scripts' `encode` writes the same
/// bytes, which a test checks against a live server).
#[cfg(test)]
pub(crate) fn encode(r: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    write_header(
        &mut out,
        0,
        r.attempt as u16,
        r.max_attempts as u16,
        r.due_ms,
        r.created_ms,
        r.token,
    );
    out[1] = sections(
        &mut out,
        Sections {
            lease_ms: r.lease_ms,
            backoff: r.backoff,
            timeout_ms: r.timeout_ms,
            expires: r.expires,
            priority: r.priority,
            retention: r.retention,
            target: r.target.as_deref(),
            trace: r.trace.as_deref(),
            result: r.result.as_deref(),
            key: r.key.as_deref(),
            batch: None,
            deps: r.deps.map(|(p, res)| [p, u8::from(res)]),
            done: r.done,
            error: r.last_error.as_deref(),
        },
    );
    out.extend_from_slice(&r.payload);
    out
}

fn u48_bytes(v: u64) -> [u8; 6] {
    let b = v.min(0xFFFF_FFFF_FFFF).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
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
    let timeout_ms = if flags & F_TIMEOUT != 0 {
        Some(u48(take(4)?) as u32)
    } else {
        None
    };
    let expires = if flags & F_EXPIRES != 0 {
        Some((u48(take(6)?), flags & F_EXPIRES_REL != 0))
    } else {
        None
    };
    let (mut priority, mut retention, mut target, mut trace) = (None, None, None, None);
    let (mut result, mut key, mut deps) = (None, None, None);
    if flags & F_EXTRA != 0 {
        let n = take(1)?[0];
        for _ in 0..n {
            match take(1)?[0] {
                X_PRIORITY => priority = Some(take(1)?[0]),
                X_KEEP => {
                    retention.get_or_insert(Retention::default()).keep_done_ms = u48(take(6)?)
                }
                X_DEDUPE => retention.get_or_insert(Retention::default()).dedupe_ms = u48(take(6)?),
                X_TARGET => {
                    let n = u48(take(2)?) as usize;
                    target = Some(take(n)?.to_vec());
                }
                X_TRACE => {
                    let n = u48(take(2)?) as usize;
                    trace = Some(take(n)?.to_vec());
                }
                X_RESULT => {
                    let n = u48(take(2)?) as usize;
                    result = Some(take(n)?.to_vec());
                }
                X_KEY => {
                    let n = u48(take(2)?) as usize;
                    key = Some(take(n)?.to_vec());
                }
                X_DEPS => {
                    let n = u48(take(2)?) as usize;
                    let d = take(n)?;
                    deps = Some((d.first().copied().unwrap_or(0), d.get(1) == Some(&1)));
                }
                // A later build's sized extra (and X_WATCHED): skipped.
                t if t >= X_SIZED => {
                    let n = u48(take(2)?) as usize;
                    take(n)?;
                }
                t => return Err(shape(&format!("unknown record extra {t}"))),
            }
        }
    }
    let done = if flags & F_DONE != 0 {
        let at = u48(take(6)?);
        Some((at, u48(take(6)?)))
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
        timeout_ms,
        expires,
        priority,
        retention,
        target,
        trace,
        result,
        key,
        deps,
        done,
        last_error,
        payload: b[pos..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases per fuzz property: `DELAYQ_FUZZ_CASES`, else `default` (docs/RELIABILITY.md
    /// has the long runs).
    fn fuzz_cases(default: u32) -> u32 {
        std::env::var("DELAYQ_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(fuzz_cases(20_000)))]
        /// Fuzz: any bytes decode to a record or a typed error, never a panic; and whatever
        /// decodes re-encodes to a record that decodes the same.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
            if let Ok(r) = decode(&bytes) {
                let again = decode(&encode(&r)).expect("re-encoded record decodes");
                proptest::prop_assert_eq!(again, r);
            }
        }

        /// The same, for inputs that start with a valid header (the interesting part).
        #[test]
        fn decoding_mutated_records_never_panics(flip in 0usize..64, value in proptest::prelude::any::<u8>(), cut in 0usize..80) {
            let mut bytes = encode(&sample());
            if flip < bytes.len() {
                bytes[flip] = value;
            }
            bytes.truncate(cut.max(1));
            let _ = decode(&bytes);
        }
    }
    use std::time::Duration;

    fn header(flags: u8, attempt: u16, max: u16, due: u64, created: u64, token: u64) -> Vec<u8> {
        let mut h = Vec::new();
        write_header(&mut h, flags, attempt, max, due, created, token);
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
    fn a_spec_is_the_mode_then_the_record_with_the_schedule_time_as_due() {
        let job = NewJob::new(b"payload".to_vec())
            .max_attempts(7)
            .lease(Duration::from_millis(1500))
            .delay(Duration::from_secs(90))
            .replace();
        let spec = spec(job.clone());
        assert_eq!(spec[0], SPEC_DELAY | SPEC_REPLACE);
        let r = decode(&spec[1..]).unwrap();
        assert_eq!(
            (r.attempt, r.max_attempts, r.due_ms, r.created_ms, r.token),
            (0, 7, 90_000, 0, 0)
        );
        assert_eq!(
            (r.lease_ms, r.payload.as_slice()),
            (Some(1500), &b"payload"[..])
        );
        // The same sections and payload as the schedule scripts' tail.
        let (flags, tail) = tail(job);
        assert_eq!((spec[2], &spec[1 + HEADER_LEN..]), (flags, &tail[..]));
        // A time past the u48 field is capped, not wrapped.
        let far = super::spec(NewJob::new(Vec::new()).due(delayq::Due::At(u64::MAX)));
        assert_eq!(far[0], SPEC_AT);
        assert_eq!(decode(&far[1..]).unwrap().due_ms, (1 << 48) - 1);
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

    #[test]
    fn layout_constants_agree() {
        let mut at = 0;
        let widths = |c: char| match c {
            'B' => 1,
            'H' => 2,
            _ => 6,
        };
        let letters: Vec<char> = HEADER_FORMAT[1..].replace("I6", "6").chars().collect();
        assert_eq!(letters.len(), LAYOUT.len());
        for ((name, offset, width), letter) in LAYOUT.iter().zip(letters) {
            assert_eq!(*offset, at, "{name}");
            assert_eq!(widths(letter), *width, "{name}");
            at += width;
        }
        assert_eq!(at, HEADER_LEN);
        let offset = |f: &str| LAYOUT.iter().find(|l| l.0 == f).unwrap().1;
        assert_eq!(
            (AT_ATTEMPT, AT_DUE, AT_CREATED, AT_TOKEN),
            (
                offset("attempt"),
                offset("due_ms"),
                offset("created_ms"),
                offset("token")
            )
        );
    }

    /// ARCHITECTURE.md's byte table is this layout: rows `| offset | width | field |`.
    #[test]
    fn architecture_md_byte_table_matches_the_layout() {
        let doc = include_str!("../../../ARCHITECTURE.md");
        let start = doc.find("<!-- record-header -->").expect("table marker");
        let rows: Vec<(usize, usize, String)> = doc[start..]
            .lines()
            .skip(3)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let c: Vec<&str> = l.split('|').map(str::trim).collect();
                let field = c[3].trim_matches('`').to_owned();
                (c[1].parse().unwrap(), c[2].parse().unwrap(), field)
            })
            .collect();
        let want: Vec<(usize, usize, String)> = LAYOUT
            .iter()
            .map(|(f, o, w)| (*o, *w, (*f).to_owned()))
            .collect();
        assert_eq!(rows, want);
    }

    /// The scripts' `rec_kp` (keyed.lua) reads a key found before any priority as "no
    /// priority": X_PRIORITY is always the first extra a record holds.
    #[test]
    fn the_priority_is_the_first_extra() {
        let r = Record {
            priority: Some(9),
            key: Some(b"acme".to_vec()),
            lease_ms: None,
            backoff: None,
            timeout_ms: None,
            expires: None,
            done: None,
            last_error: None,
            ..sample()
        };
        let b = encode(&r);
        assert_eq!(b[1] & F_EXTRA, F_EXTRA);
        // Header, then (no fixed sections) the extras' count and the first tag.
        assert_eq!(b[HEADER_LEN + 1], X_PRIORITY, "{b:?}");
        assert_eq!(decode(&b).unwrap(), r);
    }

    fn sample() -> Record {
        Record {
            attempt: 3,
            max_attempts: 9,
            due_ms: 1_764_000_000_123,
            created_ms: 1_764_000_000_000,
            token: 77,
            lease_ms: Some(2500),
            backoff: Some(Backoff::Fixed { delay_ms: 40 }),
            timeout_ms: Some(5000),
            expires: Some((60_000, true)),
            priority: Some(7),
            retention: Some(Retention {
                keep_done_ms: 3_600_000,
                dedupe_ms: 60_000,
            }),
            target: Some(br#"{"url":"https://example.com/h","method":"POST"}"#.to_vec()),
            trace: Some(
                b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\ncongo=t61rcWkgMzE"
                    .to_vec(),
            ),
            result: Some(b"{\"sent\":true}".to_vec()),
            key: None,
            deps: None,
            done: Some((1_764_000_000_500, 1_764_000_060_500)),
            last_error: Some("boom €".into()),
            payload: b"{\"order\":42}".to_vec(),
        }
    }

    /// A record built by the scripts' `encode` decodes in Rust to the same fields, and Rust's
    /// bytes survive the scripts' `decode` + `encode` unchanged.
    #[tokio::test]
    async fn records_round_trip_between_lua_and_rust() {
        let server = delayq_test_support::RedisServer::start();
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let build = crate::scripts::full(
            "",
            "return encode({ attempt = 3, max_attempts = 9, due = 1764000000123, \
             created = 1764000000000, token = 77, lease = 2500, bkind = 0, bbase = 40, \
             bcap = 40, timeout = 5000, expires = 60000, expires_rel = true, prio = 7, \
             keep = 3600000, dedupe = 60000, target = ARGV[3], trace = ARGV[4], \
             result = ARGV[5], done_at = 1764000000500, \
             dedupe_until = 1764000060500, err = ARGV[1], payload = ARGV[2] })",
            false,
        );
        let r = sample();
        let from_lua: Vec<u8> = redis::Script::new(&build)
            .arg(r.last_error.as_deref().unwrap())
            .arg(&r.payload)
            .arg(r.target.as_deref().unwrap())
            .arg(r.trace.as_deref().unwrap())
            .arg(r.result.as_deref().unwrap())
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(decode(&from_lua).unwrap(), r);
        assert_eq!(encode(&r), from_lua);
        let again = crate::scripts::full("", "return encode(decode(ARGV[1]))", false);
        for rec in [
            r.clone(),
            Record {
                expires: Some((1_764_000_060_000, false)),
                ..r.clone()
            },
            Record {
                key: Some(b"tenant-7".to_vec()),
                ..r.clone()
            },
            Record {
                key: Some(b"tenant-7".to_vec()),
                deps: Some((1, true)),
                ..r.clone()
            },
            Record {
                lease_ms: None,
                backoff: None,
                timeout_ms: None,
                expires: None,
                priority: None,
                retention: None,
                target: None,
                trace: None,
                result: None,
                done: None,
                last_error: None,
                token: 0,
                ..r.clone()
            },
        ] {
            let bytes = encode(&rec);
            let back: Vec<u8> = redis::Script::new(&again)
                .arg(&bytes)
                .invoke_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(back, bytes);
        }
        // A later build's sized extra (tag 30): Rust skips it, the scripts keep it.
        let mut later = encode(&Record {
            priority: None,
            retention: None,
            target: None,
            trace: None,
            result: None,
            ..r.clone()
        });
        let extra_at = HEADER_LEN + 4 + 9 + 4 + 6;
        assert_eq!(later[1] & F_EXTRA, 0);
        later[1] |= F_EXTRA;
        later.splice(extra_at..extra_at, [1, 30, 0, 3, b'x', b'y', b'z']);
        let read = decode(&later).unwrap();
        assert_eq!((read.trace, read.payload), (None, r.payload.clone()));
        let back: Vec<u8> = redis::Script::new(&again)
            .arg(&later)
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(back, later);
    }
}
