//! The consumer's `process` span per attempt (OpenTelemetry messaging conventions), captured
//! by a test layer: its name, kind and attributes, the job's trace, lateness and outcome.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{
    Consumer, ConsumerOptions, Failure, Job, JobId, NewJob, Producer, QueueName, TraceContext,
};
use delayq_embedded::EmbeddedBackend;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::{Context, SubscriberExt};

type Fields = BTreeMap<String, String>;

/// Every `process` span's fields, by span id.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<HashMap<u64, Fields>>>);

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.insert(f.name().to_owned(), format!("{v:?}"));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().to_owned(), v.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "process" {
            let mut f = Fields::new();
            attrs.record(&mut Collect(&mut f));
            self.0.lock().unwrap().insert(id.into_u64(), f);
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(f) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Collect(f));
        }
    }
}

/// OpenTelemetry spans as they end.
#[derive(Clone, Debug, Default)]
struct Ended(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Ended {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

/// The test binary's one global subscriber: the capturing layer and an OpenTelemetry layer.
/// Global: a thread's own (`set_default`) misses spans whose callsites other tests' threads
/// registered first (tracing caches each callsite's interest globally).
fn global() -> &'static (Spans, Ended) {
    static GLOBAL: std::sync::OnceLock<(Spans, Ended)> = std::sync::OnceLock::new();
    GLOBAL.get_or_init(|| {
        let spans = Spans::default();
        let ended = Ended::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(ended.clone())
            .build();
        let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry()
                .with(spans.clone())
                .with(otel),
        )
        .expect("no other global subscriber in this test binary");
        (spans, ended)
    })
}

#[tokio::test(flavor = "current_thread")]
async fn each_attempt_runs_in_a_process_span() {
    let spans = global().0.clone();
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let q = QueueName::new("spanq").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let ctx = TraceContext::new(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        None,
    )
    .unwrap();
    p.enqueue(
        NewJob::new(b"1".to_vec())
            .id(JobId::new("traced").unwrap())
            .trace(ctx),
    )
    .await
    .unwrap();
    p.enqueue(NewJob::new(b"2".to_vec()).id(JobId::new("plain").unwrap()))
        .await
        .unwrap();
    let c = Consumer::new(b, q, ConsumerOptions::default()).unwrap();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let handler = move |job: Job| {
        let done = done_tx.clone();
        async move {
            let _ = done.send(());
            if job.id.as_str() == "plain" {
                return Err(Failure::dead("no such order"));
            }
            Ok(())
        }
    };
    let report = c
        .run(handler, async move {
            for _ in 0..2 {
                done_rx.recv().await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        })
        .await
        .unwrap();
    assert_eq!((report.acked, report.dead), (1, 1), "{report:?}");
    let all: Vec<Fields> = spans.0.lock().unwrap().values().cloned().collect();
    let by = |id: &str| {
        all.iter()
            .find(|f| {
                f.get("messaging.destination.name").map(String::as_str) == Some("spanq")
                    && f.get("messaging.message.id").map(String::as_str) == Some(id)
            })
            .unwrap_or_else(|| panic!("no process span of {id}: {all:?}"))
            .clone()
    };
    let traced = by("traced");
    assert_eq!(traced["otel.name"], "process spanq");
    assert_eq!(traced["otel.kind"], "consumer");
    assert_eq!(traced["messaging.system"], "delayq");
    assert_eq!(traced["messaging.destination.name"], "spanq");
    assert_eq!(traced["delayq.attempt"], "1");
    assert_eq!(traced["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert!(
        traced["delayq.lateness_ms"].parse::<u64>().is_ok(),
        "{traced:?}"
    );
    assert_eq!(traced["delayq.outcome"], "acked");
    let plain = by("plain");
    assert!(!plain.contains_key("trace_id"), "{plain:?}");
    assert_eq!(plain["delayq.outcome"], "dead");
}

/// The Rust library with an OpenTelemetry layer (feature `otel`): a job enqueued inside the
/// application's span is created in a `send` span of that trace and stores its context; its
/// attempt's `process` span is the send span's child. A job enqueued outside any span stores
/// none and its attempt starts a trace of its own.
#[tokio::test(flavor = "current_thread")]
async fn an_enqueue_in_an_application_span_joins_its_trace() {
    let ended = global().1.clone();
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let q = QueueName::new("otelq").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let app = tracing::info_span!("checkout");
    let app_trace = app.context().span().span_context().trace_id();
    p.enqueue(NewJob::new(b"1".to_vec()).id(JobId::new("in-app").unwrap()))
        .instrument(app.clone())
        .await
        .unwrap();
    p.enqueue(NewJob::new(b"2".to_vec()).id(JobId::new("outside").unwrap()))
        .await
        .unwrap();
    let stored = p
        .get(&JobId::new("in-app").unwrap())
        .await
        .unwrap()
        .unwrap();
    let t = stored.trace.expect("the job keeps the application's trace");
    assert_eq!(t.trace_id(), app_trace.to_string());
    let outside = p
        .get(&JobId::new("outside").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outside.trace, None, "no trace, no context stored");

    let c = Consumer::new(b, q, ConsumerOptions::default()).unwrap();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let handler = move |_job: Job| {
        let done = done_tx.clone();
        async move {
            let _ = done.send(());
            Ok::<(), Failure>(())
        }
    };
    c.run(handler, async move {
        for _ in 0..2 {
            done_rx.recv().await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    })
    .await
    .unwrap();
    drop(app);
    let spans = ended.0.lock().unwrap().clone();
    let named = |name: &str, id: &str| {
        spans
            .iter()
            .find(|s| {
                s.name == name
                    && s.attributes.iter().any(|kv| {
                        kv.key.as_str() == "messaging.message.id" && kv.value.as_str() == id
                    })
            })
            .unwrap_or_else(|| panic!("no {name} span of {id}"))
    };
    let send = named("send otelq", "in-app");
    assert_eq!(send.span_context.trace_id(), app_trace);
    assert_eq!(send.span_kind, opentelemetry::trace::SpanKind::Producer);
    assert_eq!(t.span_id(), send.span_context.span_id().to_string());
    let process = named("process otelq", "in-app");
    assert_eq!(process.span_context.trace_id(), app_trace);
    assert_eq!(process.parent_span_id, send.span_context.span_id());
    assert_eq!(process.span_kind, opentelemetry::trace::SpanKind::Consumer);
    let other = named("process otelq", "outside");
    assert_ne!(other.span_context.trace_id(), app_trace);
    assert_eq!(other.parent_span_id, opentelemetry::trace::SpanId::INVALID);
}
