//! The connection caps with eviction ([`Pool`]): at most `max_connections` open at once and
//! at most `max_short_per_address` per client address outside long-lived requests; when a new
//! connection finds a cap full, the oldest connection under that cap (any, or its address's)
//! that is not serving a request — idle between requests, still sending its headers, or
//! still sending its body — is closed to make room — once it has been open [`SETTLE`], so that a new connection's request
//! is read before the next arrival may take its place. A flood of half-sent requests or unfinished bodies from many
//! addresses then costs the flooder its own connections, not everyone's probes and calls. A
//! connection serving a request (its handler running, its response being written or
//! streamed) is never evicted: long-lived requests have budgets of their own (`budget.rs`).
//!
//! Also here: [`read_body`], which reads a request's body before its handler runs, within the
//! header timeout and while its connection may still be evicted.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use delayq_wire::ErrorCode;
use tokio::sync::{Notify, oneshot};

use crate::budget::{ConnTrack, ShortConns};
use crate::error::ApiError;

/// How long a new connection is left to send its request before it may be evicted.
pub(crate) const SETTLE: Duration = Duration::from_millis(250);

/// Counter: connections closed to make room for a new one (`delayq_http_evicted_connections_total`).
pub const EVICTED_CONNECTIONS: &str = "delayq_http_evicted_connections_total";

/// The open connections, oldest first, and which of them serve a request.
pub(crate) struct Pool {
    cap: usize,
    per_address: usize,
    short: Arc<ShortConns>,
    state: Mutex<Places>,
    freed: Notify,
}

#[derive(Default)]
struct Places {
    next: u64,
    open: BTreeMap<u64, Place>,
}

struct Place {
    /// When it was accepted.
    opened: Instant,
    /// Its client address.
    addr: IpAddr,
    /// Its place among its address's short connections, once admitted ([`Pool::admit`]).
    track: Option<Arc<ConnTrack>>,
    /// Requests it is serving (0 or 1 on HTTP/1.1; a request's body read does not count).
    busy: usize,
    /// Closes it (taken when it is evicted).
    evict: Option<oneshot::Sender<()>>,
}

impl Pool {
    /// A pool of at most `cap` connections, and `per_address` short ones per address
    /// (counted in `short`).
    pub(crate) fn new(cap: usize, per_address: usize, short: Arc<ShortConns>) -> Arc<Self> {
        Arc::new(Self {
            cap: cap.max(1),
            per_address: per_address.max(1),
            short,
            state: Mutex::new(Places::default()),
            freed: Notify::new(),
        })
    }

    fn places(&self) -> std::sync::MutexGuard<'_, Places> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection from `addr` among all connections: at once while the
    /// pool has room or holds a settled connection not serving a request (the oldest such is
    /// evicted: its receiver fires), else once one settles or closes. The receiver given
    /// fires when this connection is evicted in turn. Its address's cap is [`Pool::admit`]'s.
    pub(crate) async fn enter(self: &Arc<Self>, addr: IpAddr) -> (Conn, oneshot::Receiver<()>) {
        loop {
            let freed = self.freed.notified();
            let mut settling = None;
            {
                let mut p = self.places();
                if p.open.len() >= self.cap {
                    match evictable(&p, None, u64::MAX) {
                        Some((id, age)) if age >= SETTLE => evict(&mut p, id),
                        Some((_, age)) => settling = Some(SETTLE - age),
                        None => {}
                    }
                }
                if p.open.len() < self.cap {
                    let id = p.next;
                    p.next += 1;
                    let (tx, rx) = oneshot::channel();
                    p.open.insert(
                        id,
                        Place {
                            opened: Instant::now(),
                            addr,
                            track: None,
                            busy: 0,
                            evict: Some(tx),
                        },
                    );
                    let conn = Conn {
                        pool: self.clone(),
                        id,
                    };
                    return (conn, rx);
                }
            }
            wait(freed, settling).await;
        }
    }

