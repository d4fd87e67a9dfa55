//! Span export to an OpenTelemetry collector over OTLP/HTTP (protobuf), for `serve`, `worker`
//! and `demo`: on when `--otlp-endpoint` (config `otlp_endpoint`) or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, off (and
//! absent from the subscriber) otherwise. The SDK's batch processor exports from its own
//! thread with a bounded queue, so a slow or unreachable collector never holds up a job: its
//! spans are dropped — those of a failed export and those that find the queue full — counted in
//! `delayq_trace_spans_dropped_total` and reported at most once a minute. The SDK reads the other standard variables itself (`OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor, Tracer,
};

/// Spans a failed export dropped (a Prometheus counter on `/metrics`).
pub(crate) const DROPPED: &str = "delayq_trace_spans_dropped_total";

/// How often a failing collector is reported in the log.
const SAY_EVERY: Duration = Duration::from_secs(60);

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
static TRACE_MODE: OnceLock<delayq::TraceMode> = OnceLock::new();

/// Sets `--trace-mode` for the process's consumers (worker, push, demo), once at start.
pub(crate) fn set_trace_mode(mode: delayq::TraceMode) {
    let _ = TRACE_MODE.set(mode);
}

/// `--trace-mode`: how the process's consumers relate an attempt to its job's context.
pub(crate) fn trace_mode() -> delayq::TraceMode {
    TRACE_MODE.get().copied().unwrap_or_default()
}

/// Where spans go: the flag's base URL (spans to `URL/v1/traces`, as the standard
/// `OTEL_EXPORTER_OTLP_ENDPOINT`), else the standard variables; `None`: export is off.
fn endpoint(flag: Option<&str>) -> Option<Option<String>> {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
    if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        return None;
    }
    match flag.map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => Some(Some(format!("{}/v1/traces", f.trim_end_matches('/')))),
        None if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT") => {
            Some(None)
        }
        None => None,
    }
}

/// The tracer spans are exported with, when export is configured. Errors name the setting.
pub(crate) fn tracer(flag: Option<&str>) -> Result<Option<Tracer>, String> {
    let Some(url) = endpoint(flag) else {
        return Ok(None);
    };
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if let Some(u) = &url {
        exporter = exporter.with_endpoint(u.clone());
    }
    let exporter = exporter
        .build()
        .map_err(|e| format!("OpenTelemetry exporter: {e}"))?;
    let mut resource = Resource::builder();
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    if !named {
        resource = resource.with_service_name("delayq");
    }
    resource = resource.with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    // The batch queue's bound, kept by the gate below so that every span dropped is counted
    // (the SDK's processor drops silently when its queue is full).
    let limit = std::env::var("OTEL_BSP_MAX_QUEUE_SIZE")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_QUEUE);
    let drops = Arc::new(Drops {
        to: url.unwrap_or_else(|| "the OTEL_EXPORTER_OTLP_* endpoint".into()),
        pending: AtomicUsize::new(0),
        said: Mutex::new(None),
    });
    let batch = BatchSpanProcessor::builder(Counted {
        inner: exporter,
        drops: drops.clone(),
    })
    .with_batch_config(
        BatchConfigBuilder::default()
            .with_max_queue_size(limit)
            .build(),
    )
    .build();
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_span_processor(Gate {
            inner: batch,
            drops,
            limit,
        })
        .build();
    let tracer = provider.tracer("delayq");
    let _ = PROVIDER.set(provider);
    Ok(Some(tracer))
}

/// Describes the drop counter to the metrics recorder (installed after the tracer) and shows
/// it at 0 while export is on.
pub(crate) fn describe_metrics() {
    if PROVIDER.get().is_some() {
        metrics::describe_counter!(
            DROPPED,
            "Spans not exported: their export to the OpenTelemetry collector failed, or the \
             export queue was full."
        );
        metrics::counter!(DROPPED).increment(0);
    }
}

/// Longest the exit waits for the last spans to reach the collector.
const FLUSH_WITHIN: Duration = Duration::from_secs(3);

/// Exports what is still queued before the process exits, waiting at most [`FLUSH_WITHIN`]
/// (an unreachable collector must not hold up a stop: what it did not take is dropped).
pub(crate) fn flush() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown_with_timeout(FLUSH_WITHIN);
    }
}

/// The batch queue's bound without `OTEL_BSP_MAX_QUEUE_SIZE` (the SDK's default).
const DEFAULT_QUEUE: usize = 2048;

/// Spans on their way to the collector and those that never got there.
#[derive(Debug)]
struct Drops {
    to: String,
    /// Spans handed to the batch processor and not yet through an export.
    pending: AtomicUsize,
    /// When the log last said so, and the spans dropped since.
    said: Mutex<Option<(Instant, u64)>>,
}

impl Drops {
    /// Counts `n` dropped spans; says so now if the log has not in the last minute.
    fn dropped(&self, n: u64, why: &dyn std::fmt::Display) {
        metrics::counter!(DROPPED).increment(n);
        let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *said {
            Some((at, since)) if at.elapsed() < SAY_EVERY => *since += n,
            _ => {
                let since = said.map_or(0, |(_, s)| s) + n;
                tracing::warn!(
                    collector = %self.to,
                    error = %why,
                    dropped = since,
                    "OpenTelemetry export failed: spans dropped (said at most once a minute; \
                     delayq_trace_spans_dropped_total counts them)"
                );
                *said = Some((Instant::now(), 0));
            }
        }
    }
}

/// The span processor: the SDK's batch processor behind a gate that keeps its queue bound
/// itself, so a span that would not fit is counted as dropped instead of vanishing.
#[derive(Debug)]
struct Gate {
    inner: BatchSpanProcessor,
    drops: Arc<Drops>,
    limit: usize,
}

impl SpanProcessor for Gate {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        // A sampled span takes a place in the queue (given back by the export that takes it);
        // with none left it is dropped here, counted.
        if span.span_context.is_sampled()
            && self.drops.pending.fetch_add(1, Ordering::AcqRel) >= self.limit
        {
            self.drops.pending.fetch_sub(1, Ordering::AcqRel);
            self.drops
                .dropped(1, &"the export queue is full (the collector is behind)");
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting the spans of each failed export as dropped.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    drops: Arc<Drops>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let r = self.inner.export(batch).await;
        self.drops.pending.fetch_sub(n, Ordering::AcqRel);
        if let Err(e) = &r {
            self.drops.dropped(n as u64, e);
        }
        r
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
