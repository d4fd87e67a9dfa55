//! `delayq bench --workload breakdown`: where an awaited enqueue's time goes, one layer at a
//! time, each a loop of `n` awaited calls on the bench's Redis — the wire and the server's
//! reply (redis-benchmark `PING -c 1`, a raw tokio TCP `PING`), redis-rs's multiplexed
//! connection (`PING`, through delayq's connection and through a dedicated one), a script call
//! (`EVALSHA` of `return 1`, through redis-rs and on the raw socket), the enqueue script
//! through the backend (`Backend::enqueue` of one job; the server's own time per call from
//! `INFO commandstats`), and the whole producer path (`Producer::enqueue`: validation,
//! metrics).
//! Then a batch of 1,000 through the backend, split the same way. Every layer also reports this
//! process's CPU time per call (`/proc/self/stat`): the client's own share of the round trip.

use std::time::{Duration, Instant};

use anyhow::Context;
use delayq::{Backend, Due, Producer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Row;
use super::env::{Env, per_job};
use super::util::{job, queue};
use super::workloads::delays;
use crate::backend::AnyBackend;

/// `(calls, usec)` of `cmdstat_evalsha`.
async fn evalsha_stats(conn: &mut delayq_redis::Connection) -> anyhow::Result<(u64, u64)> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .context("INFO commandstats")?;
    let line = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap_or("");
    let num = |k: &str| -> u64 {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
            .unwrap_or(0)
    };
    Ok((num("calls"), num("usec")))
}

/// This process's CPU time (user + system) in seconds, from `/proc/self/stat` (clock ticks of
/// 10 ms: loops of a second or more keep it within a few per cent); 0 where it cannot be read.
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at its closing parenthesis;
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after it.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// A layer's timing: wall and client CPU from a start taken by [`Clock::start`].
struct Clock(Instant, f64);

impl Clock {
    fn start() -> Self {
        Self(Instant::now(), cpu_secs())
    }

    /// The row of `n` calls since the start (`per`: jobs per call, for the client's CPU per job).
    fn row(&self, variant: &str, n: usize, per: usize) -> Row {
        let secs = self.0.elapsed().as_secs_f64();
        let cpu = (cpu_secs() - self.1) * 1e6 / (n * per) as f64;
        Row {
            workload: "breakdown".into(),
            variant: variant.into(),
            n: n * per,
            jobs_per_s: Some((n * per) as f64 / secs),
            note: Some(format!(
                "{:.1} µs per call, client CPU {cpu:.1} µs per job",
                secs * 1e6 / n as f64
            )),
            ..Row::default()
        }
    }
}

/// One awaited call on a raw socket: writes the packed `cmd`, reads until `reply`'s length and
/// checks that the server answered exactly `reply`.
async fn raw_call(sock: &mut TcpStream, cmd: &[u8], reply: &[u8]) -> anyhow::Result<()> {
    let mut buf = [0u8; 16];
    let mut got = 0;
    sock.write_all(cmd).await?;
    while got < reply.len() {
        let read = sock.read(&mut buf[got..reply.len()]).await?;
        anyhow::ensure!(read > 0, "the server closed the connection");
        got += read;
    }
    anyhow::ensure!(&buf[..got] == reply, "answered {:?}", &buf[..got]);
    Ok(())
}

