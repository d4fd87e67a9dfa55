//! A throwaway PostgreSQL server: `initdb` into a temporary directory, `postgres` on a free
//! port of 127.0.0.1 (its Unix socket in the same directory, never the system's), ready when
//! returned, killed when dropped. Run as root (CI), both run as the `postgres` user, which
//! the distribution's package creates. The superuser `postgres` has password
//! [`PG_PASSWORD`] (scram over TCP, so a wrong password is refused); TLS is on with a
//! throwaway CA ([`crate::tls::make_certs`]), so a client may use `sslmode=require` with
//! [`PgServer::ca`]. [`PgServer::database`] makes a fresh database per test; the relay of
//! each test then sees only its own outbox.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Dir;
use crate::lifecycle::{DetachIfShared as _, Stoppable};

/// The superuser's password.
pub const PG_PASSWORD: &str = "pg-s3cret";

/// A running PostgreSQL server owned by a test, or attached to one another test process of
/// the run started ([`crate::shared`]).
pub struct PgServer {
    child: Option<Child>,
    attached: Option<u32>,
    port: u16,
    dir: Dir,
    bin: PathBuf,
}

/// The directory of the PostgreSQL programs: `initdb` on `PATH`'s directory, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian keeps them off `PATH`).
pub fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("initdb").exists() && d.join("postgres").exists())
    })
}

/// The `postgres` user's uid and gid, when this process runs as root (PostgreSQL refuses to
/// run as root).
fn as_user() -> Option<(u32, u32)> {
    let out = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&out.stdout).trim() != "0" {
        return None;
    }
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some((
        id("-u").expect("a `postgres` user (the postgresql package makes it)"),
        id("-g").expect("the postgres group"),
    ))
}

fn command(bin: &Path, program: &str) -> Command {
    use std::os::unix::process::CommandExt as _;
    let mut c = Command::new(bin.join(program));
    if let Some((uid, gid)) = as_user() {
        c.uid(uid).gid(gid);
    }
    c
}

impl PgServer {
    /// Makes a cluster and starts it; panics with the reason when it cannot.
    pub fn start() -> Self {
        let bin = bin_dir().expect(
            "PostgreSQL is not installed (scripts/test installs the distribution's `postgresql`)",
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let certs = crate::tls::make_certs();
        for f in ["ca.crt", "server.crt", "server.key"] {
            std::fs::copy(certs.path().join(f), dir.path().join(f)).expect("certs");
        }
        std::fs::write(dir.path().join("pwfile"), PG_PASSWORD).expect("pwfile");
        if let Some((uid, gid)) = as_user() {
            for p in ["", "server.key", "server.crt", "ca.crt", "pwfile"] {
                std::os::unix::fs::chown(dir.path().join(p), Some(uid), Some(gid))
                    .expect("chown to postgres");
            }
        }
        {
            use std::os::unix::fs::PermissionsExt as _;
            let key = dir.path().join("server.key");
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("key");
        }
        let out = command(&bin, "initdb")
            .args(["-D", &data.to_string_lossy()])
            .args([
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .args(["--pwfile", &dir.path().join("pwfile").to_string_lossy()])
            .args(["--no-sync", "-E", "UTF8", "--locale=C"])
            .output()
            .expect("initdb runnable");
        assert!(
            out.status.success(),
            "initdb: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut s = Self {
            child: None,
            attached: None,
            port: crate::free_port(),
            dir: Dir::Own(dir),
            bin,
        };
        let mut last = String::new();
        for _ in 0..20 {
            match s.spawn() {
                Ok(()) => return s,
                Err(e) => {
                    last = e;
                    s.port = crate::free_port();
                }
            }
        }
        panic!("could not start postgres: {last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let d = self.dir.path().to_path_buf();
        let p = |f: &str| d.join(f).to_string_lossy().into_owned();
        let child = command(&self.bin, "postgres")
            .args(["-D", &p("data"), "-p", &self.port.to_string(), "-k", &p("")])
            .args(["-c", "listen_addresses=127.0.0.1"])
            // Durable across a kill of the server (the OS keeps what it wrote), not a power
            // cut: enough for tests, much faster.
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=300", "-c", "shared_buffers=64MB"])
            .args([
                "-c",
                "ssl=on",
                "-c",
                &format!("ssl_cert_file={}", p("server.crt")),
            ])
            .args(["-c", &format!("ssl_key_file={}", p("server.key"))])
            .args(["-c", "logging_collector=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(d.join("postgres.log"))
                    .map(Stdio::from)
                    .unwrap_or(Stdio::null()),
            )
            .detached_if_shared()
            .spawn()
            .map_err(|e| format!("postgres not runnable: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!("postgres exited with {status}: {}", self.log()));
            }
            if self.ready() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        Err(format!("postgres not ready within 30 s: {}", self.log()))
    }

    fn ready(&self) -> bool {
        Command::new(self.bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The last lines of the server's log.
    pub fn log(&self) -> String {
        let text =
            std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The URL of database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://postgres:{PG_PASSWORD}@127.0.0.1:{}/{db}",
            self.port
        )
    }

    /// The URL of database `db` without the password (give it apart).
    pub fn url_without_password(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PEM file of the CA that signed the server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// Runs `sql` in database `db` with `psql` (as the superuser, over the Unix socket);
    /// returns its output, unaligned and without headers (`|` between columns).
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", &self.dir.path().to_string_lossy()])
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", db])
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// A fresh database of its own for one test; returns its name.
    pub fn database(&self) -> String {
        let name = crate::shared::namespace().to_lowercase();
        self.psql("postgres", &format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        name
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id).or(self.attached)
    }

    /// Kills the server with SIGKILL, as a crash would (its backends end with it).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server and starts it again on the same port and data (crash recovery).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Backends of the killed server end on their own; until then the new one may
            // find the shared memory in use.
            match self.spawn() {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => panic!("postgres restart failed: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Stoppable for PgServer {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        (
            self.pid().into_iter().collect(),
            vec![self.dir.path().to_path_buf()],
        )
    }

    fn describe(&self) -> String {
        format!(
            "{} {} {}\n{}",
            self.port,
            self.pid().unwrap_or(0),
            self.dir.path().display(),
            self.bin.display()
        )
    }

    fn attach(text: &str) -> Self {
        let (first, bin) = text.split_once('\n').expect("a described server");
        let mut parts = first.splitn(3, ' ');
        let mut next = || parts.next().expect("a described server");
        let port = next().parse().expect("port");
        let pid = next().parse().expect("pid");
        Self {
            child: None,
            attached: Some(pid),
            port,
            dir: Dir::Kept(PathBuf::from(next())),
            bin: PathBuf::from(bin),
        }
    }
}
