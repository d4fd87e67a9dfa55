//! Settings from a TOML file and the environment (`--config`, `DELAYQ_*`), secrets from files,
//! `delayq config check`, SIGHUP reloads of a running `serve`, and the build it reports.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{Killed, chmod, delayq, free_port, request, text, until};

/// Writes `dir/name` readable by its owner only (secret files must be; a config file may).
fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    chmod(&p, 0o600);
    p.display().to_string()
}

/// One HTTP/1.1 request with an optional bearer token: (status, body).
fn http(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    request(addr, method, path, &headers, body)
}

/// A free loopback address.
fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// A `delayq serve` from a config file.
struct Configured<F> {
    server: Killed,
    addr: String,
    /// The token file the config names.
    tokens: PathBuf,
    /// The config file.
    file: String,
    /// Writes the config file again with `extra` lines after the address and the token file.
    rewrite: F,
}

/// `delayq serve --config delayq.toml` in `dir` on a free address, its token file holding
/// `tokens`.
fn serve_with_token_file(dir: &Path, tokens: &str) -> Configured<impl Fn(&str)> {
    let addr = free_addr();
    let token_file = PathBuf::from(write(dir, "tokens", tokens));
    let (a, t) = (addr.clone(), token_file.clone());
    let conf = move |extra: &str| {
        format!(
            "listen = \"{a}\"\ntoken_file = \"{}\"\n{extra}",
            t.display()
        )
    };
    let file = write(dir, "delayq.toml", &conf(""));
    let server = serve(dir, &addr, &["--config", &file, "serve"], &[]);
    let f = file.clone();
    let rewrite = move |extra: &str| std::fs::write(&f, conf(extra)).unwrap();
    Configured {
        server,
        addr,
        tokens: token_file,
        file,
        rewrite,
    }
}

