//! The Lua scripts, one per transition, each declared once with the keys it takes in order.
//! Every script is sent as: a prelude generated from Rust constants (record layout, flags,
//! limits, default backoff, state and reply codes), then the helpers of `common.lua` and
//! `lane.lua` it calls, then its own file.
//! The backend sends EVALSHA and, after `NOSCRIPT` (a restarted or flushed server, a new
//! slot owner), EVAL with the whole text — routed by key like every call, so one node being
//! down never fails a script on another (`SCRIPT LOAD` would go to every node).
//!
//! Each script exists in two builds that differ only in how it publishes wake-ups: `PUBLISH`
//! on one server, `SPUBLISH` (sharded Pub/Sub, in the shard's slot) on a Cluster.

use std::fmt::Write;
use std::sync::LazyLock;

use delayq::{Backoff, JobState};

use crate::keys::{Key, Keys};
use crate::record;
use crate::reply::Reply;

/// One script: the keys it takes (in `KEYS` order) and the loaded script; in tests also its
/// file name and own text, which the header checks read.
pub(crate) struct ScriptDef {
    /// Its `KEYS`, in order (checked against the file's header by a test).
    pub keys: &'static [Key],
    built: LazyLock<[Built; 2]>,
    /// File name under `lua/`.
    #[cfg(test)]
    pub file: &'static str,
    #[cfg(test)]
    source: &'static str,
}

impl ScriptDef {
    /// The build for one server (`sharded_pubsub` false) or for a Cluster.
    pub(crate) fn built(&self, sharded_pubsub: bool) -> &Built {
        &self.built[usize::from(sharded_pubsub)]
    }

    /// The names of its keys for one queue, in `KEYS` order.
    pub(crate) fn key_names<'k>(&self, k: &'k Keys) -> impl Iterator<Item = &'k str> {
        self.keys.iter().map(move |key| k.name(*key))
    }

    /// The file's own text (without prelude and helpers).
    #[cfg(test)]
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }
}

/// One build of a script: its SHA1 (for EVALSHA) and its whole text (for EVAL).
pub(crate) struct Built {
    /// SHA1 of `text`, hex.
    pub sha: String,
    /// Prelude, helpers and the script's own text.
    pub text: String,
}

/// The helper files, in the order their functions are defined (lane.lua calls common.lua's).
const HELPERS: [(&str, &str); 2] = [
    ("common.lua", include_str!("../lua/common.lua")),
    ("lane.lua", include_str!("../lua/lane.lua")),
];

/// The whole text sent for a script file: the prelude's `late_bucket`, then the helpers
/// (common.lua, lane.lua) it calls and the script with every prelude constant (and `PUBLISH`)
/// written in as its value — a value costs nothing at run time, a `local` captured by each
/// helper costs an upvalue per call. A script's `#!lua flags=…` line (Redis 7 script flags)
/// stays the first line.
pub(crate) fn full(source: &str, sharded_pubsub: bool) -> String {
    let (shebang, source) = match source.split_once('\n') {
        Some((first, rest)) if first.starts_with("#!") => (format!("{first}\n"), rest),
        _ => (String::new(), source),
    };
    let publish = if sharded_pubsub {
        "'SPUBLISH'"
    } else {
        "'PUBLISH'"
    };
    let prelude: String = PRELUDE
        .lines()
        .skip_while(|l| !l.starts_with("local function"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut helpers = functions(&prelude);
    for (_, text) in HELPERS {
        helpers.extend(functions(text));
    }
    let body = format!("{}\n{source}", used(&helpers, source));
    let mut values = CONSTANTS.clone();
    values.insert("PUBLISH".into(), publish.into());
    format!(
        "{shebang}-- delayq script; constants from Rust written in (scripts.rs)\n{}",
        inline(&body, &values)
    )
}

/// The top-level `local function`s of a Lua text, in order: `(name, text)`, each with the
/// comment lines just above it.
fn functions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut comment = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("local function ") {
            let name = rest.split('(').next().unwrap_or_default().trim().to_owned();
            let mut f = std::mem::take(&mut comment);
            f.push_str(line);
            f.push('\n');
            for l in lines.by_ref() {
                f.push_str(l);
                f.push('\n');
                if l == "end" {
                    break;
                }
            }
            out.push((name, f));
        } else if line.starts_with("--") {
            comment.push_str(line);
            comment.push('\n');
        } else {
            comment.clear();
        }
    }
    out
}

