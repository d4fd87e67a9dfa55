//! PostgreSQL beside the store, from the command line: the options (`--postgres`, its
//! password file or `DELAYQ_POSTGRES_PASSWORD`, `--postgres-ca`), the relay `serve` and
//! `worker` run beside their work, and `delayq migrate`.

use delayq_postgres::{PgOptions, Relay, RelayStatus};

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

/// A relay running beside a serve or worker: its status, and how to stop it.
pub(crate) struct Running {
    /// What it has done and what is wrong.
    pub status: RelayStatus,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops it (a batch under way finishes or rolls back) and waits.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts the relay into `backend` when `--postgres` was given.
pub(crate) fn relay(backend: &AnyBackend, pg: Option<PgOptions>) -> Option<Running> {
    let pg = pg?;
    let shown = pg.masked();
    let relay = Relay::new(backend.clone(), pg);
    let status = relay.status();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(relay.run(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    eprintln!("delayq: relaying jobs enqueued in PostgreSQL transactions from {shown}");
    Some(Running { status, stop, task })
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
