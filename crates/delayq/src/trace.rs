//! [`TraceContext`]: the W3C trace context (`traceparent`, `tracestate`) a job carries from
//! the request that enqueued it to every attempt that processes it, so one trace shows the
//! enqueue, the delay and each attempt across processes (the OpenTelemetry messaging
//! conventions' creation context).

use crate::error::InvalidInput;

/// Longest `tracestate` kept (the W3C limit is 32 members; 512 bytes is what propagators
/// must pass on).
pub const MAX_TRACESTATE: usize = 512;

/// A validated W3C trace context; serialized as `{"traceparent", "tracestate"?}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "Fields", into = "Fields")]
pub struct TraceContext {
    traceparent: String,
    tracestate: Option<String>,
}

fn hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl TraceContext {
    /// A context from a `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex
    /// flags>`, lower case, ids not all zero) and an optional `tracestate`.
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Result<Self, InvalidInput> {
        let bad = |why: &str| InvalidInput::Trace(format!("traceparent {traceparent:?}: {why}"));
        let parts: Vec<&str> = traceparent.split('-').collect();
        let [version, trace, parent, flags] = parts[..] else {
            return Err(bad("expected VERSION-TRACEID-PARENTID-FLAGS"));
        };
        if version.len() != 2 || !hex(version) || version == "ff" {
            return Err(bad(
                "the version is not two lower-case hex digits (ff is invalid)",
            ));
        }
        if version == "00" && parts.len() != 4 {
            return Err(bad("version 00 has four fields"));
        }
        if trace.len() != 32 || !hex(trace) || trace.bytes().all(|b| b == b'0') {
            return Err(bad(
                "the trace id is not 32 lower-case hex digits, not all zero",
            ));
        }
        if parent.len() != 16 || !hex(parent) || parent.bytes().all(|b| b == b'0') {
            return Err(bad(
                "the parent id is not 16 lower-case hex digits, not all zero",
            ));
        }
        if flags.len() != 2 || !hex(flags) {
            return Err(bad("the flags are not two lower-case hex digits"));
        }
        let tracestate = match tracestate.map(str::trim).filter(|s| !s.is_empty()) {
            None => None,
            Some(s) if s.len() > MAX_TRACESTATE => {
                return Err(InvalidInput::Trace(format!(
                    "tracestate of {} bytes is over {MAX_TRACESTATE}",
                    s.len()
                )));
            }
            Some(s) if !s.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
                return Err(InvalidInput::Trace(
                    "tracestate holds characters other than printable ASCII".into(),
                ));
            }
            Some(s) => Some(s.to_owned()),
        };
        Ok(Self {
            traceparent: traceparent.to_owned(),
            tracestate,
        })
    }

    /// A context from request headers as a W3C propagator reads them: an invalid
    /// `traceparent` is ignored (a new trace starts), and so is the `tracestate` with it.
    pub fn from_headers(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Self> {
        let tp = traceparent?.trim();
        Self::new(tp, tracestate)
            .or_else(|_| Self::new(tp, None))
            .ok()
    }

    /// The `traceparent` header value.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header value, if any.
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace id (32 hex digits).
    pub fn trace_id(&self) -> &str {
        &self.traceparent[3..35]
    }

    /// The parent (span) id (16 hex digits).
    pub fn span_id(&self) -> &str {
        &self.traceparent[36..52]
    }

    /// Whether the caller sampled the trace (flag bit 0).
    pub fn sampled(&self) -> bool {
        u8::from_str_radix(&self.traceparent[53..55], 16).is_ok_and(|f| f & 1 == 1)
    }

    /// The same trace with a new span id as the parent: what a span started under this context
    /// hands on (the process span of an attempt, a push request).
    pub fn child(&self) -> Self {
        let span: u64 = loop {
            let s = rand::random::<u64>();
            if s != 0 {
                break s;
            }
        };
        Self {
            traceparent: format!(
                "00-{}-{span:016x}-{}",
                self.trace_id(),
                &self.traceparent[53..55]
            ),
            tracestate: self.tracestate.clone(),
        }
    }

    /// The stored form: the `traceparent`, then a newline and the `tracestate` if any.
    pub fn to_bytes(&self) -> Vec<u8> {
        match &self.tracestate {
            Some(s) => format!("{}\n{s}", self.traceparent).into_bytes(),
            None => self.traceparent.clone().into_bytes(),
        }
    }

    /// The stored form read back.
    pub fn from_bytes(b: &[u8]) -> Result<Self, InvalidInput> {
        let s = std::str::from_utf8(b)
            .map_err(|_| InvalidInput::Trace("stored trace context is not UTF-8".into()))?;
        match s.split_once('\n') {
            Some((tp, ts)) => Self::new(tp, Some(ts)),
            None => Self::new(s, None),
        }
    }
}

/// The serialized form.
#[derive(serde::Serialize, serde::Deserialize)]
struct Fields {
    traceparent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracestate: Option<String>,
}

impl TryFrom<Fields> for TraceContext {
    type Error = InvalidInput;
    fn try_from(f: Fields) -> Result<Self, InvalidInput> {
        Self::new(&f.traceparent, f.tracestate.as_deref())
    }
}

impl From<TraceContext> for Fields {
    fn from(c: TraceContext) -> Self {
        Fields {
            traceparent: c.traceparent,
            tracestate: c.tracestate,
        }
    }
}

impl std::fmt::Display for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.traceparent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn valid_contexts_round_trip() {
        let c = TraceContext::new(TP, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(c.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_id(), "00f067aa0ba902b7");
        assert!(c.sampled());
        assert_eq!(TraceContext::from_bytes(&c.to_bytes()).unwrap(), c);
        let bare = TraceContext::new(TP, None).unwrap();
        assert_eq!(TraceContext::from_bytes(&bare.to_bytes()).unwrap(), bare);
        let child = c.child();
        assert_eq!(child.trace_id(), c.trace_id());
        assert_ne!(child.span_id(), c.span_id());
        assert_eq!(child.tracestate(), c.tracestate());
        assert!(TraceContext::new(child.traceparent(), None).is_ok());
    }

    #[test]
    fn invalid_contexts_are_refused() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(TraceContext::new(bad, None).is_err(), "{bad:?}");
            assert!(
                TraceContext::from_headers(Some(bad), None).is_none(),
                "{bad:?}"
            );
        }
        assert!(TraceContext::new(TP, Some(&"a".repeat(600))).is_err());
        // From headers, a bad tracestate drops only the tracestate.
        let c = TraceContext::from_headers(Some(TP), Some("bad\u{1}state")).unwrap();
        assert_eq!(c.tracestate(), None);
    }
}
