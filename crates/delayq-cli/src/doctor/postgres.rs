//! `delayq doctor --postgres URL`: the PostgreSQL companion — reachable, its schema's
//! version, the outbox's backlog (a relay not running, or unable to reach the store, shows
//! there first) and rows the store refused.

use delayq_postgres::{LATEST, PgOptions};

use super::report::{Check, Verdict};

/// The oldest unrelayed row past this is worth a word: relays move rows within a second.
const BACKLOG_WARN_MS: i64 = 60_000;

/// The companion's checks (none without `--postgres`).
pub(crate) async fn checks(pg: Option<&PgOptions>) -> Vec<Check> {
    let Some(pg) = pg else {
        return Vec::new();
    };
    let shown = pg.masked();
    let h = match delayq_postgres::health(pg).await {
        Ok(h) => h,
        Err(e @ delayq_postgres::Error::NewerSchema { .. }) => {
            return vec![Check::new(
                "postgres",
                Verdict::Fail,
                format!("{shown}: {e}"),
            )];
        }
        Err(e) => {
            return vec![Check::new(
                "postgres",
                Verdict::Fail,
                format!(
                    "cannot reach {shown}: {e} — jobs committed with delayq.enqueue wait there \
                     until it is back; plain jobs are not affected"
                ),
            )];
        }
    };
    let mut out = vec![Check::new(
        "postgres",
        Verdict::Ok,
        format!("{shown}: PostgreSQL {}", h.server_version),
    )];
    out.push(match h.schema {
        0 => Check::new(
            "pg-schema",
            Verdict::Warn,
            "no delayq schema yet: `delayq migrate --postgres URL` makes it (serve and worker \
             do at start)",
        ),
        v if v < LATEST => Check::new(
            "pg-schema",
            Verdict::Warn,
            format!("version {v}, this build's is {LATEST}: `delayq migrate` updates it"),
        ),
        v => Check::new("pg-schema", Verdict::Ok, format!("version {v}")),
    });
    if h.schema == 0 {
        return out;
    }
    out.push(match h.oldest_ms {
        Some(ms) if ms > BACKLOG_WARN_MS => Check::new(
            "pg-outbox",
            Verdict::Warn,
            format!(
                "{} committed job(s) not relayed, the oldest for {} s: is a `delayq serve` or \
                 `delayq worker` with --postgres running, and can it reach the store?",
                h.outbox,
                ms / 1000
            ),
        ),
        _ => Check::new(
            "pg-outbox",
            Verdict::Ok,
            format!("{} committed job(s) waiting for a relay", h.outbox),
        ),
    });
    out.push(if h.rejected > 0 {
        Check::new(
            "pg-rejected",
            Verdict::Warn,
            format!(
                "{} job(s) the store refused, kept with the reason: SELECT id, error FROM \
                 delayq.rejected",
                h.rejected
            ),
        )
    } else {
        Check::new("pg-rejected", Verdict::Ok, "no job refused")
    });
    out
}
