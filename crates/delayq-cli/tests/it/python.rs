//! The Python package (`clients/python`) against a live `delayq serve --push`: its unittest
//! suite (client calls, typed errors, retries, workers, webhook verification), the examples of
//! `examples/python` (the order-timeout story), and `pip install` of the package.

use std::path::Path;
use std::process::Command;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

use crate::common::{Killed, delayq, root, spawn_serve};

/// `delayq serve --push` on the embedded store in `dir`; returns it and its base URL.
fn serve(dir: &Path) -> (Killed, String) {
    let (child, addr) = spawn_serve(
        delayq(dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--push"])
            .args(["--allow-private-targets", "--push-secret", SECRET]),
    );
    (child, format!("http://{addr}"))
}

fn python(dir: &Path, args: &[&str], url: &str) -> std::process::Output {
    crate::common::python3()
        .current_dir(dir)
        .env("DELAYQ_URL", url)
        .env("DELAYQ_BIN", env!("CARGO_BIN_EXE_delayq"))
        .env("DELAYQ_TEST_PUSH_SECRET", SECRET)
        .args(args)
        .output()
        .expect("python3")
}

#[test]
fn the_python_package_suite_passes_against_a_live_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve(dir.path());
    let pkg = root().join("clients/python");
    let o = python(
        &pkg,
        &["-m", "unittest", "discover", "-s", "tests", "-v"],
        &url,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "python tests failed:\n{err}");
    // Every test ran against the server: none skipped for want of one.
    assert!(!err.contains("skipped"), "{err}");
    let ran: usize = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert!(ran >= 20, "{err}");
}

#[test]
fn the_order_timeout_examples_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = serve(dir.path());
    let ex = root().join("examples/python");
    let json = |o: std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let shop = json(python(
        &ex,
        &[
            "shop.py",
            &url,
            "--orders",
            "12",
            "--pay",
            "4",
            "--timeout-ms",
            "300",
        ],
        &url,
    ));
    assert_eq!(shop["created"], 12);
    assert_eq!(shop["paid"]["order-0"], "timeout cancelled");
    assert_eq!(shop["waiting"], 8, "{shop}");
    let done = json(python(
        &ex,
        &["timeouts.py", &url, "--idle-exit", "1.5"],
        &url,
    ));
    let cancelled: Vec<String> = serde_json::from_value(done["cancelled"].clone()).unwrap();
    let want: Vec<String> = {
        let mut v: Vec<String> = (4..12).map(|n| format!("order-{n}")).collect();
        v.sort();
        v
    };
    assert_eq!(cancelled, want, "the unpaid orders, each once");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "__pycache__" || name == "build" || name.to_string_lossy().ends_with(".egg-info")
        {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

#[test]
fn the_package_installs_with_pip() {
    let venv = tempfile::tempdir().unwrap();
    let run = crate::common::succeeds;
    // Exactly what the README says, in a fresh virtual environment (pip fetches the build
    // backend, setuptools, from the package index the machine uses), from a copy of the
    // package (setuptools writes build/ and *.egg-info beside the sources it builds).
    let copy = venv.path().join("src-copy");
    copy_dir(&root().join("clients/python"), &copy);
    run(Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv.path()));
    let py = venv.path().join("bin/python");
    run(Command::new(&py)
        .args(["-m", "pip", "install", "-q"])
        .arg(&copy));
    let out = run(Command::new(&py).current_dir(venv.path()).args([
        "-c",
        "import delayq, sys; print(delayq.__version__); print(delayq.__file__)",
    ]));
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(env!("CARGO_PKG_VERSION")),
        "package version = server's"
    );
    assert!(lines.next().unwrap().contains("site-packages"), "{out}");
    let pyproject = std::fs::read_to_string(root().join("clients/python/pyproject.toml")).unwrap();
    assert!(pyproject.contains(&format!("version = \"{}\"", env!("CARGO_PKG_VERSION"))));
}

/// The package is fully typed: `mypy --strict` finds nothing in it, nor in the examples (a
/// user's programs). scripts/test installs mypy and names it in `DELAYQ_MYPY`.
#[test]
fn the_package_and_a_users_program_pass_mypy_strict() {
    let mypy = std::env::var("DELAYQ_MYPY").unwrap_or_else(|_| "mypy".into());
    let cache = tempfile::tempdir().unwrap();
    let out = Command::new(&mypy)
        .args(["--strict", "--cache-dir"])
        .arg(cache.path())
        .args(["clients/python/src/delayq", "examples/python"])
        .env("MYPYPATH", root().join("clients/python/src"))
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{mypy} not runnable ({e}): scripts/test installs it"));
    let said = crate::common::text(&out);
    assert!(out.status.success() && said.contains("Success"), "{said}");
}
