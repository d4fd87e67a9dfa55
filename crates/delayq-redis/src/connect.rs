//! Making a [`RedisBackend`]: parse the connection string, then connect — retrying with
//! backoff while Redis cannot be reached (starting beside this process, mid-failover) for
//! [`ConnectOptions::connect_timeout`], never when retrying cannot help (a wrong password).

use std::time::{Duration, Instant};

use crate::backend::RedisBackend;
use crate::conn::Conn;
use crate::error;
use crate::target::{self, ConnectOptions};

impl RedisBackend {
    /// Connects to `url` (any form of [`ConnectOptions::url`]). Must be called inside a Tokio
    /// runtime.
    pub async fn connect(url: &str) -> Result<Self, crate::Error> {
        Self::connect_with(ConnectOptions::new(url)).await
    }

    /// Connects with TLS files and a replica wait. The URL and the files are checked before
    /// anything connects. While Redis cannot be reached it keeps trying with backoff (100 ms
    /// doubling to 2 s) for [`ConnectOptions::connect_timeout`], logging why at most every 5 s
    /// (a `tracing` warning).
    pub async fn connect_with(opts: ConnectOptions) -> Result<Self, crate::Error> {
        let mut last_log: Option<Instant> = None;
        Self::connect_retrying(opts, move |e| {
            if last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
                last_log = Some(Instant::now());
                tracing::warn!(error = %e, "Redis not reachable yet; retrying");
            }
        })
        .await
    }

    /// [`RedisBackend::connect_with`], telling `on_retry` each failed attempt that will be
    /// retried (what `delayq serve` answers `/readyz` with meanwhile).
    pub async fn connect_retrying(
        opts: ConnectOptions,
        mut on_retry: impl FnMut(&crate::Error),
    ) -> Result<Self, crate::Error> {
        let target = target::parse(&opts)?;
        let deadline = opts.connect_timeout.map(|t| Instant::now() + t);
        let mut delay = Duration::from_millis(100);
        let conn = loop {
            match Conn::connect(target.clone()).await {
                Ok(c) => break c,
                Err(cause) => {
                    let retry = error::worth_retrying(&cause);
                    let e = crate::Error::Connect {
                        url: target.shown.clone(),
                        cause,
                    };
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    if !retry || left == Some(Duration::ZERO) {
                        return Err(e);
                    }
                    on_retry(&e);
                    tokio::time::sleep(left.map_or(delay, |l| l.min(delay))).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        };
        Ok(Self::over(conn, target))
    }
}
