//! Shipping: the runtime image (built by `scripts/image` with buildah, run under chroot as its
//! user with its environment — no container runtime runs here) and the Debian package
//! (`scripts/package`, installed with dpkg, its service's command run as its user, purged).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{free_port, request, root, until};

fn run(cmd: &mut Command) -> String {
    crate::common::succeeds(cmd).trim().to_owned()
}

fn buildah() -> Command {
    let mut c = Command::new("buildah");
    c.env("STORAGE_DRIVER", "vfs");
    c
}

fn http(addr: &str, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let auth = format!("Bearer {token}");
    request(addr, method, path, &[("authorization", &auth)], body)
}

/// Enqueue, claim and ack one job through the API at `addr`.
fn round_trip(addr: &str, token: &str) {
    let (s, b) = http(
        addr,
        "POST",
        "/v1/queues/ship/jobs",
        token,
        r#"{"id": "j1", "payload": "hello"}"#,
    );
    assert_eq!(s, 201, "{b}");
    let (s, b) = http(
        addr,
        "POST",
        "/v1/queues/ship/claim",
        token,
        r#"{"max": 1, "lease_ms": 30000}"#,
    );
    assert_eq!(s, 200, "{b}");
    let claim: Value = serde_json::from_str(&b).unwrap();
    let job = &claim["jobs"][0];
    assert_eq!(job["id"], "j1", "{b}");
    let ack = serde_json::json!({"acks": [{"id": "j1", "lease_token": job["lease_token"]}]});
    let (s, b) = http(
        addr,
        "POST",
        "/v1/queues/ship/acks",
        token,
        &ack.to_string(),
    );
    assert_eq!(s, 200, "{b}");
    assert!(b.contains("acked"), "{b}");
}

/// Stops `child` with SIGTERM and answers its exit code, which must come within `within`.
fn terminate(child: &mut std::process::Child, within: Duration) -> Option<i32> {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + within;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no exit within {within:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The image's working container and image, removed when dropped.
struct Image {
    tag: String,
    ctr: Option<String>,
}

impl Drop for Image {
    fn drop(&mut self) {
        if let Some(c) = &self.ctr {
            let _ = buildah().args(["umount", c]).output();
            let _ = buildah().args(["rm", c]).output();
        }
        let _ = buildah().args(["rmi", "-f", &self.tag]).output();
    }
}

#[test]
fn the_image_runs_as_its_user_with_its_store_in_the_volume() {
    let tag = format!("localhost/delayq-test:{}", std::process::id());
    let mut image = Image {
        tag: tag.clone(),
        ctr: None,
    };
    run(Command::new(root().join("scripts/image")).args([env!("CARGO_BIN_EXE_delayq"), &tag]));
    let inspect = run(buildah().args(["inspect", "--type", "image", &tag]));
    let inspect: Value = serde_json::from_str(&inspect).unwrap();
    let config = &inspect["Docker"]["config"];
    assert_eq!(config["User"], "10001:10001", "{config}");
    assert_eq!(config["StopSignal"], "SIGTERM");
    assert!(config["ExposedPorts"].get("7070").is_some(), "{config}");
    assert!(
        config["Volumes"].get("/var/lib/delayq").is_some(),
        "{config}"
    );
    let health: Vec<String> =
        serde_json::from_value(config["Healthcheck"]["Test"].clone()).unwrap();
    assert_eq!(health, ["CMD", "/usr/bin/delayq", "health"]);
    let entry: Vec<String> = serde_json::from_value(config["Entrypoint"].clone()).unwrap();
    let cmd: Vec<String> = serde_json::from_value(config["Cmd"].clone()).unwrap();
    let env: Vec<String> = serde_json::from_value(config["Env"].clone()).unwrap();

    // The image's file system, as a container would see it.
    let ctr = run(buildah().args(["from", &tag]));
    image.ctr = Some(ctr.clone());
    let fs = PathBuf::from(run(buildah().args(["mount", &ctr])));
    let secrets = fs.join("run/secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("tokens"), "admin:image-token\n").unwrap();
    // Mounted as a secret should be: the image's user reads it, no one else.
    let tokens = secrets.join("tokens");
    crate::common::chmod(&tokens, 0o400);
    std::os::unix::fs::chown(&tokens, Some(10001), Some(10001)).unwrap();
    let chroot = |args: &[String], listen: &str| {
        let mut c = Command::new("/usr/sbin/chroot");
        c.arg("--userspec=10001:10001")
            .arg(&fs)
            .args(args)
            .env_clear()
            .envs(env.iter().filter_map(|kv| kv.split_once('=')))
            // What an operator sets: the port (the image's 7070 may not be free here: any
            // free one, named on the first line) and a mounted secret.
            .env("DELAYQ_LISTEN", listen)
            .env("DELAYQ_TOKEN_FILE", "/run/secrets/tokens");
        c
    };
    let argv: Vec<String> = entry.iter().chain(&cmd).cloned().collect();
    let log = std::fs::File::create(fs.join("tmp/serve.log")).unwrap();
    let mut server = chroot(&argv, "0.0.0.0:0")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let first = crate::common::first_line(&mut server);
    let port = first
        .rsplit_once(':')
        .map(|(_, p)| p.trim_end_matches(|c: char| !c.is_ascii_digit()))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| {
            let log = std::fs::read_to_string(fs.join("tmp/serve.log")).unwrap_or_default();
            panic!("no address on the image's first line {first:?}; its log: {log}")
        });
    let addr = format!("127.0.0.1:{port}");
    until("the image's server answers /healthz", || {
        TcpStream::connect(&addr).is_ok()
    });
    let (s, b) = http(&addr, "GET", "/healthz", "", "");
    assert_eq!(s, 200, "{b}");
    assert!(b.contains(env!("CARGO_PKG_VERSION")), "{b}");
    // The HEALTHCHECK command, run in the image as Docker would.
    let mut probe: Vec<String> = health[1..].to_vec();
    probe.truncate(2);
    let o = chroot(&probe, &format!("0.0.0.0:{port}")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(http(&addr, "GET", "/v1/queues", "wrong", "").0, 401);
    round_trip(&addr, "image-token");
    // The embedded store lives in the volume, owned by the image's user.
    let data = fs.join("var/lib/delayq");
    let files: Vec<_> = std::fs::read_dir(&data).unwrap().flatten().collect();
    assert!(!files.is_empty(), "nothing in the volume");
    use std::os::unix::fs::MetadataExt;
    for f in &files {
        assert_eq!(f.metadata().unwrap().uid(), 10001, "{:?}", f.path());
    }
    assert_eq!(terminate(&mut server, Duration::from_secs(30)), Some(0));
    let log = std::fs::read_to_string(fs.join("tmp/serve.log")).unwrap();
    assert!(log.contains("delayq serve: stopped"), "{log}");
}

/// Purges the package when dropped (a failed test leaves the machine as it found it).
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "delayq"]).output();
        let _ = std::fs::remove_dir_all("/var/lib/delayq");
    }
}

