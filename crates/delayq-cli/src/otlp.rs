//! Span export to an OpenTelemetry collector over OTLP/HTTP (protobuf), for `serve`, `worker`
//! and `demo`: on when `--otlp-endpoint` (config `otlp_endpoint`) or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, off (and
//! absent from the subscriber) otherwise. The SDK's batch processor exports from its own
//! thread with a bounded queue, so a slow or unreachable collector never holds up a job: its
//! spans are dropped, counted in `delayq_trace_spans_dropped_total` and reported at most once a
//! minute. The SDK reads the other standard variables itself (`OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter, Tracer};

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
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        .with_batch_exporter(Counted {
            inner: exporter,
            to: url.unwrap_or_else(|| "the OTEL_EXPORTER_OTLP_* endpoint".into()),
            said: Mutex::new(None),
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
            "Spans dropped because their export to the OpenTelemetry collector failed."
        );
        metrics::counter!(DROPPED).increment(0);
    }
}

/// Exports what is still queued (bounded by the exporter's timeout) before the process exits.
pub(crate) fn flush() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown();
    }
}

/// The OTLP exporter, counting the spans of each failed export and saying so at most once a
/// minute (with how many were dropped since).
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    to: String,
    /// When the log last said so, and the spans dropped since.
    said: Mutex<Option<(Instant, u64)>>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let r = self.inner.export(batch).await;
        if let Err(e) = &r {
            metrics::counter!(DROPPED).increment(n);
            let mut said = self.said.lock().unwrap_or_else(|p| p.into_inner());
            match &mut *said {
                Some((at, since)) if at.elapsed() < SAY_EVERY => *since += n,
                _ => {
                    let since = said.map_or(0, |(_, s)| s) + n;
                    tracing::warn!(
                        collector = %self.to,
                        error = %e,
                        dropped = since,
                        "OpenTelemetry export failed: spans dropped (said at most once a minute; \
                         delayq_trace_spans_dropped_total counts them)"
                    );
                    *said = Some((Instant::now(), 0));
                }
            }
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
