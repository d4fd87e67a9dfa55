//! Reaching PostgreSQL: the connection string (`postgres://user:pass@host:port/db?…`, or the
//! `key=value` form; a Unix socket by `host=/path`), a password kept apart (a password file),
//! and TLS. delayq speaks TLS when the URL asks for it (`sslmode=require` or `prefer`) and then
//! always verifies the server's certificate — against `--postgres-ca` when given, else the
//! system's roots; without `sslmode` it connects in plain text (loopback, a Unix socket).
//! Each connection's driver runs on a task of its own; a notification on it wakes the
//! [`tokio::sync::Notify`] the caller passed.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt as _;
use tokio::sync::Notify;
use tokio_postgres::config::SslMode;
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

use crate::Error;

/// How to reach PostgreSQL.
#[derive(Clone, Debug)]
pub struct PgOptions {
    url: String,
    password: Option<String>,
    ca: Option<PathBuf>,
}

impl PgOptions {
    /// The database `url` names.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            ca: None,
        }
    }

    /// The password to use instead of the URL's (read from a password file).
    pub fn password(mut self, password: Option<String>) -> Self {
        self.password = password;
        self
    }

    /// The PEM file of the CA that signed the server's certificate.
    pub fn ca(mut self, ca: Option<PathBuf>) -> Self {
        self.ca = ca;
        self
    }

    /// The URL with its password hidden, for messages.
    pub fn masked(&self) -> String {
        mask(&self.url)
    }

    /// The parsed settings (application name `delayq`, the password apart applied).
    pub fn config(&self) -> Result<Config, Error> {
        let mut c: Config = self
            .url
            .parse()
            .map_err(|e| Error::Settings(format!("{}: {e}", self.masked())))?;
        if c.get_application_name().is_none() {
            c.application_name("delayq");
        }
        if let Some(p) = &self.password {
            c.password(p.as_bytes());
        }
        if c.get_connect_timeout().is_none() {
            c.connect_timeout(std::time::Duration::from_secs(5));
        }
        Ok(c)
    }

    /// Whether the URL asks for TLS.
    fn wants_tls(&self, c: &Config) -> bool {
        self.url.contains("sslmode") && c.get_ssl_mode() != SslMode::Disable
    }

    /// Checks the settings and TLS files without connecting.
    pub fn check(&self) -> Result<(), Error> {
        let c = self.config()?;
        if self.wants_tls(&c) {
            self.tls()?;
        } else if self.ca.is_some() {
            return Err(Error::Tls(
                "--postgres-ca given for a URL without TLS: add sslmode=require".into(),
            ));
        }
        Ok(())
    }

    /// Connects; the connection's notifications wake `notify`, when given.
    pub async fn connect(&self, notify: Option<Arc<Notify>>) -> Result<Client, Error> {
        let c = self.config()?;
        if self.wants_tls(&c) {
            let (client, conn) = c.connect(self.tls()?).await?;
            tokio::spawn(drive(conn, notify));
            Ok(client)
        } else {
            let (client, conn) = c.connect(NoTls).await?;
            tokio::spawn(drive(conn, notify));
            Ok(client)
        }
    }

    /// A pool of up to `size` connections (made as needed, checked before reuse).
    pub fn pool(&self, size: usize) -> Result<deadpool_postgres::Pool, Error> {
        use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
        let c = self.config()?;
        let mc = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let mgr = if self.wants_tls(&c) {
            Manager::from_config(c, self.tls()?, mc)
        } else {
            Manager::from_config(c, NoTls, mc)
        };
        Pool::builder(mgr)
            .max_size(size)
            .build()
            .map_err(|e| Error::Pool(e.to_string()))
    }

    fn tls(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, Error> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca {
            Some(path) => {
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                    .and_then(|i| i.collect())
                    .map_err(|e| {
                        Error::Tls(format!("{}: not a PEM CA certificate: {e}", path.display()))
                    })?;
                if certs.is_empty() {
                    return Err(Error::Tls(format!(
                        "{}: no certificate in the file",
                        path.display()
                    )));
                }
                for cert in certs {
                    roots
                        .add(cert)
                        .map_err(|e| Error::Tls(format!("{}: {e}", path.display())))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

/// Polls a connection until it ends, waking `notify` on each notification.
async fn drive<S, T>(mut conn: tokio_postgres::Connection<S, T>, notify: Option<Arc<Notify>>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
    while let Some(m) = messages.next().await {
        match m {
            Ok(AsyncMessage::Notification(_)) => {
                if let Some(n) = &notify {
                    n.notify_one();
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!("postgres connection ended: {e}");
                break;
            }
        }
    }
    // The client sees the connection closed; a waiter re-checks at once.
    if let Some(n) = &notify {
        n.notify_one();
    }
}

/// `url` with the password of its user-info part replaced by `***`.
fn mask(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url
            .split_whitespace()
            .map(|kv| match kv.split_once('=') {
                Some(("password", _)) => "password=***".to_owned(),
                _ => kv.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, rest),
    };
    match auth.and_then(|a| a.split_once(':')) {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_in_both_forms() {
        assert_eq!(
            mask("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(mask("postgres://db/x"), "postgres://db/x");
        assert_eq!(
            mask("host=db user=app password=s3cret"),
            "host=db user=app password=***"
        );
    }

    #[test]
    fn a_ca_without_tls_and_a_bad_url_are_refused_before_connecting() {
        let e = PgOptions::new("postgres://h/db")
            .ca(Some("/nonexistent.pem".into()))
            .check()
            .unwrap_err();
        assert!(e.to_string().contains("sslmode=require"), "{e}");
        let e = PgOptions::new("postgres://h:notaport/db")
            .check()
            .unwrap_err();
        assert!(matches!(e, Error::Settings(_)), "{e}");
        let e = PgOptions::new("postgres://h/db?sslmode=require")
            .ca(Some("/nonexistent.pem".into()))
            .check()
            .unwrap_err();
        assert!(matches!(e, Error::Tls(_)) && e.to_string().contains("/nonexistent.pem"));
        PgOptions::new("postgres://u:p@h/db?sslmode=require")
            .check()
            .expect("the system's roots");
    }
}
