//! The `delayq` command: enqueue and inspect jobs, manage dead letters, run workers.
//!
//! Exit codes: 0 success, 1 failure, 2 invalid input, 3 job not found, 4 job in another state.

mod admin;
mod args;
mod backend;
mod batch;
#[cfg(feature = "bench")]
mod bench;
#[cfg(feature = "bench")]
mod chaos;
mod config;
mod config_docs;
mod connect;
mod debug;
mod demo;
#[cfg(test)]
mod doc_commands;
mod doctor;
mod enqueue;
mod errors;
mod exec;
mod health;
mod keys;
mod logging;
mod otlp;
mod output;
mod percentiles;
mod postgres;
mod push;
mod reload;
mod remote;
mod secrets;
mod serve;
mod store;
mod version;
mod worker;

use std::process::ExitCode;

use delayq::Producer;
use delayq_redis::RedisBackend;

use crate::backend::AnyBackend;

use crate::args::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = config::parse();
    otlp::set_trace_mode(cli.trace_mode);
    let tracer = match cli.command.exports_spans() {
        true => otlp::tracer(cli.otlp_endpoint.as_deref()),
        false => Ok(None),
    };
    let tracer = match tracer {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: --otlp-endpoint: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = logging::init(cli.log_level.as_deref(), tracer) {
        eprintln!("error: --log-level: {e}");
        return ExitCode::from(2);
    }
    version::register();
    let json = cli.command.json();
    let code = match run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) if json => {
            // Asked for JSON: the error is JSON too, on stderr, with the API's code.
            eprintln!(
                "{}",
                serde_json::json!({"code": error_code(&e), "message": format!("{e:#}")})
            );
            ExitCode::from(exit_code(&e))
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            if let Some(hint) = remote::hint(&e) {
                eprintln!("hint: {hint}");
            }
            if std::env::var_os("DELAYQ_DEBUG").is_some() {
                eprintln!("{e:?}");
            }
            ExitCode::from(exit_code(&e))
        }
    };
    otlp::flush();
    code
}

/// The API's error code of `e` (as `delayq serve` would answer it), or `error`.
fn error_code(e: &anyhow::Error) -> &'static str {
    use delayq_http::error::ErrorCode as C;
    for cause in e.chain() {
        if let Some(i) = cause.downcast_ref::<delayq::InvalidInput>() {
            return C::of_input(i).as_str();
        }
        if let Some(delayq_redis::Error::Connect { .. }) =
            cause.downcast_ref::<delayq_redis::Error>()
        {
            return "unavailable";
        }
        if let Some(de) = cause.downcast_ref::<delayq::Error>() {
            return match C::of_error(de) {
                C::Internal => "error",
                code => code.as_str(),
            };
        }
    }
    "error"
}

