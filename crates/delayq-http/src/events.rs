//! The live event stream of a queue (`GET /v1/queues/{q}/events`, Server-Sent Events) and the
//! one stats reader per queue that all of a process's streams of that queue share
//! ([`StatsHub`]): 300 streams cost the store what one does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::Extensions;
use axum::response::sse::{Event, KeepAlive, Sse};
use delayq::{Backend, Inspect, QueueName};
use futures_util::Stream;
use tokio::sync::watch;

use crate::console::Action;
use crate::error::{ApiError, ErrorBody};
use crate::extract::QueuePath;
use crate::model::QueueView;
use crate::state::AppState;

/// How often a queue's reader looks at its counts by default (streams get them when they
/// changed): `HttpConfig::stats_every`.
pub const STATS_EVERY: Duration = Duration::from_secs(1);

/// What a queue's reader last saw.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Snapshot {
    /// The counts, as the JSON of `GET /v1/queues/{q}`.
    Stats(String),
    /// The store could not be read: why.
    Unavailable(String),
}

type Feed = watch::Sender<Option<Snapshot>>;

/// One reader per queue with streams open, started by the first stream and stopped by the
/// reader itself once no stream is left.
#[derive(Default)]
pub struct StatsHub {
    feeds: Arc<Mutex<HashMap<QueueName, Feed>>>,
}

impl StatsHub {
    /// The feed of `q`'s counts, starting its reader when no stream reads it yet.
    fn subscribe<B: Backend + Inspect>(
        &self,
        st: &AppState<B>,
        q: &QueueName,
    ) -> watch::Receiver<Option<Snapshot>> {
        let mut feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(feed) = feeds.get(q) {
            let mut rx = feed.subscribe();
            if rx.borrow().is_some() {
                rx.mark_changed();
            }
            return rx;
        }
        let (tx, rx) = watch::channel(None);
        feeds.insert(q.clone(), tx.clone());
        tokio::spawn(read(st.clone(), q.clone(), tx, self.feeds.clone()));
        rx
    }

    /// Whether a stream is watching `q` now.
    pub(crate) fn watched(&self, q: &QueueName) -> bool {
        self.feeds.lock().is_ok_and(|f| f.contains_key(q))
    }

    /// Queues with a reader running now.
    pub fn readers(&self) -> usize {
        self.feeds.lock().map_or(0, |f| f.len())
    }
}

/// A queue's reader: reads the counts every `stats_every` while any stream listens, and
/// tells the streams when they changed.
async fn read<B: Backend + Inspect>(
    st: AppState<B>,
    q: QueueName,
    tx: Feed,
    feeds: Arc<Mutex<HashMap<QueueName, Feed>>>,
) {
    let mut tick = tokio::time::interval(st.inner.config.stats_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = st.inner.shutdown.clone();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => {}
        }
        {
            // Leaves the table under its lock, so a new stream either finds this reader (and
            // is counted below) or starts the next one.
            let mut f = feeds.lock().unwrap_or_else(|p| p.into_inner());
            if tx.receiver_count() == 0 || *shutdown.borrow() {
                f.remove(&q);
                return;
            }
        }
        let snap = match st.backend().stats(&q).await {
            Ok(stats) => match serde_json::to_string(&QueueView::new(q.as_str(), stats)) {
                Ok(text) => Snapshot::Stats(text),
                Err(e) => Snapshot::Unavailable(e.to_string()),
            },
            Err(e) => Snapshot::Unavailable(e.to_string()),
        };
        tx.send_if_modified(|cur| {
            if cur.as_ref() == Some(&snap) {
                return false;
            }
            *cur = Some(snap);
            true
        });
    }
}

struct Events {
    q: QueueName,
    actions: tokio::sync::broadcast::Receiver<Action>,
    shutdown: watch::Receiver<bool>,
    stats: watch::Receiver<Option<Snapshot>>,
    _slot: crate::budget::Slot,
}

/// Live updates as Server-Sent Events: `stats` (the queue's counts, as `GET /v1/queues/{q}`,
/// sent when they change, at most once a second), `unavailable` (the store could not be
/// read) and `action` (an action taken through this server). Ends when the server shuts
/// down. Streams count against a budget per caller and in total (429 `too_many_streams`).
#[utoipa::path(
    get, path = "/v1/queues/{q}/events", tag = "console",
    params(("q" = String, Path)),
    responses((status = 200, description = "text/event-stream"), (status = "4XX", body = ErrorBody))
)]
pub async fn events<B: Backend + Inspect>(
    State(st): State<AppState<B>>,
    ext: Extensions,
    QueuePath(q): QueuePath,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let slot = st.long_lived(crate::budget::Kind::Stream, &ext)?;
    let start = Events {
        actions: st.inner.actions.subscribe(),
        shutdown: st.inner.shutdown.clone(),
        stats: st.inner.stats_hub.subscribe(&st, &q),
        q,
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(start, |mut s| async move {
        loop {
            if *s.shutdown.borrow() {
                return None;
            }
            tokio::select! {
                _ = s.shutdown.changed() => return None,
                a = s.actions.recv() => match a {
                    Ok(a) if a.queue == s.q.as_str() => {
                        let ev = Event::default().event("action").json_data(&a).ok()?;
                        return Some((Ok(ev), s));
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                },
                r = s.stats.changed() => {
                    r.ok()?;
                    let snap = s.stats.borrow_and_update().clone();
                    let ev = match snap {
                        Some(Snapshot::Stats(text)) => Event::default().event("stats").data(text),
                        Some(Snapshot::Unavailable(e)) => Event::default().event("unavailable").data(e),
                        None => continue,
                    };
                    return Some((Ok(ev), s));
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
