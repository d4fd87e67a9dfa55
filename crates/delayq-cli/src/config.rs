//! Settings from a TOML file and the environment, layered under the command line.
//!
//! The clap definition in `args.rs` is the one definition: every flag of the global options,
//! of `serve` and of `worker` is a file key (its long name with `-` written `_`) and an
//! environment variable (`DELAYQ_` + the key in upper case). Precedence: flags, then the
//! environment, then the file, then the flag's default — the file's values become the
//! arguments' defaults, so clap applies the rest. `docs/CONFIG.md` and the example file of
//! the package are generated from the same definition (`config_docs.rs`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::builder::OsStr;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};
use toml::Spanned;

use crate::args::Cli;

/// The commands whose own flags are file keys.
pub(crate) const SECTIONS: [&str; 2] = ["serve", "worker"];

/// Environment names of earlier releases, still read when the new name is unset.
const ALIASES: [(&str, &str); 3] = [
    ("redis", "DELAYQ_REDIS_URL"),
    ("token", "DELAYQ_TOKENS"),
    ("push_secret", "DELAYQ_PUSH_SECRETS"),
];

pub(crate) use crate::errors::ConfigError;

/// The file key of an argument: its long name with `-` written `_`.
pub(crate) fn key(arg: &Arg) -> Option<String> {
    let long = arg.get_long()?;
    if arg.is_hide_set() || matches!(long, "help" | "version" | "config") {
        return None;
    }
    Some(long.replace('-', "_"))
}

/// The environment variable of a key.
pub(crate) fn env_name(key: &str) -> String {
    format!("DELAYQ_{}", key.to_ascii_uppercase())
}

/// Whether a key holds a secret (masked by `config check`): not a file's path, not a switch
/// about secrets (`allow_readable_secrets`, `allow_no_tokens`).
pub(crate) fn secret(key: &str) -> bool {
    !key.ends_with("_file")
        && !key.starts_with("allow_")
        && (key.contains("token") || key.contains("secret") || key.contains("password"))
}

/// The CLI definition with every key's environment variable attached.
pub(crate) fn command() -> Command {
    let mut cmd = Cli::command();
    let globals: Vec<Arg> = cmd.get_arguments().cloned().collect();
    for a in &globals {
        if let Some(k) = key(a) {
            cmd = cmd.mut_arg(a.get_id(), |a| with_env(a, &k));
        }
    }
    for section in SECTIONS {
        let args: Vec<Arg> = sub(&cmd, section).get_arguments().cloned().collect();
        for a in args {
            if let Some(k) = key(&a) {
                cmd = cmd.mut_subcommand(section, |s| s.mut_arg(a.get_id(), |a| with_env(a, &k)));
            }
        }
    }
    cmd
}

fn with_env(a: Arg, key: &str) -> Arg {
    let hide = secret(key);
    a.env(env_name(key)).hide_env_values(hide)
}

pub(crate) fn sub<'a>(cmd: &'a Command, name: &str) -> &'a Command {
    cmd.get_subcommands()
        .find(|s| s.get_name() == name)
        .expect("serve and worker are subcommands")
}

/// One setting of `serve` as `delayq serve` would run with it now (flags aside): from the
/// environment, the `--config` file, or its default.
pub(crate) fn serve_setting(name: &str) -> Option<String> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let mut cmd = command();
    if let Some(p) = config_path(&args) {
        cmd = Layer::read(&cmd, &p, Some("serve")).ok()?.apply(cmd);
    }
    let (_, id) = locate(&cmd, name)?;
    let m = aliases(cmd)
        .try_get_matches_from(["delayq", "serve"])
        .ok()?;
    let v = m
        .subcommand_matches("serve")?
        .try_get_raw(&id)
        .ok()??
        .next()?;
    Some(v.to_string_lossy().into_owned())
}

/// Each key's values as the command runs with them (the keys of the globals and of its
/// section), to tell what a reload changed.
pub(crate) type Settings = BTreeMap<String, Vec<String>>;

static STARTED: std::sync::OnceLock<Settings> = std::sync::OnceLock::new();

/// The settings the process started with.
pub(crate) fn started() -> Option<&'static Settings> {
    STARTED.get()
}

