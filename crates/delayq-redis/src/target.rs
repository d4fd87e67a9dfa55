//! The connection string: one URL form per Redis topology, parsed here (before anything
//! connects) into a [`Target`] that says where to connect and how. Passwords are kept out of
//! every message: [`mask`] is the only way a URL is shown.
//!
//! | form | topology |
//! |---|---|
//! | `redis://[user:pass@]host:port[/db]`, `rediss://…` | one server (TLS with `rediss`) |
//! | `unix:///path/to/socket`, `redis+unix:///path` | one server over a Unix socket |
//! | `redis+cluster://[user:pass@]h1:p1,h2:p2,…`, `rediss+cluster://…` | Redis Cluster seeds |
//! | `redis+sentinel://[user:pass@]h1:p1,h2:p2/MASTER`, `rediss+sentinel://…` | Sentinel |

use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::{
    ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion,
    RedisConnectionInfo, TlsCertificates, io::tcp::TcpSettings,
};

use crate::error::Error;

/// How often an idle Pub/Sub connection is checked with `PING` by default
/// ([`ConnectOptions::health_check`]).
pub const HEALTH_EVERY: Duration = Duration::from_secs(10);

/// Files for TLS: a private CA to trust, and a client certificate and key for mutual TLS.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// PEM file of the CA that signed the server's certificate (default: the system's roots).
    pub ca: Option<PathBuf>,
    /// PEM client certificate (mutual TLS; needs `key`).
    pub cert: Option<PathBuf>,
    /// PEM client private key (mutual TLS; needs `cert`).
    pub key: Option<PathBuf>,
}

/// How long [`crate::RedisBackend::connect_with`] keeps trying by default when Redis cannot
/// be reached (it is starting, a failover is under way): 30 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How to connect: the connection string and its options.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// The connection string (see the module docs for the forms).
    pub url: String,
    /// TLS files (used with `rediss…` forms).
    pub tls: TlsFiles,
    /// Replicas every enqueue and acknowledgement waits for (`WAIT`) before it returns; 0
    /// waits for none.
    pub wait_replicas: u32,
    /// How long to keep trying while Redis cannot be reached (refused, timed out, loading,
    /// mid-failover), with backoff; `None`: until it can. An error that retrying cannot fix
    /// (a wrong password, a bad certificate) ends it at once. Default
    /// [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Option<Duration>,
    /// The password of the data nodes, given apart from the URL (a secret file, an
    /// environment variable) so it stays out of the process list; it wins over one in the
    /// URL, and with it a URL's bare `user@` is the ACL user name (not a password).
    pub password: Option<String>,
    /// A namespace: every key and channel under `dq:<namespace>:` instead of `dq:`, so
    /// several applications (or test runs) share one server without seeing each other's
    /// queues. 1–64 ASCII letters, digits, `-` or `_`; the ACL rule (`~dq:*`) covers it.
    pub namespace: Option<String>,
    /// How often the idle wake-up (Pub/Sub) connection is checked with `PING`, so that a
    /// silently dead socket is noticed and replaced; default [`crate::HEALTH_EVERY`] (10 s).
    pub health_check: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            url: String::new(),
            tls: TlsFiles::default(),
            wait_replicas: 0,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            password: None,
            namespace: None,
            health_check: HEALTH_EVERY,
        }
    }
}

impl ConnectOptions {
    /// Options for `url` with no TLS files and no replica wait.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }
}

/// Which Redis deployment a target names.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// One server (TCP, TLS or Unix socket).
    Single(ConnectionInfo),
    /// Seed nodes of a cluster.
    Cluster(Vec<ConnectionInfo>),
    /// Sentinels watching the master `master`; `redis` is how to talk to the data nodes.
    Sentinel {
        sentinels: Vec<ConnectionAddr>,
        master: String,
        redis: RedisConnectionInfo,
    },
}

/// A parsed connection string with its TLS material loaded.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub topology: Topology,
    /// Whether connections use TLS.
    pub tls: bool,
    /// CA and client certificate, when given.
    pub certs: Option<TlsCertificates>,
    /// The URL with its password masked, for messages.
    pub shown: String,
    /// See [`ConnectOptions::wait_replicas`].
    pub wait_replicas: u32,
    /// See [`ConnectOptions::namespace`] (checked).
    pub namespace: Option<String>,
    /// See [`ConnectOptions::health_check`] (at least 10 ms).
    pub health_check: Duration,
}

