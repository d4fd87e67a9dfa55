//! `delayq config`, and the documents generated from the settings' definition (`config.rs`):
//! docs/CONFIG.md (`delayq config reference`, checked by a test) and the commented settings
//! file of the package (`delayq config example`).

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};

use crate::config::{SECTIONS, command, env_name, key, sub, value_text};

/// docs/CONFIG.md: every key with its flag, environment variable, default and meaning.
pub(crate) fn reference() -> String {
    let cmd = command();
    let mut out = String::from(
        "# Configuration\n\n\
         <!-- Generated from the command-line definition by `delayq config reference`; \
         a test fails when this file is stale. -->\n\n\
         `delayq serve` and `delayq worker` (and every other command, for the keys of the \
         first table) read their settings from, in this order of precedence:\n\n\
         1. flags on the command line;\n\
         2. environment variables: `DELAYQ_` and the key in upper case;\n\
         3. the TOML file given by `--config FILE` (or `DELAYQ_CONFIG`): the key is the \
         flag's long name with `-` written `_`;\n\
         4. the defaults below.\n\n\
         An unknown key, a key of the other command, or a value of the wrong type is refused \
         before anything starts (exit 2), naming the file and the line. Lists (`token`, \
         `push_secret`) are TOML arrays; in the environment they are comma-separated. \
         Secrets can come from files instead (`token_file`, `push_secret_file`, \
         `metrics_token_file`, `redis_password_file`, `postgres_password_file`; the \
         environment's `DELAYQ_…_FILE`; or `DELAYQ_REDIS_PASSWORD` / `DELAYQ_POSTGRES_PASSWORD`), \
         which keeps them out of the process list. `delayq config check --config FILE` \
         validates a file and prints the effective settings with secrets masked.\n\n\
         `delayq serve` re-reads the file and the secret files on SIGHUP \
         (`systemctl reload delayq`): tokens, push secrets, the metrics token, the log level \
         and the push CA file (read again) change at once, without dropping a request or a \
         long poll; a file that no longer checks keeps the running settings (the log says \
         why); any other change — the listen address, the store, the Redis TLS files, `postgres` — is \
         logged as needing a restart.\n\n\
         Earlier releases' environment names `DELAYQ_REDIS_URL`, `DELAYQ_TOKENS` and \
         `DELAYQ_PUSH_SECRETS` are still read when the new one is unset.\n",
    );
    let table = |out: &mut String, c: &Command, title: &str| {
        let _ = write!(
            out,
            "\n## {title}\n\n| Key | Flag | Environment | Default | Meaning |\n|---|---|---|---|---|\n"
        );
        for a in c.get_arguments() {
            let Some(k) = key(a) else { continue };
            let default: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect();
            let default = match (default.as_slice(), a.get_action()) {
                ([], ArgAction::Append) => "`[]`".to_owned(),
                ([], ArgAction::SetTrue) => "`false`".to_owned(),
                ([], _) => "—".to_owned(),
                (d, _) => format!("`{}`", d.join(",")),
            };
            let _ = writeln!(
                out,
                "| `{k}` | `--{}` | `{}` | {default} | {} |",
                a.get_long().unwrap_or_default(),
                env_name(&k),
                help(a).replace('|', "\\|")
            );
        }
    };
    table(&mut out, &cmd, "Every command");
    for s in SECTIONS {
        table(&mut out, sub(&cmd, s), &format!("`delayq {s}`"));
    }
    out
}

fn help(a: &Arg) -> String {
    a.get_long_help()
        .or(a.get_help())
        .map(|h| {
            h.to_string()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// A commented settings file for `section` with every key at its default (the package's
/// `/etc/delayq/delayq.toml`).
pub(crate) fn example(section: &str) -> String {
    let cmd = command();
    let mut out = format!(
        "# delayq {section} settings (TOML). Every key is commented out at its default;\n\
         # flags and DELAYQ_* environment variables override this file. See `man delayq` and\n\
         # docs/CONFIG.md. Check a change with: delayq config check --config THIS_FILE\n"
    );
    let mut block = |c: &Command, title: &str| {
        let _ = writeln!(out, "\n# --- {title} ---");
        for a in c.get_arguments() {
            let Some(k) = key(a) else { continue };
            let mut h = help(a);
            if h.len() > 200 {
                h.truncate(h[..200].rfind(' ').unwrap_or(200));
                h.push_str(" …");
            }
            let _ = writeln!(out, "\n{}", wrap(&h, "# "));
            let d: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|d| d.to_string_lossy().into_owned())
                .collect();
            let v = match (d.as_slice(), a.get_action()) {
                (_, ArgAction::Append) => "[]".to_owned(),
                ([], ArgAction::SetTrue) => "false".to_owned(),
                ([], _) => "\"\"".to_owned(),
                (d, _) => value_text(a, &d.join(",")),
            };
            let _ = writeln!(out, "#{k} = {v}");
        }
    };
    block(&cmd, "every command");
    block(sub(&cmd, section), &format!("delayq {section}"));
    out
}

fn wrap(text: &str, prefix: &str) -> String {
    let mut lines = vec![String::from(prefix)];
    for w in text.split_whitespace() {
        let last = lines.last_mut().expect("one line");
        if last.len() + w.len() > 92 && last.len() > prefix.len() {
            lines.push(format!("{prefix}{w}"));
        } else {
            if last.len() > prefix.len() {
                last.push(' ');
            }
            last.push_str(w);
        }
    }
    lines.join("\n")
}

/// `delayq config …`.
pub(crate) fn run(c: &crate::args::ConfigCommand) -> anyhow::Result<u8> {
    use crate::args::ConfigCommand as C;
    match c {
        C::Check { command } => crate::config::check(command.as_deref()),
        C::Reference => {
            print!("{}", reference());
            Ok(0)
        }
        C::Example { command } => {
            print!("{}", example(command));
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_reference_in_docs_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CONFIG.md");
        let now = reference();
        let doc = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            doc == now,
            "docs/CONFIG.md is stale: run `cargo run -p delayq-cli -- config reference > \
             docs/CONFIG.md`"
        );
    }

    #[test]
    fn the_example_file_checks() {
        let dir = tempfile::tempdir().unwrap();
        for section in SECTIONS {
            let p = dir.path().join(format!("{section}.toml"));
            // Uncommented, every key at its default must still be a valid file.
            let body: String = example(section)
                .lines()
                .filter_map(|l| l.strip_prefix('#'))
                .filter(|l| l.starts_with(|c: char| c.is_ascii_lowercase()))
                .filter(|l| !l.ends_with("= \"\""))
                .collect::<Vec<_>>()
                .join("\n");
            assert!(body.lines().count() > 5, "{body}");
            std::fs::write(&p, body).unwrap();
            let l = crate::config::Layer::read(&command(), &p, Some(section));
            assert!(l.is_ok(), "{section}: {}", l.err().unwrap());
        }
    }
}