/// `KEY=VALUE` lines of a unit's `[Service]` section.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_package_installs_runs_as_its_user_and_purges_to_its_data() {
    assert!(
        !Path::new("/var/lib/delayq").exists() && !Path::new("/usr/bin/delayq").exists(),
        "a delayq is installed on this machine already: this test installs and purges its own"
    );
    let out = tempfile::tempdir().unwrap();
    let deb = run(Command::new(root().join("scripts/package"))
        .args([env!("CARGO_BIN_EXE_delayq")])
        .arg(out.path()));
    let _installed = Installed;
    run(Command::new("dpkg").args(["-i", &deb]));
    let conffiles = std::fs::read_to_string("/var/lib/dpkg/info/delayq.conffiles").unwrap();
    assert_eq!(conffiles.trim(), "/etc/delayq/delayq.toml");
    for unit in ["delayq.service", "delayq-worker@.service"] {
        let o = Command::new("systemd-analyze")
            .args(["verify", &format!("/lib/systemd/system/{unit}")])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && said.trim().is_empty(),
            "{unit}: {said}"
        );
    }
    // The settings may hold secrets: root and the service's group only.
    let mode = run(Command::new("stat").args(["-c", "%a %U:%G", "/etc/delayq/delayq.toml"]));
    assert_eq!(mode, "640 root:delayq");
    // The binary is stripped: no symbol table, no debug sections.
    let sections = run(Command::new("readelf").args(["-S", "-W", "/usr/bin/delayq"]));
    for s in [".symtab", ".debug_info"] {
        assert!(!sections.contains(s), "/usr/bin/delayq has {s}");
    }
    let o = run(Command::new("/usr/bin/delayq").args([
        "config",
        "check",
        "--config",
        "/etc/delayq/delayq.toml",
    ]));
    assert!(o.contains("valid for delayq serve"), "{o}");
    let man = run(Command::new("sh").args(["-c", "zcat /usr/share/man/man1/delayq.1.gz"]));
    assert!(man.contains(".TH delayq 1"), "{man}");

    // The service's command, as its user, with its environment and working directory.
    let unit = std::fs::read_to_string("/lib/systemd/system/delayq.service").unwrap();
    let exec = unit_values(&unit, "ExecStart").remove(0);
    let user = unit_values(&unit, "User").remove(0);
    assert_eq!(user, "delayq");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // setpriv execs the command (as systemd does: SIGTERM reaches delayq itself).
    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args(["--reuid", &user, "--regid", &user, "--init-groups", "--"])
        .args(exec.split_whitespace())
        .current_dir(unit_values(&unit, "WorkingDirectory").remove(0))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        // An operator's drop-in: the port (7070 may be taken here).
        .env("DELAYQ_LISTEN", &addr)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for kv in unit_values(&unit, "Environment") {
        let (k, v) = kv.split_once('=').unwrap();
        cmd.env(k, v);
    }
    let mut server = cmd.spawn().unwrap();
    until("the service answers", || TcpStream::connect(&addr).is_ok());
    round_trip(&addr, "");
    let ps = run(Command::new("ps").args(["-o", "user=", "-C", "delayq"]));
    assert!(ps.lines().any(|u| u.trim() == "delayq"), "{ps}");
    assert_eq!(terminate(&mut server, Duration::from_secs(30)), Some(0));
    let store: Vec<_> = std::fs::read_dir("/var/lib/delayq")
        .unwrap()
        .flatten()
        .collect();
    assert!(!store.is_empty(), "the store is in the state directory");

    run(Command::new("dpkg").args(["--purge", "delayq"]));
    for gone in [
        "/usr/bin/delayq",
        "/etc/delayq",
        "/lib/systemd/system/delayq.service",
        "/lib/systemd/system/delayq-worker@.service",
        "/usr/share/man/man1/delayq.1.gz",
    ] {
        assert!(!Path::new(gone).exists(), "{gone} is left after purge");
    }
    let o = Command::new("getent")
        .args(["passwd", "delayq"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "the delayq user is left after purge");
    assert!(
        Path::new("/var/lib/delayq")
            .read_dir()
            .unwrap()
            .next()
            .is_some(),
        "purge keeps the data directory"
    );
}

