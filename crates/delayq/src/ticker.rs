//! [`Ticker`]: fires due schedules ([`crate::schedule`]). Run one in every process that should
//! keep schedules going (`delayq serve` and `delayq worker` do): there is no leader, each fire
//! is enqueued once whoever gets there first ([`Schedules::fire`] is a compare-and-set).

use std::future::Future;
use std::time::Duration;

use tokio::time::sleep;

use crate::error::Result;
use crate::name::QueueName;
use crate::schedule::Schedules;

/// Longest sleep between two looks at the schedules: a schedule created or changed by another
/// process is noticed within it.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Fires the due schedules of some queues (or of every queue that has schedules).
pub struct Ticker<S> {
    store: S,
    queues: Option<Vec<QueueName>>,
}

impl<S: Schedules> Ticker<S> {
    /// A ticker of every queue with schedules. It plans fires on the store's clock
    /// ([`Schedules::clock_ms`]), never this host's.
    pub fn new(store: S) -> Self {
        Self {
            store,
            queues: None,
        }
    }

    /// Only these queues' schedules.
    pub fn queues(mut self, queues: Vec<QueueName>) -> Self {
        self.queues = Some(queues);
        self
    }

    /// Fires whatever is due now on the store's clock; returns how many fires it enqueued and
    /// how long until the earliest next fire of the schedules it saw (`None`: none seen).
    pub async fn tick(&self) -> Result<(usize, Option<Duration>)> {
        let queues = match &self.queues {
            Some(q) => q.clone(),
            None => self.store.scheduled_queues().await?,
        };
        let mut listed = Vec::with_capacity(queues.len());
        for q in queues {
            let schedules = self.store.schedules(&q).await?;
            if !schedules.is_empty() {
                listed.push((q, schedules));
            }
        }
        if listed.is_empty() {
            return Ok((0, None));
        }
        // One read of the store's clock a tick, after the schedules: a fire stored before it
        // is planned with a now past it (never early, never skipped as "not due yet").
        let now = self.store.clock_ms().await?;
        let mut fired = 0;
        let mut earliest: Option<u64> = None;
        for (q, schedules) in listed {
            for s in schedules {
                let mut next = s.next_ms;
                if s.next_ms <= now {
                    let plan = match s.spec.plan(s.next_ms, now) {
                        Ok(p) => p,
                        Err(e) => {
                            tracing::warn!(queue = %q, schedule = %s.name, error = %e, "schedule cannot fire");
                            continue;
                        }
                    };
                    let n = plan.fires.len();
                    next = plan.next;
                    if self.store.fire(&q, &s.name, plan).await? {
                        fired += n;
                        metrics::counter!(crate::telemetry::FIRES, "queue" => q.to_string())
                            .increment(n as u64);
                    }
                }
                earliest = Some(earliest.map_or(next, |e| e.min(next)));
            }
        }
        Ok((
            fired,
            earliest.map(|next| Duration::from_millis(next.saturating_sub(now))),
        ))
    }

    /// Ticks until `shutdown` completes: after each tick it sleeps until the earliest next
    /// fire (at most [`LOOK_EVERY`]); after an error, [`LOOK_EVERY`].
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut moves = crate::clock::Moves::watch();
        loop {
            moves.mark();
            let wait = match self.tick().await {
                Ok((_, Some(until))) => until.min(LOOK_EVERY),
                Ok((_, None)) => LOOK_EVERY,
                Err(e) => {
                    tracing::warn!(error = %e, "ticking schedules failed");
                    LOOK_EVERY
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = sleep(wait) => {}
                // Tests only (feature `test-clock`): the store's clock moved forward.
                _ = moves.moved() => {}
            }
        }
    }
}
