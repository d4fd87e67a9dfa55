//! An HTTP receiver for push tests and the push bench: an axum server on a free loopback port
//! that records every request and answers by path — `/ok…` 200, `/nocontent…` 204, `/fail…`
//! 500 with a body, `/busy…` 503 with `Retry-After: 2` to the first request of each
//! `webhook-id` and 200 after, `/limited…` likewise with 429 and `Retry-After: 60`, `/brief…`
//! 200 after 50 ms, `/slow…` 200 after 2 s — plus a second port that accepts
//! connections and closes them without answering; and, with [`Receiver::start_tls`], a TLS
//! port that offers HTTP/2.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    /// The path.
    pub path: String,
    /// Headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// When it arrived.
    pub at: SystemTime,
    /// The HTTP version (`HTTP/1.1`, `HTTP/2.0`).
    pub version: String,
}

impl Received {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Seen {
    requests: Vec<Received>,
    busy_once: HashSet<String>,
    /// With `record` off (the bench), only a count.
    count: u64,
}

/// A running receiver; stops when dropped.
pub struct Receiver {
    addr: SocketAddr,
    closing: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Sees each request as it arrives.
pub type OnRequest = Arc<dyn Fn(&Received) + Send + Sync>;

type Shared = (Arc<Mutex<Seen>>, bool, Option<OnRequest>);

impl Receiver {
    /// Starts one that records every request.
    pub async fn start() -> Self {
        Self::start_with(true, None).await
    }

    /// Starts one; `record` off keeps only a count, and `on_request` sees each request as it
    /// arrives (the bench measures lateness there).
    pub async fn start_with(record: bool, on_request: Option<OnRequest>) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared: Shared = (seen.clone(), record, on_request);
        let app = Router::new().fallback(answer).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let closer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closing = closer.local_addr().unwrap();
        let close = tokio::spawn(async move {
            while let Ok((sock, _)) = closer.accept().await {
                drop(sock);
            }
        });
        Self {
            addr,
            closing,
            seen,
            tasks: vec![server, close],
        }
    }

    /// Starts one that records every request on a TLS port (`https_url`) besides its plain
    /// one, with `cert` / `key` (PEM; e.g. `server.crt` of [`crate::tls::make_certs`]); it
    /// offers HTTP/2 and HTTP/1.1 by ALPN.
    pub async fn start_tls(cert: &std::path::Path, key: &std::path::Path) -> (Self, String) {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut r = Self::start().await;
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("cert file")
            .collect::<Result<_, _>>()
            .expect("certs");
        let key = PrivateKeyDer::from_pem_file(key).expect("key file");
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server certificate");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let shared: Shared = (r.seen.clone(), true, None);
        let app = Router::new().fallback(answer).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        r.tasks.push(tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(sock).await else {
                        return;
                    };
                    let service = hyper_util::service::TowerToHyperService::new(app);
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
                });
            }
        }));
        (r, format!("https://localhost:{port}"))
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The same path on `localhost` (a name, for the resolver's checks).
    pub fn url_by_name(&self, path: &str) -> String {
        format!("http://localhost:{}{path}", self.addr.port())
    }

    /// A URL whose server closes every connection without answering.
    pub fn closing_url(&self) -> String {
        format!("http://{}/closed", self.closing)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Received> {
        self.seen.lock().unwrap().requests.clone()
    }

    /// Requests so far (also when not recording).
    pub fn count(&self) -> u64 {
        self.seen.lock().unwrap().count
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn answer(
    State((seen, record, hook)): State<Shared>,
    version: axum::http::Version,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let r = Received {
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
        at: SystemTime::now(),
        version: format!("{version:?}"),
    };
    if let Some(h) = &hook {
        h(&r);
    }
    let path = r.path.clone();
    let first_busy = {
        let mut s = seen.lock().unwrap();
        s.count += 1;
        let first = (path.starts_with("/busy") || path.starts_with("/limited"))
            && s.busy_once
                .insert(r.header("webhook-id").unwrap_or_default().to_owned());
        if record {
            s.requests.push(r);
        }
        first
    };
    if path.starts_with("/nocontent") {
        StatusCode::NO_CONTENT.into_response()
    } else if path.starts_with("/fail") {
        (StatusCode::INTERNAL_SERVER_ERROR, "boom from the receiver").into_response()
    } else if path.starts_with("/busy") && first_busy {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "2")],
            "busy",
        )
            .into_response()
    } else if path.starts_with("/limited") && first_busy {
        (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "60")],
            "slow down",
        )
            .into_response()
    } else if path.starts_with("/brief") {
        tokio::time::sleep(Duration::from_millis(50)).await;
        (StatusCode::OK, "ok").into_response()
    } else if path.starts_with("/slow") {
        // Longer than the push timeouts the tests set: the pusher gives up first.
        tokio::time::sleep(Duration::from_secs(2)).await;
        (StatusCode::OK, "late").into_response()
    } else {
        (StatusCode::OK, "ok").into_response()
    }
}
