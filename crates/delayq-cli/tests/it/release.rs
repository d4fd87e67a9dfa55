//! The clients as a user installs them: `scripts/release DIR --clients` builds the npm tarball,
//! the Python wheel and sdist, a Go module proxy tree and the Rust crates for the workspace's
//! version; each client is installed into a fresh project with no access to the repository's
//! sources (npm offline, pip with no index for delayq, Go through the file proxy only), drives
//! a live `delayq serve` (an enqueue, a read, a cancel with its outcome), and its language's
//! conformance runner runs the whole shared suite against the installed package.

use std::process::Command;

use crate::common::{delayq, root, spawn_serve, succeeds};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The program each language runs: enqueue `order-<lang>` due in an hour, read it back (its
/// payload `{"order": 7}`), cancel it (`cancelled`), then cancel again (`not_found`); prints
/// `ok` when all held.
const TS: &str = r#"
import { Client } from "delayq";
const c = new Client({ baseUrl: process.env.DELAYQ_URL });
await c.enqueue("release", { order: 7 }, { id: "order-ts", delayMs: 3_600_000 });
const j = await c.get("release", "order-ts");
if (j?.payload?.order !== 7) throw new Error("read back: " + JSON.stringify(j));
if ((await c.cancel("release", "order-ts")) !== "cancelled") throw new Error("cancel");
if ((await c.cancel("release", "order-ts")) !== "not_found") throw new Error("cancel again");
console.log("ok");
"#;

const GO: &str = r#"package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/delayq/delayq/clients/go"
)

func main() {
	ctx := context.Background()
	c := delayq.NewClient(os.Getenv("DELAYQ_URL"))
	if _, err := c.Enqueue(ctx, "release", map[string]int{"order": 7}, delayq.WithID("order-go"),
		delayq.WithDelay(time.Hour), delayq.WithBackoff(delayq.FixedBackoff(time.Second))); err != nil {
		panic(err)
	}
	j, err := c.Get(ctx, "release", "order-go")
	if err != nil {
		panic(err)
	}
	var p struct{ Order int }
	if err := json.Unmarshal(j.Payload, &p); err != nil || p.Order != 7 {
		panic(fmt.Sprintf("read back: %s %v", j.Payload, err))
	}
	if r, err := c.Cancel(ctx, "release", "order-go"); err != nil || r != delayq.Cancelled {
		panic(fmt.Sprint("cancel: ", r, err))
	}
	if r, _ := c.Cancel(ctx, "release", "order-go"); r != delayq.CancelNotFound {
		panic(fmt.Sprint("cancel again: ", r))
	}
	fmt.Println("ok")
}
"#;

const PY: &str = r#"
import os
from delayq import Client
c = Client(os.environ["DELAYQ_URL"])
c.enqueue("release", {"order": 7}, id="order-py", delay_ms=3_600_000)
assert c.get("release", "order-py").payload == {"order": 7}
assert c.cancel("release", "order-py") == "cancelled"
assert c.cancel("release", "order-py") == "not_found"
print("ok")
"#;

