//! The [`Pusher`]: runs inside any process (`delayq serve --push` is one) and delivers the
//! due jobs of every push queue as HTTP requests. Each queue gets a consumer of the core
//! engine (fenced leases extended while a request runs, retries by backoff, graceful drain),
//! whose handler is a delivery ([`crate::deliver`]); new push queues are found as they appear.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{
    Backend, Completion, Consumer, ConsumerOptions, DeliveryLog, Failure, Handler, Inspect, Job,
    QueueName, RunReport, TraceMode,
};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::{self, PushError};
use crate::deliver::{Shared, deliver};
use crate::hosts::{HostLimits, Hosts};
use crate::signing::Secret;

/// The settings of a running [`Pusher`] that a reload replaces (`delayq serve` on SIGHUP).
pub struct Reloads {
    shared: Arc<Shared>,
    connect_timeout: Duration,
    per_host: usize,
}

impl Reloads {
    /// Signs every later request with `secrets`.
    pub fn replace_secrets(&self, secrets: Vec<Secret>) {
        self.shared.secrets.replace(secrets);
    }

    /// Trusts the CA certificates of `ca` (read again now) besides the system's for every
    /// later request; on an error the running client stays.
    pub fn replace_ca(&self, ca: Option<&PathBuf>) -> Result<(), PushError> {
        let client = client::build(
            self.shared.allow_private,
            ca,
            self.connect_timeout,
            self.per_host,
        )?;
        match self.shared.client.write() {
            Ok(mut c) => *c = client,
            Err(poisoned) => *poisoned.into_inner() = client,
        }
        Ok(())
    }
}

/// How a [`Pusher`] runs.
#[derive(Clone, Debug)]
pub struct PusherOptions {
    /// Signing secrets (`whsec_…`): requests carry a signature by each (rotation). None:
    /// requests go unsigned (a warning is logged).
    pub secrets: Vec<Secret>,
    /// Let targets resolve to loopback, private, link-local and metadata addresses.
    pub allow_private: bool,
    /// Limits per target host, over every queue.
    pub hosts: HostLimits,
    /// Requests in flight per queue.
    pub concurrency: usize,
    /// Lease of a job whose request runs (extended every third of it while the request runs,
    /// so it covers the dispatch deadline with a margin).
    pub lease: Duration,
    /// A PEM file of CA certificates trusted besides the system's.
    pub ca: Option<PathBuf>,
    /// Longest TCP + TLS connect.
    pub connect_timeout: Duration,
    /// Only these queues; `None`: every push queue of the store, found as they appear.
    pub queues: Option<Vec<QueueName>>,
    /// How often the store's push queues are listed.
    pub discover_every: Duration,
    /// On shutdown, how long requests in flight may take before their leases are released.
    pub shutdown_grace: Duration,
    /// How a delivery's `process` span relates to its job's creation context.
    pub trace_mode: TraceMode,
    /// Longest a target's 429 `Retry-After` holds its job's key (`pause_key_on_429`): the
    /// job itself waits what the target asked, but the key's other jobs — possibly for other
    /// targets — go on after this, and are held again only if a target answers 429 again.
    pub max_key_hold: Duration,
}

impl Default for PusherOptions {
    fn default() -> Self {
        Self {
            secrets: Vec::new(),
            allow_private: false,
            hosts: HostLimits::default(),
            concurrency: 64,
            lease: Duration::from_secs(60),
            ca: None,
            connect_timeout: Duration::from_secs(10),
            queues: None,
            discover_every: Duration::from_secs(2),
            shutdown_grace: Duration::from_secs(30),
            trace_mode: TraceMode::Child,
            max_key_hold: DEFAULT_MAX_KEY_HOLD,
        }
    }
}

/// [`PusherOptions::max_key_hold`] by default: five minutes.
pub const DEFAULT_MAX_KEY_HOLD: Duration = Duration::from_secs(300);

/// Delivers the due jobs of push queues by HTTP (see the module docs).
pub struct Pusher<B> {
    backend: B,
    opts: PusherOptions,
    shared: Arc<Shared>,
}

