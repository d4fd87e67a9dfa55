//! Arguments of the long-running commands — `delayq worker` and `delayq serve` with its limits
//! and pusher — and a job's push target on the command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse_duration;

/// Arguments of `delayq worker`.
#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    /// Shell command run for each job: payload on stdin; DELAYQ_JOB_ID, DELAYQ_QUEUE,
    /// DELAYQ_ATTEMPT, DELAYQ_DUE_AT_MS in the environment. Exit 0 acks; anything else retries.
    #[arg(long)]
    pub exec: Option<String>,
    /// Benchmark handler instead of --exec: append `id,completion_ms` to this file per job.
    #[arg(long, hide = true, conflicts_with = "exec")]
    pub bench_record: Option<PathBuf>,
    /// With --bench-record: sleep this long in each job first.
    #[arg(long, hide = true, default_value_t = 0)]
    pub bench_sleep_ms: u64,
    /// With several --queue: serve them in the order given, a queue only while every one
    /// before it has nothing due (default: share claims by weight).
    #[arg(long)]
    pub strict: bool,
    /// Jobs run at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Due jobs leased beyond the free slots and held until one frees (one claim serves
    /// several jobs) — only while handlers are fast: at most 50 ms of work per slot at their
    /// recent pace. A held job is given back after a third of its lease, and at shutdown.
    #[arg(long, default_value_t = delayq::consumer::DEFAULT_PREFETCH)]
    pub prefetch: usize,
    /// Lease length (extended while the command runs).
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub lease: Duration,
    /// On SIGTERM/SIGINT, how long running commands may take before they are killed.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub grace: Duration,
    /// No line per job (start-up and shutdown lines stay).
    #[arg(long)]
    pub quiet: bool,
    /// Per-job lines as text or JSON lines (on stderr).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: crate::exec::LogFormat,
    /// Keep each successful command's standard output (at most 65,535 bytes; more fails the
    /// job as dead) as the job's result, shown by `delayq get` while the queue keeps done jobs
    /// (`queue set --keep-done`).
    #[arg(long, requires = "exec")]
    pub keep_output: bool,
    /// When a job is cancelled while its command runs (`delayq cancel --running`), the
    /// command's process group gets SIGTERM, then SIGKILL after this.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub kill_after: Duration,
}

/// An HTTP push target on the command line.
#[derive(Args, Debug, Default)]
pub(crate) struct TargetArgs {
    /// Push target URL (http:// or https://): the payload is sent there at the due time.
    #[arg(long = "target")]
    pub url: Option<String>,
    /// Request method of the target (default POST).
    #[arg(long = "target-method", requires = "url")]
    pub method: Option<String>,
    /// Request header of the target, `NAME: VALUE` (repeatable).
    #[arg(long = "target-header", requires = "url")]
    pub headers: Vec<String>,
}

impl TargetArgs {
    /// The target, or `None` without `--target`.
    pub(crate) fn target(&self) -> anyhow::Result<Option<delayq::Target>> {
        let Some(url) = &self.url else {
            return Ok(None);
        };
        let mut t = delayq::Target::post(url.clone());
        if let Some(m) = &self.method {
            t.method = m.to_ascii_uppercase();
        }
        for h in &self.headers {
            let (k, v) = h
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("--target-header {h:?}: expected NAME: VALUE"))?;
            t.headers.insert(k.trim().to_owned(), v.trim().to_owned());
        }
        t.validate().map_err(delayq::Error::from)?;
        Ok(Some(t))
    }
}

/// Arguments of `delayq serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    pub listen: std::net::SocketAddr,
    /// Accepted bearer token, `SCOPE:TOKEN` with a scope of read (browse and stats), produce
    /// (enqueue, cancel, reschedule), consume (claim, ack, nack, extend, release), admin
    /// (everything) or all (every scope), or a bare TOKEN without `:` for every scope
    /// (repeatable). A `:` after anything but a scope is refused.
    #[arg(long = "token", value_delimiter = ',')]
    pub tokens: Vec<String>,
    /// File with one accepted bearer token per line, each `SCOPE:TOKEN` (`all:TOKEN` for
    /// every scope; blank lines and `#` comments skipped); re-read on SIGHUP. Refused when
    /// other users may read it.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Token /metrics requires (queue names appear there); without it /metrics is open. Any
    /// API token is accepted there too.
    #[arg(long)]
    pub metrics_token: Option<String>,
    /// File holding the /metrics token (its first line), instead of --metrics-token.
    #[arg(long, conflicts_with = "metrics_token")]
    pub metrics_token_file: Option<PathBuf>,
    /// Allow a non-loopback address without any token.
    #[arg(long)]
    pub insecure: bool,
    /// Let a reload (SIGHUP) leave a server that has tokens with none. Without it such a
    /// reload is refused and the running tokens stay: an emptied token file must not open
    /// the API.
    #[arg(long)]
    pub allow_no_tokens: bool,
    /// Largest job payload, in bytes.
    #[arg(long, default_value_t = delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES)]
    pub max_payload: usize,
    /// Connection and long-lived request budgets.
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Push: deliver the due jobs of push queues (`delivery: push`) as HTTP requests.
    #[command(flatten)]
    pub push: PushArgs,
}

