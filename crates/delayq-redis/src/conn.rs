//! The command connection for every topology, and how it heals.
//!
//! [`Conn`] hands out the live connection: a [`ConnectionManager`] to one server (or to the
//! master the sentinels name) or a [`ClusterConnection`] routing each script to its slot's node.
//! The redis crate reconnects after a dropped socket, but not after a reply that never comes
//! (a half-open socket behind a NAT or load balancer that forgot it): every call waits at
//! most [`RESPONSE_TIMEOUT`], and a timeout — or, under Sentinel, a `READONLY` reply or a
//! refused connection (the master moved) — makes [`Conn::failed`] build a fresh connection in
//! the background (asking the sentinels again) while callers get a retryable error.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
use redis::{Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, ServerErrorKind, Value};

use crate::target::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT, Target, Topology, tcp_settings};

/// A live connection: to one server (or the master Sentinel names), or to a Cluster (commands
/// routed by key). Implements the redis crate's `ConnectionLike`, so any command runs on it.
#[derive(Clone)]
pub enum Live {
    /// One server (reconnects by itself).
    Single(ConnectionManager),
    /// The master the sentinels named. It never reconnects by itself: an old master that was
    /// SIGKILLed and restarted calls itself master, empty, until the sentinels notice it (up
    /// to 10 s) — reconnecting to its address would write there and lose those writes when it
    /// is made a replica. A lost connection is replaced by asking the sentinels again.
    Sentinel(MultiplexedConnection),
    /// A Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Live {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Live::Single(c) => c.req_packed_command(cmd),
            Live::Sentinel(c) => c.req_packed_command(cmd),
            Live::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Live::Single(c) => c.req_packed_commands(cmd, offset, count),
            Live::Sentinel(c) => c.req_packed_commands(cmd, offset, count),
            Live::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Live::Single(c) => c.get_db(),
            Live::Sentinel(c) => c.get_db(),
            Live::Cluster(c) => c.get_db(),
        }
    }
}

/// The command connection: cheap to clone, replaced when it stops answering.
#[derive(Clone)]
pub(crate) struct Conn {
    inner: Arc<Shared>,
}

struct Shared {
    target: Target,
    /// Generation and connection; the generation tells a stale failure report from a new one.
    current: RwLock<(u64, Live)>,
    /// Behind Sentinel: the master's address the current connection goes to.
    master: RwLock<Option<redis::ConnectionAddr>>,
    rebuilding: tokio::sync::Mutex<()>,
}

/// How often a connection behind Sentinel asks the sentinels whether its master is still
/// theirs ([`watch_sentinels`]).
const SENTINEL_WATCH: std::time::Duration = std::time::Duration::from_secs(1);

impl Conn {
    /// Connects to `target` (at most [`CONNECT_TIMEOUT`] per attempt).
    pub(crate) async fn connect(target: Target) -> Result<Self, RedisError> {
        let (live, master) = open(&target).await?;
        let sentinel = master.is_some();
        let me = Self {
            inner: Arc::new(Shared {
                target,
                current: RwLock::new((0, live)),
                master: RwLock::new(master),
                rebuilding: tokio::sync::Mutex::new(()),
            }),
        };
        if sentinel {
            tokio::spawn(watch_sentinels(Arc::downgrade(&me.inner)));
        }
        Ok(me)
    }

    /// The target it connects to.
    pub(crate) fn target(&self) -> &Target {
        &self.inner.target
    }

    /// The live connection and its generation.
    pub(crate) fn get(&self) -> (u64, Live) {
        self.inner.current.read().expect("conn lock").clone()
    }

    /// Whether the connection is a cluster's.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.inner.target.topology, Topology::Cluster(_))
    }

    /// Reports that a call on generation `generation` failed with `e`; replaces the connection
    /// in the background when `e` says it is dead or talks to a server that is no longer the
    /// master.
    pub(crate) fn failed(&self, generation: u64, e: &RedisError) {
        let sentinel = matches!(self.inner.target.topology, Topology::Sentinel { .. });
        let heal = e.is_timeout()
            || matches!(e.kind(), ErrorKind::ClusterConnectionNotFound)
            || (sentinel
                && (e.is_connection_refusal()
                    || e.is_connection_dropped()
                    || e.is_io_error()
                    || matches!(
                        e.kind(),
                        ErrorKind::Server(ServerErrorKind::ReadOnly | ServerErrorKind::MasterDown)
                    )));
        if !heal {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move { me.rebuild(generation).await });
    }

    async fn rebuild(&self, generation: u64) {
        let _one = self.inner.rebuilding.lock().await;
        if self.get().0 != generation {
            return; // another caller already replaced it
        }
        match open(&self.inner.target).await {
            Ok((live, master)) => {
                tracing::warn!(redis = %self.inner.target.shown, "Redis connection replaced");
                *self.inner.current.write().expect("conn lock") = (generation + 1, live);
                *self.inner.master.write().expect("conn lock") = master;
            }
            Err(e) => {
                tracing::warn!(redis = %self.inner.target.shown, error = %e,
                    "Redis connection not replaced yet");
            }
        }
    }
}