    /// `conn`'s place among its address's short connections: at once while the address has
    /// room or holds a settled connection not serving a request (the oldest such is evicted),
    /// else once one settles or closes. `None`: every short connection of the address is
    /// serving a request (`conn` is refused), or `conn` was evicted meanwhile. Run by the
    /// connection's own task, so that an address's flood waits on itself, not on the accept
    /// loop everyone goes through.
    pub(crate) async fn admit(&self, conn: &Conn) -> Option<Arc<ConnTrack>> {
        loop {
            let freed = self.freed.notified();
            let settling;
            {
                let mut p = self.places();
                let addr = p.open.get(&conn.id)?.addr;
                if let Some(track) = self.short.admit(addr, self.per_address) {
                    if let Some(place) = p.open.get_mut(&conn.id) {
                        place.track = Some(track.clone());
                    }
                    return Some(track);
                }
                match evictable(&p, Some(addr), conn.id) {
                    Some((id, age)) if age >= SETTLE => {
                        evict(&mut p, id);
                        continue;
                    }
                    Some((_, age)) => settling = Some(SETTLE - age),
                    None => {
                        metrics::counter!(crate::REFUSED_CONNECTIONS).increment(1);
                        return None;
                    }
                }
            }
            wait(freed, settling).await;
        }
    }

    fn mark(&self, id: u64, busy: bool) {
        let mut p = self.places();
        if let Some(place) = p.open.get_mut(&id) {
            if busy {
                place.busy += 1;
            } else {
                place.busy = place.busy.saturating_sub(1);
            }
        }
        drop(p);
        if !busy {
            // A connection became evictable: a new one waiting for a place may take it.
            self.freed.notify_one();
        }
    }

    /// Connections open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.places().open.len()
    }
}

/// Until a place frees, or `settling` passes (the oldest idle connection may go then).
async fn wait(freed: tokio::sync::futures::Notified<'_>, settling: Option<Duration>) {
    match settling {
        Some(wait) => {
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
        None => freed.await,
    }
}

/// The oldest connection not serving a request, and its age: of all (`of` = `None`), or the
/// admitted ones of address `of` other than connection `except`.
fn evictable(p: &Places, of: Option<IpAddr>, except: u64) -> Option<(u64, Duration)> {
    p.open
        .iter()
        .find(|(id, c)| {
            c.busy == 0
                && c.evict.is_some()
                && of.is_none_or(|a| a == c.addr && c.track.is_some() && **id != except)
        })
        .map(|(id, c)| (*id, c.opened.elapsed()))
}

/// Closes connection `id`: it leaves the pool and its address's count now, and its task
/// drops it.
fn evict(p: &mut Places, id: u64) {
    if let Some(mut place) = p.open.remove(&id)
        && let Some(evict) = place.evict.take()
    {
        if let Some(t) = &place.track {
            t.closed();
        }
        let _ = evict.send(());
        metrics::counter!(EVICTED_CONNECTIONS).increment(1);
    }
}

/// One open connection's place in its [`Pool`], given back when dropped (the connection
/// closed, or was evicted).
pub(crate) struct Conn {
    pool: Arc<Pool>,
    id: u64,
}

impl Conn {
    /// Marks the connection as serving a request until the guard is dropped.
    fn busy(self: &Arc<Self>) -> Busy {
        self.pool.mark(self.id, true);
        Busy(self.clone())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.pool.places().open.remove(&self.id);
        self.pool.freed.notify_one();
    }
}

/// A connection serving a request: not evictable while it lives.
struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.pool.mark(self.0.id, false);
    }
}