/// The layers, in order.
pub(super) async fn breakdown(env: &mut Env, n: usize) -> anyhow::Result<Vec<Row>> {
    env.reset().await?;
    let AnyBackend::Redis(b) = env.backend().await? else {
        anyhow::bail!("the breakdown needs Redis");
    };
    let mut rows = Vec::new();
    if let Some(rate) = env.redis_benchmark(&["-c", "1", "-n", &n.to_string(), "-t", "ping"]) {
        rows.push(Row {
            workload: "breakdown".into(),
            variant: "redis-benchmark PING -c 1".into(),
            n,
            jobs_per_s: Some(rate),
            note: Some(format!("{:.1} µs per call", 1e6 / rate)),
            ..Row::default()
        });
    }
    // A raw RESP PING over tokio: the floor for any async Rust client.
    let mut sock = TcpStream::connect((env.host.as_str(), env.port)).await?;
    sock.set_nodelay(true)?;
    let t = Clock::start();
    for _ in 0..n {
        raw_call(&mut sock, b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n").await?;
    }
    rows.push(t.row("raw tokio TCP PING", n, 1));
    // redis-rs's multiplexed connection (what every delayq call uses).
    let mut conn = b.connection();
    let t = Clock::start();
    for _ in 0..n {
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
    }
    rows.push(t.row("redis-rs PING", n, 1));
    // A connection of its own (no manager, no response timeout), as a dedicated connection for
    // latency-critical single calls would be.
    let mut own = redis::Client::open(format!("redis://{}:{}", env.host, env.port))?
        .get_multiplexed_async_connection()
        .await?;
    let t = Clock::start();
    for _ in 0..n {
        let _: String = redis::cmd("PING").query_async(&mut own).await?;
    }
    rows.push(t.row("redis-rs PING, dedicated connection", n, 1));
    // A script call that does nothing.
    let noop = redis::Script::new("return 1");
    let _: i64 = noop.invoke_async(&mut conn).await?;
    let t = Clock::start();
    for _ in 0..n {
        let _: i64 = noop.invoke_async(&mut conn).await?;
    }
    rows.push(t.row("redis-rs EVALSHA return 1", n, 1));
    // The same script call on a socket this task writes and reads itself (the command packed by
    // redis-rs): what a connection read by the calling task, with no pipeline task between,
    // would save on every awaited call.
    let packed = redis::cmd("EVALSHA")
        .arg(noop.get_hash())
        .arg(0)
        .get_packed_command();
    let t = Clock::start();
    for _ in 0..n {
        raw_call(&mut sock, &packed, b":1\r\n").await?;
    }
    rows.push(t.row("raw tokio EVALSHA return 1", n, 1));
    // The enqueue script through the backend, one job per call, then in batches of 1,000
    // (W1's batch: an hour or two of delay each).
    let single: Vec<_> = (0..n).map(|i| vec![job(i, Due::Now)]).collect();
    let batches = (n / 1000).max(1);
    let d = delays(batches * 1000, 3_600_000, 7_200_000);
    let batched: Vec<Vec<_>> = (0..batches)
        .map(|k| {
            (k * 1000..(k + 1) * 1000)
                .map(|i| job(i, Due::Delay(Duration::from_millis(d[i]))))
                .collect()
        })
        .collect();
    for (variant, calls, per) in [
        ("Backend::enqueue (enqueue.lua)", single, 1),
        ("Backend::enqueue, batches of 1,000", batched, 1000),
    ] {
        env.reset().await?;
        let count = calls.len();
        let (calls0, usec0) = evalsha_stats(&mut conn).await?;
        let before = env.cost().await?;
        let t = Clock::start();
        for jobs in calls {
            b.enqueue(&queue(), jobs).await?;
        }
        let mut r = t.row(variant, count, per);
        let (cpu, cmds) = per_job(before, env.cost().await?, count * per);
        let (calls1, usec1) = evalsha_stats(&mut conn).await?;
        let server = (usec1 - usec0) as f64 / ((calls1 - calls0).max(1) * per as u64) as f64;
        if let Some(note) = r.note.as_mut() {
            note.push_str(&format!(
                "; the script {server:.2} µs per job on the server"
            ));
        }
        r.redis_cpu_us_per_job = cpu;
        r.redis_cmds_per_job = cmds;
        rows.push(r);
    }
    // The whole producer path (new ids).
    env.reset().await?;
    let b = env.backend().await?;
    let p = Producer::new(b, queue());
    let jobs: Vec<_> = (0..n).map(|i| job(i, Due::Now)).collect();
    let t = Clock::start();
    for j in jobs {
        p.enqueue(j).await?;
    }
    rows.push(t.row("Producer::enqueue", n, 1));
    env.reset().await?;
    Ok(rows)
}