/// Behind Sentinel, every [`SENTINEL_WATCH`] while the connection lives: when the sentinels
/// no longer call its master a settled master of theirs — they think it down (a partition
/// that leaves it reachable from here but not from them), they are failing it over, or they
/// name another — the connection is replaced (again each round until a new one is made,
/// which waits for the failover to end). Without this a client that still reaches an
/// isolated master writes there until the partition heals and the sentinels demote it,
/// losing every write in between (`delayq chaos --scenario sentinel-partition`).
async fn watch_sentinels(shared: std::sync::Weak<Shared>) {
    // The sentinel connection the last answer came on, asked again each round (a round
    // costs one command, not a connection); on any error the sentinels are asked afresh.
    let mut kept: Option<MultiplexedConnection> = None;
    loop {
        tokio::time::sleep(SENTINEL_WATCH).await;
        let Some(inner) = shared.upgrade() else {
            return;
        };
        let Topology::Sentinel {
            sentinels, master, ..
        } = &inner.target.topology
        else {
            return;
        };
        let again = match kept.as_mut() {
            Some(c) => timeout(
                redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(master.as_str())
                    .query_async::<HashMap<String, String>>(c),
            )
            .await
            .ok(),
            None => None,
        };
        let named = match again {
            Some(m) => Named::from_answer(&m),
            None => match ask_sentinels_on(&inner.target, sentinels, master).await {
                Ok((c, named)) => {
                    kept = Some(c);
                    named
                }
                Err(_) => {
                    kept = None;
                    continue; // no sentinel answers: nothing to go on
                }
            },
        };
        let ours = inner.master.read().expect("conn lock").clone();
        let theirs = named.settled() && ours.as_ref().is_some_and(|a| named.is(a));
        if !theirs {
            let me = Conn { inner };
            let generation = me.get().0;
            tracing::warn!(redis = %me.inner.target.shown, flags = %named.flags,
                "the sentinels no longer call this connection's master theirs");
            me.rebuild(generation).await;
        }
    }
}

/// A `redis::Client` for one server (TLS material applied).
pub(crate) fn client(target: &Target, info: redis::ConnectionInfo) -> Result<Client, RedisError> {
    match &target.certs {
        Some(certs) => Client::build_with_tls(info, certs.clone()),
        None => Client::open(info),
    }
}

/// A client for the master the sentinels name now.
pub(crate) async fn master_client(target: &Target) -> Result<Client, RedisError> {
    let Topology::Sentinel {
        sentinels,
        master,
        redis,
    } = &target.topology
    else {
        unreachable!("master_client on a non-Sentinel target")
    };
    no_failover_in_progress(target, sentinels, master).await?;
    let mut b = SentinelClientBuilder::new(sentinels.clone(), master, SentinelServerType::Master)?
        .set_client_to_redis_db(redis.db())
        .set_client_to_redis_protocol(redis.protocol())
        .set_client_to_redis_tcp_settings(tcp_settings())
        .set_client_to_sentinel_tcp_settings(tcp_settings());
    if let Some(u) = redis.username() {
        b = b.set_client_to_redis_username(u);
    }
    if let Some(p) = redis.password() {
        b = b.set_client_to_redis_password(p);
    }
    if target.tls {
        b = b
            .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
        if let Some(c) = &target.certs {
            b = b
                .set_client_to_redis_certificates(c.clone())
                .set_client_to_sentinel_certificates(c.clone());
        }
    }
    let mut sc = b.build()?;
    timeout(sc.async_get_client()).await
}

/// What the first sentinel that answers says of the master now.
struct Named {
    /// The master's address as the sentinels announce it.
    host: String,
    port: u16,
    /// Its flags (`master`, or with `failover_in_progress`, `s_down`, `o_down` …).
    flags: String,
}

impl Named {
    /// From a `SENTINEL MASTER` answer.
    fn from_answer(m: &HashMap<String, String>) -> Self {
        let field = |k: &str| m.get(k).cloned().unwrap_or_default();
        Named {
            host: field("ip"),
            port: field("port").parse().unwrap_or(0),
            flags: field("flags"),
        }
    }

    /// Whether the sentinels agree on this master: no failover under way, not thought down.
    fn settled(&self) -> bool {
        !["failover_in_progress", "s_down", "o_down"]
            .iter()
            .any(|f| self.flags.contains(f))
    }

