//! `delayq bench --workload breakdown`: where an awaited enqueue's time goes, one layer at a
//! time, each a loop of `n` awaited calls on the bench's Redis — the wire and the server's
//! reply (redis-benchmark `PING -c 1`, a raw tokio TCP `PING`), redis-rs's multiplexed
//! connection (`PING`), a script call (`EVALSHA` of `return 1`), the enqueue script through
//! the backend (`Backend::enqueue` of one job; the server's own time per call from `INFO
//! commandstats`), and the whole producer path (`Producer::enqueue`: validation, metrics).

use std::time::Instant;

use anyhow::Context;
use delayq::{Backend, Producer, Schedule};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Row;
use super::env::{Env, per_job};
use super::util::{job, queue};
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

fn row(variant: &str, n: usize, secs: f64, note: String) -> Row {
    Row {
        workload: "breakdown".into(),
        variant: variant.into(),
        n,
        jobs_per_s: Some(n as f64 / secs),
        note: Some(format!("{:.1} µs per call{note}", secs * 1e6 / n as f64)),
        ..Row::default()
    }
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
    let mut sock = tokio::net::TcpStream::connect((env.host.as_str(), env.port)).await?;
    sock.set_nodelay(true)?;
    let mut buf = [0u8; 16];
    let t = Instant::now();
    for _ in 0..n {
        sock.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
        let mut got = 0;
        while got < 7 {
            got += sock.read(&mut buf[got..]).await?;
        }
    }
    rows.push(row(
        "raw tokio TCP PING",
        n,
        t.elapsed().as_secs_f64(),
        String::new(),
    ));
    // redis-rs's multiplexed connection (what every delayq call uses).
    let mut conn = b.connection();
    let t = Instant::now();
    for _ in 0..n {
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
    }
    rows.push(row(
        "redis-rs PING",
        n,
        t.elapsed().as_secs_f64(),
        String::new(),
    ));
    // A script call that does nothing.
    let noop = redis::Script::new("return 1");
    let _: i64 = noop.invoke_async(&mut conn).await?;
    let t = Instant::now();
    for _ in 0..n {
        let _: i64 = noop.invoke_async(&mut conn).await?;
    }
    rows.push(row(
        "redis-rs EVALSHA return 1",
        n,
        t.elapsed().as_secs_f64(),
        String::new(),
    ));
    // The enqueue script through the backend, one job per call.
    let jobs: Vec<_> = (0..n).map(|i| job(i, Schedule::Now)).collect();
    let (calls0, usec0) = evalsha_stats(&mut conn).await?;
    let before = env.cost().await?;
    let t = Instant::now();
    for j in jobs {
        b.enqueue(&queue(), vec![j]).await?;
    }
    let secs = t.elapsed().as_secs_f64();
    let (cpu, cmds) = per_job(before, env.cost().await?, n);
    let (calls1, usec1) = evalsha_stats(&mut conn).await?;
    let server = (usec1 - usec0) as f64 / (calls1 - calls0).max(1) as f64;
    let mut r = row(
        "Backend::enqueue (enqueue.lua)",
        n,
        secs,
        format!("; the script {server:.1} µs on the server"),
    );
    r.redis_cpu_us_per_job = cpu;
    r.redis_cmds_per_job = cmds;
    rows.push(r);
    // The whole producer path (new ids).
    env.reset().await?;
    let b = env.backend().await?;
    let p = Producer::new(b, queue());
    let jobs: Vec<_> = (0..n).map(|i| job(i, Schedule::Now)).collect();
    let t = Instant::now();
    for j in jobs {
        p.enqueue(j).await?;
    }
    rows.push(row(
        "Producer::enqueue",
        n,
        t.elapsed().as_secs_f64(),
        String::new(),
    ));
    env.reset().await?;
    Ok(rows)
}
