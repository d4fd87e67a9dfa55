//! A real OTLP/HTTP collector for the trace tests: an axum server on a free loopback port that
//! takes `POST /v1/traces` (protobuf `ExportTraceServiceRequest`), decodes every span and keeps
//! it in a form tests assert on (ids in hex, kind and attributes as strings).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

/// One exported span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    /// The span's name (`process orders`, `POST /v1/queues/{q}/jobs`).
    pub name: String,
    /// `server`, `client`, `producer`, `consumer` or `internal`.
    pub kind: &'static str,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// The parent's span id; `None` for a root.
    pub parent: Option<String>,
    /// Linked spans: (trace id, span id).
    pub links: Vec<(String, String)>,
    /// Attributes, values as strings.
    pub attributes: BTreeMap<String, String>,
    /// The exporting process's `service.name`.
    pub service: Option<String>,
    /// Whether the span's status is an error.
    pub error: bool,
}

impl SpanRecord {
    /// Attribute `key`, if set.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// A running collector; stops when dropped.
pub struct Collector {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<SpanRecord>>>,
    task: tokio::task::JoinHandle<()>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

fn kind(k: i32) -> &'static str {
    match SpanKind::try_from(k) {
        Ok(SpanKind::Server) => "server",
        Ok(SpanKind::Client) => "client",
        Ok(SpanKind::Producer) => "producer",
        Ok(SpanKind::Consumer) => "consumer",
        _ => "internal",
    }
}

async fn traces(State(spans): State<Arc<Mutex<Vec<SpanRecord>>>>, body: Bytes) -> StatusCode {
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut got = Vec::new();
    for rs in req.resource_spans {
        let resource = rs
            .resource
            .as_ref()
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                got.push(SpanRecord {
                    name: s.name.clone(),
                    kind: kind(s.kind),
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
                    links: s
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                    attributes: attributes(&s.attributes),
                    service: resource.get("service.name").cloned(),
                    // STATUS_CODE_ERROR is 2.
                    error: s.status.as_ref().is_some_and(|st| st.code == 2),
                });
            }
        }
    }
    spans.lock().unwrap().extend(got);
    StatusCode::OK
}

impl Collector {
    /// Starts one on a free loopback port.
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, spans, task }
    }

    /// The base URL (`--otlp-endpoint`; spans arrive at `/v1/traces`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<SpanRecord> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits (up to `within`) until the spans received satisfy `done`; returns them, or panics
    /// naming `what` with the spans it has.
    pub async fn wait_for(
        &self,
        what: &str,
        within: Duration,
        done: impl Fn(&[SpanRecord]) -> bool,
    ) -> Vec<SpanRecord> {
        let deadline = Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if Instant::now() > deadline {
                let names: Vec<_> = spans
                    .iter()
                    .map(|s| format!("{} [{}] {}", s.name, s.kind, s.trace_id))
                    .collect();
                panic!("collector: {what} not within {within:?}; spans: {names:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}
