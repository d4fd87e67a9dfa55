//! Command-line arguments of the `delayq` binary, and the parsers for durations and times.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand};
use delayq::{Due, JobId, QueueName};

mod batch;
mod keys;
mod processes;
pub(crate) use batch::BatchCommand;
pub(crate) use keys::KeysCommand;
pub(crate) use processes::{PushArgs, ServeArgs, TargetArgs, WorkerArgs};

/// delayq: jobs that run at a future time.
///
/// Every option of the store, of `serve` and of `worker` can also come from the environment
/// (DELAYQ_ and its name in upper case with `_` for `-`, e.g. DELAYQ_LISTEN) or a TOML file
/// (--config FILE; the key is the name with `_` for `-`). Flags win over the environment,
/// which wins over the file.
#[derive(Parser, Debug)]
#[command(name = "delayq", version = crate::version::LONG, about)]
pub(crate) struct Cli {
    /// TOML settings file (docs/CONFIG.md; `delayq config reference` lists every key).
    #[arg(
        long,
        global = true,
        help_heading = "Store and connection",
        env = "DELAYQ_CONFIG"
    )]
    pub config: Option<PathBuf>,
    /// Log level of the process's own log on stderr: error, warn, info, debug, trace, or a
    /// filter such as `delayq=debug,warn` (default: RUST_LOG, else warn). `serve` changes it on
    /// SIGHUP.
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub log_level: Option<String>,
    /// OpenTelemetry collector to export spans to over OTLP/HTTP (protobuf), as its base URL
    /// (spans go to URL/v1/traces), for `serve`, `worker` and `demo`. Without it the standard
    /// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turn export on; with
    /// neither, nothing is exported. OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
    /// OTEL_EXPORTER_OTLP_HEADERS and OTEL_TRACES_SAMPLER apply as usual.
    #[arg(long, global = true, value_name = "URL", help_heading = "Tracing")]
    pub otlp_endpoint: Option<String>,
    /// How an attempt's `process` span relates to the context its job was enqueued in: `child`
    /// (one trace from the enqueue through every attempt) or `link` (each attempt its own
    /// trace, linked to the enqueue's).
    #[arg(
        long,
        global = true,
        default_value = "child",
        value_name = "MODE",
        help_heading = "Tracing"
    )]
    pub trace_mode: delayq::TraceMode,
    /// Redis connection string: redis://user:pass@host:port/db (user, pass and db optional),
    /// rediss://… (TLS), unix:///path, redis+cluster://h1:p1,h2:p2,…,
    /// redis+sentinel://h1:p1,h2:p2/MASTER (rediss+… for TLS). Without it delayq uses the
    /// embedded store.
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub redis: Option<String>,
    /// PEM file of a private CA that signed the Redis server's certificate.
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with --tls-key).
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub tls_cert: Option<PathBuf>,
    /// PEM client key for mutual TLS (with --tls-cert).
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub tls_key: Option<PathBuf>,
    /// Make every enqueue and acknowledgement wait until N replicas have it (Redis WAIT), so
    /// a failover cannot lose it.
    #[arg(
        long,
        global = true,
        help_heading = "Store and connection",
        default_value_t = 0
    )]
    pub wait_replicas: u32,
    /// Keep every Redis key under dq:NAME: instead of dq: — applications (or staging and
    /// production) sharing one Redis never see each other's queues.
    #[arg(
        long,
        global = true,
        help_heading = "Store and connection",
        value_name = "NAME"
    )]
    pub namespace: Option<String>,
    /// How long to keep trying to reach Redis when it cannot be reached (starting beside this
    /// process, mid-failover), with backoff, logging why every few seconds; then exit with a
    /// clear message. Default: indefinitely for `serve` and `worker` (serve answers /healthz
    /// meanwhile, /readyz 503), 2s for other commands; 0s tries once.
    #[arg(long, global = true, help_heading = "Store and connection", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,
    /// File holding the Redis password (a mounted secret): it stays out of the process list,
    /// where a password in --redis is visible. Wins over a password in the URL.
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub redis_password_file: Option<PathBuf>,
    /// The Redis password, from the environment only (never a flag: the process list shows
    /// flags).
    #[arg(skip = std::env::var("DELAYQ_REDIS_PASSWORD").ok())]
    pub redis_password: Option<String>,
    /// PostgreSQL beside the store (postgres://user:pass@host:port/db; `?sslmode=require` for
    /// TLS, verified against --postgres-ca or the system's roots). `serve` and `worker` relay
    /// the jobs an application enqueued in its own transaction (`SELECT delayq.enqueue(…)`)
    /// into the store; `delayq migrate` creates delayq's schema there (serve and worker do at
    /// start).
    #[arg(long, global = true, help_heading = "PostgreSQL", value_name = "URL")]
    pub postgres: Option<String>,
    /// File holding the PostgreSQL password (its first line; wins over one in --postgres).
    #[arg(long, global = true, help_heading = "PostgreSQL", value_name = "FILE")]
    pub postgres_password_file: Option<PathBuf>,
    /// The PostgreSQL password, from the environment only (never a flag).
    #[arg(skip = std::env::var("DELAYQ_POSTGRES_PASSWORD").ok())]
    pub postgres_password: Option<String>,
    /// PEM file of the CA that signed the PostgreSQL server's certificate.
    #[arg(long, global = true, help_heading = "PostgreSQL", value_name = "FILE")]
    pub postgres_ca: Option<PathBuf>,
    /// A running `delayq serve` to send every command to (http://HOST:PORT). Without it, a
    /// command on the embedded store goes to the server that owns it, when one runs.
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub server: Option<String>,
    /// Bearer token for that server, when it needs one.
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub server_token: Option<String>,
    /// File holding the bearer token for that server (its first line), instead of
    /// --server-token: it stays out of the environment and the unit file.
    #[arg(
        long,
        global = true,
        help_heading = "Store and connection",
        conflicts_with = "server_token"
    )]
    pub server_token_file: Option<PathBuf>,
    /// Take secret files (tokens, passwords, push secrets) that every user may read. Refused
    /// by default, as ssh refuses such a key; for where a file's mode cannot be set (Docker
    /// Compose mounts a file secret with its host file's mode).
    #[arg(long, global = true, help_heading = "Store and connection")]
    pub allow_readable_secrets: bool,
    /// Directory of the embedded store (used when no Redis URL is configured).
    #[arg(
        long,
        global = true,
        help_heading = "Store and connection",
        default_value = "./delayq-data"
    )]
    pub data: PathBuf,
    /// Queue name: 1-128 characters of [A-Za-z0-9._-]. `delayq worker` serves several:
    /// repeat it (or separate them with commas) with an optional weight each, `NAME:WEIGHT`
    /// (1-1000, default 1): among the queues with due jobs, claims are shared by weight (or,
    /// with `--strict`, taken in the order given).
    #[arg(
        long,
        short,
        global = true,
        default_value = "default",
        value_delimiter = ',',
        action = clap::ArgAction::Append,
        value_name = "NAME[:WEIGHT]"
    )]
    pub queue: Vec<QueueSpec>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Enqueue a job (or many with --jsonl).
    Enqueue(EnqueueArgs),
    /// Show one job.
    Get {
        /// The job id.
        id: JobId,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a scheduled job; says whether it was still scheduled.
    Cancel {
        /// The job id.
        id: JobId,
        /// Cancel it even while a worker runs it: it ends cancelled now and its worker stops
        /// the handler within a second (exit 0, "cancelling").
        #[arg(long)]
        running: bool,
    },
    /// Move a scheduled job to a new time.
    Reschedule {
        /// The job id.
        id: JobId,
        /// When.
        #[command(flatten)]
        when: When,
    },
    /// Counts of the queue.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Every queue that holds jobs, one row each.
        #[arg(long)]
        all: bool,
    },
    /// Browse the queue's jobs by state.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Every job of one key at once: list, cancel or move them.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Dead-letter tools.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Queue settings, pause and resume.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Periodic jobs of the queue: cron (with a time zone) or a fixed interval. Every `serve`
    /// and `worker` process fires them; each fire is enqueued once, as `NAME@<fire ms>`.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Batches: jobs enqueued together whose ends enqueue a callback once (`batch-<id>-complete`).
    #[command(subcommand)]
    Batch(BatchCommand),
    /// Flows: jobs of any queues that wait for one another, enqueued in one call.
    #[command(subcommand)]
    Flow(FlowCommand),
    /// Run a command for every due job.
    Worker(WorkerArgs),
    /// Settings files: check one, list every key, print a commented example.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// What this build sends a store: the Redis scripts' text and SHA1s.
    #[command(subcommand)]
    Debug(crate::debug::DebugCommand),
    /// Exit 0 when a `delayq serve` is ready (`/readyz` answers 200), 1 otherwise: a container
    /// HEALTHCHECK or a probe that needs no curl.
    Health {
        /// The server (default: http://127.0.0.1:7070, or `listen` of the --config file).
        #[arg(long)]
        url: Option<String>,
    },
    /// Copy the embedded store to a new directory while it serves (a consistent snapshot;
    /// restore by pointing --data at it). On Redis, use Redis's own persistence instead.
    Backup {
        /// The directory to create the copy in (it must not hold a store).
        dest: PathBuf,
    },
    /// Print the man page (roff), generated from this definition, for packages.
    #[command(hide = true)]
    Manpage,
    /// Print a new random push signing secret (whsec_…) for `serve --push-secret` and the
    /// receivers that verify pushes.
    PushSecret,
    /// Check the Redis deployment: topology (Cluster slots, Sentinel quorum, replicas), TLS,
    /// the ACL rule, and on every master version, eviction policy and persistence; latency,
    /// clock.
    Doctor {
        /// Check the ACL rule of this user (with ACL DRYRUN, as an admin user) instead of the
        /// connected one.
        #[arg(long)]
        acl_user: Option<String>,
    },
    /// Create or update delayq's schema in the PostgreSQL database --postgres names (serve
    /// and worker do it at start too); refuses a database a newer delayq migrated.
    Migrate,
    /// The order-timeout story: orders, payments that cancel timeouts, a failing handler.
    Demo {
        /// Orders to place.
        #[arg(long, default_value_t = 200)]
        orders: usize,
    },
    /// Serve the HTTP API, the dashboard and /metrics.
    Serve(ServeArgs),
    /// Run the benchmark workloads of docs/BENCHMARKS.md (built with `--features bench`).
    #[cfg(feature = "bench")]
    Bench(crate::bench::BenchArgs),
    /// Run a fault scenario against a redis-server it starts, checked by the history checker
    /// (docs/RELIABILITY.md; built with `--features bench`).
    #[cfg(feature = "bench")]
    Chaos(crate::chaos::ChaosArgs),
}

