//! What a `delayq doctor` check is, and how the verdicts are printed (every doctor, Redis or
//! embedded, reports the same way).

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verdict {
    /// Fine.
    Ok,
    /// Works, with a caveat worth reading.
    Warn,
    /// delayq's guarantees do not hold on this server.
    Fail,
}

/// One check's outcome.
pub(crate) struct Check {
    /// What was checked.
    pub name: &'static str,
    /// The verdict.
    pub verdict: Verdict,
    /// What was found and what to do.
    pub detail: String,
}

impl Check {
    pub(crate) fn new(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Self {
        Self {
            name,
            verdict,
            detail: detail.into(),
        }
    }
}

pub(crate) fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Prints a verdict per check; the exit code: 1 when one fails.
pub(crate) fn report(checks: &[Check]) -> u8 {
    for c in checks {
        let v = match c.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        println!("{v}  {:<12} {}", c.name, c.detail);
    }
    let worst = checks
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    if worst == Verdict::Fail { 1 } else { 0 }
}