/// Why the settings cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoadError {
    /// The file.
    #[error(transparent)]
    File(#[from] ConfigError),
    /// The command line or the environment.
    #[error("{0}")]
    Args(#[from] clap::Error),
}

/// Parses the command line with the environment and the `--config` file under it; on an
/// error, says it and exits (2; help and version exit 0).
pub(crate) fn parse() -> Cli {
    match load() {
        Ok((cli, settings)) => {
            let _ = STARTED.set(settings);
            cli
        }
        Err(LoadError::Args(e)) => e.exit(),
        Err(LoadError::File(e)) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}

/// The command line, the environment and the `--config` file, as the process would run them.
pub(crate) fn load() -> Result<(Cli, Settings), LoadError> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let mut cmd = command();
    let section = section_of(&cmd, &args);
    if let Some(path) = config_path(&args) {
        cmd = Layer::read(&cmd, &path, section.as_deref())?.apply(cmd);
    }
    cmd = aliases(cmd);
    let m = cmd.clone().try_get_matches_from(args)?;
    let settings = settings(&cmd, &m, section.as_deref());
    Ok((Cli::from_arg_matches(&m)?, settings))
}

fn settings(cmd: &Command, m: &ArgMatches, section: Option<&str>) -> Settings {
    let mut out = Settings::new();
    let mut add = |c: &Command, m: &ArgMatches| {
        for a in c.get_arguments() {
            let Some(k) = key(a) else { continue };
            if let Ok(Some(raw)) = m.try_get_raw(a.get_id().as_str()) {
                out.insert(k, raw.map(|v| v.to_string_lossy().into_owned()).collect());
            }
        }
    };
    add(cmd, m);
    if let Some(s) = section.filter(|s| SECTIONS.contains(s))
        && let Some(sm) = m.subcommand_matches(s)
    {
        add(sub(cmd, s), sm);
    }
    out
}

/// The old environment names, as defaults under the file's values' place.
fn aliases(mut cmd: Command) -> Command {
    for (k, old) in ALIASES {
        let (Some(v), true) = (
            std::env::var_os(old),
            std::env::var_os(env_name(k)).is_none(),
        ) else {
            continue;
        };
        let v = v.to_string_lossy().into_owned();
        let vals: Vec<OsStr> = if k == "redis" {
            vec![OsStr::from(v)]
        } else {
            v.split(',').map(|s| OsStr::from(s.to_owned())).collect()
        };
        let (section, id) = locate(&cmd, k).expect("aliased keys exist");
        cmd = set_default(cmd, section, &id, vals);
    }
    cmd
}

/// `--config FILE` (or `--config=FILE`) from the command line, else `DELAYQ_CONFIG`.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--" {
            break;
        }
        if s == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(p) = s.strip_prefix("--config=") {
            return Some(PathBuf::from(p));
        }
    }
    std::env::var_os("DELAYQ_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The subcommand named on the command line (skipping global options and their values).
fn section_of(cmd: &Command, args: &[OsString]) -> Option<String> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if let Some(name) = s.strip_prefix("--") {
            let takes = cmd
                .get_arguments()
                .find(|g| g.get_long() == Some(name))
                .is_some_and(|g| g.get_action().takes_values());
            if takes {
                it.next();
            }
            continue;
        }
        if s.starts_with('-') {
            if s == "-q" {
                it.next();
            }
            continue;
        }
        return Some(s.into_owned());
    }
    None
}

