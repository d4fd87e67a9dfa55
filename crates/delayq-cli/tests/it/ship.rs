//! Shipping: the runtime image (built by `scripts/image` with buildah, run under chroot as its
//! user with its environment — no container runtime runs here) and the Debian package
//! (`scripts/package`, installed with dpkg, its service's command run as its user, purged).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

fn buildah() -> Command {
    let mut c = Command::new("buildah");
    c.env("STORAGE_DRIVER", "vfs");
    c
}

fn http(addr: &str, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
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
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let secrets = fs.join("run/secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("tokens"), "admin:image-token\n").unwrap();
    let chroot = |args: &[String]| {
        let mut c = Command::new("/usr/sbin/chroot");
        c.arg("--userspec=10001:10001")
            .arg(&fs)
            .args(args)
            .env_clear()
            .envs(env.iter().filter_map(|kv| kv.split_once('=')))
            // What an operator sets: the port (the image's 7070 is not free here) and a
            // mounted secret.
            .env("DELAYQ_LISTEN", format!("0.0.0.0:{port}"))
            .env("DELAYQ_TOKEN_FILE", "/run/secrets/tokens");
        c
    };
    let argv: Vec<String> = entry.iter().chain(&cmd).cloned().collect();
    let log = std::fs::File::create(fs.join("tmp/serve.log")).unwrap();
    let mut server = chroot(&argv)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    until("the image's server answers /healthz", || {
        TcpStream::connect(&addr).is_ok()
    });
    let (s, b) = http(&addr, "GET", "/healthz", "", "");
    assert_eq!(s, 200, "{b}");
    assert!(b.contains(env!("CARGO_PKG_VERSION")), "{b}");
    // The HEALTHCHECK command, run in the image as Docker would.
    let mut probe: Vec<String> = health[1..].to_vec();
    probe.truncate(2);
    let o = chroot(&probe).output().unwrap();
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