/// How long connecting may take, and how long a reply may take before the connection is
/// considered dead and replaced.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
pub(crate) const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// TCP settings of every connection: keepalive probes find a peer that vanished without a
/// FIN (NAT or load balancer state dropped), and the user timeout bounds unacknowledged writes.
pub(crate) fn tcp_settings() -> TcpSettings {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(15))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
        .set_user_timeout(Duration::from_secs(20))
}

/// The URL with the password replaced by `***`.
pub fn mask(url: &str) -> String {
    // Query credentials first (`unix:///s?pass=…`, `?password=…`).
    let (url, query) = match url.split_once('?') {
        Some((u, q)) => {
            let q: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _))
                        if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
                    {
                        format!("{k}=***")
                    }
                    _ => kv.to_owned(),
                })
                .collect();
            (u, format!("?{}", q.join("&")))
        }
        None => (url, String::new()),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return format!("{url}{query}");
    };
    let (auth, tail) = match rest.rfind('@') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => return format!("{url}{query}"),
    };
    let masked = match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{tail}"),
        // `redis://password@host` (no user) is the password alone.
        None if !auth.is_empty() => format!("{scheme}://***{tail}"),
        None => url.to_owned(),
    };
    format!("{masked}{query}")
}

/// Refuses a namespace that is not 1–64 ASCII letters, digits, `-` or `_`.
fn check_namespace(ns: &str) -> Result<(), Error> {
    let ok = (1..=64).contains(&ns.len())
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::Namespace {
            name: ns.to_owned(),
        })
    }
}

/// Parses `opts` and reads its certificate files; nothing connects.
pub(crate) fn parse(opts: &ConnectOptions) -> Result<Target, Error> {
    let url = opts.url.trim();
    // Without a scheme (`user:pass@host:port`) mask as if it had one.
    let shown = if url.contains("://") {
        mask(url)
    } else {
        mask(&format!("redis://{url}"))
            .trim_start_matches("redis://")
            .to_owned()
    };
    let bad = |why: String| Error::Url {
        url: shown.clone(),
        why,
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        bad(format!(
            "expected SCHEME://… (did you mean redis://{shown}?)"
        ))
    })?;
    let (tls, kind) = match scheme {
        "redis" => (false, "single"),
        "rediss" => (true, "single"),
        "unix" | "redis+unix" => (false, "unix"),
        "redis+cluster" => (false, "cluster"),
        "rediss+cluster" => (true, "cluster"),
        "redis+sentinel" => (false, "sentinel"),
        "rediss+sentinel" => (true, "sentinel"),
        other => {
            return Err(bad(format!(
                "unknown scheme {other:?} (use redis, rediss, unix, redis+cluster, \
                 rediss+cluster, redis+sentinel or rediss+sentinel)"
            )));
        }
    };
    let certs = load_certs(&opts.tls, tls)?;
    if let Some(ns) = &opts.namespace {
        check_namespace(ns)?;
    }
    let target = |topology| Target {
        topology,
        tls,
        certs: certs.clone(),
        shown: shown.clone(),
        wait_replicas: opts.wait_replicas,
        namespace: opts.namespace.clone(),
        health_check: opts.health_check.max(Duration::from_millis(10)),
    };
    if kind == "unix" {
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() || !path.starts_with('/') {
            return Err(bad("a Unix socket URL needs an absolute path".into()));
        }
        let mut redis = RedisConnectionInfo::default();
        for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
            redis = match k {
                "db" => redis.set_db(v.parse().map_err(|_| bad(format!("bad db {v:?}")))?),
                "user" => redis.set_username(v),
                "pass" | "password" => redis.set_password(v),
                _ => return Err(bad(format!("unknown option {k:?}"))),
            };
        }
        if let Some(p) = opts.password.as_deref().filter(|p| !p.is_empty()) {
            redis = redis.set_password(p);
        }
        let info = ConnectionAddr::Unix(PathBuf::from(path))
            .into_connection_info()
            .map_err(|e| bad(e.to_string()))?
            .set_redis_settings(redis);
        return Ok(target(Topology::Single(info)));
    }

    // [user:pass@]hosts[/path]
    let (auth, hosts_path) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    let (hosts, path) = match hosts_path.split_once('/') {
        Some((h, p)) => (h, p),
        None => (hosts_path, ""),
    };
    let mut redis = RedisConnectionInfo::default().set_protocol(ProtocolVersion::RESP2);
    if let Some(auth) = auth {
        // `user:pass@`; a bare `word@` is the password (redis-cli's reading) unless the
        // password is given apart (a file, the environment): then it is the ACL user name,
        // as `redis://delayq@redis:6379` with `DELAYQ_REDIS_PASSWORD_FILE` means.
        let apart = opts.password.as_deref().is_some_and(|p| !p.is_empty());
        let (user, pass) = match auth.split_once(':') {
            Some((u, p)) => (decode(u).map_err(&bad)?, decode(p).map_err(&bad)?),
            None if apart => (decode(auth).map_err(&bad)?, String::new()),
            None => (String::new(), decode(auth).map_err(&bad)?),
        };
        if !user.is_empty() {
            redis = redis.set_username(user);
        }
        if !pass.is_empty() {
            redis = redis.set_password(pass);
        }
    }
    if let Some(p) = opts.password.as_deref().filter(|p| !p.is_empty()) {
        redis = redis.set_password(p);
    }
    let addrs: Vec<ConnectionAddr> = hosts
        .split(',')
        .map(|h| host_port(h, tls).map_err(&bad))
        .collect::<Result<_, _>>()?;
    let path = path.split('?').next().unwrap_or("");
    match kind {
        "single" => {
            if addrs.len() != 1 {
                return Err(bad(
                    "several hosts: use redis+cluster:// or redis+sentinel://".into(),
                ));
            }
            if !path.is_empty() {
                let db = path
                    .parse()
                    .map_err(|_| bad(format!("database {path:?} is not a number")))?;
                redis = redis.set_db(db);
            }
            Ok(target(Topology::Single(info(addrs[0].clone(), &redis))))
        }
        "cluster" => {
            if !path.is_empty() {
                return Err(bad("Redis Cluster has one database: drop the /path".into()));
            }
            Ok(target(Topology::Cluster(
                addrs.into_iter().map(|a| info(a, &redis)).collect(),
            )))
        }
        _ => {
            if path.is_empty() {
                return Err(bad(
                    "name the master: redis+sentinel://host:port,…/MASTER_NAME".into(),
                ));
            }
            Ok(target(Topology::Sentinel {
                sentinels: addrs,
                master: path.to_owned(),
                redis,
            }))
        }
    }
}