/// `delayq queue …`.
#[derive(Subcommand, Debug)]
pub(crate) enum QueueCommand {
    /// Create a queue or change its settings (the shard count only while it is empty).
    Create {
        /// The queue.
        name: QueueName,
        /// Shards: hash slots the queue's jobs spread over (Redis; 1-256).
        #[arg(long, default_value_t = 1)]
        shards: u32,
        /// Keep the queue's one-delay lane (Redis): jobs whose due times come in arrival
        /// order — every job of a queue with one delay — are stored whole in a list, ~45 %
        /// less memory each.
        #[arg(long)]
        lane: bool,
        /// Width of the lane's time windows, e.g. 10s (100ms-60s; 0s: none; default 10s):
        /// a job due more than one width past its window's start waits whole in that
        /// window (~40 % less memory) until one width before the window starts.
        #[arg(long, value_parser = parse_duration, requires = "lane")]
        lane_window: Option<Duration>,
    },
    /// Change some of a queue's settings (those not given keep their values): its shard
    /// count (only while empty), a start-rate limit and a limit on jobs leased at once, which
    /// every consumer of every process obeys.
    Set {
        /// The queue.
        name: QueueName,
        /// Shards (Redis; 1-256).
        #[arg(long)]
        shards: Option<u32>,
        /// The one-delay lane on or off (Redis; `true` | `false`; only while the queue is
        /// empty).
        #[arg(long)]
        lane: Option<bool>,
        /// Width of the lane's time windows, e.g. 10s (100ms-60s; 0s: none; only while the
        /// queue is empty).
        #[arg(long, value_parser = parse_duration)]
        lane_window: Option<Duration>,
        /// Most jobs started per second over all consumers (e.g. 50, or 0.5 for one every 2 s).
        #[arg(long, conflicts_with = "no_rate")]
        rate: Option<f64>,
        /// Most jobs started at once after a quiet spell (with --rate; default: the rate
        /// rounded up).
        #[arg(long, requires = "rate")]
        burst: Option<u32>,
        /// Most jobs leased at once over all consumers.
        #[arg(long, conflicts_with = "no_max_in_flight")]
        max_in_flight: Option<u32>,
        /// Remove the rate limit.
        #[arg(long)]
        no_rate: bool,
        /// Remove the in-flight limit.
        #[arg(long)]
        no_max_in_flight: bool,
        /// Keep completed jobs readable as done this long, e.g. 1h (0s: off).
        #[arg(long, value_parser = parse_duration)]
        keep_done: Option<Duration>,
        /// Refuse a completed job's id this long, e.g. 10m (0s: off).
        #[arg(long, value_parser = parse_duration)]
        dedupe: Option<Duration>,
        /// Keep jobs due further ahead than this, e.g. 1h, in PostgreSQL beside the store
        /// (the cold tier: needs a `delayq serve --postgres`, reached with --server, or
        /// --postgres here); they move into the store when due within it.
        #[arg(long, value_parser = parse_duration, conflicts_with = "no_cold")]
        cold_after: Option<Duration>,
        /// Keep no job cold: the cold tier's jobs of the queue move into the store.
        #[arg(long)]
        no_cold: bool,
        /// Default push target of the queue's jobs that carry none.
        #[command(flatten)]
        target: TargetArgs,
        /// Remove the default push target.
        #[arg(long, conflicts_with = "url")]
        no_target: bool,
        /// Who takes the due jobs: pull (workers claim them; jobs with a target are refused)
        /// or push (`serve --push` sends each to its target). A default target given to a pull
        /// queue makes it push unless this says otherwise.
        #[arg(long, value_parser = ["pull", "push"])]
        delivery: Option<String>,
        /// Limits per key.
        #[command(flatten)]
        keys: KeyLimitArgs,
    },
    /// The busiest keys of a queue: jobs in flight and due per key, and held keys.
    Keys {
        /// The queue.
        name: QueueName,
        /// Most keys.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Hold one key's due jobs until a time or for a while (an upstream's Retry-After): the
    /// queue's other keys are claimed meanwhile.
    PauseKey {
        /// The queue.
        name: QueueName,
        /// The key.
        key: delayq::JobKey,
        /// How long, e.g. 30s.
        #[arg(long = "for", value_parser = parse_duration, conflicts_with = "until",
              required_unless_present = "until")]
        for_: Option<Duration>,
        /// Until this time (RFC 3339).
        #[arg(long, value_parser = parse_time)]
        until: Option<SystemTime>,
    },
    /// Lift a key's hold: its due jobs are claimed again at once.
    ResumeKey {
        /// The queue.
        name: QueueName,
        /// The key.
        key: delayq::JobKey,
    },
    /// Show a queue's settings and counts.
    Show {
        /// The queue.
        name: QueueName,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Pause a queue: it accepts jobs and leases none, for every consumer of every process.
    Pause {
        /// The queue.
        name: QueueName,
    },
    /// Resume a paused queue; its consumers wake at once.
    Resume {
        /// The queue.
        name: QueueName,
    },
}