/// Both units rate OK (at most 2.5) in `systemd-analyze security`, read offline from the
/// files the package installs.
#[test]
fn the_units_are_hardened() {
    for unit in ["delayq.service", "delayq-worker@.service"] {
        let path = root().join("deploy/systemd").join(unit);
        let o = Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager"])
            .arg(&path)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let level: f64 = out
            .lines()
            .find_map(|l| l.split_once("Overall exposure level for "))
            .and_then(|(_, rest)| rest.split_once(": "))
            .and_then(|(_, v)| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{unit}: no level in {out}"));
        assert!(level <= 2.5, "{unit}: exposure {level}\n{out}");
    }
}

/// Runs `delayq config check --for CMD` with `env` (secret file paths pointed at a temporary
/// file) and asserts every variable is taken as a setting.
fn env_is_understood(cmd: &str, env: &[(String, String)]) {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "admin:x\n").unwrap();
    crate::common::chmod(&secret, 0o600);
    let mut c = crate::common::delayq(tmp.path());
    c.args(["config", "check", "--for", cmd]);
    for (k, v) in env {
        let v = if k.ends_with("_FILE") {
            secret.display().to_string()
        } else {
            v.clone()
        };
        c.env(k, v);
    }
    let out = run(&mut c);
    for (k, _) in env {
        assert!(
            out.contains(&format!("# {k}\n")),
            "{cmd}: {k} is not a setting:\n{out}"
        );
    }
}

