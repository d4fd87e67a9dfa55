//! The server a bench runs against: started and pinned as docs/BENCHMARKS.md says (or given with
//! `--redis`), plus what the bench reads from it: `INFO` cost counters, memory, the ceiling.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use delayq::{Inspect, QueueSettings};
use delayq_embedded::EmbeddedBackend;
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use delayq_test_support::cluster::RedisCluster;
use redis::aio::ConnectionManager;

use crate::backend::AnyBackend;

/// How long the bench queue keeps done jobs with `--keep-done` / `--result-bytes`.
const KEEP_DONE_MS: u64 = 600_000;

/// The store a bench runs against — a Redis server, or embedded stores in a temporary
/// directory — and how the bench is placed on the machine.
pub(crate) struct Env {
    /// URL of the server (empty for the embedded store).
    pub url: String,
    /// The embedded store's root and the store of the current workload.
    embedded: Option<Embedded>,
    /// Owned server (none with `--redis` or `--cluster`).
    _server: Option<RedisServer>,
    /// Owned cluster (`--cluster`).
    _cluster: Option<RedisCluster>,
    /// A connection per master for `INFO`, `FLUSHALL`, `DBSIZE` (Redis only).
    admin: Vec<ConnectionManager>,
    /// Shards of the bench queue (`--shards`).
    pub shards: u32,
    /// The bench queue has the one-delay lane (`--lane`).
    pub lane: bool,
    /// With `lane`: the width of its time windows (ms; `None`: the default).
    pub lane_window_ms: Option<u32>,
    /// `--wait-replicas` of the bench's backends.
    pub wait_replicas: u32,
    /// The bench queue keeps done jobs (`--keep-done`, `--result-bytes`).
    pub keep_done: bool,
    /// Share of Redis CPU per master between the last two cost readings (several masters).
    pub spread: Option<Vec<f64>>,
    last_cost: Option<Cost>,
    /// E.g. "redis-server on CPU 0, clients on CPU 1".
    pub placement: String,
    /// `redis_version` of `INFO server`.
    pub redis_version: String,
    /// Prefix that pins a client process (`taskset -c 1`), empty when unpinned.
    pub client_prefix: Vec<String>,
    /// Port of the server (for redis-benchmark).
    pub port: u16,
    /// Host of the server.
    pub host: String,
    /// This executable (for worker processes).
    pub exe: PathBuf,
}

struct Embedded {
    root: tempfile::TempDir,
    runs: usize,
    current: Option<EmbeddedBackend>,
}

impl Embedded {
    fn dir(&self) -> PathBuf {
        self.root.path().join(format!("run{}", self.runs))
    }
}

/// `(cpu µs per job, commands per job)` between two cost readings (Redis only).
pub(super) fn per_job(
    before: Option<Cost>,
    after: Option<Cost>,
    n: usize,
) -> (Option<f64>, Option<f64>) {
    match (before, after) {
        (Some(b), Some(a)) => {
            let (c, k) = b.per_job(&a, n);
            (Some(c), Some(k))
        }
        _ => (None, None),
    }
}

/// Server cost counters at one moment (summed over masters; CPU also per master).
#[derive(Clone, Debug, Default)]
pub(crate) struct Cost {
    cpu_s: f64,
    calls: u64,
    by_master: Vec<f64>,
}

impl Cost {
    /// `(cpu µs per job, commands per job)` from `self` to `later`.
    pub(crate) fn per_job(&self, later: &Cost, n: usize) -> (f64, f64) {
        let n = n.max(1) as f64;
        (
            (later.cpu_s - self.cpu_s) * 1e6 / n,
            later.calls.saturating_sub(self.calls) as f64 / n,
        )
    }
}

fn can_pin() -> Result<(), String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return Err(format!("{cpus} CPU available"));
    }
    if Command::new("taskset").arg("-V").output().is_err() {
        return Err("taskset not found".into());
    }
    Ok(())
}