/// A queue's limits per key (`delayq queue set`).
#[derive(Args, Debug)]
pub(crate) struct KeyLimitArgs {
    /// Most jobs of one key leased at once.
    #[arg(long, conflicts_with = "no_key_max_in_flight")]
    pub key_max_in_flight: Option<u32>,
    /// Remove the limit on each key's jobs leased at once.
    #[arg(long)]
    pub no_key_max_in_flight: bool,
    /// Most jobs of one key started per second (e.g. 5, or 0.5 for one every 2 s).
    #[arg(long, conflicts_with = "no_key_rate")]
    pub key_rate: Option<f64>,
    /// Most jobs of one key started at once after a quiet spell (with --key-rate; default:
    /// the rate rounded up).
    #[arg(long, requires = "key_rate")]
    pub key_burst: Option<u32>,
    /// Remove the rate limit of each key.
    #[arg(long)]
    pub no_key_rate: bool,
    /// Pause a push job's key when its target answers 429 with Retry-After (`true` |
    /// `false`).
    #[arg(long)]
    pub pause_key_on_429: Option<bool>,
}

impl KeyLimitArgs {
    /// Applies the flags given to `s`.
    pub(crate) fn apply(&self, s: &mut delayq::QueueSettings) {
        if self.key_max_in_flight.is_some() {
            s.key_max_in_flight = self.key_max_in_flight;
        }
        if self.no_key_max_in_flight {
            s.key_max_in_flight = None;
        }
        if let Some(per_s) = self.key_rate {
            let burst = self
                .key_burst
                .unwrap_or_else(|| per_s.ceil().max(1.0) as u32);
            s.key_rate = Some(delayq::Rate { per_s, burst });
        }
        if self.no_key_rate {
            s.key_rate = None;
        }
        if let Some(p) = self.pause_key_on_429 {
            s.pause_key_on_429 = p;
        }
    }
}