impl<B: Backend + Inspect> Pusher<B> {
    /// A pusher over `backend`; builds the HTTP client (and reads the CA file).
    pub fn new(backend: B, opts: PusherOptions) -> Result<Self, PushError> {
        if opts.concurrency == 0 || opts.hosts.concurrency == 0 {
            return Err(PushError::Option("concurrency must be at least 1".into()));
        }
        if !opts.hosts.per_s.is_finite() || opts.hosts.per_s <= 0.0 || opts.hosts.burst == 0 {
            return Err(PushError::Option(
                "the per-host rate must be > 0 with a burst of at least 1".into(),
            ));
        }
        delayq::job::validate_lease(opts.lease).map_err(|e| PushError::Option(e.to_string()))?;
        let client = client::build(
            opts.allow_private,
            opts.ca.as_ref(),
            opts.connect_timeout,
            opts.hosts.concurrency,
        )?;
        let shared = Arc::new(Shared {
            client: std::sync::RwLock::new(client),
            secrets: Arc::new(crate::signing::SecretSet::new(opts.secrets.clone())),
            allow_private: opts.allow_private,
            hosts: Hosts::new(opts.hosts),
            log: Arc::new(DeliveryLog::new()),
            max_key_hold: opts.max_key_hold,
        });
        Ok(Self {
            backend,
            opts,
            shared,
        })
    }

    /// What a reload may replace while this pusher runs: its signing secrets and CA file.
    pub fn reloads(&self) -> Reloads {
        Reloads {
            shared: self.shared.clone(),
            connect_timeout: self.opts.connect_timeout,
            per_host: self.opts.hosts.concurrency,
        }
    }

    /// The log of this pusher's requests (serve it with `AppState::with_deliveries`).
    pub fn log(&self) -> Arc<DeliveryLog> {
        self.shared.log.clone()
    }

    /// Runs until `shutdown` completes: finds push queues and runs a consumer for each; then
    /// drains them (requests in flight finish within the grace period). Returns each queue's
    /// counts.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Vec<(QueueName, RunReport)> {
        if self.shared.secrets.get().is_empty() {
            tracing::warn!("push requests are not signed: give a secret (--push-secret)");
        }
        let (stop_tx, stop_rx) = watch::channel(false);
        // Each queue's own stop: a queue set back to pull stops being pushed.
        let mut running: HashMap<QueueName, Arc<watch::Sender<bool>>> = HashMap::new();
        let mut tasks: JoinSet<(QueueName, RunReport)> = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let listed = self
                .queues()
                .await
                .unwrap_or_else(|| running.keys().cloned().collect());
            // A consumer that found its queue set back to pull stopped itself: forget it, so
            // the queue is pushed again if it becomes a push queue again.
            running.retain(|_, stop| !*stop.borrow());
            if self.opts.queues.is_none() {
                running.retain(|q, stop| {
                    let keep = listed.contains(q);
                    if !keep {
                        tracing::info!(queue = %q, "no longer a push queue: stopped pushing it");
                        let _ = stop.send(true);
                    }
                    keep
                });
            }
            for q in listed {
                if let std::collections::hash_map::Entry::Vacant(e) = running.entry(q.clone()) {
                    tracing::info!(queue = %q, "pushing queue");
                    let own = Arc::new(watch::channel(false).0);
                    e.insert(own.clone());
                    self.spawn(&mut tasks, q, stop_rx.clone(), own);
                }
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(self.opts.discover_every) => {}
            }
        }
        let _ = stop_tx.send(true);
        let mut out = Vec::new();
        while let Some(r) = tasks.join_next().await {
            match r {
                Ok(r) => out.push(r),
                Err(e) => tracing::error!(error = %e, "push consumer failed"),
            }
        }
        out
    }

    /// The queues to push: the given ones, or the store's push queues (`None`: the store
    /// could not be asked).
    async fn queues(&self) -> Option<Vec<QueueName>> {
        if let Some(q) = &self.opts.queues {
            return Some(q.clone());
        }
        match self.backend.push_queues().await {
            Ok(q) => Some(q),
            Err(e) => {
                tracing::warn!(error = %e, "listing push queues failed");
                None
            }
        }
    }

    fn spawn(
        &self,
        tasks: &mut JoinSet<(QueueName, RunReport)>,
        q: QueueName,
        mut stop: watch::Receiver<bool>,
        own: Arc<watch::Sender<bool>>,
    ) {
        let opts = ConsumerOptions {
            concurrency: self.opts.concurrency,
            lease: self.opts.lease,
            batch: self.opts.concurrency.min(100),
            shutdown_grace: self.opts.shutdown_grace,
            trace_mode: self.opts.trace_mode,
            ..ConsumerOptions::default()
        };
        let consumer = match Consumer::new(self.backend.clone(), q.clone(), opts) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(queue = %q, error = %e, "cannot push this queue");
                return;
            }
        };
        let handler = Deliver {
            backend: self.backend.clone(),
            queue: q.clone(),
            shared: self.shared.clone(),
            settings: Mutex::new(None),
            own: own.clone(),
        };
        let mut own_stop = own.subscribe();
        tasks.spawn(async move {
            let stopped = async move {
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => {}
                    _ = own_stop.wait_for(|s| *s) => {}
                }
            };
            let report = match consumer.run(handler, stopped).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(queue = %q, error = %e, "push consumer ended");
                    RunReport::default()
                }
            };
            (q, report)
        });
    }
}