    /// Whether `addr` is the address they name.
    fn is(&self, addr: &redis::ConnectionAddr) -> bool {
        match addr {
            redis::ConnectionAddr::Tcp(host, port)
            | redis::ConnectionAddr::TcpTls { host, port, .. } => {
                *host == self.host && *port == self.port
            }
            _ => false,
        }
    }
}

/// `SENTINEL MASTER master` asked of the sentinel at `addr` (at most 2 × [`CONNECT_TIMEOUT`]),
/// with the connection it was asked on.
pub(crate) async fn sentinel_master(
    target: &Target,
    addr: &redis::ConnectionAddr,
    master: &str,
) -> Result<(MultiplexedConnection, HashMap<String, String>), RedisError> {
    let info = redis::IntoConnectionInfo::into_connection_info(addr.clone())?
        .set_tcp_settings(tcp_settings());
    timeout(async {
        let mut c = client(target, info)?
            .get_multiplexed_async_connection()
            .await?;
        let m = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(master)
            .query_async(&mut c)
            .await?;
        Ok((c, m))
    })
    .await
}

/// Asks the sentinels, in order, what they say of `master` (`SENTINEL MASTER`): the first
/// answer counts. No answer at all is an error — never a reason to go on without one; when
/// the only answers were errors (a master name none of them watches), the error is the last
/// of them.
async fn ask_sentinels(
    target: &Target,
    sentinels: &[redis::ConnectionAddr],
    master: &str,
) -> Result<Named, RedisError> {
    ask_sentinels_on(target, sentinels, master)
        .await
        .map(|(_, named)| named)
}

/// [`ask_sentinels`], with the connection the answer came on (to ask again on it).
async fn ask_sentinels_on(
    target: &Target,
    sentinels: &[redis::ConnectionAddr],
    master: &str,
) -> Result<(MultiplexedConnection, Named), RedisError> {
    let mut refused = None;
    for addr in sentinels {
        match sentinel_master(target, addr, master).await {
            Ok((c, m)) => return Ok((c, Named::from_answer(&m))),
            // It answered with an error (`No such master with that name`: the URL names a
            // master it does not watch): kept to report, unless another one knows the master.
            Err(e) if e.code().is_some() => refused = Some(e),
            // A sentinel that does not answer: ask the next one.
            Err(_) => {}
        }
    }
    if let Some(e) = refused {
        return Err(e);
    }
    Err(RedisError::from((
        ErrorKind::MasterNameNotFoundBySentinel,
        "no sentinel answered",
        master.to_owned(),
    )))
}

/// Refuses to pick a master while the sentinels are failing over, or when none of them
/// answers. Mid-failover `SENTINEL MASTERS` (which the redis crate reads) still names the old
/// master; an old master that was restarted meanwhile answers `ROLE` as a master, empty, and
/// writes it acknowledges are lost when the sentinels make it a replica — `delayq chaos
/// --scenario sentinel-failover` lost 490 acknowledged jobs that way. Callers retry until the
/// failover has ended.
async fn no_failover_in_progress(
    target: &Target,
    sentinels: &[redis::ConnectionAddr],
    master: &str,
) -> Result<(), RedisError> {
    let named = ask_sentinels(target, sentinels, master).await?;
    if named.settled() {
        Ok(())
    } else {
        Err(failover(named.flags))
    }
}

/// A connection through the sentinels failed for want of an answer: when a sentinel answers,
/// the master it names is what does not (down, or being replaced — until the sentinels notice,
/// after down-after-milliseconds, they still call it settled), so the error says a failover is
/// in progress rather than "connection refused" for the sentinels' URL.
async fn master_unreachable(
    target: &Target,
    sentinels: &[redis::ConnectionAddr],
    master: &str,
    e: RedisError,
) -> RedisError {
    match ask_sentinels(target, sentinels, master).await {
        Ok(named) => RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "failover in progress (or the master is down)",
            format!(
                "the sentinels name {}:{} (flags {}) as master {master}, which does not \
                 answer ({e}); waiting for them to promote a replica",
                named.host, named.port, named.flags
            ),
        )),
        // No sentinel answers: that is the error.
        Err(_) => e,
    }
}

fn failover(flags: String) -> RedisError {
    RedisError::from((
        ErrorKind::MasterNameNotFoundBySentinel,
        "failover in progress",
        flags,
    ))
}