/// The values of a settings file, checked against the definition.
pub(crate) struct Layer {
    /// The file.
    pub path: PathBuf,
    /// (section or `None` for a global, argument id, values), in file order.
    values: Vec<(Option<&'static str>, String, Vec<String>)>,
}

impl Layer {
    /// Reads and checks `path` for the command `section` (`serve`, `worker`, or another: then
    /// only the global keys apply and the others are skipped).
    pub(crate) fn read(
        cmd: &Command,
        path: &Path,
        section: Option<&str>,
    ) -> Result<Layer, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(format!("reading {}: {e}", path.display())))?;
        let table: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
            toml::from_str(&text).map_err(|e| syntax_error(path, &text, &e))?;
        let mut entries: Vec<_> = table.into_iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        let line = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
        let mut values = Vec::new();
        for (k, v) in entries {
            let at = format!("{}:{}", path.display(), line(k.span().start));
            let name = k.get_ref().as_str();
            let Some((place, id)) = locate(cmd, name) else {
                return Err(ConfigError::new(format!(
                    "{at}: unknown key `{name}`{}",
                    suggest(cmd, name)
                )));
            };
            match (place, section) {
                (None, _) => {}
                (Some(p), Some(s)) if p == s => {}
                (Some(p), Some(s)) if SECTIONS.contains(&s) => {
                    return Err(ConfigError::new(format!(
                        "{at}: `{name}` is a setting of `delayq {p}`, not of `delayq {s}`"
                    )));
                }
                // Not told which command: every key is kept (`config check` picks by them).
                (Some(_), None) => {}
                // Another command (`stats`, `enqueue`, …) reads the global keys only.
                (Some(_), Some(_)) => continue,
            }
            let arg = arg_of(cmd, place, &id);
            let vals = strings(name, &arg, v.get_ref())
                .map_err(|e| ConfigError::new(format!("{at}: {e}")))?;
            if !matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
                for v in &vals {
                    let shown = if secret(name) { "***" } else { v };
                    valid(&arg, v, shown)
                        .map_err(|e| ConfigError::new(format!("{at}: `{name}`: {e}")))?;
                }
            }
            values.push((place, id, vals));
        }
        Ok(Layer {
            path: path.to_owned(),
            values,
        })
    }

    /// The definition with this file's values as the defaults.
    pub(crate) fn apply(&self, mut cmd: Command) -> Command {
        for (place, id, vals) in &self.values {
            let vals = vals.iter().map(|v| OsStr::from(v.clone())).collect();
            cmd = set_default(cmd, *place, id, vals);
        }
        cmd
    }

    /// Whether the file set the argument `id`.
    pub(crate) fn sets(&self, id: &str) -> bool {
        self.values.iter().any(|(_, i, _)| i == id)
    }

    /// The sections the file's keys belong to.
    pub(crate) fn sections(&self) -> Vec<&'static str> {
        let mut s: Vec<_> = self.values.iter().filter_map(|(p, _, _)| *p).collect();
        s.dedup();
        s
    }
}

/// A TOML syntax error as its line and column and what is wrong — never the offending line,
/// which toml's own message quotes and which may hold a token or a password; quoted text in
/// the message is masked too.
fn syntax_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let at = e.span().map_or(String::new(), |span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        format!(":{line}:{column}")
    });
    let mut message = String::new();
    for (i, part) in e.message().trim().split('"').enumerate() {
        if i > 0 {
            message.push('"');
        }
        message.push_str(if i % 2 == 1 { "***" } else { part });
    }
    ConfigError::new(format!(
        "{}{at}: not valid TOML: {}",
        path.display(),
        message.replace('\n', "; ")
    ))
}

/// Runs the flag's own parser on `value`: the file is checked as the command line would be;
/// errors show `shown` for the value (`***` for a secret).
fn valid(arg: &Arg, value: &str, shown: &str) -> Result<(), String> {
    let probe = Command::new("probe").no_binary_name(true).arg(
        Arg::new("v")
            .long("v")
            .action(ArgAction::Set)
            .value_parser(arg.get_value_parser().clone()),
    );
    match probe.try_get_matches_from([format!("--v={value}")]) {
        Ok(_) => Ok(()),
        Err(e) => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            let why = first.rsplit_once("': ").map_or(first, |(_, w)| w);
            let why = why.trim_start_matches("error: ");
            let possible: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|p| p.get_name().to_owned())
                .collect();
            let why = why.replace(value, shown);
            if possible.is_empty() {
                Err(format!("invalid value {shown:?}: {why}"))
            } else {
                Err(format!(
                    "invalid value {shown:?} (possible values: {})",
                    possible.join(", ")
                ))
            }
        }
    }
}