/// `delayq config …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ConfigCommand {
    /// Check the --config file (and the environment) and print the effective settings,
    /// secrets masked; exit 2 when something is wrong.
    Check {
        /// Check it as the settings of this command (default: the one its keys belong to,
        /// else serve).
        #[arg(long = "for", value_parser = ["serve", "worker"])]
        command: Option<String>,
    },
    /// Print docs/CONFIG.md: every key with its flag, environment variable and default.
    Reference,
    /// Print a commented settings file with every key at its default.
    Example {
        /// For this command.
        #[arg(value_parser = ["serve", "worker"], default_value = "serve")]
        command: String,
    },
}

/// `delayq schedule …`.
#[derive(Subcommand, Debug)]
pub(crate) enum ScheduleCommand {
    /// Create or change a schedule (a new timing applies from now; anything else from the
    /// next fire).
    Set {
        /// Its name: 1-128 characters of [A-Za-z0-9._-].
        name: String,
        /// Cron expression: 5 fields, or 6 with seconds first, e.g. "*/5 * * * *".
        #[arg(long, required_unless_present = "every", conflicts_with = "every")]
        cron: Option<String>,
        /// Time zone of --cron, e.g. Europe/Paris.
        #[arg(long, default_value = "UTC", requires = "cron")]
        tz: String,
        /// Instead of --cron: every so long, e.g. 30s, 5m (at least 1s).
        #[arg(long, value_parser = parse_duration)]
        every: Option<Duration>,
        /// Payload text of each fire's job.
        #[arg(long, default_value = "")]
        payload: String,
        /// Fires missed while nothing ran (over 60 s late): none, one (the latest) or all.
        #[arg(long, default_value = "none")]
        catch_up: String,
        /// max_attempts of each job.
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Push each fire's job by HTTP (a periodic webhook).
        #[command(flatten)]
        target: TargetArgs,
    },
    /// List the queue's schedules with their next fire.
    List {
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Delete a schedule (jobs it already enqueued stay).
    Rm {
        /// Its name.
        name: String,
    },
}

/// `delayq jobs …`.
#[derive(Subcommand, Debug)]
pub(crate) enum JobsCommand {
    /// List jobs of one state, by due time (leased: lease deadline; dead: failure time).
    List {
        /// scheduled (due later), due (due now, waiting), leased or dead.
        #[arg(long)]
        state: delayq::ListState,
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Continue after this cursor (printed after a full page).
        #[arg(long)]
        cursor: Option<delayq::Cursor>,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
}

/// `delayq flow …`.
#[derive(Subcommand, Debug)]
pub(crate) enum FlowCommand {
    /// Enqueue the flow read from stdin: `{"jobs": [{queue, id, payload, depends_on?, …}]}`
    /// (each job an enqueue body with its queue and id). Checked whole first — a cycle, a
    /// dependency neither in the flow nor stored, or a bad job refuses it all (exit 2,
    /// nothing written) — then written dependencies first.
    Create,
}

impl Command {
    /// Whether the command only reads (it must never create a store).
    pub(crate) fn read_only(&self) -> bool {
        matches!(
            self,
            Command::Get { .. }
                | Command::Stats { .. }
                | Command::Dead(DeadCommand::List { .. })
                | Command::Jobs(JobsCommand::List { .. })
                | Command::Queue(QueueCommand::Show { .. })
        ) || matches!(self, Command::Keys(k) if k.read_only())
    }