/// What one caller and the whole server may hold open (docs/API.md, "Limits").
#[derive(Args, Debug)]
#[command(next_help_heading = "Connection limits")]
pub(crate) struct LimitArgs {
    /// Most open connections; when full, the oldest connection not serving a request (idle,
    /// or still sending its request) is closed for a new one, else the new one waits in the
    /// listen backlog. Keep it above --max-streams-total plus --max-long-polls-total: the rest
    /// is always there for short requests (health checks, claims without wait_ms, admin
    /// calls).
    #[arg(long, default_value_t = 2048)]
    pub max_connections: usize,
    /// Most connections one client address may hold outside long-lived requests (sending
    /// headers, idle, short requests); past it, the address's oldest connection not serving
    /// a request is closed for the new one, or the new one is closed when all serve one.
    #[arg(long, default_value_t = 64)]
    pub max_connections_per_address: usize,
    /// How long a client may take to send a request's headers (and an idle keep-alive
    /// connection stays open).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// Most event streams (GET …/events) per caller: its token, or its address without tokens.
    #[arg(long, default_value_t = 32)]
    pub max_streams: usize,
    /// Most event streams open at once, all callers.
    #[arg(long, default_value_t = 256)]
    pub max_streams_total: usize,
    /// Most long polls (claims with wait_ms) waiting per caller.
    #[arg(long, default_value_t = 256)]
    pub max_long_polls: usize,
    /// Most long polls waiting at once, all callers.
    #[arg(long, default_value_t = 1024)]
    pub max_long_polls_total: usize,
}

/// The pusher of `delayq serve --push`.
#[derive(Args, Debug)]
#[command(next_help_heading = "Push delivery")]
pub(crate) struct PushArgs {
    /// Deliver the jobs of push queues (`queue set Q --delivery push`) by sending each to its
    /// HTTP target (or the queue's default) at its due time.
    #[arg(long)]
    pub push: bool,
    /// Signing secret `whsec_<base64>` (Standard Webhooks; repeatable: requests carry a
    /// signature by each, for rotation).
    #[arg(long = "push-secret", value_delimiter = ',')]
    pub secrets: Vec<String>,
    /// File with one signing secret per line (same form as --push-secret); re-read on SIGHUP.
    #[arg(long)]
    pub push_secret_file: Option<PathBuf>,
    /// Let targets resolve to loopback, private, link-local and cloud-metadata addresses
    /// (refused by default: server-side request forgery).
    #[arg(long)]
    pub allow_private_targets: bool,
    /// Requests in flight per push queue.
    #[arg(long, default_value_t = 64)]
    pub push_concurrency: usize,
    /// Requests in flight per target host, over all queues.
    #[arg(long, default_value_t = 32)]
    pub push_host_concurrency: usize,
    /// Requests started per second per target host.
    #[arg(long, default_value_t = 200.0)]
    pub push_host_rate: f64,
    /// Requests a target host may get at once after a quiet spell.
    #[arg(long, default_value_t = 50)]
    pub push_host_burst: u32,
    /// Longest a target's 429 `Retry-After` holds its job's key on a queue with
    /// `pause_key_on_429`, seconds (the job itself waits what the target asked).
    #[arg(long, default_value_t = 300)]
    pub push_max_key_hold: u64,
    /// PEM file of CA certificates trusted for https targets besides the system's.
    #[arg(long)]
    pub push_ca: Option<PathBuf>,
    /// Push only this queue (repeatable; default: every push queue of the store).
    #[arg(long = "push-queue")]
    pub push_queues: Vec<String>,
}
