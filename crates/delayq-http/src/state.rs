//! [`AppState`]: what every handler shares — the backend, the limits, the tokens, the
//! Prometheus handle and the shutdown signal that ends pending long polls.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Backend, Inspect, Instrumented, Producer, QueueName};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

/// Settings of the HTTP layer.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Largest job payload in bytes (default 1 MiB).
    pub max_payload: usize,
    /// Largest request body in bytes (default 16 MiB, for batches).
    pub max_body: usize,
    /// Accepted bearer tokens and their scopes; empty = no authentication.
    pub tokens: Vec<crate::auth::Token>,
    /// The token `/metrics` requires (any API token is accepted too); `None`: `/metrics` is
    /// open (queue names appear there).
    pub metrics_token: Option<String>,
    /// Longest request (long polls end sooner: `wait_ms` is at most 60 s).
    pub request_timeout: Duration,
    /// Without tokens, accept only loopback `Host` values (`localhost`, `127.0.0.1`, `[::1]`):
    /// a web page that rebinds its own name to 127.0.0.1 cannot reach the API. `delayq serve`
    /// sets it when it listens on loopback without tokens.
    pub loopback_hosts_only: bool,
    /// Most open connections (more wait in the listen backlog until one closes).
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (also how long an idle
    /// keep-alive connection stays open).
    pub header_timeout: Duration,
    /// How often [`crate::serve`] samples every queue's depth for the console (default 10 s).
    pub depth_every: Duration,
    /// Most long polls (`wait_ms` > 0) one caller (one token; everyone without tokens) may have
    /// waiting at once; more answer 429 `too_many_long_polls`.
    pub max_long_polls: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_payload: delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES,
            max_body: 16 * 1024 * 1024,
            tokens: Vec::new(),
            metrics_token: None,
            request_timeout: Duration::from_secs(90),
            loopback_hosts_only: false,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            max_long_polls: 256,
            depth_every: crate::depth::EVERY,
        }
    }
}

/// Shared state of the router. Cheap to clone.
pub struct AppState<B> {
    pub(crate) inner: Arc<Inner<B>>,
}

impl<B> Clone for AppState<B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

pub(crate) struct Inner<B> {
    /// The backend, metered (every lease operation of a handler is counted here).
    pub backend: Instrumented<B>,
    pub config: HttpConfig,
    pub prometheus: Option<PrometheusHandle>,
    pub shutdown_tx: watch::Sender<bool>,
    pub shutdown: watch::Receiver<bool>,
    /// Queues seen by this server, so their gauges are exported even when empty.
    pub seen: Mutex<BTreeSet<QueueName>>,
    /// Long polls waiting now, per caller (its `Authorization` value; "" without tokens).
    pub polls_per_caller: Mutex<std::collections::HashMap<String, usize>>,
    /// Long polls waiting for jobs, per queue, and their claim loops.
    pub polls: crate::polls::Polls,
    /// Long polls their clients may cut short (`poll_id`).
    pub cuts: crate::polls::Cuts,
    /// Actions taken through this server, for the console's event streams.
    pub actions: tokio::sync::broadcast::Sender<crate::console::Action>,
    /// Depth samples per queue (`depth.rs`).
    pub depths: crate::depth::Depths,
    /// The push delivery log of this process's pusher, when it runs one.
    pub deliveries: std::sync::OnceLock<Arc<delayq::DeliveryLog>>,
}

/// One waiting long poll, counted until dropped.
pub(crate) struct PollSlot<B> {
    state: AppState<B>,
    key: String,
}

impl<B> Drop for PollSlot<B> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.state.inner.polls_per_caller.lock()
            && let Some(n) = m.get_mut(&self.key)
        {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.key);
            }
        }
    }
}

impl<B: Backend + Inspect> AppState<B> {
    /// State over `backend`. Pass a Prometheus handle to serve `/metrics`.
    pub fn new(backend: B, config: HttpConfig, prometheus: Option<PrometheusHandle>) -> Self {
        let (shutdown_tx, shutdown) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                backend: Instrumented::new(backend),
                config,
                prometheus,
                shutdown_tx,
                shutdown,
                seen: Mutex::default(),
                polls_per_caller: Mutex::default(),
                polls: crate::polls::Polls::default(),
                cuts: crate::polls::Cuts::default(),
                actions: tokio::sync::broadcast::channel(256).0,
                depths: crate::depth::Depths::default(),
                deliveries: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Serves the delivery log of this process's pusher (`GET …/jobs/{id}/deliveries`, the
    /// console's job page); every clone of this state serves it. The first log given stays.
    pub fn with_deliveries(self, log: Arc<delayq::DeliveryLog>) -> Self {
        let _ = self.inner.deliveries.set(log);
        self
    }

    /// A slot for a long poll by `key`, or `None` when that caller already has
    /// [`HttpConfig::max_long_polls`] waiting.
    pub(crate) fn poll_slot(&self, key: String) -> Option<PollSlot<B>> {
        let mut m = self.inner.polls_per_caller.lock().ok()?;
        let n = m.entry(key.clone()).or_default();
        if *n >= self.inner.config.max_long_polls {
            return None;
        }
        *n += 1;
        Some(PollSlot {
            state: self.clone(),
            key,
        })
    }

    /// Every queue the store lists and every queue this server has served (so an empty queue
    /// still has its gauges and depth samples), sorted.
    pub(crate) async fn known_queues(&self) -> BTreeSet<QueueName> {
        let mut queues = self
            .inner
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        if let Ok(listed) = self.inner.backend.queues().await {
            queues.extend(listed);
        }
        queues
    }

    /// Long polls waiting for jobs now, all queues.
    pub fn waiting_polls(&self) -> usize {
        self.inner.polls.waiting()
    }

    /// Ends pending long polls (they answer with no jobs) and refuses new ones.
    pub fn begin_shutdown(&self) {
        let _ = self.inner.shutdown_tx.send(true);
    }

    pub(crate) fn config(&self) -> &HttpConfig {
        &self.inner.config
    }

    pub(crate) fn backend(&self) -> &Instrumented<B> {
        &self.inner.backend
    }

    pub(crate) fn producer(&self, q: &QueueName) -> Producer<B> {
        self.note(q);
        Producer::metered(self.inner.backend.clone(), q.clone())
            .with_max_payload(self.inner.config.max_payload)
    }

    /// Tells event streams of `action` (nobody listening is fine).
    pub(crate) fn announce(&self, action: crate::console::Action) {
        let _ = self.inner.actions.send(action);
    }

    pub(crate) fn note(&self, q: &QueueName) {
        if let Ok(mut seen) = self.inner.seen.lock()
            && !seen.contains(q)
        {
            seen.insert(q.clone());
        }
    }
}
