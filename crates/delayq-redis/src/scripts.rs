//! How a script is built and what every script shares. Each script is declared once, in the
//! module of its transition (`crate::transitions`, with [`crate::protocol::script!`]); this
//! module builds its text: the header generated from the declaration, then the helpers it
//! names and those they name (`crate::helpers`: each helper's `--@ NAME needs …` line, and
//! where it is defined), then its own file — with every prelude constant (record layout,
//! flags, limits, default backoff, state and reply codes, generated from Rust) written in as
//! its value.
//! The backend sends EVALSHA and, after `NOSCRIPT` (a restarted or flushed server, a new
//! slot owner), EVAL with the whole text — routed by key like every call, so one node being
//! down never fails a script on another (`SCRIPT LOAD` would go to every node).
//!
//! Each script exists in two builds that differ only in how it publishes wake-ups: `PUBLISH`
//! on one server, `SPUBLISH` (sharded Pub/Sub, in the shard's slot) on a Cluster.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::LazyLock;

use crate::keys::{Key, Keys};
use crate::prelude::PRELUDE;

/// One script as declared: its file, keys, helpers and text, and its two builds.
pub(crate) struct ScriptDef {
    /// Its declared `KEYS`, in order (the key tails follow them).
    pub keys: &'static [Key],
    /// File name under `lua/`.
    pub file: &'static str,
    /// The file's own text (without header, prelude and helpers).
    #[cfg(test)]
    pub source: &'static str,
    /// Its generated header.
    #[cfg(test)]
    pub header: fn() -> String,
    /// Both builds, made on first use.
    pub built: LazyLock<[Built; 2]>,
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
}

/// A declared script with its argument and reply types (`A` encodes, `R` decodes).
pub(crate) struct Script<A, R> {
    /// The declaration.
    pub def: ScriptDef,
    types: PhantomData<fn(A) -> R>,
}

impl<A, R> Script<A, R> {
    /// The script of a declaration.
    pub(crate) const fn new(def: ScriptDef) -> Self {
        Script {
            def,
            types: PhantomData,
        }
    }
}

/// One build of a script: its SHA1 (for EVALSHA) and its whole text (for EVAL).
pub(crate) struct Built {
    /// SHA1 of `text`, hex.
    pub sha: String,
    /// Header, helpers and the script's own text.
    pub text: String,
}

/// The whole text sent for a script: its header, the helpers it names and its own text, with
/// every prelude constant (and `PUBLISH`) written in as its value — a value costs nothing at
/// run time, a `local` captured by each helper costs an upvalue per call. A script's
/// `#!lua flags=…` line (Redis 7 script flags) stays the first line.
pub(crate) fn full(header: &str, source: &str, sharded_pubsub: bool) -> String {
    let (shebang, source) = match source.split_once('\n') {
        Some((first, rest)) if first.starts_with("#!") => (format!("{first}\n"), rest),
        _ => (String::new(), source),
    };
    let publish = if sharded_pubsub {
        "'SPUBLISH'"
    } else {
        "'PUBLISH'"
    };
    let helpers = crate::helpers::called(source);
    let (before, late, source) = crate::helpers::place_helpers(&helpers, source);
    let forward = if late.is_empty() {
        String::new()
    } else {
        format!("local {}\n", late.join(", "))
    };
    let body = format!("{header}{forward}{before}\n{source}");
    let mut values = CONSTANTS.clone();
    values.insert("PUBLISH".into(), publish.into());
    format!(
        "{shebang}-- delayq script; constants from Rust written in (scripts.rs)\n{}",
        inline(&body, &values)
    )
}

