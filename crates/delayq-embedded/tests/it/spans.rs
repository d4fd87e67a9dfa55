//! The consumer's `process` span per attempt (OpenTelemetry messaging conventions), captured
//! by a test layer: its name, kind and attributes, the job's trace, lateness and outcome.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{
    Consumer, ConsumerOptions, Failure, Job, JobId, NewJob, Producer, QueueName, TraceContext,
};
use delayq_embedded::EmbeddedBackend;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
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

#[tokio::test(flavor = "current_thread")]
async fn each_attempt_runs_in_a_process_span() {
    // A global subscriber: a thread's own (`set_default`) misses spans whose callsites other
    // tests' threads registered first (tracing caches each callsite's interest globally).
    static SPANS: std::sync::OnceLock<Spans> = std::sync::OnceLock::new();
    let spans = SPANS
        .get_or_init(|| {
            let spans = Spans::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(spans.clone()),
            )
            .expect("no other global subscriber in this test binary");
            spans
        })
        .clone();
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