/// The helpers `source` calls, directly or through other helpers, in their order: a script
/// runs every `local function` of its text at each call (a closure is made for each), so it
/// carries only those it uses.
fn used(helpers: &[(String, String)], source: &str) -> String {
    let words = |t: &str| -> std::collections::HashSet<String> {
        t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut need = words(source);
    let mut taken = vec![false; helpers.len()];
    loop {
        let mut grew = false;
        for (i, (name, text)) in helpers.iter().enumerate() {
            if !taken[i] && need.contains(name) {
                taken[i] = true;
                need.extend(words(text));
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    helpers
        .iter()
        .zip(taken)
        .filter(|(_, t)| *t)
        .map(|((_, text), _)| text.as_str())
        .collect()
}

/// The prelude's constants: name → Lua value.
static CONSTANTS: LazyLock<std::collections::HashMap<String, String>> = LazyLock::new(|| {
    PRELUDE
        .lines()
        .filter_map(|l| l.strip_prefix("local "))
        .filter(|l| !l.starts_with("function"))
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
});

/// `text` with every identifier that names a constant replaced by its value (whole
/// identifiers only: `S_SLOT` is not a part of `SERIES_SLOTS`).
fn inline(text: &str, values: &std::collections::HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match values.get(word.as_str()) {
            Some(v) => out.push_str(v),
            None => out.push_str(word),
        }
        word.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            word.push(ch);
        } else {
            flush(&mut word, &mut out);
            out.push(ch);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn build(source: &str) -> [Built; 2] {
    [false, true].map(|sharded| {
        let text = full(source, sharded);
        Built {
            sha: redis::Script::new(&text).get_hash().to_owned(),
            text,
        }
    })
}

macro_rules! scripts {
    ($($name:ident = $file:literal [$($key:ident),*];)*) => {
        $(
            #[doc = concat!("`lua/", $file, "`.")]
            pub(crate) static $name: ScriptDef = ScriptDef {
                keys: &[$(Key::$key),*],
                #[cfg(test)]
                file: $file,
                #[cfg(test)]
                source: include_str!(concat!("../lua/", $file)),
                built: LazyLock::new(|| build(include_str!(concat!("../lua/", $file)))),
            };
        )*
        /// Every script.
        #[cfg(test)]
        pub(crate) static ALL: &[&ScriptDef] = &[$(&$name),*];
    };
}

scripts! {
    ENQUEUE = "enqueue.lua" [Sched, Jobs, Wake, Stat, Ready, Done, Lane, LaneMeta, LaneGone];
    CLAIM = "claim.lua" [Sched, Lease, Jobs, Dead, Fence, Stat, Wake, Done, Ready, Lane, LaneMeta];
    ACK = "ack.lua" [Lease, Jobs, Stat, Wake, Done, Lane, LaneMeta];
    NACK = "nack.lua" [Sched, Lease, Jobs, Dead, Wake, Stat, Lane, LaneMeta];
    EXTEND = "extend.lua" [Lease, Jobs, Lane, LaneMeta];
    RELEASE = "release.lua" [Sched, Lease, Jobs, Wake, Stat];
    CANCEL = "cancel.lua" [Sched, Lease, Jobs, Dead, Ready, Lane, LaneMeta, LaneGone];
    RESCHEDULE = "reschedule.lua" [Sched, Lease, Jobs, Dead, Wake, Ready, Lane, LaneMeta, LaneGone];
    GET = "get.lua" [Sched, Lease, Jobs, Dead, Lane, LaneMeta];
    STATS = "stats.lua" [Sched, Lease, Dead, Stat, Done, Ready, Jobs, Lane, LaneMeta, LaneGone];
    LIST = "list.lua" [Sched, Lease, Dead, Jobs, Done, Stat, Ready, Lane, LaneMeta];
    DEAD_REQUEUE = "dead_requeue.lua" [Sched, Lease, Dead, Jobs, Wake, Ready, Lane, LaneMeta];
    DEAD_PURGE = "dead_purge.lua" [Sched, Lease, Dead, Jobs, Ready, Lane, LaneMeta];
    CANCEL_ALL = "cancel_all.lua" [Sched, Jobs, Ready, Lane, LaneMeta, LaneGone, Stat];
    PAUSE = "pause.lua" [Stat, Wake];
    LIMITS = "limits.lua" [Stat, Wake];
    FIRE = "fire.lua" [Sched, Jobs, Wake, Stat, CronNext, Lane, LaneMeta];
    FIRE_SHARD = "fire_shard.lua" [Sched, Jobs, Wake, Stat, Fired, Lane, LaneMeta];
    ADVANCE = "advance.lua" [CronNext];
}

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
    def("MAX_ERROR", delayq::limits::MAX_ERROR_BYTES.to_string());
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
    // The lateness bucket (1-based) of a delay in ms: comparisons, no table built per call.
    s.push_str("local function late_bucket(ms)\n");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `(n, name)` of each `-- KEYS[n] name` line of a script's header.
    fn header_keys(source: &str) -> Vec<(usize, String)> {
        source
            .lines()
            .skip_while(|l| l.starts_with("#!"))
            .take_while(|l| l.starts_with("--"))
            .filter_map(|l| {
                let rest = l.strip_prefix("-- KEYS[")?;
                let (n, rest) = rest.split_once(']')?;
                let name = rest.split_whitespace().next()?;
                Some((n.parse().ok()?, name.to_owned()))
            })
            .collect()
    }

    #[test]
    fn every_lua_header_lists_the_declared_keys_in_order() {
        for def in ALL {
            let declared: Vec<(usize, String)> = def
                .keys
                .iter()
                .enumerate()
                .map(|(i, k)| (i + 1, k.field().to_owned()))
                .collect();
            assert_eq!(header_keys(def.source()), declared, "{}", def.file);
            // The script reads no KEYS index it does not declare.
            for n in declared.len() + 1..=declared.len() + 3 {
                assert!(
                    !def.source().contains(&format!("KEYS[{n}]")),
                    "{} KEYS[{n}]",
                    def.file
                );
            }
        }
        let dir = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/lua")).unwrap();
        let mut files: Vec<String> = dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| HELPERS.iter().all(|(name, _)| f != name))
            .collect();
        files.sort();
        let mut declared: Vec<&str> = ALL.iter().map(|d| d.file).collect();
        declared.sort();
        assert_eq!(files, declared, "every .lua file is declared once");
    }

    /// Every command a script calls (`redis.call('X'`, `redis.pcall('X'`, `call_chunked('X'`)
    /// is one the ACL rule grants, so a least-privilege user runs every script.
    #[test]
    fn the_acl_rule_grants_every_command_a_script_calls() {
        let granted: std::collections::HashSet<String> =
            crate::acl_commands().map(str::to_ascii_lowercase).collect();
        let mut seen = 0;
        for text in ALL
            .iter()
            .map(|d| d.source())
            .chain(HELPERS.map(|(_, t)| t))
        {
            for marker in ["call('", "pcall('", "call_chunked('"] {
                for part in text.split(marker).skip(1) {
                    let cmd = part
                        .split('\'')
                        .next()
                        .unwrap_or_default()
                        .to_ascii_lowercase();
                    assert!(granted.contains(&cmd), "ACL_RULE lacks +{cmd}");
                    seen += 1;
                }
            }
        }
        assert!(seen > 100, "{seen} calls found");
    }

    /// Every `R_…` and `ST_…` name a script uses is defined by the prelude, so every code a
    /// script can return is one Rust maps.
    #[test]
    fn every_code_a_script_returns_is_mapped() {
        let defined: std::collections::HashSet<String> = PRELUDE
            .lines()
            .filter_map(|l| l.strip_prefix("local "))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_owned)
            .collect();
        let mut used = 0;
        for text in ALL
            .iter()
            .map(|d| d.source())
            .chain(HELPERS.map(|(_, t)| t))
        {
            for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if (word.starts_with("R_") || word.starts_with("ST_")) && !word.ends_with('_') {
                    used += 1;
                    assert!(
                        defined.contains(word),
                        "{word} is not defined by the prelude"
                    );
                }
            }
        }
        assert!(used > 10, "scripts return named codes");
        for (_, name) in Reply::ALL {
            assert!(defined.contains(name));
        }
    }

    /// The prelude's `late_bucket` puts a delay in the bucket `delayq::series` does.
    #[test]
    fn lua_lateness_buckets_match_rust() {
        let server = delayq_test_support::RedisServer::start();
        let probes = [
            0u64, 1, 2, 3, 9, 10, 11, 99, 100, 101, 999, 1_000, 59_999, 60_000, 60_001,
        ];
        let list: Vec<String> = probes.iter().map(|p| format!("late_bucket({p})")).collect();
        let script = format!("{}return {{ {} }}", *PRELUDE, list.join(", "));
        let got = server.command(&["EVAL", &script, "0"]);
        let want: Vec<String> = probes
            .iter()
            .map(|p| (delayq::series::lateness_bucket(*p) + 1).to_string())
            .collect();
        assert_eq!(got.lines().collect::<Vec<_>>(), want);
    }

    /// The key names the scripts build for the lane's time windows (lane.lua: win_key and
    /// the rest) are the ones keys.rs gives.
    #[test]
    fn lua_window_keys_match_rust() {
        let server = delayq_test_support::RedisServer::start();
        let k = Keys::shard(&delayq::QueueName::new("orders").unwrap(), 2, 4);
        let script = full(
            "return { win_key(KEYS[1], 1796175823000), win_key(KEYS[1], '1796175823000'), \
             wins_key(KEYS[1]), wtombs_key(KEYS[1]), ix_prefix(KEYS[1]) .. '17' }",
            false,
        );
        let got = server.command(&["EVAL", &script, "1", &k.lane]);
        let want = [
            k.window(1_796_175_823_000),
            k.window(1_796_175_823_000),
            k.windows(),
            k.window_tombs(),
            k.bucket(17),
        ];
        let lines: Vec<&str> = got.lines().filter(|l| !l.starts_with(['*', '$'])).collect();
        assert_eq!(lines, want);
    }

    #[test]
    fn a_script_carries_only_the_helpers_it_uses() {
        let text = full("return has(1, 1)", false);
        assert!(text.contains("local function has("));
        assert!(!text.contains("local function decode("));
        // Through other helpers: ack_pairs needs keep_done, which needs decode and encode.
        let text = full("return ack_pairs(1, 2, {}, 1, 0)", false);
        for f in [
            "ack_pairs",
            "keep_done",
            "decode",
            "encode",
            "call_chunked",
            "rec_token",
        ] {
            assert!(text.contains(&format!("local function {f}(")), "{f}");
        }
        assert!(!text.contains("local function promote("));
        // Helpers keep their order (a helper is defined before those that call it).
        assert!(text.find("function decode(") < text.find("function keep_done("));
    }

    #[test]
    fn constants_are_written_in_as_whole_words() {
        let values = [("S_SLOT".to_owned(), "84".to_owned())]
            .into_iter()
            .collect();
        assert_eq!(
            inline("x = S_SLOT + SERIES_SLOTS - S_SLOT2", &values),
            "x = 84 + SERIES_SLOTS - S_SLOT2"
        );
        let text = full("return R_OK", false);
        assert!(!text.contains("local R_OK"), "constants are not locals");
        assert!(text.ends_with(&format!("return {}", Reply::Ok as i64)));
    }
}