fn set_default(cmd: Command, place: Option<&'static str>, id: &str, vals: Vec<OsStr>) -> Command {
    let id = id.to_owned();
    let f = move |a: Arg| {
        if vals.len() == 1 {
            a.default_value(vals[0].clone())
        } else {
            a.default_values(vals)
        }
    };
    match place {
        None => cmd.mut_arg(id, f),
        Some(p) => cmd.mut_subcommand(p, |s| s.mut_arg(id, f)),
    }
}

/// Where key `name` is defined: `None` for a global option, or the section; and the id.
fn locate(cmd: &Command, name: &str) -> Option<(Option<&'static str>, String)> {
    let find = |c: &Command| {
        c.get_arguments()
            .find(|a| key(a).as_deref() == Some(name))
            .map(|a| a.get_id().as_str().to_owned())
    };
    if let Some(id) = find(cmd) {
        return Some((None, id));
    }
    SECTIONS
        .iter()
        .find_map(|s| find(sub(cmd, s)).map(|id| (Some(*s), id)))
}

fn arg_of(cmd: &Command, place: Option<&str>, id: &str) -> Arg {
    let c = place.map_or(cmd, |p| sub(cmd, p));
    c.get_arguments()
        .find(|a| a.get_id().as_str() == id)
        .cloned()
        .expect("located above")
}

/// Every key of the definition.
fn keys(cmd: &Command) -> Vec<String> {
    let mut all: Vec<String> = cmd.get_arguments().filter_map(key).collect();
    for s in SECTIONS {
        all.extend(sub(cmd, s).get_arguments().filter_map(key));
    }
    all
}

fn suggest(cmd: &Command, name: &str) -> String {
    let best = keys(cmd)
        .into_iter()
        .map(|k| (strsim::jaro_winkler(name, &k), k))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((score, k)) if score > 0.7 => format!(" (did you mean `{k}`?)"),
        _ => " (`delayq config reference` lists every key)".to_owned(),
    }
}

/// A TOML value as the strings the flag would take, or why it cannot be one.
fn strings(name: &str, arg: &Arg, v: &toml::Value) -> Result<Vec<String>, String> {
    let flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    let list = matches!(arg.get_action(), ArgAction::Append);
    let one = |v: &toml::Value| -> Result<String, String> {
        match v {
            toml::Value::String(s) if !flag => Ok(s.clone()),
            toml::Value::Integer(i) if !flag => Ok(i.to_string()),
            toml::Value::Float(f) if !flag => Ok(f.to_string()),
            toml::Value::Boolean(b) if flag => Ok(b.to_string()),
            other if flag => Err(format!(
                "`{name}` takes true or false, not {}",
                other.type_str()
            )),
            other => Err(format!(
                "`{name}` takes a {}, not {}",
                if list {
                    "string or a list of them"
                } else {
                    "string or number"
                },
                other.type_str()
            )),
        }
    };
    match v {
        toml::Value::Array(items) if list => items.iter().map(one).collect(),
        toml::Value::Array(_) => Err(format!("`{name}` takes one value, not a list")),
        v => Ok(vec![one(v)?]),
    }
}

/// The effective settings of `section` as `key = value  # source` lines, secrets masked.
pub(crate) fn effective(
    cmd: &Command,
    m: &ArgMatches,
    section: &str,
    file: Option<&Layer>,
) -> String {
    let mut out = String::new();
    let sm = m.subcommand_matches(section).unwrap_or(m);
    let order = command();
    let mut show = |c: &Command, title: &str| {
        let _ = writeln!(out, "# {title}");
        let here: Vec<&Arg> = c.get_arguments().collect();
        let at = |id: &str| here.iter().position(|a| a.get_id().as_str() == id);
        let top = std::iter::once(&order).chain(order.get_subcommands());
        let mut args: Vec<&Arg> = top
            .filter(|o| o.get_name() == c.get_name())
            .flat_map(|o| o.get_arguments())
            .filter_map(|a| at(a.get_id().as_str()).map(|i| here[i]))
            .collect();
        args.dedup_by_key(|a| a.get_id().clone());
        for a in args {
            let Some(k) = key(a) else { continue };
            let id = a.get_id().as_str();
            let Ok(Some(raw)) = sm.try_get_raw(id) else {
                let _ = writeln!(out, "# {k} (not set)");
                continue;
            };
            let vals: Vec<String> = raw
                .map(|v| {
                    let v = v.to_string_lossy().into_owned();
                    if secret(&k) {
                        "********".to_owned()
                    } else if k == "redis" {
                        delayq_redis::mask(&v)
                    } else {
                        v
                    }
                })
                .collect();
            let source = match sm.value_source(id) {
                Some(clap::parser::ValueSource::CommandLine) => "flag".to_owned(),
                Some(clap::parser::ValueSource::EnvVariable) => env_name(&k),
                _ if file.is_some_and(|f| f.sets(id)) => "file".to_owned(),
                _ => "default".to_owned(),
            };
            let shown = if matches!(a.get_action(), ArgAction::Append) {
                toml::Value::Array(vals.into_iter().map(toml::Value::String).collect()).to_string()
            } else {
                value_text(a, &vals.concat())
            };
            let _ = writeln!(out, "{k} = {shown}  # {source}");
        }
    };
    show(cmd, "every command");
    show(sub(cmd, section), &format!("delayq {section}"));
    out
}

