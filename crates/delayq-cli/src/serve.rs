//! `delayq serve`: the HTTP API over the configured backend.

use crate::backend::AnyBackend;
use anyhow::Context;
use delayq_http::{AppState, HttpConfig};

use crate::args::ServeArgs;
use crate::secrets::Secrets;

/// Runs the server on Redis: it listens at once and answers `/healthz` (and `/readyz` 503 with
/// the reason) while it waits for Redis, then serves until SIGTERM or SIGINT.
pub(crate) async fn run_redis(
    opts: delayq_redis::ConnectOptions,
    backend_desc: &str,
    a: ServeArgs,
    secrets: Secrets,
    pg: Option<delayq_postgres::PgOptions>,
) -> anyhow::Result<u8> {
    let listener = bind(a.listen).await?;
    let reason: delayq_http::starting::Reason =
        std::sync::Arc::new(std::sync::Mutex::new("connecting".into()));
    let seen = reason.clone();
    let mut log = crate::connect::RetryLog::new(backend_desc);
    let addr = listener.local_addr()?;
    let mut first = true;
    let connecting = delayq_redis::RedisBackend::connect_retrying(opts, move |e| {
        if let Ok(mut r) = seen.lock() {
            *r = e.to_string();
        }
        if std::mem::take(&mut first) {
            eprintln!(
                "delayq serve: listening on http://{addr}; /healthz answers, /readyz 503 until \
                 Redis is reachable"
            );
        }
        log.retrying(e);
    });
    let started = delayq_http::starting::while_starting(
        &listener,
        reason,
        connecting,
        crate::worker::shutdown_signal(),
    )
    .await;
    let Some(backend) = started else {
        eprintln!("delayq serve: stopped before Redis was reachable");
        return Ok(0);
    };
    let backend = backend.context("connecting to Redis")?;
    run(
        listener,
        AnyBackend::Redis(backend),
        backend_desc,
        None,
        a,
        secrets,
        pg,
    )
    .await
}

/// Listens on `addr`.
pub(crate) async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

/// Runs the server on `listener` until SIGTERM or SIGINT, then shuts down gracefully, with the
/// `secrets` [`crate::secrets::check`] read.
pub(crate) async fn run(
    listener: tokio::net::TcpListener,
    backend: AnyBackend,
    backend_desc: &str,
    owned_store: Option<std::path::PathBuf>,
    a: ServeArgs,
    secrets: Secrets,
    pg: Option<delayq_postgres::PgOptions>,
) -> anyhow::Result<u8> {
    let (backend, relay) = crate::postgres::companion(backend, pg)?;
    let tokens = secrets.tokens;
    let prometheus = delayq_http::install_prometheus().map_err(anyhow::Error::msg)?;
    crate::otlp::describe_metrics();
    let config = HttpConfig {
        max_payload: a.max_payload,
        // Checked whenever the tokens are none, so a reload to none keeps the guard.
        loopback_hosts_only: a.listen.ip().is_loopback(),
        tokens,
        metrics_token: secrets.metrics_token,
        max_connections: a.limits.max_connections,
        max_short_per_address: a.limits.max_connections_per_address,
        header_timeout: a.limits.header_timeout,
        max_streams: a.limits.max_streams,
        max_streams_total: a.limits.max_streams_total,
        max_long_polls: a.limits.max_long_polls,
        max_long_polls_total: a.limits.max_long_polls_total,
        // A pushing server refuses at enqueue the targets its pusher would refuse whatever DNS
        // says, instead of dead-lettering them at their due time.
        target_check: (a.push.push && !a.push.allow_private_targets).then(|| {
            std::sync::Arc::new(delayq_push::client::refused_at_enqueue) as delayq_http::TargetCheck
        }),
        ..HttpConfig::default()
    };
    raise_fd_limit(config.max_connections);
    let auth = if config.tokens.is_empty() {
        "no auth"
    } else {
        "bearer tokens"
    };
    // Every serve process fires the due schedules of every queue (no leader: each fire is
    // enqueued once whichever process gets there first).
    let (stop_ticker, mut ticker_stopped) = tokio::sync::watch::channel(false);
    let ticker = tokio::spawn(delayq::Ticker::new(backend.clone()).run(async move {
        let _ = ticker_stopped.wait_for(|s| *s).await;
    }));
    let pusher = crate::push::pusher(&a.push, secrets.push, backend.clone())?;
    let mut state = AppState::new(backend, config, Some(prometheus));
    if let Some(r) = &relay {
        let status = r.status.clone();
        state = state.with_companion(("postgres", std::sync::Arc::new(move || status.problem())));
    }
    if let Some(p) = &pusher {
        state = state.with_deliveries(p.log());
    }
    let reloads = tokio::spawn(crate::reload::on_hangup(
        state.clone(),
        pusher.as_ref().map(|p| p.reloads()),
    ));
    let (stop_pusher, mut pusher_stopped) = tokio::sync::watch::channel(false);
    let pushing = pusher.map(|p| {
        tokio::spawn(p.run(async move {
            let _ = pusher_stopped.wait_for(|s| *s).await;
        }))
    });
    let addr = listener.local_addr()?;
    // Other delayq commands on this store find the server here (it owns the store's lock).
    // Written before the banner: whoever reads the banner may at once run a command that
    // goes through this server.
    let server_file = owned_store.as_deref().map(crate::store::server_file);
    if let Some(f) = &server_file {
        let mut local = addr;
        if local.ip().is_unspecified() {
            local.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        std::fs::write(f, format!("http://{local}\n"))
            .with_context(|| format!("writing {}", f.display()))?;
    }
    println!("delayq serve: listening on http://{addr} ({auth}), backend {backend_desc}");
    println!("  console    http://{addr}/");
    if pushing.is_some() {
        println!("  push       delivering push queues by HTTP");
    }
    println!("  API spec   http://{addr}/openapi.json");
    // The try lines leave nothing behind: the worker runs the job when it is due.
    println!("  try        delayq enqueue --queue demo --delay 5s --payload hello");
    println!(
        "             delayq worker --queue demo --exec cat    (prints hello in 5 s; Ctrl-C stops)"
    );
    let served = delayq_http::serve(listener, state, crate::worker::shutdown_signal()).await;
    reloads.abort();
    let _ = stop_ticker.send(true);
    let _ = stop_pusher.send(true);
    let _ = ticker.await;
    if let Some(p) = pushing {
        let _ = p.await;
    }
    if let Some(r) = relay {
        r.stop().await;
    }
    if let Some(f) = &server_file {
        let _ = std::fs::remove_file(f);
    }
    served?;
    eprintln!("delayq serve: stopped");
    Ok(0)
}

/// Raises the soft limit of open files towards the hard one so that `--max-connections`
/// (plus the store's and the pusher's sockets) fits; says so when it cannot.
fn raise_fd_limit(connections: usize) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let want = connections as u64 + 256;
    let mut lim = getrlimit(Resource::Nofile);
    let cur = lim.current.unwrap_or(u64::MAX);
    if cur >= want {
        return;
    }
    let hard = lim.maximum.unwrap_or(u64::MAX);
    lim.current = Some(want.min(hard));
    if setrlimit(Resource::Nofile, lim).is_err() || want > hard {
        eprintln!(
            "delayq serve: warning: the open-file limit ({cur}, hard {hard}) is below \
             --max-connections {connections} + 256; raise it (ulimit -n, LimitNOFILE=)"
        );
    }
}
