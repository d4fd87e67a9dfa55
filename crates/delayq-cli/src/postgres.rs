//! PostgreSQL beside the store, from the command line: the options (`--postgres`, its
//! password file or `DELAYQ_POSTGRES_PASSWORD`, `--postgres-ca`), the relay `serve` and
//! `worker` run beside their work, and `delayq migrate`.

use delayq_postgres::{PgOptions, Relay, RelayStatus, Tiered};

use crate::args::Cli;
use crate::backend::AnyBackend;

/// The PostgreSQL options of the command line, checked (no connection yet); `None` without
/// `--postgres`.
pub(crate) fn options(cli: &Cli) -> anyhow::Result<Option<PgOptions>> {
    let Some(url) = &cli.postgres else {
        if cli.postgres_password_file.is_some() || cli.postgres_ca.is_some() {
            return Err(crate::config::ConfigError::new(
                "--postgres-password-file and --postgres-ca go with --postgres URL",
            )
            .into());
        }
        return Ok(None);
    };
    let password = match &cli.postgres_password_file {
        Some(f) => Some(crate::secrets::first_line(
            f,
            "--postgres-password-file",
            cli.allow_readable_secrets,
        )?),
        None => cli.postgres_password.clone().filter(|p| !p.is_empty()),
    };
    let opts = PgOptions::new(url.clone())
        .password(password)
        .ca(cli.postgres_ca.clone());
    opts.check()
        .map_err(|e| crate::config::ConfigError::new(e.to_string()))?;
    Ok(Some(opts))
}

/// The store `serve` and `worker` run over: with `--postgres`, with the cold tier beside it.
pub(crate) type Served = Tiered<AnyBackend>;

/// What runs beside a serve or worker given `--postgres`: the relay (its status) and the cold
/// tier's mover, and how to stop them.
pub(crate) struct Running {
    /// What the relay has done and what is wrong.
    pub status: RelayStatus,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stops them (a batch or move under way finishes or rolls back) and waits.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// `backend` as one-shot commands use it: with `--postgres`, seeing the cold tier (no relay,
/// no mover: a serve or worker does that).
pub(crate) fn for_commands(backend: AnyBackend, pg: Option<PgOptions>) -> anyhow::Result<Served> {
    Ok(match pg {
        Some(pg) => Tiered::new(backend, pg.pool(2)?),
        None => Tiered::plain(backend),
    })
}

/// `backend` as serve and worker use it: without `--postgres` alone; with it, the cold tier
/// beside it, the relay moving committed jobs in and the mover moving due cold jobs in.
pub(crate) fn companion(
    backend: AnyBackend,
    pg: Option<PgOptions>,
) -> anyhow::Result<(Served, Option<Running>)> {
    let Some(pg) = pg else {
        return Ok((Tiered::plain(backend), None));
    };
    let shown = pg.masked();
    let served = Tiered::new(backend, pg.pool(8)?);
    // Jobs committed in transactions go through the tier too: a far one of a cold queue
    // stays in PostgreSQL.
    let relay = Relay::new(served.clone(), pg);
    let status = relay.status();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut relay_stopped = stopped.clone();
    let mut mover_stopped = stopped;
    let tasks = vec![
        tokio::spawn(relay.run(async move {
            let _ = relay_stopped.wait_for(|s| *s).await;
        })),
        tokio::spawn(
            served
                .clone()
                .run_mover(std::time::Duration::from_secs(1), async move {
                    let _ = mover_stopped.wait_for(|s| *s).await;
                }),
        ),
    ];
    eprintln!(
        "delayq: PostgreSQL at {shown}: relaying jobs enqueued in its transactions, keeping \
         far jobs of queues with cold_after_ms"
    );
    Ok((
        served,
        Some(Running {
            status,
            stop,
            tasks,
        }),
    ))
}

/// `delayq migrate`: creates or updates the schema, says what it did.
pub(crate) async fn migrate(cli: &Cli) -> anyhow::Result<u8> {
    let Some(pg) = options(cli)? else {
        return Err(crate::config::ConfigError::new(
            "delayq migrate needs --postgres URL (or `postgres` in the --config file, or \
             DELAYQ_POSTGRES)",
        )
        .into());
    };
    let mut client = pg.connect(None).await?;
    let m = delayq_postgres::migrate(&mut client).await?;
    if m.from == m.to {
        println!(
            "delayq schema in {}: already at version {}",
            pg.masked(),
            m.to
        );
    } else {
        println!(
            "delayq schema in {}: version {} → {}",
            pg.masked(),
            m.from,
            m.to
        );
    }
    Ok(0)
}
