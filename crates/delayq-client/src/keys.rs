//! The key calls of [`Client`]: hold and release one key, the busiest keys, and every job of
//! one key — a page of them, cancelling or moving them all in one call.

use delayq_wire::{
    JobList, KeyCancelRequest, KeyCancelView, KeyHoldView, KeyJobsQuery, KeyList, KeyPauseRequest,
    KeyRescheduleRequest, KeyRescheduleView,
};
use reqwest::Method;

use crate::client::{Client, Repeat, enc, q, query_string};
use crate::error::Result;

impl Client {
    /// Holds one key's due jobs in `queue` until `hold` ends (`until` or `for_ms`): the other
    /// keys' jobs are claimed meanwhile (an upstream's `Retry-After`).
    pub async fn pause_key(
        &self,
        queue: &str,
        key: &str,
        hold: &KeyPauseRequest,
    ) -> Result<KeyHoldView> {
        let path = format!("{}/keys/{}/pause", q(queue)?, enc(key));
        self.json(Method::POST, &path, Some(hold), Repeat::Safe)
            .await
    }

    /// Lifts a key's hold: its due jobs are claimed again.
    pub async fn resume_key(&self, queue: &str, key: &str) -> Result<KeyHoldView> {
        let path = format!("{}/keys/{}/resume", q(queue)?, enc(key));
        self.json(Method::POST, &path, None::<&()>, Repeat::Safe)
            .await
    }

    /// The busiest keys of `queue` (most in flight and due, then held), at most `limit`
    /// (default 20).
    pub async fn keys(&self, queue: &str, limit: Option<usize>) -> Result<KeyList> {
        let mut path = format!("{}/keys", q(queue)?);
        if let Some(n) = limit {
            path.push_str(&format!("?limit={n}"));
        }
        self.get_json(&path).await
    }

    /// A page of `key`'s jobs in `queue`, by id (`GET …/keys/{key}/jobs`): every state but
    /// done, or the one in `query.state`; pass `next_cursor` back as `query.cursor`.
    pub async fn key_jobs(&self, queue: &str, key: &str, query: &KeyJobsQuery) -> Result<JobList> {
        let query = query_string(&[
            ("state", query.state.clone()),
            ("limit", query.limit.map(|l| l.to_string())),
            ("cursor", query.cursor.clone()),
        ]);
        self.get_json(&format!("{}/keys/{}/jobs{query}", q(queue)?, enc(key)))
            .await
    }

    /// Cancels every scheduled and due job of `key` in `queue` — with `running` its running
    /// jobs too, their workers told to stop. Safe to repeat: a second call finds them gone.
    pub async fn cancel_key(&self, queue: &str, key: &str, running: bool) -> Result<KeyCancelView> {
        let path = format!("{}/keys/{}/cancel", q(queue)?, enc(key));
        let body = KeyCancelRequest { running };
        self.json(Method::POST, &path, Some(&body), Repeat::Safe)
            .await
    }

    /// Moves every scheduled and due job of `key` in `queue`: each by `shift_ms`, or all to
    /// `due_at`. Sent once when it shifts (a repeat would shift again).
    pub async fn reschedule_key(
        &self,
        queue: &str,
        key: &str,
        to: &KeyRescheduleRequest,
    ) -> Result<KeyRescheduleView> {
        let path = format!("{}/keys/{}/reschedule", q(queue)?, enc(key));
        let repeat = if to.shift_ms.is_some() {
            Repeat::Once
        } else {
            Repeat::Safe
        };
        self.json(Method::POST, &path, Some(to), repeat).await
    }
}
