//! Reaching Redis from the binary: how long a command keeps trying when Redis cannot be
//! reached (started beside it, mid-failover) and how the wait is reported.

use std::time::{Duration, Instant};

/// How often a wait for Redis says why it is still waiting.
const SAY_EVERY: Duration = Duration::from_secs(5);

/// Default wait of a one-shot command (`enqueue`, `get`, …): long enough for a failover's
/// or a restart's blip, short enough that a wrong URL says so at once.
const ONE_SHOT: Duration = Duration::from_secs(2);

/// The connect timeout: the one given, else none (wait indefinitely) for the long-running
/// `serve` and `worker` and [`ONE_SHOT`] for the others.
pub(crate) fn timeout(given: Option<Duration>, long_running: bool) -> Option<Duration> {
    match given {
        Some(t) => Some(t),
        None if long_running => None,
        None => Some(ONE_SHOT),
    }
}

/// Says on stderr why Redis is not reachable yet, at most every [`SAY_EVERY`].
pub(crate) struct RetryLog {
    desc: String,
    last: Option<Instant>,
}

impl RetryLog {
    /// A log for Redis at `desc` (its URL, password masked).
    pub(crate) fn new(desc: &str) -> Self {
        Self {
            desc: desc.to_owned(),
            last: None,
        }
    }

    /// A log that first speaks after [`SAY_EVERY`]: a wait shorter than that ends with its
    /// error alone.
    pub(crate) fn quiet_at_first(desc: &str) -> Self {
        Self {
            last: Some(Instant::now()),
            ..Self::new(desc)
        }
    }

    /// One failed attempt that will be retried.
    pub(crate) fn retrying(&mut self, e: &delayq_redis::Error) {
        if self.last.is_some_and(|t| t.elapsed() < SAY_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        eprintln!(
            "delayq: waiting for Redis at {}: {}; retrying (--connect-timeout bounds the wait)",
            self.desc,
            first_line(&e.to_string())
        );
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// The Redis password given apart from the URL: `--redis-password-file` (its first line), else
/// `DELAYQ_REDIS_PASSWORD`.
pub(crate) fn password(cli: &crate::args::Cli) -> anyhow::Result<Option<String>> {
    if let Some(f) = &cli.redis_password_file {
        return Ok(Some(crate::secrets::first_line(
            f,
            "--redis-password-file",
            cli.allow_readable_secrets,
        )?));
    }
    Ok(cli.redis_password.clone().filter(|p| !p.is_empty()))
}

/// Whether the command line itself (what `ps` and /proc/PID/cmdline show) holds a password in
/// a `--redis` URL.
pub(crate) fn password_in_arguments() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().enumerate().any(|(i, a)| {
        let url = match a.strip_prefix("--redis=") {
            Some(u) => Some(u),
            None if a == "--redis" => args.get(i + 1).map(String::as_str),
            None => None,
        };
        url.is_some_and(has_password)
    })
}

/// Whether a connection string carries a password (`…://[user]:pass@…`, `?pass=`).
fn has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = rest.rfind('@').map(|at| &rest[..at]);
    auth.is_some_and(|a| a.split_once(':').is_some_and(|(_, p)| !p.is_empty()) || !a.contains(':'))
        || rest.contains("pass=")
        || rest.contains("password=")
}

#[cfg(test)]
mod tests {
    use super::has_password;

    #[test]
    fn passwords_in_urls_are_found() {
        for (url, yes) in [
            ("redis://:secret@h:6379", true),
            ("redis://app:secret@h:6379", true),
            ("redis://secret@h:6379", true),
            ("redis://h:6379", false),
            ("redis://app:@h:6379", false),
            ("unix:///tmp/r.sock?pass=x", true),
            ("redis+sentinel://h:1,h:2/m", false),
        ] {
            assert_eq!(has_password(url), yes, "{url}");
        }
    }
}