/// Keeps a connection to `addr` only if the sentinels, asked after it was made, still name
/// that address as a settled master. The look-up and the connect are separate steps: a
/// failover can start, or the sentinels' answer change, between them — and a connection that
/// was late reaches whatever listens at the old address by then (an old master restarted
/// empty). Asking once more after connecting closes that window: from then on a master
/// that is demoted answers `READONLY`, which replaces the connection.
pub(crate) async fn confirm_master(
    target: &Target,
    addr: &redis::ConnectionAddr,
) -> Result<(), RedisError> {
    let Topology::Sentinel {
        sentinels, master, ..
    } = &target.topology
    else {
        return Ok(());
    };
    let named = ask_sentinels(target, sentinels, master).await?;
    if !named.settled() {
        return Err(failover(named.flags));
    }
    if !named.is(addr) {
        return Err(RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "the sentinels name another master now",
            format!("{}:{}", named.host, named.port),
        )));
    }
    Ok(())
}

async fn timeout<T>(f: impl Future<Output = Result<T, RedisError>>) -> Result<T, RedisError> {
    tokio::time::timeout(CONNECT_TIMEOUT * 2, f)
        .await
        .unwrap_or_else(|_| {
            Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting timed out",
            )))
        })
}

async fn manager(c: Client) -> Result<Live, RedisError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(3)
        .set_max_delay(std::time::Duration::from_secs(1));
    timeout(ConnectionManager::new_with_config(c, config))
        .await
        .map(Live::Single)
}

/// Opens a connection; behind Sentinel, also the master's address it goes to.
async fn open(target: &Target) -> Result<(Live, Option<redis::ConnectionAddr>), RedisError> {
    install_crypto();
    match &target.topology {
        Topology::Single(info) => Ok((manager(client(target, info.clone())?).await?, None)),
        Topology::Sentinel {
            sentinels, master, ..
        } => {
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(CONNECT_TIMEOUT))
                .set_response_timeout(Some(RESPONSE_TIMEOUT));
            let opened: Result<_, RedisError> = async {
                let c = master_client(target).await?;
                let live = timeout(c.get_multiplexed_async_connection_with_config(&config)).await?;
                let addr = c.get_connection_info().addr().clone();
                confirm_master(target, &addr).await?;
                Ok((Live::Sentinel(live), Some(addr)))
            }
            .await;
            match opened {
                Err(e) if e.is_connection_refusal() || e.is_io_error() || e.is_timeout() => {
                    Err(master_unreachable(target, sentinels, master, e).await)
                }
                r => r,
            }
        }
        Topology::Cluster(seeds) => {
            let mut b = cluster_builder(target, seeds);
            b = b.retries(3).max_retry_wait(1000).min_retry_wait(20);
            // `get_async_connection` can hang (redis-rs #1953): bound it.
            timeout(b.build()?.get_async_connection())
                .await
                .map(|c| (Live::Cluster(c), None))
        }
    }
}

/// A cluster client builder with the target's credentials, TLS and timeouts.
pub(crate) fn cluster_builder(
    target: &Target,
    seeds: &[redis::ConnectionInfo],
) -> ClusterClientBuilder {
    let mut b = ClusterClientBuilder::new(seeds.to_vec())
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .tcp_settings(tcp_settings());
    if let Some(first) = seeds.first() {
        if let Some(u) = first.redis_settings().username() {
            b = b.username(u);
        }
        if let Some(p) = first.redis_settings().password() {
            b = b.password(p);
        }
    }
    if target.tls {
        b = b.tls(redis::TlsMode::Secure);
    }
    if let Some(c) = &target.certs {
        b = b.certs(c.clone());
    }
    b
}

/// rustls needs a process-wide crypto provider; installs ring's once (a no-op when the
/// application installed one).
fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use delayq_test_support::sentinel::SentinelSet;

    use super::*;
    use crate::target::{ConnectOptions, parse, tcp_addr};

    /// A connection is kept only to the address the sentinels name, settled: one made to any
    /// other server (late, after the answer changed) is refused.
    #[tokio::test]
    async fn a_connection_is_kept_only_to_the_master_the_sentinels_name() {
        let set = SentinelSet::start();
        let target = parse(&ConnectOptions::new(set.url())).unwrap();
        let at = |port: u16| tcp_addr("127.0.0.1", port, false);
        confirm_master(&target, &at(set.master.port()))
            .await
            .unwrap();
        let e = confirm_master(&target, &at(set.replica.port()))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("another master"), "{e}");
    }

    /// A URL naming a master no sentinel watches says so (not "no sentinel answered").
    #[tokio::test]
    async fn a_master_name_no_sentinel_watches_is_reported_as_such() {
        let set = delayq_test_support::shared::sentinel();
        let url = set.url().replace("/mymaster", "/nosuch");
        // One attempt: the default keeps retrying for 30 s (a sentinel may learn the master
        // later); the message is the same.
        let once = ConnectOptions {
            connect_timeout: Some(std::time::Duration::ZERO),
            ..ConnectOptions::new(url)
        };
        let e = crate::RedisBackend::connect_with(once)
            .await
            .err()
            .expect("connected");
        assert!(e.to_string().contains("No such master"), "{e}");
    }
}