fn info(addr: ConnectionAddr, redis: &RedisConnectionInfo) -> ConnectionInfo {
    addr.into_connection_info()
        .expect("an address is connection info")
        .set_redis_settings(redis.clone())
        .set_tcp_settings(tcp_settings())
}

fn host_port(h: &str, tls: bool) -> Result<ConnectionAddr, String> {
    if h.is_empty() {
        return Err("empty host".into());
    }
    let (host, port) = match h.rsplit_once(':') {
        // [v6]:port or host:port
        Some((host, port)) if !host.ends_with(':') => {
            let port: u16 = port
                .parse()
                .map_err(|_| format!("port {port:?} of {h:?} is not a number"))?;
            (host.trim_start_matches('[').trim_end_matches(']'), port)
        }
        _ => (h, 6379),
    };
    if host.is_empty() {
        return Err(format!("no host in {h:?}"));
    }
    Ok(tcp_addr(host, port, tls))
}

/// The address of `host:port`, over TLS (hostname verified) or not.
pub(crate) fn tcp_addr(host: &str, port: u16, tls: bool) -> ConnectionAddr {
    if tls {
        ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host.to_owned(), port)
    }
}

/// Percent-decoding of user and password (`%40` for `@` …).
fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("bad %-escape in user or password")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "user or password is not UTF-8".to_owned())
}

