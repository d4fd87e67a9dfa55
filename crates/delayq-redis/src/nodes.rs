//! The servers behind a backend, for commands that are per node (`SCAN`, `INFO`, `CONFIG`):
//! the one server (or the master Sentinel names), or every master of a Cluster as
//! `CLUSTER SLOTS` lists them, reached with the same credentials and TLS as the backend.

use delayq::Result;
use redis::{ConnectionAddr, IntoConnectionInfo, Value};

use crate::backend::RedisBackend;
use crate::conn::{Live, client, sentinel_master};
use crate::error::{self, shape};
use crate::target::{Topology, tcp_addr, tcp_settings};

/// One master of a Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Master {
    /// `host:port`.
    pub addr: String,
    /// Slots it serves.
    pub slots: u32,
    /// Replicas `CLUSTER SLOTS` lists for it.
    pub replicas: usize,
}

/// The masters of the cluster and their slots (`CLUSTER SLOTS`); empty when not a Cluster.
pub(crate) async fn cluster_masters(b: &RedisBackend) -> Result<Vec<Master>> {
    if !b.inner.conn.is_cluster() {
        return Ok(Vec::new());
    }
    let mut conn = b.connection();
    let v: Value = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut conn)
        .await
        .map_err(error::map)?;
    let mut out: Vec<Master> = Vec::new();
    let Value::Array(ranges) = v else {
        return Err(shape("CLUSTER SLOTS: array expected"));
    };
    for r in ranges {
        let Value::Array(r) = r else { continue };
        let (Some(Value::Int(a)), Some(Value::Int(z)), Some(Value::Array(node))) =
            (r.first(), r.get(1), r.get(2))
        else {
            continue;
        };
        let host = match node.first() {
            Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            _ => continue,
        };
        let Some(Value::Int(port)) = node.get(1) else {
            continue;
        };
        let addr = format!("{host}:{port}");
        let slots = (z - a + 1) as u32;
        match out.iter_mut().find(|m| m.addr == addr) {
            Some(m) => m.slots += slots,
            None => out.push(Master {
                addr,
                slots,
                replicas: r.len().saturating_sub(3),
            }),
        }
    }
    out.sort_by(|a, b| a.addr.cmp(&b.addr));
    Ok(out)
}

/// Every master's address and a connection to it (the one server, or the master Sentinel
/// names, under the URL); on a Cluster one connection per master address, kept for the
/// backend's life (the dashboard lists queues often) — one `CLUSTER SLOTS` per call.
pub(crate) async fn masters(b: &RedisBackend) -> Result<Vec<(String, Live)>> {
    let target = b.target();
    let Topology::Cluster(seeds) = &target.topology else {
        return Ok(vec![(b.url().to_owned(), b.connection())]);
    };
    let mut out = Vec::new();
    for m in cluster_masters(b).await? {
        let cached = b
            .inner
            .nodes
            .lock()
            .expect("nodes lock")
            .get(&m.addr)
            .cloned();
        let conn = match cached {
            Some(c) => c,
            None => {
                let (host, port) = m.addr.rsplit_once(':').expect("host:port");
                let port: u16 = port.parse().map_err(|_| shape("CLUSTER SLOTS port"))?;
                let redis = seeds
                    .first()
                    .map(|s| s.redis_settings().clone())
                    .unwrap_or_default();
                let info = tcp_addr(host, port, target.tls)
                    .into_connection_info()
                    .map_err(error::map)?
                    .set_redis_settings(redis)
                    .set_tcp_settings(tcp_settings());
                let c = client(target, info).map_err(error::map)?;
                let conn = c.get_connection_manager().await.map_err(error::map)?;
                b.inner
                    .nodes
                    .lock()
                    .expect("nodes lock")
                    .insert(m.addr.clone(), conn.clone());
                conn
            }
        };
        out.push((m.addr, Live::Single(conn)));
    }
    Ok(out)
}

/// What one sentinel says about the master.
#[derive(Clone, Debug)]
pub struct SentinelView {
    /// The sentinel's `host:port`.
    pub addr: String,
    /// Its answer, or why there is none.
    pub answer: std::result::Result<SentinelAnswer, String>,
}

/// One sentinel's view of the master.
#[derive(Clone, Debug)]
pub struct SentinelAnswer {
    /// The master's `host:port` as this sentinel names it.
    pub master: String,
    /// The configured quorum.
    pub quorum: u32,
    /// Other sentinels it knows.
    pub other_sentinels: u32,
    /// Replicas it knows.
    pub replicas: u32,
    /// `SENTINEL CKQUORUM`: `Ok(text)` when a failover could be authorized.
    pub ckquorum: std::result::Result<String, String>,
}

/// Topology facts for `delayq doctor`.
impl RedisBackend {
    /// `"single"`, `"cluster"` or `"sentinel"`.
    pub fn topology(&self) -> &'static str {
        match self.target().topology {
            Topology::Single(_) => "single",
            Topology::Cluster(_) => "cluster",
            Topology::Sentinel { .. } => "sentinel",
        }
    }

    /// Whether connections use TLS.
    pub fn uses_tls(&self) -> bool {
        self.target().tls
    }

    /// The masters of a Cluster with their slot counts (empty on other topologies).
    pub async fn cluster_masters(&self) -> Result<Vec<Master>> {
        cluster_masters(self).await
    }

    /// A connection to every master with its address (`host:port`, or the URL when there is
    /// one server).
    pub async fn masters(&self) -> Result<Vec<(String, Live)>> {
        masters(self).await
    }

    /// What each sentinel says about the master (empty when not behind Sentinel).
    pub async fn sentinels(&self) -> Vec<SentinelView> {
        let Topology::Sentinel {
            sentinels, master, ..
        } = &self.target().topology
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for addr in sentinels {
            let shown = match addr {
                ConnectionAddr::Tcp(h, p)
                | ConnectionAddr::TcpTls {
                    host: h, port: p, ..
                } => {
                    format!("{h}:{p}")
                }
                other => format!("{other:?}"),
            };
            let answer = ask_sentinel(self, addr.clone(), master).await;
            out.push(SentinelView {
                addr: shown,
                answer,
            });
        }
        out
    }
}

async fn ask_sentinel(
    b: &RedisBackend,
    addr: ConnectionAddr,
    master: &str,
) -> std::result::Result<SentinelAnswer, String> {
    let (mut conn, fields) = sentinel_master(b.target(), &addr, master)
        .await
        .map_err(|e| e.to_string())?;
    let get = |k: &str| fields.get(k).cloned().unwrap_or_default();
    let ckquorum = redis::cmd("SENTINEL")
        .arg("CKQUORUM")
        .arg(master)
        .query_async::<String>(&mut conn)
        .await
        .map_err(|e| e.to_string());
    Ok(SentinelAnswer {
        master: format!("{}:{}", get("ip"), get("port")),
        quorum: get("quorum").parse().unwrap_or(0),
        other_sentinels: get("num-other-sentinels").parse().unwrap_or(0),
        replicas: get("num-slaves").parse().unwrap_or(0),
        ckquorum,
    })
}
