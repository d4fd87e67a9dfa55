//! The Rust client end to end against a real `delayq serve` router in this process: the core's
//! whole conformance suite run through [`delayq_client::RemoteBackend`] (so `Producer` and
//! `Consumer` work over HTTP unchanged), and the client's own calls and errors.

mod calls;
mod conformance;
mod scenarios;

use std::net::SocketAddr;
use std::sync::Arc;

use delayq::TestClock;
use delayq_embedded::EmbeddedBackend;
use delayq_http::{AppState, HttpConfig};

/// A server on a free port over a fresh embedded store with a test clock; it stops when the
/// guard drops.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The store's clock.
    pub clock: TestClock,
    _dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    /// Starts one with `config`.
    pub async fn start(config: HttpConfig) -> Self {
        Self::start_on("127.0.0.1:0".parse().unwrap(), config).await
    }

    /// Starts one on `addr` with `config`.
    pub async fn start_on(addr: SocketAddr, config: HttpConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = TestClock::new();
        let backend =
            EmbeddedBackend::open_with_clock(dir.path(), Arc::new(clock.clone())).unwrap();
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let state = AppState::new(backend, config, None);
        tokio::spawn(delayq_http::serve(listener, state, async {
            let _ = rx.await;
        }));
        Self {
            url: format!("http://{addr}"),
            clock,
            _dir: dir,
            _stop: stop,
        }
    }
}

/// Serves `backend` on a free port until the sender is dropped; its base URL.
pub async fn serve<B>(backend: B) -> (String, tokio::sync::oneshot::Sender<()>)
where
    B: delayq::Backend + delayq::Inspect + delayq::Schedules + delayq::Batches,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_on(listener, backend, HttpConfig::default())
}

fn serve_on<B>(
    listener: tokio::net::TcpListener,
    backend: B,
    config: HttpConfig,
) -> (String, tokio::sync::oneshot::Sender<()>)
where
    B: delayq::Backend + delayq::Inspect + delayq::Schedules + delayq::Batches,
{
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let state = AppState::new(backend, config, None);
    tokio::spawn(delayq_http::serve(listener, state, async {
        let _ = rx.await;
    }));
    (format!("http://{addr}"), stop)
}
