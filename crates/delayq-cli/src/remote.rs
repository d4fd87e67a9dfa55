//! The CLI's way to a running `delayq serve` (`--server URL`, or the server that owns the
//! embedded store): the client crate's [`RemoteBackend`], its URL checked up front, and the
//! hint for a server that wants a token.

pub(crate) use delayq_client::RemoteBackend;

/// A remote store at `url` (`http://host:port` or `https://…`), sending `token` if given.
pub(crate) fn connect(url: &str, token: Option<String>) -> anyhow::Result<RemoteBackend> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| anyhow::anyhow!("server URL {url:?}: expected http://HOST:PORT"))?;
    if rest.trim_end_matches('/').is_empty() {
        anyhow::bail!("server URL {url:?}: expected http://HOST:PORT");
    }
    let mut client = delayq_client::Client::new(url);
    if let Some(t) = token {
        client = client.token(t);
    }
    Ok(RemoteBackend::new(client))
}

/// What to tell the user when a remote call was refused for want of a token.
pub(crate) fn hint(e: &anyhow::Error) -> Option<&'static str> {
    e.chain()
        .any(|c| c.to_string().contains("(401 unauthorized)"))
        .then_some(
            "the delayq server wants a token: pass it with --server-token (or DELAYQ_SERVER_TOKEN)",
        )
}