fn exit_code(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(de) = cause.downcast_ref::<delayq::Error>() {
            return match de {
                delayq::Error::Invalid(_) => 2,
                delayq::Error::NotFound { .. } => 3,
                delayq::Error::WrongState { .. } | delayq::Error::LeaseLost { .. } => 4,
                _ => 1,
            };
        }
        if cause.downcast_ref::<delayq::InvalidInput>().is_some()
            || cause.downcast_ref::<serde_json::Error>().is_some()
            || cause.downcast_ref::<enqueue::BadLine>().is_some()
            || cause.downcast_ref::<config::ConfigError>().is_some()
            || cause.downcast_ref::<config::LoadError>().is_some()
        {
            return 2;
        }
    }
    1
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    match &cli.command {
        Command::PushSecret => {
            println!("{}", delayq_push::signing::Secret::generate());
            return Ok(0);
        }
        Command::Config(c) => return config_docs::run(c),
        Command::Debug(c) => return debug::run(c),
        Command::Manpage => {
            clap_mangen::Man::new(config::command()).render(&mut std::io::stdout())?;
            return Ok(0);
        }
        Command::Health { url } => {
            return health::run(url.as_deref().or(cli.server.as_deref())).await;
        }
        Command::Backup { dest } => return store::backup(&cli, dest),
        Command::Migrate => return postgres::migrate(&cli).await,
        Command::Worker(w) if w.exec.is_none() && w.bench_record.is_none() => {
            return Err(config::ConfigError::new(
                "delayq worker needs a command to run: --exec CMD (or `exec` in the --config \
                 file, or DELAYQ_EXEC)",
            )
            .into());
        }
        _ => {}
    }
    cli.check_queues()?;
    #[cfg(feature = "bench")]
    if let Command::Bench(a) = cli.command {
        return bench::run(cli.redis, cli.wait_replicas, a).await;
    }
    #[cfg(feature = "bench")]
    if let Command::Chaos(a) = cli.command {
        return chaos::run(a, cli.wait_replicas).await;
    }
    // The server's tokens and secrets, read once before anything is opened (a refused serve
    // creates nothing) and handed to the server.
    let mut serve_secrets = match &cli.command {
        Command::Serve(a) => Some(secrets::check(a, cli.allow_readable_secrets)?),
        _ => None,
    };
    let pg = postgres::options(&cli)?;
    let (backend, desc) = match (&cli.server, &cli.redis) {
        (Some(url), _) if !matches!(cli.command, Command::Serve(_)) => {
            let remote = remote::connect(url, secrets::server_token(&cli)?)?;
            let desc = format!("delayq serve at {}", remote.client().base_url());
            (AnyBackend::Remote(remote), desc)
        }
        (_, None) => {
            if let Command::Doctor { .. } = cli.command {
                let extra = doctor::postgres::checks(pg.as_ref()).await;
                return doctor::embedded::run(&cli.data, extra);
            }
            store::embedded_or_server(&cli)?
        }
        (_, Some(url)) => {
            let opts = delayq_redis::ConnectOptions {
                url: url.clone(),
                tls: delayq_redis::TlsFiles {
                    ca: cli.tls_ca.clone(),
                    cert: cli.tls_cert.clone(),
                    key: cli.tls_key.clone(),
                },
                wait_replicas: cli.wait_replicas,
                connect_timeout: connect::timeout(
                    cli.connect_timeout,
                    matches!(cli.command, Command::Serve(_) | Command::Worker(_)),
                ),
                password: connect::password(&cli)?,
                namespace: cli.namespace.clone(),
                health_check: delayq_redis::HEALTH_EVERY,
            };
            if let Command::Doctor { acl_user } = cli.command {
                return doctor::run(opts, acl_user, pg.as_ref()).await;
            }
            let desc = delayq_redis::mask(url);
            if let Command::Serve(a) = cli.command {
                let secrets = serve_secrets.take().expect("read above for serve");
                return serve::run_redis(opts, &desc, a, secrets, pg).await;
            }
            // A worker says at once why it waits; a one-shot command gives up within its
            // short wait with one message (the error), unless told to wait longer.
            let mut log = match cli.command {
                Command::Worker(_) => connect::RetryLog::new(&desc),
                _ => connect::RetryLog::quiet_at_first(&desc),
            };
            let backend = RedisBackend::connect_retrying(opts, |e| log.retrying(e)).await?;
            (AnyBackend::Redis(backend), desc)
        }
    };
    if let Command::Worker(a) = cli.command {
        return worker::run(backend, cli.queue, a, pg).await;
    }
    if let Command::Serve(a) = cli.command {
        let owned = matches!(backend, AnyBackend::Embedded(_)).then(|| cli.data.clone());
        let secrets = serve_secrets.take().expect("read above for serve");
        let listener = serve::bind(a.listen).await?;
        return serve::run(listener, backend, &desc, owned, a, secrets, pg).await;
    }
    // One-shot commands see the cold tier with --postgres.
    let backend = postgres::for_commands(backend, pg)?;
    let queue = cli.one_queue()?;
    let producer = Producer::new(backend.clone(), queue.clone());
    match cli.command {
        Command::Enqueue(a) => enqueue::run(&producer, a).await.map(|()| 0),
        Command::Get { id, json } => admin::get(&producer, &id, json).await,
        Command::Cancel { id, running } => admin::cancel(&producer, &id, running).await,
        Command::Reschedule { id, when } => admin::reschedule(&producer, &id, when.due()?).await,
        Command::Stats { json, all } => admin::stats(&producer, json, all).await,
        Command::Dead(cmd) => admin::dead(&backend, &queue, cmd).await,
        Command::Jobs(cmd) => admin::jobs(&backend, &queue, cmd).await,
        Command::Keys(cmd) => keys::run(&backend, &queue, cmd).await,
        Command::Queue(cmd) => admin::queue(&backend, cmd).await,
        Command::Schedule(cmd) => admin::schedule(&backend, &queue, cmd).await,
        Command::Batch(cmd) => batch::run(&producer, cmd).await,
        Command::Flow(args::FlowCommand::Create) => enqueue::flow(&backend).await,
        Command::Worker(_) => unreachable!("handled above"),
        Command::Serve(_) => unreachable!("handled above"),
        Command::Demo { orders } => demo::run(backend, orders).await,
        #[cfg(feature = "bench")]
        Command::Bench(_) => unreachable!("handled above"),
        #[cfg(feature = "bench")]
        Command::Chaos(_) => unreachable!("handled above"),
        Command::Doctor { .. } => unreachable!("handled above"),
        Command::PushSecret
        | Command::Config(_)
        | Command::Debug(_)
        | Command::Health { .. }
        | Command::Manpage
        | Command::Migrate
        | Command::Backup { .. } => {
            unreachable!("handled above")
        }
    }
}