pub(crate) fn value_text(a: &Arg, v: &str) -> String {
    let plain = matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse)
        || v.parse::<f64>().is_ok();
    if plain {
        v.to_owned()
    } else {
        toml::Value::String(v.to_owned()).to_string()
    }
}

/// `delayq config check`: validates the file for `serve` or `worker` (`for_section`, else
/// the one its keys belong to, else `serve`) and prints the effective settings.
pub(crate) fn check(for_section: Option<&str>) -> anyhow::Result<u8> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let cmd = command();
    let path = config_path(&args);
    let section = match (for_section, &path) {
        (Some(s), _) => s.to_owned(),
        (None, Some(p)) => {
            let l = Layer::read(&cmd, p, None)?;
            l.sections().first().copied().unwrap_or("serve").to_owned()
        }
        (None, None) => "serve".to_owned(),
    };
    let file = path
        .as_deref()
        .map(|p| Layer::read(&cmd, p, Some(&section)))
        .transpose()?;
    let mut full = file.as_ref().map_or(cmd.clone(), |f| f.apply(cmd.clone()));
    full = aliases(full);
    let m = full
        .clone()
        .try_get_matches_from(["delayq", &section])
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_start_matches("error: ")))?;
    let cli = Cli::from_arg_matches(&m)?;
    if let crate::args::Command::Serve(a) = &cli.command {
        crate::secrets::check(a, cli.allow_readable_secrets)
            .map_err(|e| ConfigError::new(format!("{e:#}")))?;
    }
    if let Some(f) = &file {
        println!("# {}: valid for delayq {section}", f.path.display());
    }
    print!("{}", effective(&full, &m, &section, file.as_ref()));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_and_switches_about_them_are_not() {
        for k in ["token", "metrics_token", "push_secret", "server_token"] {
            assert!(secret(k), "{k}");
        }
        for k in [
            "token_file",
            "redis_password_file",
            "server_token_file",
            "allow_readable_secrets",
            "allow_no_tokens",
        ] {
            assert!(!secret(k), "{k}");
        }
    }

    #[test]
    fn every_key_has_one_place_and_its_environment_name() {
        let cmd = command();
        let all = keys(&cmd);
        let mut seen = std::collections::BTreeSet::new();
        for k in &all {
            assert!(
                seen.insert(k.clone()) || matches!(k.as_str(), "log_format"),
                "{k} twice"
            );
            let (place, id) = locate(&cmd, k).expect("located");
            let a = arg_of(&cmd, place, &id);
            assert_eq!(
                a.get_env().map(|e| e.to_string_lossy().into_owned()),
                Some(env_name(k)),
                "{k}"
            );
        }
        for k in [
            "listen",
            "redis",
            "data",
            "token",
            "metrics_token",
            "push",
            "push_secret",
        ] {
            assert!(all.iter().any(|a| a == k), "{k} is a key");
        }
        for k in [
            "allow_private_targets",
            "wait_replicas",
            "tls_ca",
            "exec",
            "concurrency",
        ] {
            assert!(all.iter().any(|a| a == k), "{k} is a key");
        }
    }
}
