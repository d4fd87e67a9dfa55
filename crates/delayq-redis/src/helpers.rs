//! The Lua helpers a script includes by name: each helper file's `--@ NAME needs …` sections
//! (`common.lua`, `batch.lua`, `keyed.lua`, `lane.lua`, and the prelude's), the helpers a
//! script needs through the ones it names, and where each is defined in its text — before the
//! script, or at a `--@ define` line in the branch that calls it.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use crate::prelude::PRELUDE;

/// The helper files, in the order their functions are defined (keyed.lua calls common.lua's,
/// lane.lua both).
pub(crate) const HELPER_FILES: [(&str, &str); 5] = [
    ("common.lua", include_str!("../lua/common.lua")),
    ("batch.lua", include_str!("../lua/batch.lua")),
    ("deps.lua", include_str!("../lua/deps.lua")),
    ("keyed.lua", include_str!("../lua/keyed.lua")),
    ("lane.lua", include_str!("../lua/lane.lua")),
];

/// One helper: its name, the helpers it calls and its text (from its `--@` line to the next).
pub(crate) struct Helper {
    /// Its name (the `local function` it defines).
    pub name: String,
    /// The helpers it calls, as its `--@` line declares them.
    pub needs: Vec<String>,
    /// Its text.
    pub text: String,
}

/// Every helper, in definition order: the prelude's, then common.lua's and lane.lua's.
pub(crate) static HELPERS: LazyLock<Vec<Helper>> = LazyLock::new(|| {
    let mut out = Vec::new();
    for text in std::iter::once(PRELUDE.as_str()).chain(HELPER_FILES.map(|(_, t)| t)) {
        for section in text.split("\n--@ ").skip(1) {
            let (first, body) = section.split_once('\n').unwrap_or((section, ""));
            let mut words = first.split_whitespace();
            let name = words.next().unwrap_or_default().to_owned();
            let needs = match words.next() {
                Some("needs") => words.map(str::to_owned).collect(),
                _ => Vec::new(),
            };
            out.push(Helper {
                name,
                needs,
                text: format!("{}\n", body.trim_end()),
            });
        }
    }
    out
});

/// The identifiers of a Lua text, comments left out.
pub(crate) fn words(text: &str) -> HashSet<String> {
    text.lines()
        .map(|l| l.split("--").next().unwrap_or_default())
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The helpers a script's own text calls (the names it uses that a helper defines), in
/// definition order — read from the text, never listed by hand.
pub(crate) fn called(source: &str) -> Vec<&'static str> {
    let used = words(source);
    HELPERS
        .iter()
        .filter(|h| used.contains(&h.name))
        .map(|h| h.name.as_str())
        .collect()
}

/// The names of `helpers` and of every helper they need.
fn needed(helpers: &[&str]) -> HashSet<&'static str> {
    let by_name: HashMap<&str, &'static Helper> =
        HELPERS.iter().map(|h| (h.name.as_str(), h)).collect();
    let mut want: HashSet<&'static str> = HashSet::new();
    let mut todo: Vec<&str> = helpers.to_vec();
    while let Some(name) = todo.pop() {
        let h = by_name
            .get(name)
            .unwrap_or_else(|| panic!("no Lua helper `{name}`"));
        if want.insert(&h.name) {
            todo.extend(h.needs.iter().map(String::as_str));
        }
    }
    want
}

/// The text of the helpers in `want`, in definition order (a helper before those that call
/// it).
fn helper_text(want: &HashSet<&str>) -> String {
    HELPERS
        .iter()
        .filter(|h| want.contains(h.name.as_str()))
        .map(|h| h.text.as_str())
        .collect()
}

/// A script's line `--@ define NAME …`: the named helpers (declared in its `helpers`), and
/// those only they need, are defined at that line instead of before the script. Every helper
/// defined costs a closure on each call whether it runs or not (~1–2k instructions in Redis's
/// Lua), so helpers that only one branch calls — a keyed queue's — are defined in that
/// branch: `if keyed then --@ define key_take … end`. Their names are declared `local` before
/// the helpers, so the script and its other helpers see them. Each such line defines all it
/// needs that is not defined before the script (a helper two branches need is defined in
/// both: neither branch counts on the other having run).
const DEFINE: &str = "--@ define ";

