//! The Lua prelude: every constant the scripts share with Rust (record layout, flags, limits,
//! default backoff, state, reply and listing codes), and the helpers made from Rust values
//! (`now_us`, `late_bucket`), generated from Rust. `scripts.rs` writes the constants into each
//! script as values; `helpers.rs` reads the prelude's helpers like those of the helper files.

use std::fmt::Write;
use std::sync::LazyLock;

use delayq::{Backoff, JobState};

use crate::record;
use crate::reply::Reply;

/// The codes of `which` (the Lua prelude defines each name): the listing's kinds.
pub(crate) const WHICH: [(&str, delayq::ListState); 6] = [
    ("LIST_SCHEDULED", delayq::ListState::Scheduled),
    ("LIST_DUE", delayq::ListState::Due),
    ("LIST_LEASED", delayq::ListState::Leased),
    ("LIST_DEAD", delayq::ListState::Dead),
    ("LIST_DONE", delayq::ListState::Done),
    ("LIST_WAITING", delayq::ListState::Waiting),
];

/// The code of `which` for a kind of listing.
pub(crate) fn which_code(which: delayq::ListState) -> u8 {
    WHICH.iter().position(|(_, w)| *w == which).unwrap_or(0) as u8 + 1
}

/// How far apart two priorities' turns are in a keyed queue's `ready` (keyed.lua:
/// key_promote): 2^40 turns, more than any queue takes, so a higher priority always comes
/// first and the keys share each priority round-robin.
const KEY_PRIO_SPAN: u64 = 1 << 40;

/// What a parked job's turn is raised by in a keyed queue's `ready` (keyed.lua): past every
/// live turn (below 10 x [`KEY_PRIO_SPAN`] in size), exact in a double.
const KEY_PARKED: u64 = 1 << 50;

