//! Secret files — tokens, the metrics token, push secrets, the Redis password, a worker's server
//! token: read only when no other user can read or write them (as ssh treats a private key),
//! with errors that name the file and the mode to set, never its content; and `serve`'s
//! secrets gathered from flags, the environment and those files ([`check`]).

use std::path::Path;

use anyhow::{Context, bail};
use delayq_http::auth::Token;

use crate::args::ServeArgs;

/// Refuses `path` when other users may read or write it (its mode has any of `0o006`), unless
/// `allow_readable` (`--allow-readable-secrets`: where a file's mode cannot be set, as Docker
/// Compose bind-mounts a file secret with its host file's mode).
fn check_mode(path: &Path, what: &str, allow_readable: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("reading {what} file {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o006 != 0 && !allow_readable {
        anyhow::bail!(
            "{what} file {} can be {} by every user (mode {mode:04o}): `chmod 0600` it (or \
             0640 with a group the delayq user is in), or pass --allow-readable-secrets \
             (DELAYQ_ALLOW_READABLE_SECRETS) where its mode cannot be set",
            path.display(),
            if mode & 0o004 != 0 { "read" } else { "changed" },
        );
    }
    Ok(())
}

/// The lines of a secret file that are not blank or `#` comments, trimmed, with their line
/// numbers (from 1); refused when its mode lets others read it.
pub(crate) fn lines(
    path: &Path,
    what: &str,
    allow_readable: bool,
) -> anyhow::Result<Vec<(usize, String)>> {
    Ok(read(path, what, allow_readable)?
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(i, l)| (i, l.to_owned()))
        .collect())
}

/// The first line of a secret file (a password, a token), trimmed.
pub(crate) fn first_line(path: &Path, what: &str, allow_readable: bool) -> anyhow::Result<String> {
    Ok(read(path, what, allow_readable)?
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_owned())
}

/// The text of secret file `path`, after [`check_mode`].
fn read(path: &Path, what: &str, allow_readable: bool) -> anyhow::Result<String> {
    check_mode(path, what, allow_readable)?;
    std::fs::read_to_string(path).with_context(|| format!("reading {what} file {}", path.display()))
}

/// The token for `--server`: `--server-token-file`'s first line, else `--server-token`.
pub(crate) fn server_token(cli: &crate::args::Cli) -> anyhow::Result<Option<String>> {
    match &cli.server_token_file {
        Some(f) => Ok(
            Some(first_line(f, "server token", cli.allow_readable_secrets)?)
                .filter(|t| !t.is_empty()),
        ),
        None => Ok(cli.server_token.clone()),
    }
}

/// The secrets of a running server, from flags, the environment, the config file and the
/// secret files; a SIGHUP loads them again.
pub(crate) struct Secrets {
    /// Accepted bearer tokens.
    pub tokens: Vec<Token>,
    /// The token `/metrics` requires.
    pub metrics_token: Option<String>,
    /// Push signing secrets.
    pub push: Vec<delayq_push::Secret>,
}

/// The accepted tokens and secrets; refuses a public address without a token. Called before
/// the store is opened, so a refused `serve` creates nothing; `allow_readable`:
/// `--allow-readable-secrets`.
pub(crate) fn check(a: &ServeArgs, allow_readable: bool) -> anyhow::Result<Secrets> {
    let mut tokens: Vec<Token> = a
        .tokens
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| Token::parse(t).map_err(|e| anyhow::anyhow!("--token / DELAYQ_TOKEN: {e}")))
        .collect::<anyhow::Result<_>>()?;
    if let Some(f) = &a.token_file {
        for (line, text) in lines(f, "token", allow_readable)? {
            tokens
                .push(Token::parse_scoped(&text).map_err(|e| {
                    anyhow::anyhow!("token file {}, line {line}: {e}", f.display())
                })?);
        }
    }
    if tokens.is_empty() && !a.listen.ip().is_loopback() && !a.insecure {
        bail!(
            "refusing to listen on {} without a token: give --token (or DELAYQ_TOKEN, \
             --token-file), listen on a loopback address, or pass --insecure",
            a.listen
        );
    }
    let l = &a.limits;
    let long_lived = l.max_streams_total + l.max_long_polls_total;
    if l.max_connections <= long_lived {
        bail!(
            "--max-connections {} must be above --max-streams-total + --max-long-polls-total \
             ({long_lived}): short requests need connections the long-lived ones cannot take",
            l.max_connections
        );
    }
    let mut push: Vec<String> = a
        .push
        .secrets
        .iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(f) = &a.push.push_secret_file {
        push.extend(
            lines(f, "push secret", allow_readable)?
                .into_iter()
                .map(|(_, l)| l),
        );
    }
    let push = push
        .iter()
        .map(|s| delayq_push::Secret::parse(s))
        .collect::<Result<Vec<_>, _>>()
        .context("--push-secret / DELAYQ_PUSH_SECRET / --push-secret-file")?;
    let metrics_token = match &a.metrics_token_file {
        Some(f) => lines(f, "metrics token", allow_readable)?
            .into_iter()
            .next()
            .map(|(_, l)| l),
        None => a.metrics_token.clone().filter(|t| !t.is_empty()),
    };
    Ok(Secrets {
        tokens,
        metrics_token,
        push,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_file_others_can_read_or_write_is_refused_naming_it_and_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tokens");
        std::fs::write(&f, "# c\n\nadmin:hunter2\n").unwrap();
        for (mode, ok) in [(0o600, true), (0o640, true), (0o644, false), (0o602, false)] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let r = lines(&f, "token", false);
            assert_eq!(r.is_ok(), ok, "{mode:o}");
            if let Err(e) = r {
                let e = format!("{e:#}");
                assert!(e.contains(&f.display().to_string()) && e.contains("chmod 0600"));
                assert!(!e.contains("hunter2"), "{e}");
            } else {
                assert_eq!(r.unwrap(), vec![(3, "admin:hunter2".to_owned())]);
            }
            // Where a mode cannot be set, the operator may take the file anyway.
            assert!(lines(&f, "token", true).is_ok(), "{mode:o}");
        }
    }
}