/// `source` with each `--@ define` line replaced by its helpers' definitions, the names those
/// define, and the helpers defined before the script (`helpers` and what they need, less what
/// is defined later).
pub(crate) fn place_helpers(helpers: &[&str], source: &str) -> (String, Vec<&'static str>, String) {
    let defines: Vec<Vec<&str>> = source
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix(DEFINE))
        .map(|l| l.split_whitespace().collect())
        .collect();
    for name in defines.iter().flatten() {
        assert!(
            helpers.contains(name),
            "`{DEFINE}{name}` names a helper the script does not call"
        );
    }
    let eager: Vec<&str> = helpers
        .iter()
        .copied()
        .filter(|h| !defines.iter().flatten().any(|d| d == h))
        .collect();
    let eager = needed(&eager);
    let before = helper_text(&eager);
    let mut late: Vec<&'static str> = Vec::new();
    let mut out = String::with_capacity(source.len());
    let mut defines = defines.into_iter();
    for line in source.split_inclusive('\n') {
        if !line.trim_start().starts_with(DEFINE) {
            out.push_str(line);
            continue;
        }
        let names = defines.next().unwrap_or_default();
        let here: HashSet<&'static str> = needed(&names)
            .into_iter()
            .filter(|n| !eager.contains(n))
            .collect();
        let mut text = helper_text(&here);
        for h in HELPERS.iter().filter(|h| here.contains(h.name.as_str())) {
            text = text.replacen(
                &format!("local function {}(", h.name),
                &format!("{} = function(", h.name),
                1,
            );
            if !late.contains(&h.name.as_str()) {
                late.push(h.name.as_str());
            }
        }
        out.push_str(&text);
    }
    (before, late, out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scripts::full;
    use crate::transitions;

    /// Each helper's `--@` line names the helpers its body calls; a script's helpers are read
    /// from its text (`called`) and include the ones it calls — and none named only in a
    /// comment.
    #[test]
    fn declared_helpers_are_the_helpers_called() {
        let names: HashSet<String> = HELPERS.iter().map(|h| h.name.clone()).collect();
        let claim = transitions::all()
            .into_iter()
            .find(|d| d.file == "claim.lua")
            .expect("claim.lua");
        let found: HashSet<&str> = called(claim.source).into_iter().collect();
        assert!(
            found.contains("promote") && found.contains("key_take"),
            "{found:?}"
        );
        assert!(called("-- promote()\nlocal x = 1\n").is_empty());
        for h in HELPERS.iter() {
            let mut used: HashSet<String> = words(&h.text).intersection(&names).cloned().collect();
            used.remove(&h.name);
            let declared: HashSet<String> = h.needs.iter().cloned().collect();
            assert_eq!(declared, used, "helper {}", h.name);
        }
        assert!(HELPERS.len() > 50, "{} helpers found", HELPERS.len());
    }

    #[test]
    fn a_script_carries_the_helpers_it_names_and_theirs() {
        let text = full("", "return has(1, 1)", false);
        assert!(text.contains("local function has("));
        assert!(!text.contains("local function decode("));
        // Through other helpers: ack_pairs needs keep_done, which needs decode and encode.
        let text = full("", "return ack_pairs", false);
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
    fn a_helper_named_on_a_define_line_is_made_only_there() {
        let src = "has(1, 1)\nrec_due()\nif a then\n  --@ define lane_find\n  lane_find()\nend\nif b then\n  \
             --@ define lane_pull\n  lane_pull()\nend\n";
        let text = full("", src, false);
        // Declared before every helper, defined in the branches (assigned, not `local`).
        let forward = text
            .lines()
            .find(|l| l.starts_with("local lane_") && !l.contains("function"))
            .expect("declared");
        assert!(forward.contains(" lane_find,") && forward.contains(" lane_pull"));
        assert!(text.find(forward) < text.find("local function has("));
        assert!(!text.contains("local function lane_find("));
        let (first, second) = text.split_once("if b then").unwrap();
        assert!(
            first
                .split_once("if a then")
                .unwrap()
                .1
                .contains("lane_find = function(")
        );
        // What both branches need is defined in both: neither counts on the other.
        assert!(second.contains("lane_find = function("));
        assert!(second.contains("lane_pull = function("));
        assert!(!first.contains("lane_pull = function("));
        // What the script needs outside the branches stays before it.
        assert!(text.contains("local function rec_due("));
        assert_eq!(text.matches("lane_find = function(").count(), 2);
    }

    #[test]
    #[should_panic(expected = "does not call")]
    fn a_define_line_names_only_declared_helpers() {
        full("", "--@ define lane_find\n", false);
    }
}
