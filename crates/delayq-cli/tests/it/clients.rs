//! The TypeScript, Go and Python clients against live `delayq serve` processes: each runs the
//! shared conformance suite (`clients/conformance`) on the embedded store and on Redis, its
//! own tests (the workers under faults: a server restarted mid-run, a worker closed mid-job,
//! a handler past its lease, a job past its timeout — they start and stop their own servers
//! with `DELAYQ_BIN`), and its order-timeout example installed from the repository as a user
//! would (`npm install` of the package folder, a Go module with a `replace`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{Killed, delayq, root, spawn_serve};

/// A server on the embedded store in `dir` and one on the shared Redis; their base URLs.
fn servers(dir: &Path) -> Vec<(Killed, String)> {
    let redis = delayq_test_support::shared::redis();
    let ns = delayq_test_support::shared::namespace();
    let embedded = spawn_serve(delayq(dir).args(["serve", "--listen", "127.0.0.1:0"]));
    let on_redis = spawn_serve(delayq(dir).args([
        "--redis",
        &redis.url(),
        "--namespace",
        &ns,
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]));
    [embedded, on_redis]
        .into_iter()
        .map(|(k, addr)| (k, format!("http://{addr}")))
        .collect()
}

fn ok(what: &str, o: Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{what} failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn run(cmd: &mut Command, what: &str) -> String {
    ok(what, cmd.output().unwrap_or_else(|e| panic!("{what}: {e}")))
}

/// The TypeScript package built (its `npm ci` runs `tsc`): node_modules and build/ exist.
pub(crate) fn typescript_built() -> PathBuf {
    let pkg = root().join("clients/typescript");
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        if !pkg.join("node_modules/typescript").exists() {
            run(
                Command::new("npm")
                    .args(["ci", "--no-audit", "--no-fund"])
                    .current_dir(&pkg),
                "npm ci",
            );
        }
        run(
            Command::new("npx")
                .args(["tsc", "-p", "tsconfig.json"])
                .current_dir(&pkg),
            "tsc",
        );
    });
    pkg
}

#[test]
fn typescript_passes_the_conformance_suite_and_its_own_tests_on_both_stores() {
    let pkg = typescript_built();
    let dir = tempfile::tempdir().unwrap();
    for (_server, url) in servers(dir.path()) {
        let out = run(
            Command::new("node")
                .args(["--test", "build/test/"])
                .env("DELAYQ_URL", &url)
                .env("DELAYQ_BIN", env!("CARGO_BIN_EXE_delayq"))
                .current_dir(&pkg),
            &format!("the TypeScript tests against {url}"),
        );
        assert!(
            out.contains("# fail 0") && out.contains("# skipped 0"),
            "{out}"
        );
        assert!(!out.contains("# pass 0"), "{out}");
    }
}

#[test]
fn go_passes_the_conformance_suite_and_its_own_tests_on_both_stores() {
    let dir = tempfile::tempdir().unwrap();
    for (_server, url) in servers(dir.path()) {
        let out = run(
            Command::new("go")
                .args(["test", "-count=1", "-v", "./..."])
                .env("DELAYQ_URL", &url)
                .env("DELAYQ_BIN", env!("CARGO_BIN_EXE_delayq"))
                .env("GOFLAGS", "-mod=mod")
                .current_dir(root().join("clients/go")),
            &format!("the Go tests against {url}"),
        );
        assert!(!out.contains("--- SKIP"), "{out}");
        assert!(out.contains("--- PASS: TestConformanceScenarios"), "{out}");
    }
}

#[test]
fn python_passes_the_conformance_suite_on_both_stores() {
    let pkg = root().join("clients/python");
    let dir = tempfile::tempdir().unwrap();
    for (_server, url) in servers(dir.path()) {
        let o = crate::common::python3()
            .args(["-m", "unittest", "test_conformance", "-v"])
            .env("DELAYQ_URL", &url)
            .current_dir(&pkg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "python against {url}:\n{err}");
        assert!(!err.contains("skipped"), "{err}");
    }
}

/// The example's JSON line: every unpaid order cancelled once, the paid ones not.
fn check_story(out: &str) {
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let cancelled: Vec<String> = serde_json::from_value(v["cancelled"].clone()).unwrap();
    let want: Vec<String> = (2..6).map(|n| format!("order-{n}")).collect();
    assert_eq!(cancelled, want, "{v}");
    assert_eq!(v["left"], 0, "{v}");
}

#[test]
fn the_typescript_example_installs_from_the_repository_and_runs() {
    typescript_built();
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) =
        spawn_serve(delayq(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]));
    // A project of the user's own, elsewhere, that installs the package folder.
    let app = dir.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::copy(
        root().join("examples/typescript/order-timeout.mjs"),
        app.join("order-timeout.mjs"),
    )
    .unwrap();
    std::fs::write(
        app.join("package.json"),
        r#"{"name": "app", "private": true, "type": "module"}"#,
    )
    .unwrap();
    run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund"])
            .arg(root().join("clients/typescript"))
            .current_dir(&app),
        "npm install ./clients/typescript",
    );
    let out = run(
        Command::new("node")
            .args(["order-timeout.mjs", &format!("http://{addr}")])
            .args(["--orders", "6", "--pay", "2", "--timeout-ms", "300"])
            .current_dir(&app),
        "the TypeScript example",
    );
    check_story(&out);
}

#[test]
fn the_go_example_builds_against_the_module_folder_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) =
        spawn_serve(delayq(dir.path()).args(["serve", "--listen", "127.0.0.1:0"]));
    // A module of the user's own, elsewhere, that requires the client by a `replace`.
    let app = dir.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::copy(root().join("examples/go/main.go"), app.join("main.go")).unwrap();
    let module = std::fs::read_to_string(root().join("examples/go/go.mod"))
        .unwrap()
        .replace(
            "=> ../../clients/go",
            &format!("=> {}", root().join("clients/go").display()),
        );
    std::fs::write(app.join("go.mod"), module).unwrap();
    run(
        Command::new("go")
            .args(["build", "-o", "order-timeout", "."])
            .env("GOFLAGS", "-mod=mod")
            .current_dir(&app),
        "go build",
    );
    let out = run(
        Command::new(app.join("order-timeout"))
            .args(["-url", &format!("http://{addr}")])
            .args(["-orders", "6", "-pay", "2", "-timeout", "300ms"]),
        "the Go example",
    );
    check_story(&out);
}