    /// Whether the command runs jobs or serves requests, so exports its spans when
    /// `--otlp-endpoint` (or the OTEL_EXPORTER_OTLP_* variables) say where.
    /// (The bench too, to measure what export costs per job.)
    pub(crate) fn exports_spans(&self) -> bool {
        #[cfg(feature = "bench")]
        if matches!(self, Command::Bench(_)) {
            return true;
        }
        matches!(
            self,
            Command::Serve(_) | Command::Worker(_) | Command::Demo { .. }
        )
    }

    /// Whether the command was asked for JSON (`--json`): its errors are JSON too.
    pub(crate) fn json(&self) -> bool {
        matches!(
            self,
            Command::Get { json: true, .. }
                | Command::Stats { json: true, .. }
                | Command::Dead(DeadCommand::List { json: true, .. })
                | Command::Jobs(JobsCommand::List { json: true, .. })
                | Command::Queue(QueueCommand::Show { json: true, .. })
                | Command::Schedule(ScheduleCommand::List { json: true })
        )
    }
}

/// When a job is due: `--delay` or `--at` (neither: now).
#[derive(Args, Debug, Clone)]
#[group(multiple = false)]
pub(crate) struct When {
    /// Delay, e.g. 250ms, 30s, 30m, 7d.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub delay: Option<Duration>,
    /// Absolute time, RFC 3339 (e.g. 2026-12-01T10:00:00Z or 2026-12-01T11:00:00+01:00).
    #[arg(long, value_parser = parse_time)]
    pub at: Option<SystemTime>,
}

impl When {
    /// When the job becomes due.
    pub(crate) fn due(&self) -> Result<Due, delayq::InvalidInput> {
        match (self.delay, self.at) {
            (Some(d), _) => Ok(Due::Delay(d)),
            (None, Some(t)) => Due::at(t),
            (None, None) => Ok(Due::Now),
        }
    }
}

/// Arguments of `delayq enqueue`.
#[derive(Args, Debug)]
pub(crate) struct EnqueueArgs {
    /// Job id (makes the enqueue idempotent); generated when absent.
    #[arg(long, conflicts_with = "jsonl")]
    pub id: Option<JobId>,
    /// When.
    #[command(flatten)]
    pub when: When,
    /// Deliveries before the job is dead-lettered.
    #[arg(long)]
    pub max_attempts: Option<u32>,
    /// Longest one attempt may run, e.g. 30s (the handler is cancelled after it).
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Expire unstarted at this time (RFC 3339): dead-lettered as `expired` instead of late.
    #[arg(long, value_parser = parse_time, conflicts_with = "expire_after")]
    pub expires_at: Option<SystemTime>,
    /// Expire unstarted this long after the due time, e.g. 3h.
    #[arg(long, value_parser = parse_duration)]
    pub expire_after: Option<Duration>,
    /// With --id: replace a scheduled job with this id (new payload and due time: debounce)
    /// instead of keeping it; a leased or dead one is not touched.
    #[arg(long, requires = "id")]
    pub replace: bool,
    /// Priority among due jobs, 0-9 (default 5; higher first).
    #[arg(long)]
    pub priority: Option<u8>,
    /// Its key (a tenant, a customer, an upstream host: 1-128 bytes): the queue shares its
    /// claims among the keys with due jobs, and its key limits bound each key.
    #[arg(long)]
    pub key: Option<delayq::JobKey>,
    /// Wait for these jobs (ids of the queue, or QUEUE/ID; repeat or separate with commas):
    /// the job stays waiting until each has ended, then it is due (at the earliest at its own
    /// time). A dead or cancelled one dead-letters it.
    #[arg(long, value_delimiter = ',', value_name = "ID")]
    pub after: Vec<String>,
    /// Keep the job readable as done this long after it completes, e.g. 1h.
    #[arg(long, value_parser = parse_duration)]
    pub keep_done: Option<Duration>,
    /// Refuse its id again for this long after it completes, e.g. 10m.
    #[arg(long, value_parser = parse_duration)]
    pub dedupe: Option<Duration>,
    /// Deliver by HTTP push (`delayq serve --push`) instead of a worker.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Payload text.
    #[arg(long, conflicts_with_all = ["payload_file", "jsonl"])]
    pub payload: Option<String>,
    /// Read the payload from a file.
    #[arg(long, conflicts_with = "jsonl")]
    pub payload_file: Option<PathBuf>,
    /// Read jobs from stdin, one JSON object per line:
    /// {"id", "payload", "delay_ms" | "run_at", "max_attempts", "key"}.
    #[arg(long)]
    pub jsonl: bool,
    /// Jobs per batch with --jsonl.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
}

/// Dead-letter subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum DeadCommand {
    /// List dead jobs, oldest failure first.
    List {
        /// Skip this many.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// Show at most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Put dead jobs back, due now.
    Requeue {
        /// The job to requeue.
        #[arg(required_unless_present = "all")]
        id: Option<JobId>,
        /// Requeue every dead job.
        #[arg(long, conflicts_with = "id")]
        all: bool,
    },
    /// Delete every dead job.
    Purge,
}

/// A queue named on the command line, with the weight a worker gives it: `NAME[:WEIGHT]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QueueSpec {
    /// The queue.
    pub name: QueueName,
    /// Its weight, when given.
    pub weight: Option<u32>,
}

impl std::str::FromStr for QueueSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let max = delayq::consumer::MAX_WEIGHT;
        let (name, weight) = match s.split_once(':') {
            Some((n, w)) => match w.parse::<u32>() {
                Ok(w) if (1..=max).contains(&w) => (n, Some(w)),
                _ => return Err(format!("weight {w:?} of queue {n}: expected 1-{max}")),
            },
            None => (s, None),
        };
        let name = QueueName::new(name).map_err(|e| e.to_string())?;
        Ok(Self { name, weight })
    }
}