/// How long a queue's settings (its default target, `pause_key_on_429`) are trusted before
/// they are read again.
const SETTINGS_TTL: Duration = Duration::from_secs(5);

/// A queue's settings and when they were read.
type CachedSettings = Option<(Instant, delayq::QueueSettings)>;

/// The consumer handler of one push queue.
struct Deliver<B> {
    backend: B,
    queue: QueueName,
    shared: Arc<Shared>,
    /// The queue's settings and when they were read.
    settings: Mutex<CachedSettings>,
    /// Stops this queue's consumer (set when the queue turns out to be a pull queue now).
    own: Arc<watch::Sender<bool>>,
}

impl<B: Backend + Inspect> Deliver<B> {
    /// The target of a job of `key` answered 429 with `Retry-After: wait`: when the queue
    /// says so (`pause_key_on_429`), the key's jobs are held that long, so the queue's other
    /// keys go on while this upstream recovers. A failure to hold is logged, never fails the
    /// delivery's own retry.
    async fn hold_key(&self, key: &delayq::JobKey, wait: Duration) {
        let on = match self.settings().await {
            Ok(s) => s.pause_key_on_429,
            Err(e) => {
                tracing::warn!(queue = %self.queue, %key, error = %e.message(), "reading the queue's settings to hold a key");
                return;
            }
        };
        if !on || wait.is_zero() {
            return;
        }
        // Any producer can put a job with a victim's key and its own target answering 429
        // with a day's Retry-After: the key is held a bounded time, the job waits its own.
        let wait = wait.min(self.shared.max_key_hold);
        match self
            .backend
            .pause_key(&self.queue, key, delayq::KeyHold::For(wait))
            .await
        {
            Ok(_) => tracing::info!(queue = %self.queue, %key, wait_ms = wait.as_millis() as u64,
                "key held after 429 Retry-After"),
            Err(e) => {
                tracing::warn!(queue = %self.queue, %key, error = %e, "holding a key after 429")
            }
        }
    }

    /// The queue's settings, read at most every [`SETTINGS_TTL`]; a queue set back to pull
    /// stops this consumer.
    async fn settings(&self) -> Result<delayq::QueueSettings, Failure> {
        if let Some((at, s)) = self.settings.lock().expect("lock").as_ref()
            && at.elapsed() < SETTINGS_TTL
        {
            return Ok(s.clone());
        }
        let s = self
            .backend
            .settings(&self.queue)
            .await
            .map_err(|e| Failure::give_back(format!("reading the queue's settings: {e}")))?;
        if s.delivery != delayq::DeliveryMode::Push {
            // Set back to pull since this pusher found it: its jobs are the workers' now. This
            // one is given back and the queue's consumer stops at once (claiming more only to
            // give them back would keep them from the workers).
            let _ = self.own.send(true);
            return Err(Failure::give_back(format!(
                "queue {} is a pull queue now: left for its workers",
                self.queue
            )));
        }
        *self.settings.lock().expect("lock") = Some((Instant::now(), s.clone()));
        Ok(s)
    }
}

impl<B: Backend + Inspect> Handler for Deliver<B> {
    async fn handle(&self, job: Job) -> Result<Completion, Failure> {
        let target = match &job.target {
            Some(t) => t.clone(),
            None => match self.settings().await?.target {
                Some(t) => t,
                None => {
                    return Err(Failure::dead(
                        "no push target: the job carries none and its queue has no default",
                    ));
                }
            },
        };
        let d = deliver(&self.shared, &job, &target).await;
        if let (Some(wait), Some(key)) = (d.too_many, &job.key) {
            self.hold_key(key, wait).await;
        }
        d.result?;
        Ok(Completion::default())
    }
}
