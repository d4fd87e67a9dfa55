//! What several CLI test files share: the `delayq` binary with none of the environment's
//! settings, a `delayq serve` child that stops with the test, and where it listens.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The repository's root (an absolute path without `..`).
#[allow(dead_code)] // not every test file reads the tree
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `python3` with the Python client's sources and tests on its path (`PYTHONPATH`), no
/// bytecode written into the tree.
#[allow(dead_code)] // not every test file runs Python
pub(crate) fn python3() -> Command {
    let pkg = root().join("clients/python");
    // scripts/test's virtual environment (httpx for the AsyncClient), else the system's.
    let python = std::env::var("DELAYQ_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut c = Command::new(python);
    let path = format!(
        "{}:{}",
        pkg.join("src").display(),
        pkg.join("tests").display()
    );
    c.env("PYTHONPATH", path)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    c
}

/// What a command wrote, standard output then standard error.
#[allow(dead_code)] // not every test file reads output
pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `cmd`, which must succeed (else the test fails with what it wrote); its standard
/// output.
#[allow(dead_code)] // not every test file runs tools
pub(crate) fn succeeds(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The first line `child` writes to its piped standard output; the rest keeps being read (a
/// closed pipe would end it).
#[allow(dead_code)] // not every test file starts a server
pub(crate) fn first_line(child: &mut Child) -> String {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    first
}

/// `delayq` run in `dir`, deaf to the environment's store, server and token settings.
#[allow(dead_code)] // not every test file builds its commands here
pub(crate) fn delayq(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_delayq"));
    c.current_dir(dir);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("DELAYQ_") {
            c.env_remove(k);
        }
    }
    c
}

/// A child process stopped (SIGTERM, then waited for) when dropped; `kill()` it for SIGKILL.
pub(crate) struct Killed(pub(crate) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` (a `delayq … serve …`) and returns it with its first line of output. The rest
/// keeps being read (a closed pipe would end it).
#[allow(dead_code)] // not every test file starts a server
pub(crate) fn spawn_serve_line(cmd: &mut Command) -> (Killed, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = first_line(&mut child);
    (Killed(child), first)
}

/// Starts `cmd` (a `delayq … serve --listen 127.0.0.1:0 …`) and returns it with the
/// `host:port` its first line names.
#[allow(dead_code)] // not every test file starts a server
pub(crate) fn spawn_serve(cmd: &mut Command) -> (Killed, String) {
    let (child, first) = spawn_serve_line(cmd);
    let addr = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .to_owned();
    (child, addr)
}

/// One HTTP/1.1 request to `addr` (`host:port`) with extra `headers`: (status, body).
#[allow(dead_code)] // not every test file talks HTTP
pub(crate) fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        extra.insert_str(0, "host: localhost\r\n");
    }
    let req = format!(
        "{method} {path} HTTP/1.1\r\n{extra}content-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_owned())
}

/// Runs `cmd` with `stdin` written to its standard input; its output.
#[allow(dead_code)] // not every test file writes to stdin
pub(crate) fn with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Polls `f` every 20 ms until it holds; panics naming `what` after 30 s.
#[allow(dead_code)] // not every test file waits
pub(crate) fn until(what: &str, f: impl FnMut() -> bool) {
    assert!(
        holds_within(std::time::Duration::from_secs(30), f),
        "timed out: {what}"
    );
}

/// Polls `f` every 20 ms until it holds (`true`) or `within` has passed (`false`).
#[allow(dead_code)] // not every test file waits
pub(crate) fn holds_within(within: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A free loopback port (bound and released).
#[allow(dead_code)] // not every test file needs one
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A clock this test moves and the processes it starts follow: they get
/// `DELAYQ_TEST_CLOCK=<file>` ([`SharedClock::env`]), and [`SharedClock::advance`] moves them
/// (the test binary's `delayq` is built with the test clock; a release build ignores it).
#[allow(dead_code)] // not every test file moves time
pub(crate) struct SharedClock {
    /// The test's own clock (give it to in-process backends too).
    pub(crate) clock: delayq::TestClock,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

#[allow(dead_code)] // not every test file moves time
impl SharedClock {
    /// A clock at the system's time, published for the processes started with [`Self::env`].
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("clock");
        let clock = delayq::TestClock::new();
        clock.publish(&file).unwrap();
        Self {
            clock,
            file,
            _dir: dir,
        }
    }

    /// The variable and value that make a started process follow this clock.
    pub(crate) fn env(&self) -> (&'static str, &Path) {
        (delayq::clock::TEST_CLOCK_ENV, &self.file)
    }

    /// Moves this clock and every process following it `by` forward.
    pub(crate) fn advance(&self, by: std::time::Duration) {
        self.clock.advance(by);
        self.clock.publish(&self.file).unwrap();
    }
}

/// Sets `path`'s mode (a secret file: delayq refuses one that every user can read).
#[allow(dead_code)] // not every test file writes secret files
pub(crate) fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