/// A response body that keeps its connection busy until it is written (or dropped).
struct Held {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Held {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Middleware: the request's connection is busy — not evictable — from here until its
/// response is written, except while [`read_body`] reads the request's body.
pub(crate) async fn serving(req: Request, next: Next) -> Response {
    let Some(conn) = req.extensions().get::<Arc<Conn>>().cloned() else {
        return next.run(req).await;
    };
    let busy = conn.busy();
    let resp = next.run(req).await;
    resp.map(|body| Body::new(Held { body, _busy: busy }))
}

/// What [`read_body`] needs: the longest a body may take, and the most bytes it may have.
#[derive(Clone, Copy)]
pub(crate) struct BodyRules {
    /// The header timeout: a body is given the same time as the headers before it.
    pub deadline: Duration,
    /// The body limit.
    pub max: usize,
}

/// Middleware (after authentication): reads the whole request body within
/// [`BodyRules::deadline`] — 408 and the connection closed when it does not arrive, not the
/// 90-s request timeout — while its connection may be evicted, then hands it on. A body over
/// the limit is handed on cut just past it, for the handler's usual 413.
pub(crate) async fn read_body(
    State(rules): State<BodyRules>,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let conn = parts.extensions.get::<Arc<Conn>>().cloned();
    // Evictable while the body arrives: the busy mark `serving` set is lifted meanwhile.
    if let Some(c) = &conn {
        c.pool.mark(c.id, false);
    }
    let read = tokio::time::timeout(
        rules.deadline,
        axum::body::to_bytes(body, rules.max.saturating_add(1)),
    )
    .await;
    if let Some(c) = &conn {
        c.pool.mark(c.id, true);
    }
    let body = match read {
        Ok(Ok(bytes)) => Body::from(bytes),
        Ok(Err(e)) if too_long(&e) => {
            return closing(ApiError::new(
                ErrorCode::BodyTooLarge,
                format!("the request body is over {} bytes", rules.max),
            ));
        }
        Ok(Err(_)) => {
            return closing(ApiError::new(
                ErrorCode::InvalidBody,
                "the request body could not be read",
            ));
        }
        Err(_) => {
            return closing(ApiError::new(
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    rules.deadline.as_secs()
                ),
            ));
        }
    };
    next.run(Request::from_parts(parts, body)).await
}

/// Whether a body read failed on its length limit.
fn too_long(e: &axum::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        if s.to_string().contains("length limit exceeded") {
            return true;
        }
        source = s.source();
    }
    false
}

/// `e` answered with `Connection: close`: what is left of the request is not read.
fn closing(e: ApiError) -> Response {
    let mut r = e.into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn enter(pool: &Arc<Pool>, ip: &str) -> Option<(Arc<Conn>, oneshot::Receiver<()>)> {
        let (c, rx) = pool.enter(ip.parse().unwrap()).await;
        pool.admit(&c).await?;
        Some((Arc::new(c), rx))
    }

    #[tokio::test]
    async fn a_full_pool_evicts_its_oldest_idle_connection_never_a_busy_one() {
        let pool = Pool::new(3, 64, Arc::default());
        let (a, mut a_rx) = enter(&pool, "127.0.0.1").await.unwrap();
        let (_b, mut b_rx) = enter(&pool, "127.0.0.1").await.unwrap();
        let (c, mut c_rx) = enter(&pool, "127.0.0.1").await.unwrap();
        let busy_a = a.busy();
        // Full: the oldest not serving a request (b) goes, once it has settled.
        let t = Instant::now();
        let (d, _d_rx) = enter(&pool, "127.0.0.1").await.unwrap();
        assert!(
            t.elapsed() >= SETTLE / 2,
            "a new connection is left to settle"
        );
        assert!(b_rx.try_recv().is_ok(), "b evicted");
        assert!(a_rx.try_recv().is_err(), "a is busy");
        assert!(c_rx.try_recv().is_err(), "c is younger");
        assert_eq!(pool.len(), 3);
        // Every one busy: a new connection waits until one is free.
        let busy_c = c.busy();
        let busy_d = d.busy();
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { enter(&pool, "127.0.0.1").await.is_some() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "no place while all serve");
        drop(busy_c);
        let entered = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("a place once c is idle")
            .unwrap();
        assert!(entered);
        assert!(c_rx.try_recv().is_ok(), "c evicted once idle");
        drop((busy_a, busy_d));
    }

    #[tokio::test]
    async fn a_full_address_evicts_its_own_oldest_idle_connection_or_refuses() {
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        let short: Arc<ShortConns> = Arc::default();
        let pool = Pool::new(100, 2, short.clone());
        let (_other, mut other_rx) = enter(&pool, "127.0.0.2").await.unwrap();
        let (a, mut a_rx) = enter(&pool, "127.0.0.1").await.unwrap();
        let (b, _b_rx) = enter(&pool, "127.0.0.1").await.unwrap();
        // Its address is full: its own oldest idle one goes once settled, not the other
        // address's older one.
        let (c, _) = enter(&pool, "127.0.0.1").await.unwrap();
        assert!(a_rx.try_recv().is_ok(), "a evicted");
        assert!(
            other_rx.try_recv().is_err(),
            "another address's connection stays"
        );
        assert_eq!(short.count(one), 2);
        drop(a);
        // Every short connection of the address serving a request: refused.
        let _busy = (b.busy(), c.busy());
        assert!(enter(&pool, "127.0.0.1").await.is_none());
    }
}