fn load_certs(files: &TlsFiles, tls: bool) -> Result<Option<TlsCertificates>, Error> {
    if files.ca.is_none() && files.cert.is_none() && files.key.is_none() {
        return Ok(None);
    }
    if !tls {
        return Err(Error::Tls {
            path: None,
            why: "TLS files given for a URL without TLS: use rediss://".into(),
        });
    }
    let read = |p: &Path, what: &str| -> Result<Vec<u8>, Error> {
        let bytes = std::fs::read(p).map_err(|e| Error::Tls {
            path: Some(p.to_owned()),
            why: format!("cannot read {what}: {e}"),
        })?;
        if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
            return Err(Error::Tls {
                path: Some(p.to_owned()),
                why: format!("{what} is not a PEM file"),
            });
        }
        Ok(bytes)
    };
    let root_cert = files
        .ca
        .as_deref()
        .map(|p| read(p, "CA certificate"))
        .transpose()?;
    let client_tls = match (&files.cert, &files.key) {
        (Some(c), Some(k)) => Some(ClientTlsConfig {
            client_cert: read(c, "client certificate")?,
            client_key: read(k, "client key")?,
        }),
        (None, None) => None,
        _ => {
            return Err(Error::Tls {
                path: None,
                why: "mutual TLS needs both --tls-cert and --tls-key".into(),
            });
        }
    };
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(url: &str) -> Result<Target, Error> {
        parse(&ConnectOptions::new(url))
    }

    #[test]
    fn a_bare_user_with_a_password_apart_is_the_user() {
        let settings = |url: &str, apart: Option<&str>| {
            let mut o = ConnectOptions::new(url);
            o.password = apart.map(str::to_owned);
            let Topology::Single(i) = parse(&o).unwrap().topology else {
                panic!()
            };
            let r = i.redis_settings();
            (
                r.username().map(str::to_owned),
                r.password().map(str::to_owned),
            )
        };
        assert_eq!(
            settings("redis://delayq@redis:6379", Some("pw")),
            (Some("delayq".into()), Some("pw".into()))
        );
        // Without a password apart, redis-cli's reading: the word is the password.
        assert_eq!(
            settings("redis://pw@redis:6379", None),
            (None, Some("pw".into()))
        );
        assert_eq!(
            settings("redis://u:old@redis:6379", Some("new")),
            (Some("u".into()), Some("new".into()))
        );
    }

    #[test]
    fn every_form_parses() {
        assert!(matches!(
            p("redis://127.0.0.1:7000/2").unwrap().topology,
            Topology::Single(_)
        ));
        let t = p("rediss://u:p%40ss@h:1").unwrap();
        assert!(t.tls);
        let Topology::Single(i) = t.topology else {
            panic!()
        };
        assert_eq!(i.redis_settings().password(), Some("p@ss"));
        assert_eq!(i.redis_settings().username(), Some("u"));
        assert!(matches!(
            p("unix:///tmp/r.sock").unwrap().topology,
            Topology::Single(_)
        ));
        let Topology::Cluster(seeds) = p("redis+cluster://a:1,b:2,c:3").unwrap().topology else {
            panic!()
        };
        assert_eq!(seeds.len(), 3);
        let Topology::Sentinel {
            sentinels, master, ..
        } = p("rediss+sentinel://x:pw@a:1,b:2/mymaster")
            .unwrap()
            .topology
        else {
            panic!()
        };
        assert_eq!((sentinels.len(), master.as_str()), (2, "mymaster"));
    }

    #[test]
    fn bad_urls_name_the_problem_and_never_the_password() {
        for (url, says) in [
            ("http://h:1", "unknown scheme"),
            ("redis://h:port", "not a number"),
            ("redis+sentinel://u:secret@a:1", "name the master"),
            ("redis://u:secret@a:1,b:2", "several hosts"),
            ("localhost:6379", "SCHEME://"),
            ("redis://u:secret@h:1/x", "not a number"),
        ] {
            let e = p(url).err().unwrap().to_string();
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("secret"), "{e}");
        }
        assert_eq!(mask("redis://u:secret@h:1"), "redis://u:***@h:1");
        assert_eq!(mask("redis://secret@h:1"), "redis://***@h:1");
        assert_eq!(mask("redis://h:1"), "redis://h:1");
        assert_eq!(
            mask("unix:///tmp/r.sock?db=2&pass=secret"),
            "unix:///tmp/r.sock?db=2&pass=***"
        );
        assert_eq!(
            mask("redis+unix:///s?user=u&password=secret"),
            "redis+unix:///s?user=u&password=***"
        );
    }

    #[test]
    fn unreadable_or_misplaced_certificates_are_refused_before_connecting() {
        let mut o = ConnectOptions::new("rediss://h:1");
        o.tls.ca = Some("/nonexistent/ca.pem".into());
        let e = parse(&o).err().unwrap().to_string();
        assert!(e.contains("/nonexistent/ca.pem") && e.contains("CA"), "{e}");
        let mut o = ConnectOptions::new("redis://h:1");
        o.tls.ca = Some("/etc/hostname".into());
        assert!(parse(&o).err().unwrap().to_string().contains("rediss://"));
        let mut o = ConnectOptions::new("rediss://h:1");
        o.tls.cert = Some("/etc/hostname".into());
        assert!(parse(&o).err().unwrap().to_string().contains("both"));
    }
}