/// `delayq serve` with its stderr in `dir/serve.log`, started with `args`; waits for /healthz.
fn serve(dir: &Path, addr: &str, args: &[&str], env: &[(&str, &str)]) -> Killed {
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let child = delayq(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let server = Killed(child);
    until("serve answers /healthz", || {
        TcpStream::connect(addr).is_ok() && http(addr, "GET", "/healthz", None, "").0 == 200
    });
    server
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
}

fn hangup(server: &Killed) {
    let ok = Command::new("kill")
        .args(["-HUP", &server.0.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn flags_win_over_the_environment_which_wins_over_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = write(
        dir,
        "delayq.toml",
        "# serve settings\nlisten = \"127.0.0.1:7001\"\nmax_payload = 1000\n\
         token = [\"admin:from-file\"]\nheader_timeout = \"3s\"\n",
    );
    let check = |env: &[(&str, &str)], flags: &[&str]| {
        let o = delayq(dir)
            .args(["config", "check", "--config", &f])
            .args(flags)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        text(&o)
    };
    let out = check(&[], &[]);
    assert!(out.contains("listen = \"127.0.0.1:7001\"  # file"), "{out}");
    assert!(out.contains("max_payload = 1000  # file"), "{out}");
    assert!(out.contains("max_connections = 2048  # default"), "{out}");
    // The secret is masked.
    assert!(out.contains("token = [\"********\"]  # file"), "{out}");
    assert!(!out.contains("from-file"), "{out}");
    let out = check(&[("DELAYQ_LISTEN", "127.0.0.1:7002")], &[]);
    assert!(
        out.contains("listen = \"127.0.0.1:7002\"  # DELAYQ_LISTEN"),
        "{out}"
    );

    // The same file drives a real server; a flag beats both.
    let addr = free_addr();
    let _s = serve(
        dir,
        &addr,
        &["--config", &f, "serve", "--listen", &addr],
        &[("DELAYQ_LISTEN", "127.0.0.1:9")],
    );
    let (s, _) = http(&addr, "GET", "/v1/queues", None, "");
    assert_eq!(s, 401, "the file's token is required");
    let (s, _) = http(&addr, "GET", "/v1/queues", Some("from-file"), "");
    assert_eq!(s, 200);
    let big = format!(r#"{{"payload": "{}"}}"#, "x".repeat(2000));
    let (s, b) = http(&addr, "POST", "/v1/queues/q/jobs", Some("from-file"), &big);
    assert_eq!(s, 413, "max_payload from the file: {b}");
}

#[test]
fn a_bad_file_is_refused_before_anything_starts_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let cases = [
        (
            "listen = \"127.0.0.1:0\"\n\nmax_conections = 10\n",
            "bad.toml:3: unknown key `max_conections` (did you mean `max_connections`?)",
        ),
        (
            "concurrency = \"four\"\n",
            "bad.toml:1: `concurrency`: invalid value \"four\"",
        ),
        ("push = \"yes\"\n", "bad.toml:1: `push` takes true or false"),
        (
            "exec = \"cat\"\n",
            "bad.toml:1: `exec` is a setting of `delayq worker`, not of `delayq serve`",
        ),
        (
            "listen = [\"a\", \"b\"]\n",
            "`listen` takes one value, not a list",
        ),
        ("listen = \n", "bad.toml"),
    ];
    for (body, want) in cases {
        let f = write(dir, "bad.toml", body);
        let cmd = if body.starts_with("concurrency") {
            "worker"
        } else {
            "serve"
        };
        let o = delayq(dir).args(["--config", &f, cmd]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{body}: {}", text(&o));
        assert!(
            text(&o).contains(want),
            "{body}: want {want:?} in {}",
            text(&o)
        );
        let o = delayq(dir)
            .args(["config", "check", "--for", cmd, "--config", &f])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "check {body}: {}", text(&o));
        assert!(text(&o).contains(want), "check {body}: {}", text(&o));
    }
    assert!(
        !dir.join("delayq-data").exists(),
        "a refused start created the store"
    );
    // A missing file is named too.
    let o = delayq(dir)
        .args(["--config", "nope.toml", "serve"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("reading nope.toml"), "{}", text(&o));
}

#[test]
fn secrets_from_files_stay_out_of_the_process_list() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let secret = "admin:s3cret-from-a-file";
    let tokens = write(dir, "tokens", &format!("# mounted secret\n{secret}\n"));
    let metrics = write(dir, "metrics", "m3trics-token\n");
    let addr = free_addr();
    let s = serve(
        dir,
        &addr,
        &["serve", "--listen", &addr],
        &[
            ("DELAYQ_TOKEN_FILE", &tokens),
            ("DELAYQ_METRICS_TOKEN_FILE", &metrics),
        ],
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", s.0.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(!cmdline.contains("s3cret"), "{cmdline}");
    assert_eq!(http(&addr, "GET", "/v1/queues", None, "").0, 401);
    assert_eq!(
        http(&addr, "GET", "/v1/queues", Some("s3cret-from-a-file"), "").0,
        200
    );
    assert_eq!(http(&addr, "GET", "/metrics", None, "").0, 401);
    assert_eq!(
        http(&addr, "GET", "/metrics", Some("m3trics-token"), "").0,
        200
    );
}

#[test]
fn sighup_rotates_tokens_without_dropping_a_long_poll() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Configured {
        server,
        addr,
        tokens,
        rewrite,
        ..
    } = serve_with_token_file(dir, "all:old-token\n");
    let status = |token: &str| http(&addr, "GET", "/v1/queues", Some(token), "").0;
    let reloads = |n: usize| log(dir).matches("delayq serve: reloaded").count() >= n;

    // Rotation: both tokens, while a long poll by the old one waits.
    let poll = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let body = r#"{"max": 1, "lease_ms": 30000, "wait_ms": 3000}"#;
            http(&addr, "POST", "/v1/queues/q/claim", Some("old-token"), body)
        })
    };
    std::fs::write(&tokens, "all:old-token\nall:new-token\n").unwrap();
    hangup(&server);
    until("the first reload", || reloads(1));
    assert_eq!(status("new-token"), 200);
    let (s, b) = poll.join().unwrap();
    assert_eq!(s, 200, "the long poll across the reload: {b}");

    // The old token goes.
    std::fs::write(&tokens, "all:new-token\n").unwrap();
    hangup(&server);
    until("the second reload", || reloads(2));
    assert_eq!(status("old-token"), 401);
    assert_eq!(status("new-token"), 200);

    // A broken file keeps what runs and says why; a setting that cannot change live is named.
    rewrite("max_conections = 1\n");
    hangup(&server);
    until("the refusal", || log(dir).contains("reload refused"));
    assert!(
        log(dir).contains("unknown key `max_conections`"),
        "{}",
        log(dir)
    );
    assert_eq!(status("new-token"), 200);
    rewrite("max_payload = 10\nlog_level = \"info\"\n");
    hangup(&server);
    until("the third reload", || reloads(3));
    assert!(
        log(dir).contains("needs a restart: max_payload"),
        "{}",
        log(dir)
    );
}