impl Env {
    /// Starts a server with the docs/BENCHMARKS.md settings (or a cluster of `cluster` masters, all
    /// on CPU 0), or connects to `url`; the bench queue gets `shards` shards.
    pub(crate) async fn new(
        url: Option<String>,
        shards: u32,
        cluster: Option<usize>,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let pin = can_pin();
        let mut owned_cluster = None;
        let (server, url, mut placement) = match (url, cluster) {
            (Some(u), _) => (
                None,
                u,
                "server given with --redis (its placement is unknown)".to_owned(),
            ),
            (None, Some(m)) => {
                let prefix: &[&str] = if pin.is_ok() {
                    &["taskset", "-c", "0"]
                } else {
                    &[]
                };
                let c = RedisCluster::start_prefixed(prefix, m, 0);
                let url = c.url(None);
                owned_cluster = Some(c);
                let placement = if pin.is_ok() {
                    format!("{m}-master cluster, every redis-server on CPU 0, clients on CPU 1")
                } else {
                    format!("{m}-master cluster, unpinned")
                };
                (None, url, placement)
            }
            (None, None) => {
                let args = ["--save", "", "--appendonly", "no"];
                let (server, placement) = match &pin {
                    Ok(()) => (
                        RedisServer::start_prefixed(&["taskset", "-c", "0"], &args)
                            .map_err(anyhow::Error::msg)?,
                        "redis-server on CPU 0, clients on CPU 1".to_owned(),
                    ),
                    Err(why) => (
                        RedisServer::start_prefixed(&[], &args).map_err(anyhow::Error::msg)?,
                        format!("unpinned ({why})"),
                    ),
                };
                let url = server.url();
                (Some(server), url, placement)
            }
        };
        let mut client_prefix = Vec::new();
        if pin.is_ok() {
            // Pin this process (all its threads; threads made later inherit it) to CPU 1.
            let ok = Command::new("taskset")
                .args(["-a", "-cp", "1", &std::process::id().to_string()])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if ok {
                client_prefix = vec!["taskset".into(), "-c".into(), "1".into()];
            } else {
                placement = format!("{placement}; pinning the bench failed");
            }
        } else if server.is_none() {
            placement = format!("{placement}; clients unpinned");
        }
        let node_urls: Vec<String> = match &owned_cluster {
            Some(c) => c.nodes.iter().map(RedisServer::url).collect(),
            None if url.contains("+cluster") || url.contains("+sentinel") => anyhow::bail!(
                "bench measures a cluster it starts itself (--cluster N); a given \
                 redis+cluster:// or redis+sentinel:// URL is not supported"
            ),
            None => vec![url.clone()],
        };
        let mut admin = Vec::new();
        for u in &node_urls {
            let client = redis::Client::open(u.as_str())?;
            // FLUSHALL of a 10-million-job backlog takes seconds: no short response timeout.
            let config = redis::aio::ConnectionManagerConfig::new()
                .set_response_timeout(Some(std::time::Duration::from_secs(300)));
            admin.push(
                client
                    .get_connection_manager_with_config(config)
                    .await
                    .context("connecting to Redis")?,
            );
        }
        let client = redis::Client::open(node_urls[0].as_str())?;
        let info = client.get_connection_info().addr().to_string();
        let (host, port) = info
            .rsplit_once(':')
            .map(|(h, p)| (h.to_owned(), p.parse().unwrap_or(6379)))
            .unwrap_or(("127.0.0.1".into(), 6379));
        let server_info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut admin[0])
            .await?;
        let redis_version = field(&server_info, "redis_version").unwrap_or_default();
        if shards > 1 {
            placement = format!("{placement}; queue of {shards} shards");
        }
        Ok(Self {
            url,
            embedded: None,
            _server: server,
            _cluster: owned_cluster,
            admin,
            shards,
            lane: false,
            lane_window_ms: None,
            wait_replicas: 0,
            keep_done: false,
            spread: None,
            last_cost: None,
            placement,
            redis_version,
            client_prefix,
            port,
            host,
            exe,
        })
    }

    /// Embedded stores in a temporary directory, a fresh one per workload run.
    pub(crate) fn embedded() -> anyhow::Result<Self> {
        Ok(Self {
            url: String::new(),
            embedded: Some(Embedded {
                root: tempfile::tempdir()?,
                runs: 0,
                current: None,
            }),
            _server: None,
            _cluster: None,
            admin: Vec::new(),
            shards: 1,
            lane: false,
            lane_window_ms: None,
            wait_replicas: 0,
            keep_done: false,
            spread: None,
            last_cost: None,
            placement: "embedded store (SQLite, WAL, synchronous=FULL) on local disk; unpinned"
                .into(),
            redis_version: "embedded".into(),
            client_prefix: Vec::new(),
            port: 0,
            host: String::new(),
            exe: std::env::current_exe()?,
        })
    }

    /// Whether this is the embedded store.
    pub(crate) fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// Whether the bench runs on several masters (a cluster it started).
    pub(crate) fn is_cluster(&self) -> bool {
        self._cluster.is_some()
    }

    fn admins(&mut self) -> anyhow::Result<&mut [ConnectionManager]> {
        if self.admin.is_empty() {
            anyhow::bail!("this workload needs Redis");
        }
        Ok(&mut self.admin)
    }

    /// Empties the store: `FLUSHALL`, or a fresh embedded store.
    pub(crate) async fn reset(&mut self) -> anyhow::Result<()> {
        if let Some(e) = self.embedded.as_mut() {
            e.current = None;
            e.runs += 1;
            return Ok(());
        }
        for a in self.admins()? {
            redis::cmd("FLUSHALL")
                .query_async::<()>(a)
                .await
                .context("FLUSHALL")?;
        }
        Ok(())
    }

    /// A backend: a new Redis connection, or the current embedded store (opened on demand).
    pub(crate) async fn backend(&mut self) -> anyhow::Result<AnyBackend> {
        match self.embedded.as_mut() {
            Some(e) => {
                if e.current.is_none() {
                    let b = EmbeddedBackend::open(e.dir())?;
                    if self.keep_done {
                        let mut settings = QueueSettings::default();
                        settings.retention.keep_done_ms = KEEP_DONE_MS;
                        b.configure(&queue(), settings).await?;
                    }
                    e.current = Some(b);
                }
                Ok(AnyBackend::Embedded(e.current.clone().expect("opened")))
            }
            None => {
                let mut opts = delayq_redis::ConnectOptions::new(self.url.clone());
                opts.wait_replicas = self.wait_replicas;
                let b = RedisBackend::connect_with(opts).await?;
                if self.shards > 1 || self.lane || self.keep_done {
                    let mut settings = QueueSettings::with_shards(self.shards);
                    settings.set_lane(Some(self.lane), self.lane_window_ms);
                    if self.keep_done {
                        settings.retention.keep_done_ms = KEEP_DONE_MS;
                    }
                    b.configure(&queue(), settings).await?;
                }
                Ok(AnyBackend::Redis(b))
            }
        }
    }

    /// Closes the embedded store so that a worker process can own it (no-op on Redis). Every
    /// clone of the backend must be dropped first.
    pub(crate) fn release(&mut self) {
        if let Some(e) = self.embedded.as_mut() {
            e.current = None;
        }
    }

    /// The arguments that point a `delayq` process at this store.
    pub(crate) fn backend_args(&self) -> Vec<String> {
        match &self.embedded {
            Some(e) => vec!["--data".into(), e.dir().to_string_lossy().into_owned()],
            None => vec![
                "--redis".into(),
                self.url.clone(),
                "--wait-replicas".into(),
                self.wait_replicas.to_string(),
            ],
        }
    }

    /// CPU seconds and total command calls so far, summed over masters (Redis only); also
    /// sets [`Env::spread`] for the interval since the previous reading.
    pub(crate) async fn cost(&mut self) -> anyhow::Result<Option<Cost>> {
        if self.admin.is_empty() {
            return Ok(None);
        }
        let mut total = Cost::default();
        for admin in &mut self.admin {
            let cpu: String = redis::cmd("INFO")
                .arg("cpu")
                .query_async(admin)
                .await
                .context("INFO cpu")?;
            let stats: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(admin)
                .await
                .context("INFO commandstats")?;
            let f = |k| {
                field(&cpu, k)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let calls: u64 = stats
                .lines()
                .filter_map(|l| l.split("calls=").nth(1))
                .filter_map(|r| r.split(',').next()?.parse::<u64>().ok())
                .sum();
            let cpu_s = f("used_cpu_user") + f("used_cpu_sys");
            total.cpu_s += cpu_s;
            total.calls += calls;
            total.by_master.push(cpu_s);
        }
        if let Some(prev) = &self.last_cost
            && total.by_master.len() > 1
            && prev.by_master.len() == total.by_master.len()
        {
            let d: Vec<f64> = total
                .by_master
                .iter()
                .zip(&prev.by_master)
                .map(|(a, b)| a - b)
                .collect();
            let sum: f64 = d.iter().sum();
            self.spread = (sum > 0.0).then(|| d.iter().map(|x| x / sum).collect());
        }
        self.last_cost = Some(total.clone());
        Ok(Some(total))
    }

    /// `used_memory` in bytes, summed over masters (Redis only).
    pub(crate) async fn used_memory(&mut self) -> anyhow::Result<u64> {
        let mut total = 0;
        for a in self.admins()? {
            let mem: String = redis::cmd("INFO").arg("memory").query_async(a).await?;
            total += field(&mem, "used_memory")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
        Ok(total)
    }

    /// `DBSIZE`, summed over masters (Redis only).
    pub(crate) async fn dbsize(&mut self) -> anyhow::Result<u64> {
        let mut total = 0;
        for a in self.admins()? {
            total += redis::cmd("DBSIZE").query_async::<u64>(a).await?;
        }
        Ok(total)
    }

    /// A command pinned like the bench's clients.
    pub(crate) fn client_command(&self, program: &std::path::Path) -> Command {
        match self.client_prefix.split_first() {
            Some((p, rest)) => {
                let mut c = Command::new(p);
                c.args(rest).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    /// Runs one redis-benchmark line and returns its requests per second.
    pub(crate) fn redis_benchmark(&self, args: &[&str]) -> Option<f64> {
        let out = self
            .client_command(std::path::Path::new("redis-benchmark"))
            .args(["-h", &self.host, "-p", &self.port.to_string(), "-q"])
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        // Progress lines end in '\r'; the final line reads "<name>: <rate> requests per
        // second, p50=…".
        let last = text
            .split(['\r', '\n'])
            .rfind(|l| l.contains(" requests per second"))?;
        let head = last.split(" requests per second").next()?;
        head.rsplit(' ').next()?.parse().ok()
    }
}

/// `name:value` of an `INFO` reply.
pub(super) fn field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    })
}

/// The redis-benchmark figures of docs/BENCHMARKS.md, measured in the same run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(super) struct Ceiling {
    /// `-n 200000 -t zadd` (50 clients).
    pub zadd: Option<f64>,
    /// The same with `-P 16`.
    pub zadd_p16: Option<f64>,
    /// `-n 100000 -c 1 -t zadd`: one round trip at a time.
    pub zadd_c1: Option<f64>,
    /// `-n 100000 eval "return 1" 0`.
    pub eval: Option<f64>,
}

impl Ceiling {
    /// Runs the four lines (then `FLUSHALL`).
    pub(super) async fn measure(env: &mut Env) -> anyhow::Result<Self> {
        let c = Self {
            zadd: env.redis_benchmark(&["-n", "200000", "-t", "zadd"]),
            zadd_p16: env.redis_benchmark(&["-n", "200000", "-P", "16", "-t", "zadd"]),
            zadd_c1: env.redis_benchmark(&["-n", "100000", "-c", "1", "-t", "zadd"]),
            eval: env.redis_benchmark(&["-n", "100000", "eval", "return 1", "0"]),
        };
        env.reset().await?;
        Ok(c)
    }
}

/// The queue every workload uses.
pub(crate) fn queue() -> delayq::QueueName {
    delayq::QueueName::new("bench").expect("valid name")
}
