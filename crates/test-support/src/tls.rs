//! A `redis-server` that speaks TLS, with certificates made at test time by the `openssl`
//! command: a throwaway CA, a server certificate for `127.0.0.1`/`localhost`, and a client
//! certificate for mutual TLS. The plain port stays open on 127.0.0.1 for the harness's own
//! commands (`PING`, `ACL SETUSER`, …); clients under test use the TLS port.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::lifecycle::Stoppable;
use crate::{RedisServer, free_port};

/// A TLS server and its certificate files.
pub struct TlsServer {
    /// The server (its plain port is for the harness).
    pub server: RedisServer,
    tls_port: u16,
    certs: crate::Dir,
}

/// Certificate files of a [`TlsServer`].
pub struct Certs {
    /// The CA that signed both certificates.
    pub ca: PathBuf,
    /// Client certificate.
    pub client_cert: PathBuf,
    /// Client key.
    pub client_key: PathBuf,
}

/// Runs `openssl` in `dir` with `args` (words separated by spaces; none holds a space).
fn openssl(dir: &Path, args: &str) {
    let out = Command::new("openssl")
        .args(args.split(' '))
        .current_dir(dir)
        .output()
        .expect("openssl not runnable (is it installed?)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes `name.key` and `name.crt` signed by the CA in `dir`.
fn issue(dir: &Path, name: &str, ext: &str) {
    let key = format!("{name}.key");
    let csr = format!("{name}.csr");
    let crt = format!("{name}.crt");
    let extfile = format!("{name}.ext");
    std::fs::write(dir.join(&extfile), ext).expect("ext file");
    let (ec, subj) = (
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1",
        format!("/CN={name}"),
    );
    openssl(
        dir,
        &format!("req {ec} -nodes -keyout {key} -out {csr} -subj {subj}"),
    );
    openssl(
        dir,
        &format!(
            "x509 -req -in {csr} -CA ca.crt -CAkey ca.key -CAcreateserial -out {crt} -days 2 \
             -extfile {extfile}"
        ),
    );
}

/// A throwaway CA (`ca.crt`, `ca.key`), a server certificate for `127.0.0.1` / `localhost`
/// (`server.crt`, `server.key`) and a client certificate (`client.crt`, `client.key`), in a
/// temporary directory that lives as long as the returned guard.
pub fn make_certs() -> tempfile::TempDir {
    let certs = tempfile::tempdir().expect("temp dir");
    let d = certs.path();
    openssl(
        d,
        "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
         -out ca.crt -days 2 -subj /CN=delayq-test-ca",
    );
    issue(
        d,
        "server",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    );
    issue(d, "client", "extendedKeyUsage=clientAuth\n");
    certs
}

impl TlsServer {
    /// Starts a server with a TLS port (client certificates optional: mutual TLS works, and
    /// so does a client that only trusts the CA).
    pub fn start() -> Self {
        let certs = make_certs();
        let d = certs.path();
        let tls_port = free_port();
        let p = |f: &str| d.join(f).to_string_lossy().into_owned();
        let server = RedisServer::start_with(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &p("server.crt"),
            "--tls-key-file",
            &p("server.key"),
            "--tls-ca-cert-file",
            &p("ca.crt"),
            "--tls-auth-clients",
            "optional",
        ]);
        Self {
            server,
            tls_port,
            certs: crate::Dir::Own(certs),
        }
    }

    /// `rediss://[user:password@]127.0.0.1:<tls port>`.
    pub fn url(&self, auth: Option<(&str, &str)>) -> String {
        match auth {
            Some((u, p)) => format!("rediss://{u}:{p}@127.0.0.1:{}", self.tls_port),
            None => format!("rediss://127.0.0.1:{}", self.tls_port),
        }
    }

    /// The TLS port.
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// The directory of the certificate files.
    pub fn certs_dir(&self) -> &Path {
        self.certs.path()
    }

    /// The certificate files.
    pub fn certs(&self) -> Certs {
        let d = self.certs.path();
        Certs {
            ca: d.join("ca.crt"),
            client_cert: d.join("client.crt"),
            client_key: d.join("client.key"),
        }
    }
}

impl Stoppable for TlsServer {
    fn leftovers(&self) -> (Vec<u32>, Vec<PathBuf>) {
        let (p, mut d) = self.server.leftovers();
        d.push(self.certs_dir().to_path_buf());
        (p, d)
    }
    /// Lines that [`TlsServer::attach`] reads back in another process.
    fn describe(&self) -> String {
        format!(
            "{}\n{} {}",
            self.server.describe(),
            self.tls_port,
            self.certs.path().display()
        )
    }

    /// The server [`TlsServer::describe`] names, started by another process.
    fn attach(text: &str) -> Self {
        let (server, tls) = text.split_once('\n').expect("a described TLS server");
        let (port, certs) = tls.split_once(' ').expect("TLS port and certificates");
        Self {
            server: RedisServer::attach(server),
            tls_port: port.parse().expect("TLS port"),
            certs: crate::Dir::Kept(PathBuf::from(certs)),
        }
    }
}