/// Tokens fail closed: a reload that would leave none is refused (the running tokens stay),
/// a mistyped scope is refused with its line, a token file others can read is refused; a file
/// that says `allow_no_tokens` may leave none, and the Host guard then holds as at start.
#[test]
fn tokens_fail_closed_across_reloads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Configured {
        server,
        addr,
        tokens,
        file: f,
        rewrite,
    } = serve_with_token_file(dir, "admin:keep-me\n");
    let refusals = |n: usize| log(dir).matches("reload refused").count() >= n;
    let kept = || {
        assert_eq!(http(&addr, "GET", "/v1/queues", None, "").0, 401);
        assert_eq!(http(&addr, "GET", "/v1/queues", Some("keep-me"), "").0, 200);
    };

    // `sed -i '/^admin/d'`: no token left.
    std::fs::write(&tokens, "# emptied\n").unwrap();
    hangup(&server);
    until("the first refusal", || refusals(1));
    assert!(log(dir).contains("leave no token"), "{}", log(dir));
    kept();
    // A mistyped scope, in any case or spacing: refused with its line, the secret unsaid.
    for (n, line) in ["reed:typo-secret", "Read:typo-secret", "read :typo-secret"]
        .iter()
        .enumerate()
    {
        std::fs::write(&tokens, format!("admin:keep-me\n{line}\n")).unwrap();
        hangup(&server);
        until("a scope refusal", || refusals(n + 2));
        assert!(log(dir).contains("line 2"), "{}", log(dir));
        kept();
    }
    // Readable by every user.
    std::fs::write(&tokens, "admin:keep-me\n").unwrap();
    chmod(&tokens, 0o644);
    hangup(&server);
    until("the mode refusal", || refusals(5));
    assert!(log(dir).contains("mode 0644"), "{}", log(dir));
    chmod(&tokens, 0o600);
    kept();
    // A TOML error holding a token: its line is not repeated.
    rewrite("token = [\"admin:toml-secret\n");
    hangup(&server);
    until("the syntax refusal", || refusals(6));
    kept();
    let o = delayq(dir)
        .args(["config", "check", "--config", &f])
        .output()
        .unwrap();
    assert!(!o.status.success());
    for out in [text(&o), log(dir)] {
        assert!(!out.contains("toml-secret"), "{out}");
        assert!(!out.contains("typo-secret"), "{out}");
    }
    assert!(text(&o).contains(":3:"), "names the line: {}", text(&o));

    // Said explicitly, no token: open to this machine only, the Host guard on.
    std::fs::write(&tokens, "").unwrap();
    rewrite("allow_no_tokens = true\n");
    hangup(&server);
    until("the reload to no token", || {
        log(dir).matches("delayq serve: reloaded").count() >= 1
    });
    assert_eq!(http(&addr, "GET", "/v1/queues", None, "").0, 200);
    let (status, body) = request(
        &addr,
        "GET",
        "/v1/queues",
        &[("host", "rebind.attacker.example")],
        "",
    );
    assert_eq!(status, 403, "{body}");
}

