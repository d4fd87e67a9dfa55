//! The process's own log on stderr (tracing) and its level, which `serve` changes on SIGHUP.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

static LEVEL: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The filter of `--log-level` (else `RUST_LOG`, else `warn`).
pub(crate) fn filter(level: Option<&str>) -> Result<EnvFilter, String> {
    match level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| format!("log level {l:?}: {e}")),
        None => Ok(EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into())),
    }
}

/// Starts the log; colours only on a terminal, and never with NO_COLOR set. With a `tracer`
/// (OTLP export configured) the spans of delayq's own crates at INFO go to it too, whatever
/// the log level: the log's filter is the log layer's alone.
pub(crate) fn init(
    level: Option<&str>,
    tracer: Option<opentelemetry_sdk::trace::Tracer>,
) -> Result<(), String> {
    use tracing_subscriber::Layer;
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let (level, handle) = reload::Layer::new(filter(level)?);
    let spans = tracer.map(|t| {
        let ours = tracing_subscriber::filter::Targets::new()
            .with_target("delayq", tracing::Level::INFO)
            .with_target("delayq_http", tracing::Level::INFO)
            .with_target("delayq_push", tracing::Level::INFO)
            .with_target("delayq_cli", tracing::Level::INFO);
        tracing_opentelemetry::layer()
            .with_tracer(t)
            .with_error_records_to_exceptions(true)
            .with_filter(ours)
    });
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(colour)
                .with_writer(std::io::stderr)
                .with_filter(level),
        )
        .with(spans)
        .init();
    let _ = LEVEL.set(handle);
    Ok(())
}

/// Changes the filter of the running log (from [`filter`]).
pub(crate) fn set(f: EnvFilter) -> Result<(), String> {
    match LEVEL.get() {
        Some(h) => h.reload(f).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}