/// The prelude's constants: name → Lua value.
static CONSTANTS: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
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
fn inline(text: &str, values: &HashMap<String, String>) -> String {
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

/// Both builds of a declared script.
pub(crate) fn build(header: String, source: &str) -> [Built; 2] {
    [false, true].map(|sharded| {
        let text = full(&header, source, sharded);
        Built {
            sha: redis::Script::new(&text).get_hash().to_owned(),
            text,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::helpers::HELPER_FILES;
    use crate::helpers::words;
    use crate::record;
    use crate::reply::Reply;
    use crate::transitions;

    /// The names a script's comment lists under "Keys (declared in …)": one per line.
    fn commented_keys(source: &str) -> Vec<String> {
        source
            .lines()
            .skip_while(|l| !l.starts_with("-- Keys (declared in"))
            .skip(1)
            // A key's line: `-- name  what` (two spaces at least), continued by indented lines.
            .take_while(|l| {
                l.starts_with("--   ")
                    || l.split_once("  ")
                        .is_some_and(|(h, _)| !h[3..].contains(' '))
            })
            .filter(|l| !l.starts_with("--   "))
            .filter_map(|l| {
                l.strip_prefix("-- ")?
                    .split_whitespace()
                    .next()
                    .map(str::to_owned)
            })
            .collect()
    }

    #[test]
    fn every_script_is_declared_once_and_its_comment_names_its_keys_in_order() {
        for def in transitions::all() {
            let mut declared: Vec<String> = def.keys.iter().map(|k| k.field().to_owned()).collect();
            let header = (def.header)();
            for line in header.lines() {
                // A key tail's length: `local NAME_n = tonumber(ARGV[i])`.
                if let Some(rest) = line.strip_prefix("local ")
                    && let Some((name, _)) = rest.split_once("_n = tonumber(ARGV[")
                {
                    declared.push(name.to_owned());
                }
            }
            assert_eq!(commented_keys(def.source), declared, "{}", def.file);
            assert!(
                def.source.contains(&format!(
                    "transitions/{}.rs",
                    def.file.trim_end_matches(".lua")
                )),
                "{} names the module that declares it",
                def.file
            );
        }
        let dir = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/lua")).unwrap();
        let mut files: Vec<String> = dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".lua"))
            .filter(|f| HELPER_FILES.iter().all(|(name, _)| f != name))
            .collect();
        files.sort();
        let mut declared: Vec<&str> = transitions::all().iter().map(|d| d.file).collect();
        declared.sort();
        assert_eq!(files, declared, "every .lua file is declared once");
    }

    /// No position is written by hand: scripts and helpers read `ARGV` and `KEYS` only
    /// through the generated header (a key tail's `KEYS[NAME_at …]`).
    #[test]
    fn no_script_reads_a_position_by_hand() {
        let texts = transitions::all().map(|d| (d.file, d.source));
        for (file, text) in texts.iter().copied().chain(HELPER_FILES) {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("--").next().unwrap_or_default();
                assert!(!code.contains("ARGV"), "{file}:{}: {line}", n + 1);
                for part in code.split("KEYS[").skip(1) {
                    let index = part
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next();
                    assert!(
                        index.is_some_and(|i| i.ends_with("_at")),
                        "{file}:{}: {line}",
                        n + 1
                    );
                }
            }
        }
    }

    /// Every script's build loads on a real server (syntax, Lua's limits on locals and
    /// upvalues), in both builds.
    #[test]
    fn every_build_loads() {
        let server = delayq_test_support::RedisServer::start();
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_connection().unwrap();
        for def in transitions::all() {
            for sharded in [false, true] {
                let built = def.built(sharded);
                let sha: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(&built.text)
                    .query(&mut conn)
                    .unwrap_or_else(|e| panic!("{}: {e}", def.file));
                assert_eq!(sha, built.sha, "{}", def.file);
            }
        }
    }

    /// Every command a script calls (`redis.call('X'`, `redis.pcall('X'`, `call_chunked('X'`)
    /// is one the ACL rule grants, so a least-privilege user runs every script.
    #[test]
    fn the_acl_rule_grants_every_command_a_script_calls() {
        let granted: HashSet<String> = crate::acl_commands().map(str::to_ascii_lowercase).collect();
        let mut seen = 0;
        for text in transitions::all()
            .iter()
            .map(|d| d.source)
            .chain(HELPER_FILES.map(|(_, t)| t))
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

    /// Every `R_…`, `ST_…`, `SPEC_…` and `LIST_…` name a script uses is defined by the
    /// prelude, so every code a script returns or reads is one Rust maps.
    #[test]
    fn every_code_a_script_uses_is_defined() {
        let defined: HashSet<String> = PRELUDE
            .lines()
            .filter_map(|l| l.strip_prefix("local "))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_owned)
            .collect();
        let mut used = 0;
        for text in transitions::all()
            .iter()
            .map(|d| d.source)
            .chain(HELPER_FILES.map(|(_, t)| t))
        {
            for word in words(text) {
                if ["R_", "ST_", "SPEC_", "LIST_"]
                    .iter()
                    .any(|p| word.starts_with(p))
                    && !word.ends_with('_')
                {
                    used += 1;
                    assert!(
                        defined.contains(&word),
                        "{word} is not defined by the prelude"
                    );
                }
            }
        }
        assert!(used > 10, "scripts use named codes");
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
        let script = full("", &format!("return {{ {} }}", list.join(", ")), false);
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
            "",
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

    /// Every kind of index entry, tagged (written by Rust) and untagged (written before the
    /// tags), reads the same in Lua's `ix_entry` as in Rust; what Lua writes Rust reads.
    #[test]
    fn index_entries_round_trip_between_rust_and_lua() {
        use crate::keys::IndexEntry;
        let server = delayq_test_support::RedisServer::start();
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let read = full(
            "",
            "local kind, a, b = ix_entry(KEYS[1]) return { kind, a, b or -1 }",
            false,
        );
        let entries = [
            IndexEntry::Lane(0),
            IndexEntry::Lane(123_456_789_012),
            IndexEntry::Window {
                start: 1_796_175_823_000,
                pos: 0,
            },
            IndexEntry::Window {
                start: 1_796_175_823_000,
                pos: 8191,
            },
        ];
        for e in entries {
            let legacy = match e {
                IndexEntry::Lane(s) => s.to_string().into_bytes(),
                IndexEntry::Window { .. } => e.encode()[1..].to_vec(),
            };
            for bytes in [e.encode(), legacy] {
                assert_eq!(IndexEntry::decode(&bytes), Some(e), "{bytes:?}");
                let (kind, a, b): (String, u64, i64) = redis::cmd("EVAL")
                    .arg(&read)
                    .arg(1)
                    .arg(&bytes)
                    .query(&mut conn)
                    .unwrap();
                let got = match kind.as_bytes() {
                    [IndexEntry::LANE] => IndexEntry::Lane(a),
                    [IndexEntry::WINDOW] => IndexEntry::Window {
                        start: a,
                        pos: b as u32,
                    },
                    other => panic!("kind {other:?}"),
                };
                assert_eq!(got, e);
            }
        }
        // What enqueue.lua writes for each kind (IX_LANE .. n, IX_WINDOW .. pack) reads back.
        let write = full(
            "",
            "return { IX_LANE .. 42, IX_WINDOW .. struct.pack('>I6I3', 1796175823000, 7) }",
            false,
        );
        let written: Vec<Vec<u8>> = redis::cmd("EVAL")
            .arg(&write)
            .arg(0)
            .query(&mut conn)
            .unwrap();
        assert_eq!(IndexEntry::decode(&written[0]), Some(IndexEntry::Lane(42)));
        assert_eq!(
            IndexEntry::decode(&written[1]),
            Some(IndexEntry::Window {
                start: 1_796_175_823_000,
                pos: 7
            })
        );
    }

    /// The spec's flags byte reads in Lua's `due_from` as Rust means it.
    #[test]
    fn spec_flags_round_trip_between_rust_and_lua() {
        let server = delayq_test_support::RedisServer::start();
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let script = full(
            "",
            "local m = string.byte(ARGV[1], 1) \
             return { due_from(m, tonumber(ARGV[2]), 1000), has(m, SPEC_REPLACE) and 1 or 0 }",
            false,
        );
        let now = 1000u64;
        let cases = [
            (delayq::Due::Now, false, now),
            (
                delayq::Due::Delay(std::time::Duration::from_millis(250)),
                true,
                now + 250,
            ),
            (delayq::Due::At(5000), false, 5000),
            (delayq::Due::At(10), true, now),
        ];
        for (when, replace, due) in cases {
            let mut job = delayq::NewJob::new(Vec::new()).due(when);
            if replace {
                job = job.replace();
            }
            let spec = record::spec(job);
            let (_, t) = record::when(when);
            let got: (u64, u8) = redis::cmd("EVAL")
                .arg(&script)
                .arg(0)
                .arg(&spec[..1])
                .arg(t)
                .query(&mut conn)
                .unwrap();
            assert_eq!(got, (due, u8::from(replace)), "{when:?}");
        }
    }

    /// `lua/built/` holds the text Redis runs for every script, and `SHA1SUMS` both builds'
    /// SHA1s: what this (test) build loads is what is committed there — and scripts/test
    /// compares the shipped build's `delayq debug scripts --sha1` with the same file.
    #[test]
    fn the_committed_built_scripts_are_current() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("lua/built");
        let again = "regenerate with `cargo run -p delayq-cli -- debug scripts --write \
                     crates/delayq-redis/lua/built`";
        let all = transitions::scripts();
        for s in &all {
            let committed = std::fs::read_to_string(dir.join(s.file)).unwrap_or_default();
            assert!(
                committed == s.text,
                "lua/built/{} is stale: {again}",
                s.file
            );
        }
        let committed = std::fs::read_to_string(dir.join("SHA1SUMS")).unwrap_or_default();
        assert_eq!(
            committed,
            transitions::sha1sums(&all),
            "lua/built/SHA1SUMS is stale: {again}"
        );
        let files = std::fs::read_dir(&dir).expect("lua/built").count();
        assert_eq!(
            files,
            transitions::scripts().len() + 1,
            "a file in lua/built/ no script builds"
        );
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
        let text = full("", "return R_OK", false);
        assert!(!text.contains("local R_OK"), "constants are not locals");
        assert!(text.ends_with(&format!("return {}", Reply::Ok as i64)));
    }
}