impl Cli {
    /// Checks the queues before anything is opened: `worker` takes several, each once; any
    /// other command exactly one, without a weight.
    pub(crate) fn check_queues(&self) -> Result<(), crate::errors::ConfigError> {
        if !matches!(self.command, Command::Worker(_)) {
            return self.one_queue().map(|_| ());
        }
        for (i, q) in self.queue.iter().enumerate() {
            if self.queue[..i].iter().any(|o| o.name == q.name) {
                return Err(crate::errors::ConfigError::new(format!(
                    "--queue {} is named twice",
                    q.name
                )));
            }
        }
        Ok(())
    }

    /// The queue of a command other than `worker`: exactly one, without a weight.
    pub(crate) fn one_queue(&self) -> Result<QueueName, crate::errors::ConfigError> {
        match &self.queue[..] {
            [one] if one.weight.is_none() => Ok(one.name.clone()),
            _ => Err(crate::errors::ConfigError::new(
                "only `delayq worker` serves several queues or takes a weight (NAME:WEIGHT); \
                 this command takes one --queue",
            )),
        }
    }
}

/// Parses `250ms`, `30s`, `30m`, `7d`, `1h 30m`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "{s:?} is negative: a delay cannot be in the past (0 means now; --at takes a time)"
        ));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (examples: 250ms, 30s, 30m, 7d)"))
}

/// Parses RFC 3339 with `Z` or a numeric offset.
pub(crate) fn parse_time(s: &str) -> Result<SystemTime, String> {
    delayq::rfc3339::parse_ms(s)
        .map(|ms| std::time::UNIX_EPOCH + Duration::from_millis(ms))
        .ok_or_else(|| format!("{s:?} is not an RFC 3339 time (e.g. 2026-12-01T10:00:00Z)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86400)
        );
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn times() {
        let z = parse_time("2026-12-01T10:00:00Z").unwrap();
        let plus = parse_time("2026-12-01T11:00:00+01:00").unwrap();
        let minus = parse_time("2026-12-01T08:30:00-01:30").unwrap();
        assert_eq!(z, plus);
        assert_eq!(z, minus);
        assert!(parse_time("2026-12-01 10:00").is_err());
        assert!(parse_time("tomorrow").is_err());
    }
}