/// `config check` refuses a token file every user can read, unless the file it checks says
/// `allow_readable_secrets` (the setting of the file checked, not of the checking process).
#[test]
fn config_check_reads_secret_files_as_the_server_would() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let tokens = write(dir, "tokens", "admin:readable\n");
    chmod(Path::new(&tokens), 0o644);
    let check = |extra: &str| {
        let f = write(
            dir,
            "delayq.toml",
            &format!("token_file = \"{tokens}\"\n{extra}"),
        );
        delayq(dir)
            .args(["config", "check", "--config", &f])
            .output()
            .unwrap()
    };
    let o = check("");
    assert!(
        !o.status.success() && text(&o).contains("mode 0644"),
        "{}",
        text(&o)
    );
    let o = check("allow_readable_secrets = true\n");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("allow_readable_secrets = true"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_worker_reads_its_file_and_refuses_to_start_without_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = delayq(dir)
        .args(["enqueue", "--queue", "mail", "--payload", "hi"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = delayq(dir).args(["worker"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("needs a command to run"), "{}", text(&o));
    let out = dir.join("out.txt");
    let f = write(
        dir,
        "worker-mail.toml",
        &format!(
            "queue = \"mail\"\nexec = \"cat >> {}; kill -TERM $PPID\"\nconcurrency = 1\n",
            out.display()
        ),
    );
    let o = delayq(dir)
        .args(["worker", "--config", &f])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hi");
    let o = delayq(dir)
        .args(["config", "check", "--config", &f])
        .output()
        .unwrap();
    assert!(text(&o).contains("valid for delayq worker"), "{}", text(&o));
}

#[test]
fn the_version_names_the_commit_and_health_probes_readiness() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = delayq(dir).arg("--version").output().unwrap();
    let v = text(&o);
    assert!(
        v.starts_with(&format!("delayq {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    assert!(v.contains(", built 20"), "{v}");
    let addr = free_addr();
    let o = delayq(dir)
        .args(["health", "--url", &format!("http://{addr}")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "nothing listens: {}", text(&o));
    let _s = serve(dir, &addr, &["serve", "--listen", &addr], &[]);
    let (s, b) = http(&addr, "GET", "/healthz", None, "");
    assert_eq!(s, 200);
    let h: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"), "{h}");
    assert!(v.contains(h["commit"].as_str().unwrap()), "{h} vs {v}");
    let o = delayq(dir)
        .args(["health"])
        .env("DELAYQ_LISTEN", &addr)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rotates_push_secrets() {
    use delayq_push::Secret;
    use delayq_push::signing::{SIGNATURE_HEADER, TIMESTAMP_HEADER, verify};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rx = delayq_test_support::receiver::Receiver::start().await;
    let (old, new) = (
        Secret::generate().to_string(),
        Secret::generate().to_string(),
    );
    let secrets = PathBuf::from(write(dir, "push-secrets", &format!("{old}\n")));
    let addr = free_addr();
    let s = secrets.display().to_string();
    let args = [
        "serve",
        "--listen",
        &addr,
        "--push",
        "--allow-private-targets",
        "--push-secret-file",
        &s,
    ];
    let server = tokio::task::block_in_place(|| serve(dir, &addr, &args, &[]));
    let (st, b) = http(
        &addr,
        "PUT",
        "/v1/queues/hooks",
        None,
        r#"{"delivery": "push"}"#,
    );
    assert_eq!(st, 200, "{b}");
    let parse = |s: &str| Secret::parse(s).unwrap();
    // Pushes job `id` and answers which of (old, new) its signature verifies with.
    let push = |id: &str| {
        let body = serde_json::json!({"id": id, "payload": id, "target": {"url": rx.url("/ok")}});
        let (st, b) = http(
            &addr,
            "POST",
            "/v1/queues/hooks/jobs",
            None,
            &body.to_string(),
        );
        assert_eq!(st, 201, "{b}");
        until("the push arrives", || {
            rx.requests()
                .iter()
                .any(|r| r.header("webhook-id") == Some(id))
        });
        let r = rx
            .requests()
            .into_iter()
            .find(|r| r.header("webhook-id") == Some(id))
            .unwrap();
        let check = |secret: &str| {
            verify(
                &[parse(secret)],
                id,
                r.header(TIMESTAMP_HEADER).unwrap(),
                r.header(SIGNATURE_HEADER).unwrap(),
                &r.body,
                delayq::job::system_now_ms() / 1000,
                300,
            )
            .is_ok()
        };
        (check(&old), check(&new))
    };
    let reloads = |n: usize| log(dir).matches("delayq serve: reloaded").count() >= n;
    tokio::task::block_in_place(|| {
        assert_eq!(push("p1"), (true, false));
        std::fs::write(&secrets, format!("{old}\n{new}\n")).unwrap();
        hangup(&server);
        until("the first reload", || reloads(1));
        assert_eq!(push("p2"), (true, true), "both sign during the rotation");
        std::fs::write(&secrets, format!("{new}\n")).unwrap();
        hangup(&server);
        until("the second reload", || reloads(2));
        assert_eq!(push("p3"), (false, true));
    });
}
