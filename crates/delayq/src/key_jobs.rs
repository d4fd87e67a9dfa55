//! Every job of one key at once ("user 42 deleted their account"): a page of the key's jobs
//! by id ([`KeyJobsRequest`], [`KeyJobsPage`]), and how its waiting jobs move in bulk
//! ([`KeyMove`]). Stores keep an index by key, so each costs in proportion to the key's jobs,
//! not the queue's ([`crate::Inspect::key_jobs`], [`crate::Inspect::cancel_key`],
//! [`crate::Inspect::reschedule_key`]).

use crate::error::InvalidInput;
use crate::job::JobInfo;
use crate::listing::ListState;
use crate::name::JobId;

/// A page of one key's jobs: those in `state` (every state but done when `None`), by id,
/// starting strictly after `after`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyJobsRequest {
    /// Only jobs in this state (waiting, scheduled, due, leased or dead); `None`: all of them.
    pub state: Option<ListState>,
    /// Most jobs (1–[`crate::listing::MAX_PAGE`]).
    pub limit: usize,
    /// The page starts strictly after this id (byte order).
    pub after: Option<JobId>,
}

impl KeyJobsRequest {
    /// Checks the page size and that the state is one a key's listing covers (done jobs are
    /// not kept by key).
    pub fn check(&self) -> Result<(), InvalidInput> {
        crate::listing::check_limit(self.limit)?;
        match self.state {
            Some(ListState::Done) => Err(InvalidInput::Query(
                "a key's jobs are listed as scheduled, due, leased or dead, not done".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// The listing a job is in at `now_ms` (a scheduled job due by then is due); `None`: done.
pub fn listed_as(info: &JobInfo, now_ms: u64) -> Option<ListState> {
    match info.state {
        crate::JobState::Scheduled if info.due_at_ms <= now_ms => Some(ListState::Due),
        crate::JobState::Scheduled => Some(ListState::Scheduled),
        crate::JobState::Leased => Some(ListState::Leased),
        crate::JobState::Dead => Some(ListState::Dead),
        crate::JobState::Done => None,
        crate::JobState::Waiting => Some(ListState::Waiting),
    }
}

/// A page of one key's jobs, by id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyJobsPage {
    /// The jobs, by id (byte order).
    pub jobs: Vec<JobInfo>,
    /// Where the next page starts (pass as [`KeyJobsRequest::after`]); `None`: this was the
    /// last. A page may hold fewer than `limit` jobs and still have a next one (a store that
    /// reads a bounded part of a large key per call).
    pub next: Option<JobId>,
    /// The store's clock when it read the page (ms): a scheduled job due by then is due
    /// ([`listed_as`]).
    pub now_ms: u64,
}

/// One shard's part of a key's page: its matching jobs after the cursor, by id (at most
/// `limit + 1`: one more says that more follow), and `stopped_at` when it read only part of
/// the key (the last id it read: it knows nothing past it).
#[derive(Clone, Debug, Default)]
pub struct ShardKeyPage {
    /// Matching jobs, by id.
    pub jobs: Vec<JobInfo>,
    /// The last id read when the shard stopped early.
    pub stopped_at: Option<JobId>,
    /// The shard's clock when it read them (ms).
    pub now_ms: u64,
}

impl KeyJobsPage {
    /// Merges the shards' parts into one page of at most `limit`, by id: no job past the
    /// lowest `stopped_at` is handed out (a shard that stopped there may have jobs before the
    /// others' later ones), so a page never skips a job.
    pub fn merge(parts: Vec<ShardKeyPage>, limit: usize) -> Self {
        let bound = parts.iter().filter_map(|p| p.stopped_at.clone()).min();
        let now_ms = parts.iter().map(|p| p.now_ms).max().unwrap_or(0);
        let mut more = bound.is_some();
        let mut jobs: Vec<JobInfo> = Vec::new();
        for p in parts {
            for j in p.jobs {
                if bound.as_ref().is_none_or(|b| j.id <= *b) {
                    jobs.push(j);
                } else {
                    more = true;
                }
            }
        }
        jobs.sort_by(|a, b| a.id.as_str().as_bytes().cmp(b.id.as_str().as_bytes()));
        if jobs.len() > limit {
            jobs.truncate(limit);
            more = true;
        }
        let next = if !more {
            None
        } else if jobs.len() == limit || bound.is_none() {
            jobs.last().map(|j| j.id.clone()).or(bound)
        } else {
            // Fewer than a page before the bound: the next page starts after it.
            bound
        };
        Self { jobs, next, now_ms }
    }
}

/// How a key's waiting jobs move ([`crate::Inspect::reschedule_key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyMove {
    /// Each by this many ms from its own due time (earlier when negative; never before now).
    Shift(i64),
    /// All to this time (ms since the epoch).
    To(u64),
}

impl KeyMove {
    /// Checks the move: a shift or a time at most [`crate::limits::MAX_DELAY`] away.
    pub fn check(self) -> Result<(), InvalidInput> {
        let max = crate::limits::MAX_DELAY.as_millis() as u64;
        match self {
            KeyMove::Shift(ms) if ms.unsigned_abs() <= max => Ok(()),
            KeyMove::Shift(ms) => Err(InvalidInput::Query(format!(
                "shift_ms {ms} is over the 10-year limit"
            ))),
            KeyMove::To(_) => Ok(()),
        }
    }

    /// The new due time of a job due at `due` when the store's clock reads `now` (ms).
    pub fn apply(self, due: u64, now: u64) -> u64 {
        match self {
            KeyMove::Shift(ms) => {
                let moved = if ms >= 0 {
                    due.saturating_add(ms as u64)
                } else {
                    due.saturating_sub(ms.unsigned_abs())
                };
                moved.max(now.min(due))
            }
            KeyMove::To(at) => at,
        }
    }

    /// As the (mode, value) pair a script reads: 0 and the shift, or 1 and the time.
    pub fn as_pair(self) -> (u8, i64) {
        match self {
            KeyMove::Shift(ms) => (0, ms),
            KeyMove::To(at) => (1, at as i64),
        }
    }
}

/// What a key's bulk cancel did ([`crate::Inspect::cancel_key`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCancelled {
    /// Jobs cancelled (scheduled, due, and with `running` the leased ones).
    pub cancelled: u64,
    /// Of those, the ones that were running: ended cancelled at once, their workers told to
    /// stop (as [`crate::Backend::cancel_running`]).
    pub running: u64,
}

impl std::ops::AddAssign for KeyCancelled {
    fn add_assign(&mut self, o: Self) {
        self.cancelled += o.cancelled;
        self.running += o.running;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobState;

    fn job(id: &str) -> JobInfo {
        JobInfo {
            id: JobId::new(id).unwrap(),
            state: JobState::Scheduled,
            attempt: 0,
            max_attempts: 1,
            due_at_ms: 0,
            created_at_ms: 0,
            lease_deadline_ms: None,
            failed_at_ms: None,
            completed_at_ms: None,
            last_error: None,
            timeout_ms: None,
            expires_at_ms: None,
            priority: 0,
            target: None,
            trace: None,
            key: None,
            payload: Vec::new(),
            result: None,
            dependencies: Vec::new(),
            dependents: Vec::new(),
            cold: false,
        }
    }

    fn ids(p: &KeyJobsPage) -> Vec<&str> {
        p.jobs.iter().map(|j| j.id.as_str()).collect()
    }

    #[test]
    fn shard_pages_merge_by_id_and_never_skip_past_a_shard_that_stopped() {
        let part = |ids: &[&str], stopped: Option<&str>| ShardKeyPage {
            jobs: ids.iter().map(|i| job(i)).collect(),
            stopped_at: stopped.map(|s| JobId::new(s).unwrap()),
            now_ms: 0,
        };
        let p = KeyJobsPage::merge(vec![part(&["a", "d"], None), part(&["b", "c"], None)], 3);
        assert_eq!(ids(&p), ["a", "b", "c"]);
        assert_eq!(p.next.as_ref().map(JobId::as_str), Some("c"));
        let p = KeyJobsPage::merge(vec![part(&["a"], None), part(&["b"], None)], 3);
        assert_eq!(ids(&p), ["a", "b"]);
        assert_eq!(p.next, None, "everything fit");
        // The second shard read up to "c" only: "e" of the first waits for the next page.
        let p = KeyJobsPage::merge(vec![part(&["a", "e"], None), part(&["b"], Some("c"))], 10);
        assert_eq!(ids(&p), ["a", "b"]);
        assert_eq!(p.next.as_ref().map(JobId::as_str), Some("c"));
        // A shard that found nothing in its part still moves the cursor on.
        let p = KeyJobsPage::merge(vec![part(&[], Some("m"))], 10);
        assert!(p.jobs.is_empty());
        assert_eq!(p.next.as_ref().map(JobId::as_str), Some("m"));
    }

    #[test]
    fn moves_shift_each_job_but_never_into_the_past() {
        assert_eq!(KeyMove::Shift(500).apply(10_000, 1_000), 10_500);
        assert_eq!(KeyMove::Shift(-500).apply(10_000, 1_000), 9_500);
        assert_eq!(
            KeyMove::Shift(-50_000).apply(10_000, 1_000),
            1_000,
            "not before now"
        );
        assert_eq!(
            KeyMove::Shift(-50_000).apply(500, 1_000),
            500,
            "a due job stays due"
        );
        assert_eq!(KeyMove::To(7).apply(10_000, 1_000), 7);
        assert!(KeyMove::Shift(i64::MAX).check().is_err());
        assert!(KeyMove::Shift(-3_600_000).check().is_ok());
    }

    #[test]
    fn a_key_listing_refuses_done_and_bad_limits() {
        let r = |state, limit| KeyJobsRequest {
            state,
            limit,
            after: None,
        };
        assert!(r(None, 10).check().is_ok());
        assert!(r(Some(ListState::Dead), 10).check().is_ok());
        assert!(r(Some(ListState::Done), 10).check().is_err());
        assert!(r(None, 0).check().is_err());
    }
}
