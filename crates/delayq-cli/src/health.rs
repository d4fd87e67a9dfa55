//! `delayq health`: exit 0 only when a `delayq serve` answers `/readyz` 200 — the probe of a
//! container image that carries no curl.

/// Probes `url` (default: the `listen` address of the settings, else 127.0.0.1:7070).
pub(crate) async fn run(url: Option<&str>) -> anyhow::Result<u8> {
    let url = match url {
        Some(u) => u.to_owned(),
        None => {
            let listen = crate::config::serve_setting("listen")
                .unwrap_or_else(|| "127.0.0.1:7070".to_owned());
            format!("http://{}", local(&listen))
        }
    };
    let client = delayq_client::Client::new(&url)
        .timeout(std::time::Duration::from_secs(5))
        .retries(0);
    match client.ready().await {
        Ok(()) => {
            println!("ready: {url}");
            Ok(0)
        }
        Err(e) => {
            eprintln!("not ready: {url}: {e}");
            Ok(1)
        }
    }
}

/// A listen address as an address to call: an unspecified host (`0.0.0.0`, `[::]`) is this host.
fn local(listen: &str) -> String {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(a) if a.ip().is_unspecified() => format!("127.0.0.1:{}", a.port()),
        _ => listen.to_owned(),
    }
}