fn yaml_env(container: &serde_yaml_ng::Value) -> Vec<(String, String)> {
    match &container["env"] {
        serde_yaml_ng::Value::Mapping(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_owned(),
                    v.as_str().unwrap().to_owned(),
                )
            })
            .collect(),
        serde_yaml_ng::Value::Sequence(s) => s
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_owned(),
                    e["value"].as_str().unwrap().to_owned(),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn the_deploy_files_agree_with_the_binary_and_the_image() {
    let deploy = root().join("deploy");
    // Compose: every variable is a setting; Redis keeps jobs and lets delayq in by its rule.
    let compose: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(deploy.join("compose.yaml")).unwrap())
            .unwrap();
    let services = &compose["services"];
    let mut compose_env = yaml_env(&services["delayq"]["environment"].clone().into_env());
    env_is_understood("serve", &compose_env);
    compose_env = yaml_env(&services["worker"]["environment"].clone().into_env());
    env_is_understood("worker", &compose_env);
    let redis: Vec<&str> = services["redis"]["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for (flag, value) in [
        ("--appendonly", "yes"),
        ("--maxmemory-policy", "noeviction"),
    ] {
        let at = redis.iter().position(|a| *a == flag).expect(flag);
        assert_eq!(redis[at + 1], value);
    }
    let acl = std::fs::read_to_string(deploy.join("redis/users.acl")).unwrap();
    let user = acl.lines().find(|l| l.starts_with("user delayq ")).unwrap();
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        squash(user).ends_with(&squash(delayq_redis::ACL_RULE)),
        "users.acl's rule is not delayq_redis::ACL_RULE: {user}"
    );

    // Kubernetes: parsed, the image's user, port and probes; every variable a setting.
    let text = std::fs::read_to_string(deploy.join("k8s/delayq.yaml")).unwrap();
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Secret", "Deployment", "Deployment", "Service"]);
    let serve = &docs[1]["spec"]["template"]["spec"];
    assert_eq!(serve["securityContext"]["runAsUser"].as_u64(), Some(10001));
    let c = &serve["containers"][0];
    assert_eq!(c["ports"][0]["containerPort"].as_u64(), Some(7070));
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    env_is_understood("serve", &yaml_env(c));
    let worker = &docs[2]["spec"]["template"]["spec"]["containers"][0];
    env_is_understood("worker", &yaml_env(worker));

    // The build context carries no build output, history or secrets.
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    for path in ["target/", ".git/", "deploy/secrets/"] {
        assert!(ignore.lines().any(|l| l == path), ".dockerignore: {path}");
    }

    // The Dockerfile's runtime stage says what scripts/image builds.
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let image = std::fs::read_to_string(root().join("scripts/image")).unwrap();
    for (docker, buildah) in [
        ("USER 10001:10001", "--user 10001:10001"),
        ("EXPOSE 7070", "--port 7070"),
        ("VOLUME /var/lib/delayq", "--volume /var/lib/delayq"),
        ("STOPSIGNAL SIGTERM", "--stop-signal SIGTERM"),
        (
            "DELAYQ_DATA=/var/lib/delayq",
            "--env DELAYQ_DATA=/var/lib/delayq",
        ),
        (
            "DELAYQ_LISTEN=0.0.0.0:7070",
            "--env DELAYQ_LISTEN=0.0.0.0:7070",
        ),
        (
            r#"CMD ["/usr/bin/delayq", "health"]"#,
            "'CMD /usr/bin/delayq health'",
        ),
        (
            r#"ENTRYPOINT ["/usr/bin/delayq"]"#,
            r#"--entrypoint '["/usr/bin/delayq"]'"#,
        ),
        (r#"CMD ["serve"]"#, "--cmd serve"),
    ] {
        assert!(dockerfile.contains(docker), "Dockerfile: {docker}");
        assert!(image.contains(buildah), "scripts/image: {buildah}");
    }
}

/// Compose's `environment` as a mapping (it may be a list of `K=V`).
trait IntoEnv {
    fn into_env(self) -> serde_yaml_ng::Value;
}

impl IntoEnv for serde_yaml_ng::Value {
    fn into_env(self) -> serde_yaml_ng::Value {
        let mut m = serde_yaml_ng::Mapping::new();
        m.insert("env".into(), self);
        serde_yaml_ng::Value::Mapping(m)
    }
}

#[test]
fn delayq_backup_copies_a_serving_store_and_the_copy_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let delayq = || crate::common::delayq(dir);
    for i in 0..3 {
        let id = format!("b{i}");
        run(delayq().args(["enqueue", "--id", &id, "--delay", "1h", "--payload", "x"]));
    }
    let (_server, _addr) =
        crate::common::spawn_serve(delayq().args(["serve", "--listen", "127.0.0.1:0"]));
    let out = run(delayq().args(["backup", "snap"]));
    assert!(out.contains("backed up 3 job(s)"), "{out}");
    let o = delayq().args(["backup", "snap"]).output().unwrap();
    assert!(
        !o.status.success(),
        "a second backup into the same directory"
    );
    let got = run(delayq().args(["--data", "snap", "get", "b2", "--json"]));
    assert!(got.contains("\"state\":\"scheduled\""), "{got}");
    let o = delayq()
        .args(["--redis", "redis://127.0.0.1:1", "backup", "x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("persistence"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
