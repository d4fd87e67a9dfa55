//! Queue depth over time, for the console's depth chart: the server samples the queues it
//! knows (the store's list and those it served) every 10 s ([`EVERY`]) into a ring of 360
//! samples per queue (an hour). An empty queue is sampled again only when something happens
//! to it here (an enqueue, a claim, a page or stream of the console: `AppState::note`, a
//! stream's reader) or every [`RECHECK`] (a queue fed only by other processes), so idle
//! queues cost the store nothing measurable (each sample is a dozen Redis commands). Counts come from the store, so they are every process's; the history is this
//! server's (it starts when the server does). `delayq_http::serve` runs the sampler; an app
//! that mounts the router itself can run [`sample`].

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use delayq::{Backend, Inspect, QueueName};

use crate::state::AppState;

/// How often the depth is sampled by default ([`crate::HttpConfig::depth_every`]).
pub const EVERY: Duration = Duration::from_secs(10);
/// Samples kept per queue (one hour).
const KEEP: usize = 360;
/// How often an empty queue nothing happened to is sampled anyway.
pub const RECHECK: Duration = Duration::from_secs(1800);

pub use delayq_wire::DepthSample;

/// The rings of every sampled queue.
#[derive(Default)]
pub(crate) struct Depths(Mutex<HashMap<QueueName, VecDeque<DepthSample>>>);

impl Depths {
    fn push(&self, q: &QueueName, s: DepthSample) {
        if let Ok(mut m) = self.0.lock() {
            let ring = m.entry(q.clone()).or_default();
            if ring.len() == KEEP {
                ring.pop_front();
            }
            ring.push_back(s);
        }
    }

    /// The samples of `q`, oldest first.
    pub(crate) fn of(&self, q: &QueueName) -> Vec<DepthSample> {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(q).map(|r| r.iter().copied().collect()))
            .unwrap_or_default()
    }
}

/// Samples every known queue's depth every [`crate::HttpConfig::depth_every`] until the
/// server shuts down.
pub async fn sample<B: Backend + Inspect>(st: AppState<B>) {
    let mut shutdown = st.inner.shutdown.clone();
    let mut tick =
        tokio::time::interval(st.inner.config.depth_every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Per queue: whether it held jobs at its last sample, and when that was.
    let mut last: HashMap<QueueName, (bool, tokio::time::Instant)> = HashMap::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let at = delayq::job::system_now_ms();
        let touched = st.take_touched();
        let now = tokio::time::Instant::now();
        for q in st.known_queues().await {
            let due = match last.get(&q) {
                None => true,
                Some((held_jobs, sampled)) => {
                    *held_jobs
                        || touched.contains(&q)
                        || st.inner.stats_hub.watched(&q)
                        || now.duration_since(*sampled) >= RECHECK
                }
            };
            if !due {
                continue;
            }
            if let Ok(s) = st.backend().stats(&q).await {
                let sample = DepthSample {
                    at,
                    scheduled: s.scheduled,
                    due: s.due,
                    leased: s.leased,
                    dead: s.dead,
                };
                let held = s.scheduled + s.due + s.leased + s.dead > 0;
                last.insert(q.clone(), (held, now));
                st.inner.depths.push(&q, sample);
            }
        }
    }
}
