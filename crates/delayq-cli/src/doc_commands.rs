//! Every `delayq …` command line in README.md and docs/ is one the CLI's own parser accepts:
//! a renamed or removed flag fails this test, not a reader who pastes the line.

use clap::Parser;

use crate::args::Cli;

/// The documents whose command lines are checked, relative to the repository.
fn documents() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// The shell lines of a document's code blocks (continuations joined, comments cut).
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((n + 1, String::new()));
        // Inside a quote opened on an earlier line, the line is the quote's text.
        let code = if open_quote(&joined) {
            line
        } else {
            cut_comment(line)
        };
        joined.push_str(code.trim_end_matches('\\'));
        if code.trim_end().ends_with('\\') {
            joined.push(' ');
            pending = Some((start, joined));
        } else if open_quote(&joined) {
            joined.push('\n');
            pending = Some((start, joined));
        } else {
            out.push((start, joined));
        }
    }
    out
}

/// Whether `text` ends inside a single- or double-quoted string.
fn open_quote(text: &str) -> bool {
    let (mut single, mut double) = (false, false);
    for c in text.chars() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            _ => {}
        }
    }
    single || double
}

/// `line` without a shell comment (a `#` that starts a word outside quotes).
fn cut_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// The argument lists of the `delayq` commands in one shell line (each part of a pipeline or
/// list; `cargo run … -- ARGS` counts as `delayq ARGS`).
fn delayq_commands(line: &str) -> Vec<Vec<String>> {
    let Some(words) = shlex::split(line) else {
        return vec![vec!["<unbalanced quotes>".into()]];
    };
    let mut out = Vec::new();
    for part in words.split(|w| ["|", "||", "&&", ";"].contains(&w.as_str())) {
        let part: Vec<&String> = part
            .iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        let Some(first) = part.first() else { continue };
        let args: Vec<String> = if first.ends_with("delayq") && !first.contains("delayq-") {
            part[1..].iter().map(|s| (*s).clone()).collect()
        } else if first.as_str() == "cargo"
            && part.iter().any(|w| w.as_str() == "delayq-cli")
            && let Some(at) = part.iter().position(|w| w.as_str() == "--")
        {
            part[at + 1..].iter().map(|s| (*s).clone()).collect()
        } else {
            continue;
        };
        out.push(args);
    }
    out
}

#[test]
fn every_documented_command_line_parses() {
    let mut checked = 0;
    let mut bad = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("readable");
        for (n, line) in shell_lines(&text) {
            for args in delayq_commands(&line) {
                // `bench` and `chaos` exist in a build with feature `bench` only.
                let bench_only =
                    matches!(args.first().map(String::as_str), Some("bench" | "chaos"));
                if bench_only && !cfg!(feature = "bench") {
                    continue;
                }
                checked += 1;
                let argv = std::iter::once("delayq".to_owned()).chain(args);
                if let Err(e) = Cli::try_parse_from(argv) {
                    let first = e.to_string().lines().next().unwrap_or_default().to_owned();
                    bad.push(format!("{}:{n}: {line}\n    {first}", doc.display()));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {checked} lines:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(checked > 25, "{checked} command lines found");
}

#[test]
fn the_line_splitter_finds_each_command() {
    let lines = shell_lines(
        "```sh\ndelayq get x --json # a comment\ncat f | delayq enqueue \\\n  --jsonl\n\
         delayq enqueue --payload '{\n  \"a\": 1 # not a comment\n}'\n```\n",
    );
    assert_eq!(lines.len(), 3);
    assert_eq!(
        delayq_commands(&lines[0].1),
        vec![vec!["get", "x", "--json"]]
    );
    assert_eq!(
        delayq_commands(&lines[1].1),
        vec![vec!["enqueue", "--jsonl"]]
    );
    assert_eq!(
        delayq_commands(&lines[2].1),
        vec![vec![
            "enqueue",
            "--payload",
            "{\n  \"a\": 1 # not a comment\n}"
        ]]
    );
    assert_eq!(
        delayq_commands("cargo run --release -p delayq-cli -- serve"),
        vec![vec!["serve"]]
    );
    assert!(delayq_commands("curl -X POST localhost:7070/v1/queues").is_empty());
}
