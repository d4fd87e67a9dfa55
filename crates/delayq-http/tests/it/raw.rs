//! Raw HTTP/1.1 over sockets bound to a chosen loopback address (all of 127/8 is loopback on
//! Linux): what the tests of floods and budgets send, byte for byte.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `addr` from address `src`.
pub(crate) async fn connect_from(src: &str, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpSocket::new_v4()?;
    s.bind(SocketAddr::new(src.parse::<IpAddr>().unwrap(), 0))?;
    s.connect(addr).await
}

/// Sends `req` and reads until the end of the response's headers; (status, headers).
pub(crate) async fn head(s: &mut TcpStream, req: &str) -> std::io::Result<(u16, String)> {
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_default();
    Ok((status, text))
}

/// A GET of `path` with bearer `token`.
pub(crate) fn get(path: &str, token: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n")
}

/// A POST of JSON `body` to `path` with bearer `token`.
pub(crate) fn post(path: &str, token: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One short request from 127.0.0.1 on a new connection: its status and how long it took.
pub(crate) async fn timed(addr: SocketAddr, req: String) -> (u16, Duration) {
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), async {
        let mut s = connect_from("127.0.0.1", addr).await?;
        head(&mut s, &req).await
    })
    .await;
    let status = match r {
        Ok(Ok((status, _))) => status,
        _ => 0,
    };
    (status, t.elapsed())
}
