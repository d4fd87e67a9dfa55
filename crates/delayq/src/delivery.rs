//! The delivery log of HTTP push: what each request of a pushed job got (status, time taken,
//! outcome), kept in memory by the process that pushes, for the API and the console.
//!
//! Bounded: the latest [`DeliveryLog::PER_JOB`] attempts of the latest
//! [`DeliveryLog::JOBS`] jobs. It is a window on this process's work, not a store: after a
//! restart, or for requests another process sent, a job's `attempt` and `last_error` tell the
//! rest.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::name::{JobId, QueueName};

/// One HTTP request of a pushed job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The job's attempt number this request was.
    pub attempt: u32,
    /// When the request was sent, ms since the epoch.
    pub at_ms: u64,
    /// How long until the response (or the failure), ms.
    pub duration_ms: u64,
    /// The response status, when there was a response.
    pub status: Option<u16>,
    /// `delivered`, `throttled` (429/503 with Retry-After), `http_error`, `timeout`,
    /// `connect_error`, `refused` (SSRF rules) or `invalid`.
    pub outcome: String,
    /// What was stored as the job's `last_error`, for a failed request.
    pub error: Option<String>,
}

/// The bounded in-memory log (see the module docs). Shared by reference.
#[derive(Debug, Default)]
pub struct DeliveryLog {
    inner: Mutex<LogInner>,
}

#[derive(Debug, Default)]
struct LogInner {
    by_job: HashMap<(QueueName, JobId), VecDeque<Delivery>>,
    /// Jobs in the order they were first logged, for eviction.
    order: VecDeque<(QueueName, JobId)>,
}

impl DeliveryLog {
    /// Attempts kept per job.
    pub const PER_JOB: usize = 20;
    /// Jobs kept.
    pub const JOBS: usize = 10_000;

    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a request of `id` in `queue`.
    pub fn record(&self, queue: &QueueName, id: &JobId, d: Delivery) {
        let mut g = self.inner.lock().expect("delivery log lock");
        let key = (queue.clone(), id.clone());
        if !g.by_job.contains_key(&key) {
            if g.order.len() >= Self::JOBS
                && let Some(old) = g.order.pop_front()
            {
                g.by_job.remove(&old);
            }
            g.order.push_back(key.clone());
        }
        let list = g.by_job.entry(key).or_default();
        if list.len() >= Self::PER_JOB {
            list.pop_front();
        }
        list.push_back(d);
    }

    /// The requests of `id` this process logged, oldest first.
    pub fn of(&self, queue: &QueueName, id: &JobId) -> Vec<Delivery> {
        let g = self.inner.lock().expect("delivery log lock");
        g.by_job
            .get(&(queue.clone(), id.clone()))
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(attempt: u32) -> Delivery {
        Delivery {
            attempt,
            at_ms: 1,
            duration_ms: 2,
            status: Some(500),
            outcome: "http_error".into(),
            error: Some("HTTP 500".into()),
        }
    }

    #[test]
    fn keeps_the_latest_attempts() {
        let log = DeliveryLog::new();
        let q = QueueName::new("q").unwrap();
        let id = JobId::new("a").unwrap();
        for i in 1..=25 {
            log.record(&q, &id, d(i));
        }
        let got = log.of(&q, &id);
        assert_eq!(got.len(), DeliveryLog::PER_JOB);
        assert_eq!(got[0].attempt, 6);
        assert_eq!(got.last().unwrap().attempt, 25);
        assert!(log.of(&q, &JobId::new("b").unwrap()).is_empty());
    }

    #[test]
    fn evicts_the_oldest_job() {
        let log = DeliveryLog::new();
        let q = QueueName::new("q").unwrap();
        for i in 0..=DeliveryLog::JOBS {
            log.record(&q, &JobId::new(format!("j{i}")).unwrap(), d(1));
        }
        assert!(log.of(&q, &JobId::new("j0").unwrap()).is_empty());
        assert_eq!(log.of(&q, &JobId::new("j1").unwrap()).len(), 1);
    }
}
