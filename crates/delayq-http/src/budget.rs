//! Budgets that keep the server serving: long-lived requests (SSE streams, long polls) are
//! counted per caller (its token; its client address without tokens) and in total, and
//! connections that are not in a long-lived request (sending headers, idle, short requests)
//! are counted per client address, so no one caller can take the capacity others need.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Which long-lived request a budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `GET /v1/queues/{q}/events`.
    Stream,
    /// `POST /v1/queues/{q}/claim` with `wait_ms` > 0.
    LongPoll,
}

/// A count per caller and in total, each with its limit.
pub(crate) struct Budget {
    per_caller: usize,
    total: usize,
    counts: Mutex<(usize, HashMap<String, usize>)>,
}

/// Why a budget refused: the caller's share or the whole server's is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// This caller has `per_caller` open.
    Caller(usize),
    /// The server has `total` open.
    Total(usize),
}

impl Budget {
    pub(crate) fn new(per_caller: usize, total: usize) -> Arc<Self> {
        Arc::new(Self {
            per_caller: per_caller.max(1),
            total: total.max(1),
            counts: Mutex::default(),
        })
    }

    /// Takes one place for `caller`, held until the slot drops (and its connection, when
    /// given, stops counting as a short connection meanwhile).
    pub(crate) fn take(
        self: &Arc<Self>,
        caller: String,
        conn: Option<Arc<ConnTrack>>,
    ) -> Result<Slot, Full> {
        {
            let mut g = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            if g.0 >= self.total {
                return Err(Full::Total(self.total));
            }
            let n = g.1.entry(caller.clone()).or_default();
            if *n >= self.per_caller {
                return Err(Full::Caller(self.per_caller));
            }
            *n += 1;
            g.0 += 1;
        }
        if let Some(c) = &conn {
            c.set_long_lived(true);
        }
        Ok(Slot {
            budget: self.clone(),
            caller,
            conn,
        })
    }

    /// Places taken now, in total.
    pub(crate) fn in_use(&self) -> usize {
        self.counts.lock().map_or(0, |g| g.0)
    }
}

/// One place of a [`Budget`], given back when dropped.
pub(crate) struct Slot {
    budget: Arc<Budget>,
    caller: String,
    conn: Option<Arc<ConnTrack>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.budget.counts.lock().unwrap_or_else(|p| p.into_inner());
        g.0 = g.0.saturating_sub(1);
        if let Some(n) = g.1.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                g.1.remove(&self.caller);
            }
        }
        drop(g);
        if let Some(c) = &self.conn {
            c.set_long_lived(false);
        }
    }
}

/// The client address of a request's connection (set by [`crate::serve`]; absent when the
/// router is driven some other way).
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub IpAddr);

/// The caller a budget counts, when [`crate::auth::require_token`] found its token (the
/// token's place in the configured list: `Bearer x` and `bearer  x` are one caller).
#[derive(Clone, Debug)]
pub(crate) struct CallerKey(pub String);

/// The caller a budget counts: its token when the server has tokens, else its client address
/// (everyone driven without one — the router used in process — shares "").
pub(crate) fn caller_key(ext: &axum::http::Extensions) -> String {
    match (ext.get::<CallerKey>(), ext.get::<ClientAddr>()) {
        (Some(k), _) => k.0.clone(),
        (None, Some(a)) => a.0.to_string(),
        (None, None) => String::new(),
    }
}

/// Short connections per client address: every open connection not serving a long-lived
/// request (still sending its headers, idle between requests, or serving a short one).
#[derive(Default)]
pub(crate) struct ShortConns {
    per_addr: Mutex<HashMap<IpAddr, usize>>,
}

impl ShortConns {
    /// Counts a new connection from `addr`, or `None` when `addr` already has `max` short
    /// connections open (the caller closes it at once).
    pub(crate) fn admit(self: &Arc<Self>, addr: IpAddr, max: usize) -> Option<Arc<ConnTrack>> {
        let mut g = self.per_addr.lock().unwrap_or_else(|p| p.into_inner());
        let n = g.entry(addr).or_default();
        if *n >= max.max(1) {
            return None;
        }
        *n += 1;
        Some(Arc::new(ConnTrack {
            table: self.clone(),
            addr,
            state: Mutex::new(ConnState {
                open: true,
                counted: true,
            }),
        }))
    }

    fn add(&self, addr: IpAddr, up: bool) {
        let mut g = self.per_addr.lock().unwrap_or_else(|p| p.into_inner());
        if up {
            *g.entry(addr).or_default() += 1;
        } else if let Some(n) = g.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                g.remove(&addr);
            }
        }
    }

    /// Short connections open from `addr` now.
    #[cfg(test)]
    pub(crate) fn count(&self, addr: IpAddr) -> usize {
        self.per_addr
            .lock()
            .map_or(0, |g| g.get(&addr).copied().unwrap_or(0))
    }
}

struct ConnState {
    open: bool,
    counted: bool,
}

/// One accepted connection's place in [`ShortConns`]: it stops counting while it serves a
/// long-lived request and when it closes.
pub(crate) struct ConnTrack {
    table: Arc<ShortConns>,
    addr: IpAddr,
    state: Mutex<ConnState>,
}

impl ConnTrack {
    fn set_long_lived(&self, long: bool) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !s.open || s.counted != long {
            return;
        }
        s.counted = !long;
        self.table.add(self.addr, !long);
    }

    /// The connection closed: it counts no more.
    pub(crate) fn closed(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.open && s.counted {
            self.table.add(self.addr, false);
        }
        s.open = false;
        s.counted = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_refuses_past_the_callers_share_and_the_total() {
        let b = Budget::new(2, 3);
        let a1 = b.take("a".into(), None).unwrap();
        let _a2 = b.take("a".into(), None).unwrap();
        assert_eq!(b.take("a".into(), None).err(), Some(Full::Caller(2)));
        let _b1 = b.take("b".into(), None).unwrap();
        assert_eq!(b.take("c".into(), None).err(), Some(Full::Total(3)));
        drop(a1);
        assert_eq!(b.in_use(), 2);
        assert!(b.take("c".into(), None).is_ok());
    }

    #[test]
    fn a_long_lived_request_frees_its_connections_short_place() {
        let t = Arc::new(ShortConns::default());
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        let c1 = t.admit(ip, 2).unwrap();
        let c2 = t.admit(ip, 2).unwrap();
        assert!(
            t.admit(ip, 2).is_none(),
            "a third short connection is refused"
        );
        let b = Budget::new(8, 8);
        let slot = b.take("x".into(), Some(c1.clone())).unwrap();
        assert_eq!(t.count(ip), 1);
        let c3 = t
            .admit(ip, 2)
            .expect("the stream's connection left the short count");
        drop(slot);
        assert_eq!(t.count(ip), 3, "back to short after the stream ends");
        c1.closed();
        c2.closed();
        c3.closed();
        assert_eq!(t.count(ip), 0);
        c3.closed();
        assert_eq!(t.count(ip), 0, "closing twice counts once");
    }
}