/// The Lua prelude: every constant the scripts share with Rust, generated from Rust.
pub(crate) static PRELUDE: LazyLock<String> = LazyLock::new(|| {
    let mut s = String::from("-- prelude generated from Rust (scripts.rs): do not edit\n");
    let mut def = |name: &str, value: String| {
        let _ = writeln!(s, "local {name} = {value}");
    };
    def("RECORD_VERSION", record::VERSION.to_string());
    def("HEADER", format!("'{}'", record::HEADER_FORMAT));
    def("HEADER_LEN", record::HEADER_LEN.to_string());
    // Lua strings are indexed from 1.
    def("AT_ATTEMPT", (record::AT_ATTEMPT + 1).to_string());
    def("AT_DUE", (record::AT_DUE + 1).to_string());
    def("AT_TOKEN", (record::AT_TOKEN + 1).to_string());
    def("AT_CREATED", (record::AT_CREATED + 1).to_string());
    def("F_LEASE", record::F_LEASE.to_string());
    def("F_BACKOFF", record::F_BACKOFF.to_string());
    def("F_ERROR", record::F_ERROR.to_string());
    def("F_TIMEOUT", record::F_TIMEOUT.to_string());
    def("F_EXPIRES", record::F_EXPIRES.to_string());
    def("F_EXPIRES_REL", record::F_EXPIRES_REL.to_string());
    def("F_EXTRA", record::F_EXTRA.to_string());
    def("F_DONE", record::F_DONE.to_string());
    def("X_PRIORITY", record::X_PRIORITY.to_string());
    def("X_KEEP", record::X_KEEP.to_string());
    def("X_DEDUPE", record::X_DEDUPE.to_string());
    def("X_TARGET", record::X_TARGET.to_string());
    def("X_SIZED", record::X_SIZED.to_string());
    def("X_TRACE", record::X_TRACE.to_string());
    def("X_RESULT", record::X_RESULT.to_string());
    def("X_KEY", record::X_KEY.to_string());
    def("X_BATCH", record::X_BATCH.to_string());
    def("X_DEPS", record::X_DEPS.to_string());
    def("X_WATCHED", record::X_WATCHED.to_string());
    for (name, v) in [
        ("SPEC_NOW", record::SPEC_NOW),
        ("SPEC_DELAY", record::SPEC_DELAY),
        ("SPEC_AT", record::SPEC_AT),
        ("SPEC_WHEN", record::SPEC_WHEN),
        ("SPEC_REPLACE", record::SPEC_REPLACE),
    ] {
        def(name, v.to_string());
    }
    for (name, which) in WHICH {
        def(name, which_code(which).to_string());
    }
    def(
        "IX_LANE",
        format!("'{}'", char::from(crate::keys::IndexTag::LANE)),
    );
    def(
        "IX_WINDOW",
        format!("'{}'", char::from(crate::keys::IndexTag::WINDOW)),
    );
    def("MAX_ERROR", delayq::limits::MAX_ERROR_BYTES.to_string());
    for p in [
        delayq::OnDependencyFailure::Dead,
        delayq::OnDependencyFailure::Cancel,
        delayq::OnDependencyFailure::Run,
    ] {
        let name = format!("DEP_{}", format!("{p:?}").to_uppercase());
        def(&name, p.code().to_string());
    }
    for (name, op) in crate::transitions::key_bulk::OPS {
        def(name, op.to_string());
    }
    def(
        "MAX_DEP_RESULT_BYTES",
        delayq::deps::MAX_RESULT_BYTES.to_string(),
    );
    def(
        "CANCELLED_KEPT_MS",
        delayq::cancellation::REMEMBERED_FOR.as_millis().to_string(),
    );
    def(
        "MAX_CB_RESULTS",
        delayq::batch::MAX_CALLBACK_RESULTS.to_string(),
    );
    def(
        "MAX_CB_BYTES",
        delayq::batch::MAX_CALLBACK_RESULT_BYTES.to_string(),
    );
    let b = Backoff::default();
    let (base, cap) = b.base_cap_ms();
    def("DEFAULT_BKIND", b.kind_code().to_string());
    def("DEFAULT_BBASE", base.to_string());
    def("DEFAULT_BCAP", cap.to_string());
    {
        use delayq::series::{COUNTERS, INTERVAL_MS, SLOTS, layout};
        def("SERIES_INTERVAL", INTERVAL_MS.to_string());
        def("SERIES_SLOTS", SLOTS.to_string());
        def("S_PAUSED", layout::PAUSED.to_string());
        def("S_FLAGS", layout::FLAGS.to_string());
        def("L_ON", layout::LIMITED.to_string());
        def("L_WAITING", layout::WAITING.to_string());
        def("S_LIMITS", layout::LIMITS.to_string());
        def("S_LIMITS_LEN", layout::LIMITS_LEN.to_string());
        def("L_RETAIN", layout::RETAINS.to_string());
        def("S_RETAIN", layout::RETAIN.to_string());
        def("TRIM_PER_CALL", delayq::limits::TRIM_PER_CALL.to_string());
        def("L_PRIO", layout::PRIORITIES.to_string());
        def("L_LANE", layout::LANE.to_string());
        def("L_KEYS", layout::KEYS.to_string());
        def("L_KLIM", layout::KEY_LIMITED.to_string());
        def("L_BATCH", layout::BATCHES.to_string());
        def("S_KEYLIM", layout::KEY_LIMITS.to_string());
        def("KEY_PRIO_SPAN", KEY_PRIO_SPAN.to_string());
        def("KEY_PARKED", KEY_PARKED.to_string());
        def("S_WIDTH", layout::WIDTH.to_string());
        def("WIN_MAX", crate::keys::WINDOW_MAX_ENTRIES.to_string());
        def("WIN_LIST", crate::keys::WINDOWS_LISTED.to_string());
        def(
            "PRIORITY_AGING_MS",
            delayq::limits::PRIORITY_AGING.as_millis().to_string(),
        );
        def("DEFAULT_PRIORITY", delayq::DEFAULT_PRIORITY.to_string());
        def(
            "PROMOTE_PER_CALL",
            delayq::limits::PROMOTE_PER_CALL.to_string(),
        );
        def(
            "LIST_PROMOTE",
            (10 * delayq::limits::PROMOTE_PER_CALL).to_string(),
        );
        def("S_LAST", layout::LAST.to_string());
        def("S_TOTALS", layout::TOTALS.to_string());
        def("S_RING", layout::RING.to_string());
        def("S_SLOT", layout::SLOT.to_string());
        def("S_COUNTERS", COUNTERS.to_string());
    }
    for st in JobState::ALL {
        def(
            &format!("ST_{}", st.to_string().to_uppercase()),
            st.code().to_string(),
        );
    }
    for (r, name) in Reply::ALL {
        def(name, (r as i64).to_string());
    }
    // The server's clock in µs, plus the offset every call carries (`protocol::Header`:
    // `clock_offset_us`, the first argument: 0 but in tests driving the clock).
    s.push_str(
        "\n--@ now_us\nlocal function now_us()\n  local t = redis.call('TIME')\n  \
         return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us\nend\n",
    );
    // The lateness bucket (1-based) of a delay in ms: comparisons, no table built per call.
    s.push_str("\n--@ late_bucket\nlocal function late_bucket(ms)\n");
    for (i, edge) in delayq::series::LATENESS_EDGES_MS.iter().enumerate() {
        let _ = writeln!(s, "  if ms <= {edge} then return {} end", i + 1);
    }
    let _ = writeln!(
        s,
        "  return {}\nend",
        delayq::series::LATENESS_EDGES_MS.len() + 1
    );
    s
});
