//! The bridge between a job's [`TraceContext`] and the application's OpenTelemetry spans
//! (through `tracing-opentelemetry`, feature `otel`): the `send {queue}` span of an enqueue and
//! the context it stamps on the jobs, the parent or link of an attempt's `process {queue}`
//! span, and the current span's context handed to a program or a push target. Without the
//! feature, or without an OpenTelemetry layer in the subscriber, every function here leaves
//! jobs as they came: a job carries only the context it was given.

use crate::job::NewJob;
use crate::name::QueueName;
use crate::trace::TraceContext;

/// How an attempt's `process` span relates to the context the job was created in
/// ([`crate::ConsumerOptions::trace_mode`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TraceMode {
    /// The creation context is the process span's parent: enqueue and attempts form one trace
    /// (BullMQ's and Sidekiq's default).
    #[default]
    Child,
    /// The process span starts its own trace and links to the creation context (the
    /// OpenTelemetry messaging conventions' choice for long delays and batches).
    Link,
}

impl std::str::FromStr for TraceMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "child" => Ok(Self::Child),
            "link" => Ok(Self::Link),
            _ => Err(format!("trace mode {s:?}: expected child or link")),
        }
    }
}

impl std::fmt::Display for TraceMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Child => "child",
            Self::Link => "link",
        })
    }
}

/// The `send {queue}` span of an enqueue (kind producer; `messaging.batch.message_count` for a
/// batch), and the jobs stamped with its context: a job whose context is in the span's trace
/// is created in the send span, so its attempts hang under the enqueue; so is a job without a
/// context when `adopt` and the caller's current span is in a trace (the application's
/// request). A job whose context belongs to another trace keeps it, and a job enqueued outside
/// any trace stays without one. Without a current OpenTelemetry span the send span's parent is
/// the jobs' own context (the first one's, when several).
pub(crate) fn send(queue: &QueueName, jobs: &mut [NewJob], adopt: bool) -> tracing::Span {
    let span = tracing::info_span!(
        "send",
        otel.name = %format_args!("send {queue}"),
        otel.kind = "producer",
        messaging.system = "delayq",
        messaging.operation.name = "send",
        messaging.operation.type = "send",
        messaging.destination.name = %queue,
        messaging.message.id = tracing::field::Empty,
        messaging.batch.message_count = tracing::field::Empty,
    );
    if jobs.len() == 1 {
        if let Some(id) = &jobs[0].id {
            span.record("messaging.message.id", id.as_str());
        }
    } else {
        span.record("messaging.batch.message_count", jobs.len());
    }
    imp::stamp(&span, jobs, adopt);
    span
}

/// Relates a span to a context by `mode`: an attempt's process span to its job's creation
/// context, a server's request span to the caller's `traceparent`. Call it before the span is
/// first entered (a started span keeps its parent).
pub fn relate(span: &tracing::Span, trace: Option<&TraceContext>, mode: TraceMode) {
    if let Some(t) = trace {
        imp::relate(span, t, mode);
    }
}

/// The context of the current span when an OpenTelemetry layer records it (feature `otel`):
/// what a program or a request started inside it continues. `None` otherwise.
pub fn current() -> Option<TraceContext> {
    imp::of(&tracing::Span::current())
}

#[cfg(feature = "otel")]
mod imp {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::TraceMode;
    use crate::job::NewJob;
    use crate::trace::TraceContext;

    /// The OpenTelemetry form of a stored context (a remote parent).
    fn span_context(t: &TraceContext) -> Option<SpanContext> {
        let flags = u8::from_str_radix(&t.traceparent()[53..55], 16).ok()?;
        let state = t
            .tracestate()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        Some(SpanContext::new(
            TraceId::from_hex(t.trace_id()).ok()?,
            SpanId::from_hex(t.span_id()).ok()?,
            TraceFlags::new(flags),
            true,
            state,
        ))
    }

    /// The stored form of an OpenTelemetry span context; `None` when it is not valid.
    fn context_of(sc: &SpanContext) -> Option<TraceContext> {
        if !sc.is_valid() {
            return None;
        }
        let tp = format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        );
        let ts = sc.trace_state().header();
        TraceContext::new(&tp, (!ts.is_empty()).then_some(ts.as_str())).ok()
    }

    pub(super) fn of(span: &tracing::Span) -> Option<TraceContext> {
        if span.is_disabled() {
            return None;
        }
        context_of(span.context().span().span_context())
    }

    pub(super) fn relate(span: &tracing::Span, t: &TraceContext, mode: TraceMode) {
        let Some(sc) = span_context(t) else { return };
        match mode {
            TraceMode::Child => {
                let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
            }
            TraceMode::Link => span.add_link(sc),
        }
    }

    pub(super) fn stamp(span: &tracing::Span, jobs: &mut [NewJob], adopt: bool) {
        if span.is_disabled() {
            // The application filters our spans out: its own current span still names the
            // context its jobs are created in.
            if let Some(current) = of(&tracing::Span::current()).filter(|_| adopt) {
                for job in jobs.iter_mut().filter(|j| j.trace.is_none()) {
                    job.trace = Some(current.clone());
                }
            }
            return;
        }
        let inherited = tracing::Span::current()
            .context()
            .span()
            .span_context()
            .is_valid();
        if !inherited
            && let Some(sc) = jobs
                .iter()
                .find_map(|j| j.trace.as_ref().and_then(span_context))
        {
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(sc));
        }
        let Some(sent) = of(span) else { return };
        for job in jobs {
            let stamped = match &job.trace {
                Some(t) => t.trace_id() == sent.trace_id(),
                None => adopt && inherited,
            };
            if stamped {
                job.trace = Some(sent.clone());
            }
        }
    }
}

#[cfg(not(feature = "otel"))]
mod imp {
    use super::TraceMode;
    use crate::job::NewJob;
    use crate::trace::TraceContext;

    pub(super) fn of(_span: &tracing::Span) -> Option<TraceContext> {
        None
    }

    pub(super) fn relate(_span: &tracing::Span, _t: &TraceContext, _mode: TraceMode) {}

    pub(super) fn stamp(_span: &tracing::Span, _jobs: &mut [NewJob], _adopt: bool) {}
}
