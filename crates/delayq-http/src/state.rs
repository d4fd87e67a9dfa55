//! [`AppState`]: what every handler shares — the backend, the limits, the tokens, the
//! Prometheus handle and the shutdown signal that ends pending long polls.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Backend, Inspect, Instrumented, Producer, QueueName};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

/// A check of a push target at enqueue: `Some(why)` refuses it (`invalid_target`). `serve
/// --push` without `--allow-private-targets` gives one that refuses the targets its pusher
/// would refuse whatever DNS says (private, loopback and link-local literals, `localhost`).
pub type TargetCheck = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Settings of the HTTP layer.
#[derive(Clone)]
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
    /// Whenever the server has no tokens — at start or after a reload that leaves none —
    /// accept only loopback `Host` values (`localhost`, `127.0.0.1`, `[::1]`): a web page
    /// that rebinds its own name to 127.0.0.1 cannot reach the API. `delayq serve` sets it
    /// when it listens on loopback.
    pub loopback_hosts_only: bool,
    /// Most open connections (more wait in the listen backlog until one closes). Keep it
    /// above `max_streams_total + max_long_polls_total`: the rest is what short requests
    /// (health checks, claims without `wait_ms`, admin calls) always have.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (also how long an idle
    /// keep-alive connection stays open).
    pub header_timeout: Duration,
    /// How often [`crate::serve`] samples every queue's depth for the console (default 10 s).
    pub depth_every: Duration,
    /// How often a queue's event streams (`GET …/events`) get its counts read: one reader
    /// per queue, whatever the number of streams (default 1 s).
    pub stats_every: Duration,
    /// Most long polls (`wait_ms` > 0) one caller (a token; a client address without tokens)
    /// may have waiting at once; more answer 429 `too_many_long_polls`.
    pub max_long_polls: usize,
    /// Most long polls waiting at once, all callers together.
    pub max_long_polls_total: usize,
    /// Most event streams (`GET …/events`) one caller may have open; more answer 429
    /// `too_many_streams`.
    pub max_streams: usize,
    /// Most event streams open at once, all callers together.
    pub max_streams_total: usize,
    /// Most connections one client address may hold open outside long-lived requests (still
    /// sending headers, idle, or in a short request); more are closed as they arrive, so one
    /// host churning half-sent requests cannot crowd out the others.
    pub max_short_per_address: usize,
    /// Refuses push targets at enqueue (jobs, schedules, a queue's default target); `None`:
    /// every valid URL is taken.
    pub target_check: Option<TargetCheck>,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("max_payload", &self.max_payload)
            .field("max_body", &self.max_body)
            .field("tokens", &self.tokens.len())
            .field("request_timeout", &self.request_timeout)
            .field("loopback_hosts_only", &self.loopback_hosts_only)
            .field("max_connections", &self.max_connections)
            .field("target_check", &self.target_check.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpConfig {
    /// `Err(invalid_target)` when [`HttpConfig::target_check`] refuses `target`.
    pub fn check_target(&self, target: Option<&delayq::Target>) -> Result<(), crate::ApiError> {
        match (&self.target_check, target) {
            (Some(check), Some(t)) => match check(&t.url) {
                Some(why) => Err(crate::ApiError::new(
                    crate::error::ErrorCode::InvalidTarget,
                    why,
                )),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
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
            max_connections: 2048,
            header_timeout: Duration::from_secs(10),
            max_long_polls: 256,
            max_long_polls_total: 1024,
            max_streams: 32,
            max_streams_total: 256,
            max_short_per_address: 64,
            depth_every: crate::depth::EVERY,
            stats_every: crate::events::STATS_EVERY,
            target_check: None,
        }
    }
}

/// Shared state of the router. Cheap to clone.
pub struct AppState<B> {
    pub(crate) inner: Arc<Inner<B>>,
}

impl<B> AppState<B> {
    /// The tokens and the metrics token in force now.
    pub fn credentials(&self) -> Arc<Credentials> {
        match self.inner.credentials.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the accepted tokens and the metrics token (a reload): requests already past
    /// their check finish as they are; every later one is checked against the new ones.
    pub fn replace_credentials(
        &self,
        tokens: Vec<crate::auth::Token>,
        metrics_token: Option<String>,
    ) {
        let new = Arc::new(Credentials {
            tokens,
            metrics_token,
        });
        match self.inner.credentials.write() {
            Ok(mut c) => *c = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
    }
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
    /// Queues this server served or showed since the depth sampler last looked (it samples
    /// an empty queue only then: `depth.rs`).
    pub touched: Mutex<std::collections::HashSet<QueueName>>,
    /// Long polls waiting now, per caller and in total.
    pub poll_budget: Arc<crate::budget::Budget>,
    /// Event streams open now, per caller and in total.
    pub stream_budget: Arc<crate::budget::Budget>,
    /// Connections per client address outside long-lived requests ([`crate::serve`]).
    pub short_conns: Arc<crate::budget::ShortConns>,
    /// One stats reader per queue for all its event streams.
    pub stats_hub: crate::events::StatsHub,
    /// Long polls waiting for jobs, per queue, and their claim loops.
    pub polls: crate::polls::Polls,
    /// Long polls their clients may cut short (`poll_id`).
    pub cuts: crate::polls::Cuts,
    /// Fair shares of claims over several queues (`POST /v1/claim`).
    pub fair: crate::fair::FairShares,
    /// Actions taken through this server, for the console's event streams.
    pub actions: tokio::sync::broadcast::Sender<crate::console::Action>,
    /// Depth samples per queue (`depth.rs`).
    pub depths: crate::depth::Depths,
    /// The push delivery log of this process's pusher, when it runs one.
    pub deliveries: std::sync::OnceLock<Arc<delayq::DeliveryLog>>,
    /// The tokens and the metrics token now (replaced by [`AppState::replace_credentials`]).
    pub credentials: std::sync::RwLock<Arc<Credentials>>,
    /// What a companion of the store (the PostgreSQL relay) says is wrong now, for
    /// `/readyz` ([`AppState::with_companion`]).
    pub companion: std::sync::OnceLock<Companion>,
}

/// A companion of the store this server runs beside it: its name, and what is wrong with it
/// now (`None`: nothing).
pub type Companion = (&'static str, Arc<dyn Fn() -> Option<String> + Send + Sync>);

/// The secrets a request is checked against; a reload replaces them whole.
#[derive(Debug, Default)]
pub struct Credentials {
    /// Accepted bearer tokens and their scopes; empty = no authentication.
    pub tokens: Vec<crate::auth::Token>,
    /// The token `/metrics` requires, if any.
    pub metrics_token: Option<String>,
}

impl<B: Backend + Inspect> AppState<B> {
    /// State over `backend`. Pass a Prometheus handle to serve `/metrics`.
    pub fn new(backend: B, config: HttpConfig, prometheus: Option<PrometheusHandle>) -> Self {
        let (shutdown_tx, shutdown) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                backend: Instrumented::new(backend),
                config: config.clone(),
                prometheus,
                shutdown_tx,
                shutdown,
                seen: Mutex::default(),
                touched: Mutex::default(),
                poll_budget: crate::budget::Budget::new(
                    config.max_long_polls,
                    config.max_long_polls_total,
                ),
                stream_budget: crate::budget::Budget::new(
                    config.max_streams,
                    config.max_streams_total,
                ),
                short_conns: Arc::default(),
                stats_hub: crate::events::StatsHub::default(),
                polls: crate::polls::Polls::default(),
                cuts: crate::polls::Cuts::default(),
                fair: crate::fair::FairShares::default(),
                actions: tokio::sync::broadcast::channel(256).0,
                depths: crate::depth::Depths::default(),
                deliveries: std::sync::OnceLock::new(),
                companion: std::sync::OnceLock::new(),
                credentials: std::sync::RwLock::new(Arc::new(Credentials {
                    tokens: config.tokens.clone(),
                    metrics_token: config.metrics_token.clone(),
                })),
            }),
        }
    }

    /// Serves the delivery log of this process's pusher (`GET …/jobs/{id}/deliveries`, the
    /// console's job page); every clone of this state serves it. The first log given stays.
    pub fn with_deliveries(self, log: Arc<delayq::DeliveryLog>) -> Self {
        let _ = self.inner.deliveries.set(log);
        self
    }

    /// Reports a companion's problem in `/readyz` (still 200 while the store answers: the
    /// server works without it, only what goes through it waits). The first one given stays.
    pub fn with_companion(self, companion: Companion) -> Self {
        let _ = self.inner.companion.set(companion);
        self
    }

    /// A place in the long-poll or event-stream budget for the caller of a request, or the
    /// 429 that refuses it (with `Retry-After`).
    pub(crate) fn long_lived(
        &self,
        kind: crate::budget::Kind,
        ext: &axum::http::Extensions,
    ) -> Result<crate::budget::Slot, crate::ApiError> {
        use crate::budget::{Full, Kind};
        let key = crate::budget::caller_key(ext);
        let conn = ext.get::<Arc<crate::budget::ConnTrack>>().cloned();
        let (budget, code, what) = match kind {
            Kind::Stream => (
                &self.inner.stream_budget,
                crate::ErrorCode::TooManyStreams,
                "event streams",
            ),
            Kind::LongPoll => (
                &self.inner.poll_budget,
                crate::ErrorCode::TooManyLongPolls,
                "long polls",
            ),
        };
        budget.take(key, conn).map_err(|full| {
            let msg = match full {
                Full::Caller(n) => format!(
                    "{n} {what} are already open for this caller (its token, or its address \
                     without tokens); close one, or retry later"
                ),
                Full::Total(n) => {
                    format!("the server already has its maximum of {n} {what} open; retry later")
                }
            };
            crate::ApiError::new(code, msg).retry_after(1)
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

    /// Event streams open now, all callers.
    pub fn open_streams(&self) -> usize {
        self.inner.stream_budget.in_use()
    }

    /// Queues whose counts a reader is following for event streams now (one per queue).
    pub fn stats_readers(&self) -> usize {
        self.inner.stats_hub.readers()
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
        // A job posted without a trace context keeps none (the request span is the server's).
        Producer::metered(self.inner.backend.clone(), q.clone())
            .with_ambient_trace(false)
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
        if let Ok(mut t) = self.inner.touched.lock()
            && !t.contains(q)
        {
            t.insert(q.clone());
        }
    }

    /// The queues noted since the last call ([`AppState::note`]).
    pub(crate) fn take_touched(&self) -> std::collections::HashSet<QueueName> {
        self.inner
            .touched
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default()
    }
}
