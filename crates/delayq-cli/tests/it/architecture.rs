//! ARCHITECTURE.md cannot name what is not there: every path and every code identifier it
//! writes in backticks exists in the tree — a file or folder (a `*` or `NAME` in it stands
//! for any name), a function written `name()` is defined (in the file named right after it,
//! "`name()` in `file`"), a `Type::item` has each part in the code, and a snake_case,
//! CamelCase or CONSTANT word appears in the code.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Folders that are not the project's own text.
const SKIP: [&str; 7] = [
    "target",
    "node_modules",
    ".git",
    "build",
    "dist",
    "__pycache__",
    ".venv",
];
/// Files whose text is searched for identifiers.
const CODE: [&str; 13] = [
    "rs", "lua", "ts", "go", "py", "toml", "yaml", "yml", "html", "js", "css", "sh", "sql",
];

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !SKIP.contains(&name.as_str()) {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
                walk(root, &p, out);
            }
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// `pattern` (a path with `*` or `NAME` for any name) matches `path` or a tail of it.
fn matches(pattern: &str, path: &str) -> bool {
    let (pp, tp): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').collect(), path.split('/').collect());
    if pp.len() > tp.len() {
        return false;
    }
    pp.iter()
        .zip(&tp[tp.len() - pp.len()..])
        .all(|(p, t)| part(p, t))
}

/// One path part against a pattern part (`*` any run of characters, `NAME` any name).
fn part(p: &str, t: &str) -> bool {
    let p = p.replace("NAME", "*");
    let pieces: Vec<&str> = p.split('*').collect();
    if pieces.len() == 1 {
        return p == t;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !t.starts_with(first) || !t.ends_with(last) || t.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &t[first.len()..t.len() - last.len()];
    for mid in &pieces[1..pieces.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Whether `text` defines `name` (a function, type, constant, module or macro).
fn defines(text: &str, name: &str) -> bool {
    let kinds = [
        "fn ",
        "struct ",
        "enum ",
        "trait ",
        "type ",
        "const ",
        "static ",
        "mod ",
        "function ",
        "def ",
        "func ",
        "class ",
        "interface ",
        "macro_rules! ",
    ];
    let at_word_end =
        |rest: &str| !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
    kinds.iter().any(|k| {
        text.match_indices(&format!("{k}{name}"))
            .any(|(i, m)| at_word_end(&text[i + m.len()..]))
    }) || text.contains(&format!("{name} = function"))
}

#[test]
fn every_path_and_identifier_in_architecture_md_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut paths = Vec::new();
    walk(&root, &root, &mut paths);
    let paths: Vec<String> = paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut code = String::new();
    for p in &paths {
        let ext = p.rsplit('.').next().unwrap_or_default();
        if CODE.contains(&ext) || p.starts_with("scripts/") || p.starts_with(".ci/") {
            code += &std::fs::read_to_string(root.join(p)).unwrap_or_default();
            code.push('\n');
        }
    }
    let words: HashSet<&str> = code
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let spans: Vec<&str> = doc
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.contains('\n'))
        .collect();
    let exts = [
        ".rs", ".lua", ".md", ".toml", ".ts", ".go", ".py", ".yaml", ".sh", ".html",
    ];
    let mut missing = Vec::new();
    for s in &spans {
        let t = s.trim().trim_end_matches('/');
        let pathlike = t.split('/').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._*-".contains(c))
        }) && (t.contains('/') || exts.iter().any(|e| t.ends_with(e)));
        if pathlike {
            if !paths.iter().any(|p| matches(t, p)) {
                missing.push(format!("path `{s}`"));
            }
        } else if let Some(f) = t.strip_suffix("()") {
            let name = f.rsplit("::").next().unwrap();
            if is_ident(name) && !defines(&code, name) {
                missing.push(format!("function `{s}`"));
            }
        } else if t.contains("::") && t.split("::").all(is_ident) {
            if let Some(part) = t.split("::").find(|p| !words.contains(p)) {
                missing.push(format!("`{s}` (no `{part}` in the code)"));
            }
        } else if is_ident(t)
            && (t.contains('_') || t.chars().skip(1).any(|c| c.is_ascii_uppercase()))
            && !t.starts_with('_')
            && !words.contains(t)
        {
            missing.push(format!("identifier `{s}`"));
        }
    }
    // "`name()` in `file`": defined in that file.
    for w in doc.split("()` in `").skip(1).zip(doc.split("()` in `")) {
        let (after, before) = w;
        let name = before.rsplit('`').next().unwrap_or_default();
        let file = after.split('`').next().unwrap_or_default();
        let Some(p) = paths.iter().find(|p| matches(file, p)) else {
            continue; // reported above
        };
        let text = std::fs::read_to_string(root.join(p)).unwrap_or_default();
        if is_ident(name.rsplit("::").next().unwrap_or_default())
            && !defines(&text, name.rsplit("::").next().unwrap())
        {
            missing.push(format!("`{name}()` is not defined in `{file}`"));
        }
    }
    assert!(spans.len() > 300, "{} spans read", spans.len());
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_finds_what_is_not_there() {
    assert!(matches(
        "lua/built/NAME.lua",
        "crates/delayq-redis/lua/built/claim.lua"
    ));
    assert!(matches(
        "crates/delayq-redis/src/transitions/*.rs",
        "crates/delayq-redis/src/transitions/ack.rs"
    ));
    assert!(!matches("periodic.rs", "crates/delayq/src/ticker.rs"));
    assert!(!matches(
        "delayq-cli/tests/python.rs",
        "crates/delayq-cli/tests/it/python.rs"
    ));
    assert!(defines(
        "local function wake_if_earlier(a)",
        "wake_if_earlier"
    ));
    assert!(!defines(
        "local is_paused = 1\nfunction paused_x()",
        "paused"
    ));
}
