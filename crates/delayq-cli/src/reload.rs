//! SIGHUP in `delayq serve`: the config file and the secret files are read again; tokens, push
//! secrets, the metrics token, the log level and the pusher's CA file are replaced at once, without dropping a
//! request or a long poll. A file that no longer checks keeps the running settings; any other
//! changed setting is logged as needing a restart.

use delayq_http::AppState;
use delayq_push::Reloads;

use crate::args::Command;
use crate::config::Settings;

/// The keys a reload applies.
pub(crate) const LIVE: [&str; 8] = [
    "token",
    "token_file",
    "metrics_token",
    "metrics_token_file",
    "push_secret",
    "push_secret_file",
    "log_level",
    "push_ca",
];

/// Reloads on every SIGHUP until the task is aborted.
pub(crate) async fn on_hangup<B: Send + Sync + 'static>(state: AppState<B>, push: Option<Reloads>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    let mut running = crate::config::started().cloned().unwrap_or_default();
    while hup.recv().await.is_some() {
        match reload(&state, push.as_ref(), &running) {
            Ok(now) => running = now,
            Err(e) => {
                eprintln!("delayq serve: reload refused, the running settings stay: {e:#}");
            }
        }
    }
}

/// One reload: everything is checked before anything is replaced.
fn reload<B>(
    state: &AppState<B>,
    push: Option<&Reloads>,
    running: &Settings,
) -> anyhow::Result<Settings> {
    let (cli, now) = crate::config::load().map_err(|e| anyhow::anyhow!("{e}"))?;
    let Command::Serve(a) = &cli.command else {
        anyhow::bail!("the command line no longer names serve");
    };
    let secrets = crate::secrets::check(a, cli.allow_readable_secrets)?;
    if secrets.tokens.is_empty() && !state.credentials().tokens.is_empty() && !a.allow_no_tokens {
        anyhow::bail!(
            "the new settings leave no token, which would open the API to every caller: the \
             running tokens stay (set allow_no_tokens = true to run without tokens)"
        );
    }
    let level = crate::logging::filter(cli.log_level.as_deref()).map_err(anyhow::Error::msg)?;
    if let Some(p) = push {
        // The last check: a CA file that cannot be read keeps every running setting.
        p.replace_ca(a.push.push_ca.as_ref())?;
    }
    crate::logging::set(level).map_err(anyhow::Error::msg)?;
    let counts = format!(
        "{} token(s), {} push secret(s), metrics token {}",
        secrets.tokens.len(),
        secrets.push.len(),
        if secrets.metrics_token.is_some() {
            "set"
        } else {
            "none"
        }
    );
    state.replace_credentials(secrets.tokens, secrets.metrics_token);
    if let Some(p) = push {
        p.replace_secrets(secrets.push);
    }
    let restart: Vec<&str> = now
        .iter()
        .filter(|(k, v)| !LIVE.contains(&k.as_str()) && running.get(*k) != Some(*v))
        .map(|(k, _)| k.as_str())
        .collect();
    let file = cli
        .config
        .as_ref()
        .map_or("no config file".to_owned(), |p| p.display().to_string());
    eprintln!("delayq serve: reloaded ({file}): {counts}");
    if !restart.is_empty() {
        eprintln!(
            "delayq serve: changed but not applied, needs a restart: {}",
            restart.join(", ")
        );
        // Still compared with what runs: a second reload says it again.
        let mut kept = now.clone();
        for k in restart {
            match running.get(k) {
                Some(v) => kept.insert(k.to_owned(), v.clone()),
                None => kept.remove(k),
            };
        }
        return Ok(kept);
    }
    Ok(now)
}
