//! The pusher's HTTP client: one pooled `reqwest` client (HTTP/1.1 keep-alive, HTTP/2 where
//! the server offers it by ALPN, rustls with the system's roots plus an optional CA), no
//! redirects, no proxies from the environment, and a resolver that applies the SSRF rules of
//! [`crate::ssrf`] to every address it would connect to.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::ssrf::{self, Refused};

/// Errors setting up a pusher.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The CA file could not be read or is not PEM.
    #[error("push CA file {path}: {reason}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(String),
    /// An option is out of range.
    #[error("invalid pusher option: {0}")]
    Option(String),
}

/// A name whose every address is refused by the SSRF rules.
#[derive(Debug, thiserror::Error)]
#[error(
    "{host} resolves only to refused addresses ({addr} is {why}); allow private targets to reach it"
)]
pub struct RefusedTarget {
    /// The host name or address.
    pub host: String,
    /// The first refused address.
    pub addr: IpAddr,
    /// Why.
    pub why: Refused,
}

/// Resolves with the system resolver and keeps the addresses the SSRF rules allow.
struct CheckedResolver {
    allow_private: bool,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let all: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refused = None;
            let ok: Vec<SocketAddr> = all
                .into_iter()
                .filter(|a| match ssrf::check(a.ip(), allow) {
                    Ok(()) => true,
                    Err(why) => {
                        first_refused.get_or_insert((a.ip(), why));
                        false
                    }
                })
                .collect();
            if ok.is_empty()
                && let Some((addr, why)) = first_refused
            {
                return Err(Box::new(RefusedTarget { host, addr, why }) as _);
            }
            let addrs: Addrs = Box::new(ok.into_iter());
            Ok(addrs)
        })
    }
}

/// Checks a URL whose host is an IP address (the resolver never sees those).
pub fn check_literal(url: &reqwest::Url, allow_private: bool) -> Result<(), RefusedTarget> {
    let ip = match url.host() {
        Some(url::Host::Ipv4(a)) => IpAddr::V4(a),
        Some(url::Host::Ipv6(a)) => IpAddr::V6(a),
        _ => return Ok(()),
    };
    ssrf::check(ip, allow_private).map_err(|why| RefusedTarget {
        host: ip.to_string(),
        addr: ip,
        why,
    })
}

/// Whether a pusher that does not allow private targets would refuse `url` whatever DNS says:
/// an address literal on a refused network, or a `localhost` name. Checked at enqueue, so such
/// a job is refused then (its resolved names are still checked at delivery). The message names
/// `--allow-private-targets`.
pub fn refused_at_enqueue(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed
        .host_str()?
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let why = if host == "localhost" || host.ends_with(".localhost") {
        Some(Refused::Loopback.to_string())
    } else {
        check_literal(&parsed, false)
            .err()
            .map(|r| r.why.to_string())
    };
    why.map(|why| {
        format!(
            "target host {host} is {why}: this server's pusher refuses it (serve with \
             --allow-private-targets to deliver to private networks)"
        )
    })
}

/// Builds the client.
pub(crate) fn build(
    allow_private: bool,
    ca: Option<&PathBuf>,
    connect_timeout: Duration,
    per_host: usize,
) -> Result<reqwest::Client, PushError> {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_native_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(CheckedResolver { allow_private }))
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(per_host)
        .tcp_keepalive(Duration::from_secs(60))
        .tcp_nodelay(true)
        .user_agent(concat!("delayq/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = ca {
        let pem = std::fs::read(path).map_err(|e| PushError::Ca {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| PushError::Ca {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if certs.is_empty() {
            return Err(PushError::Ca {
                path: path.clone(),
                reason: "no certificate in it".into(),
            });
        }
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.build().map_err(|e| PushError::Client(e.to_string()))
}

/// The SSRF refusal inside a request error, if that is what it was.
pub(crate) fn refusal(e: &reqwest::Error) -> Option<&RefusedTarget> {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(r) = s.downcast_ref::<RefusedTarget>() {
            return Some(r);
        }
        src = s.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_addresses_are_checked() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(check_literal(&u("http://127.0.0.1:8080/x"), false).is_err());
        assert!(check_literal(&u("http://[::1]/x"), false).is_err());
        assert!(check_literal(&u("http://169.254.169.254/latest"), false).is_err());
        assert!(check_literal(&u("http://127.0.0.1/x"), true).is_ok());
        assert!(check_literal(&u("https://8.8.8.8/x"), false).is_ok());
        assert!(
            check_literal(&u("https://example.com/x"), false).is_ok(),
            "names: resolver"
        );
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_refused() {
        let r = CheckedResolver {
            allow_private: false,
        };
        let err = match r.resolve("localhost".parse().unwrap()).await {
            Err(e) => e,
            Ok(_) => panic!("localhost must be refused"),
        };
        assert!(err.downcast_ref::<RefusedTarget>().is_some(), "{err}");
        let open = CheckedResolver {
            allow_private: true,
        };
        let addrs: Vec<_> = match open.resolve("localhost".parse().unwrap()).await {
            Ok(a) => a.collect(),
            Err(e) => panic!("{e}"),
        };
        assert!(!addrs.is_empty());
    }
}
