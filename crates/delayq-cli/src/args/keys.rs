//! The arguments of `delayq keys …` (run by `crate::keys`): every job of one key.

use std::time::{Duration, SystemTime};

use clap::Subcommand;
use delayq::JobKey;

use super::{parse_duration, parse_time};

/// `delayq keys …`: every job of one key of the queue (`-q`) at once.
#[derive(Subcommand, Debug)]
pub(crate) enum KeysCommand {
    /// List the key's jobs by id: scheduled, due, running (leased) and dead ones.
    Jobs {
        /// The key.
        key: JobKey,
        /// Only this state: scheduled, due, leased or dead.
        #[arg(long)]
        state: Option<delayq::ListState>,
        /// At most this many (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Continue after this id (printed after a page with more to come).
        #[arg(long)]
        cursor: Option<delayq::JobId>,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Cancel every scheduled and due job of the key (e.g. its user deleted their account).
    Cancel {
        /// The key.
        key: JobKey,
        /// Its running jobs too: each ends cancelled now and its worker stops the handler.
        #[arg(long)]
        running: bool,
    },
    /// Move every scheduled and due job of the key: each by --shift from its own due time,
    /// or all to --at.
    Reschedule {
        /// The key.
        key: JobKey,
        /// How far, e.g. 1h, or -30m for earlier (never before now).
        #[arg(long, value_parser = parse_shift, allow_hyphen_values = true,
              conflicts_with = "at", required_unless_present = "at")]
        shift: Option<i64>,
        /// To this time (RFC 3339).
        #[arg(long, value_parser = parse_time)]
        at: Option<SystemTime>,
    },
}

impl KeysCommand {
    /// Whether it only reads.
    pub(crate) fn read_only(&self) -> bool {
        matches!(self, KeysCommand::Jobs { .. })
    }
}

/// A shift in ms: a duration (`1h`, `90s`), or one with a leading `-` for earlier.
fn parse_shift(s: &str) -> Result<i64, String> {
    let (sign, rest) = match s.trim().strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, s.trim()),
    };
    let d: Duration = parse_duration(rest)?;
    i64::try_from(d.as_millis())
        .map(|ms| sign * ms)
        .map_err(|_| format!("{s:?} is too far"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_read_both_ways() {
        assert_eq!(parse_shift("1h"), Ok(3_600_000));
        assert_eq!(parse_shift("-30m"), Ok(-1_800_000));
        assert!(parse_shift("soon").is_err());
        assert!(parse_shift("--5s").is_err());
    }
}