#[test]
fn the_client_artefacts_install_into_fresh_projects_and_work() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("release");
    let listed = succeeds(
        Command::new("bash")
            .arg(root().join("scripts/release"))
            .arg(&out)
            .arg("--clients"),
    );
    for artefact in [
        format!("delayq-{VERSION}.tgz"),
        format!("delayq-{VERSION}-py3-none-any.whl"),
        format!("delayq-{VERSION}.tar.gz"),
    ] {
        assert!(listed.contains(&artefact), "{artefact} not built: {listed}");
    }
    let (_server, addr) =
        spawn_serve(delayq(tmp.path()).args(["serve", "--listen", "127.0.0.1:0"]));
    let url = format!("http://{addr}");
    let suite = root().join("clients/conformance");

    // TypeScript: npm, offline — the tarball must carry the compiled package.
    let ts = tmp.path().join("ts");
    std::fs::create_dir_all(&ts).unwrap();
    std::fs::write(
        ts.join("package.json"),
        r#"{"name":"smoke","type":"module","private":true}"#,
    )
    .unwrap();
    std::fs::write(ts.join("smoke.mjs"), TS).unwrap();
    succeeds(
        Command::new("npm")
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .arg(out.join(format!("delayq-{VERSION}.tgz")))
            .current_dir(&ts),
    );
    let said = succeeds(
        Command::new("node")
            .arg("smoke.mjs")
            .env("DELAYQ_URL", &url)
            .current_dir(&ts),
    );
    assert_eq!(said.trim(), "ok");
    // Its conformance runner, importing the installed package instead of the sources.
    let built = crate::clients::typescript_built();
    let runner = std::fs::read_to_string(built.join("build/test/conformance.test.js"))
        .unwrap()
        .replace("\"../src/index.js\"", "\"delayq\"");
    assert!(
        runner.contains("from \"delayq\""),
        "the runner's import moved"
    );
    std::fs::write(ts.join("conformance.test.mjs"), runner).unwrap();
    let said = succeeds(
        Command::new("node")
            .args(["--test", "conformance.test.mjs"])
            .env("DELAYQ_URL", &url)
            .env("DELAYQ_CONFORMANCE", &suite)
            .current_dir(&ts),
    );
    assert!(
        said.contains("# fail 0") && !said.contains("# pass 0"),
        "{said}"
    );

    // Go: the module through the file proxy only, no replace.
    let go = tmp.path().join("go");
    std::fs::create_dir_all(&go).unwrap();
    std::fs::write(go.join("go.mod"), "module smoke\n\ngo 1.19\n").unwrap();
    std::fs::write(go.join("main.go"), GO).unwrap();
    let proxy = format!("file://{}", out.join("goproxy").display());
    let go_cmd = |args: &[&str]| {
        let mut c = Command::new("go");
        c.args(args)
            .current_dir(&go)
            .env("GOPROXY", &proxy)
            .env("GOSUMDB", "off")
            .env("GOFLAGS", "-mod=mod -modcacherw")
            .env("GOPATH", tmp.path().join("gopath"))
            .env("DELAYQ_URL", &url);
        c
    };
    succeeds(&mut go_cmd(&[
        "get",
        &format!("github.com/delayq/delayq/clients/go@v{VERSION}"),
    ]));
    let said = succeeds(&mut go_cmd(&["run", "."]));
    assert_eq!(said.trim(), "ok");
    // Its conformance runner: the module's own tests, from the module cache the proxy filled.
    let said = succeeds(
        go_cmd(&[
            "test",
            "-count=1",
            "-v",
            "-run",
            "TestConformanceScenarios|TestWebhookVectors",
            "github.com/delayq/delayq/clients/go",
        ])
        .env("DELAYQ_CONFORMANCE", &suite),
    );
    assert!(
        said.contains("--- PASS: TestConformanceScenarios") && !said.contains("--- SKIP"),
        "{said}"
    );

    // Python: the wheel into a fresh virtual environment, no package index (httpx, the extra
    // "async", from the index first).
    let venv = tmp.path().join("venv");
    succeeds(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    let py = venv.join("bin/python");
    succeeds(Command::new(&py).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "httpx==0.28.1",
    ]));
    succeeds(
        Command::new(&py)
            .args(["-m", "pip", "install", "--quiet", "--no-index"])
            .arg(out.join(format!("delayq-{VERSION}-py3-none-any.whl"))),
    );
    let said = succeeds(
        Command::new(&py)
            .args(["-c", PY])
            .env("DELAYQ_URL", &url)
            .current_dir(tmp.path()),
    );
    assert_eq!(said.trim(), "ok");
    // Its conformance runner (the Client and the AsyncClient), beside no sources.
    let pyrun = tmp.path().join("py-runner");
    std::fs::create_dir_all(&pyrun).unwrap();
    for f in ["test_conformance.py", "_live.py"] {
        std::fs::copy(root().join("clients/python/tests").join(f), pyrun.join(f)).unwrap();
    }
    let o = Command::new(&py)
        .args(["-m", "unittest", "-v", "test_conformance"])
        .env("DELAYQ_URL", &url)
        .env("DELAYQ_CONFORMANCE", &suite)
        .env_remove("PYTHONPATH")
        .current_dir(&pyrun)
        .output()
        .unwrap();
    let said = crate::common::text(&o);
    assert!(
        o.status.success() && said.contains("Ran 3 tests") && !said.contains("skipped"),
        "{said}"
    );

    // Rust: the crates as crates.io takes them — no path dependency left, each other by version.
    for name in [
        "delayq",
        "delayq-wire",
        "delayq-redis",
        "delayq-push",
        "delayq-client",
    ] {
        let krate = out.join(format!("crates/{name}-{VERSION}.crate"));
        let manifest = succeeds(
            Command::new("tar")
                .arg("-xzOf")
                .arg(&krate)
                .arg(format!("{name}-{VERSION}/Cargo.toml")),
        );
        assert!(!manifest.contains("path = \"../"), "{name}: {manifest}");
        if name == "delayq-client" {
            assert!(
                manifest.contains("[dependencies.delayq-wire]"),
                "{manifest}"
            );
        }
    }
}
