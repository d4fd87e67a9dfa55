//! Which store a command uses when no Redis URL is given: the embedded store in `--data`, or
//! — when a `delayq serve` owns that directory — that server, over its HTTP API. `serve`
//! writes its address to `<data>/SERVER` while it runs; a read-only command never creates a
//! store.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::bail;
use delayq_embedded::EmbeddedBackend;

use crate::args::{Cli, Command};
use crate::backend::AnyBackend;

/// The file in a data directory that holds the owning server's URL.
pub(crate) fn server_file(dir: &Path) -> PathBuf {
    dir.join("SERVER")
}

/// The embedded store, or the server that owns it.
pub(crate) fn embedded_or_server(cli: &Cli) -> anyhow::Result<(AnyBackend, String)> {
    let dir = &cli.data;
    let serve = matches!(cli.command, Command::Serve(_));
    if cli.command.read_only() && !dir.join("delayq.sqlite3").exists() {
        bail!(
            "no delayq store at {}: start `delayq serve` there, or pass --data DIR (or \
             DELAYQ_DATA) to name the store",
            dir.display()
        );
    }
    match EmbeddedBackend::open(dir) {
        Ok(b) => {
            if !serve && std::io::stderr().is_terminal() {
                eprintln!("delayq: embedded store in {}", shown(dir));
            }
            Ok((
                AnyBackend::Embedded(b),
                format!("embedded store in {}", shown(dir)),
            ))
        }
        Err(delayq_embedded::Error::Locked { pid, .. }) if !serve => {
            let Some(url) = owners_url(dir) else {
                bail!(
                    "the embedded store in {} is in use by another delayq process{} that \
                     serves no HTTP API (a worker?): stop it, run the command through a \
                     `delayq serve` that owns the store, or pass --data DIR",
                    shown(dir),
                    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                );
            };
            let remote = crate::remote::connect(&url, crate::secrets::server_token(cli)?)?;
            if std::io::stderr().is_terminal() {
                eprintln!(
                    "delayq: the store in {} is owned by delayq serve at {url}; going through it",
                    shown(dir)
                );
            }
            Ok((AnyBackend::Remote(remote), format!("delayq serve at {url}")))
        }
        Err(e) => Err(e.into()),
    }
}

/// The URL the owning `delayq serve` wrote to `<data>/SERVER`. A server that has just taken
/// the store's lock writes it a moment later (after binding its port), so a missing file is
/// read again for up to a second before the owner is taken to serve no HTTP API.
fn owners_url(dir: &Path) -> Option<String> {
    let read = || {
        std::fs::read_to_string(server_file(dir))
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        if let Some(url) = read() {
            return Some(url);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn shown(dir: &Path) -> String {
    std::fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_owned())
        .display()
        .to_string()
}

/// `delayq backup DEST`: a consistent copy of the embedded store, taken beside whichever
/// process serves it.
pub(crate) fn backup(cli: &Cli, dest: &Path) -> anyhow::Result<u8> {
    if cli.redis.is_some() {
        return Err(crate::config::ConfigError::new(
            "delayq backup copies the embedded store; Redis keeps its own: use its persistence \
             (appendonly yes, or BGSAVE and copy dump.rdb; docs/DEPLOY.md, \"Backups\")",
        )
        .into());
    }
    let done = delayq_embedded::backup(&cli.data, dest)?;
    println!(
        "backed up {} job(s), {} bytes, to {} (restore: delayq --data {} serve)",
        done.jobs,
        done.bytes,
        dest.display(),
        dest.display()
    );
    Ok(0)
}
