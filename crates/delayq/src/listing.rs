//! Browsing a queue's jobs: which jobs a listing covers ([`ListState`]), a page of them
//! ([`JobPage`]) and the cursor that continues it ([`Cursor`]).
//!
//! Every listing is ordered by the score the store indexes the state by (scheduled and due:
//! due time; leased: lease deadline; dead: failure time), ties by id (byte order). A cursor is
//! the `(score, id)` of the last job handed out, so the next page starts strictly after it:
//! a job that stays in its state is never repeated or skipped, whatever moves meanwhile.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::job::JobInfo;

/// Most jobs one listing page may hold.
pub const MAX_PAGE: usize = 1000;

/// Checks a listing's page size: 1–[`MAX_PAGE`].
pub fn check_limit(limit: usize) -> Result<(), InvalidInput> {
    if (1..=MAX_PAGE).contains(&limit) {
        Ok(())
    } else {
        Err(InvalidInput::Query(format!(
            "limit must be 1-{MAX_PAGE}, not {limit}"
        )))
    }
}

/// Checks that a bulk cancel names a waiting state (scheduled or due).
pub fn check_cancellable(state: ListState) -> Result<(), InvalidInput> {
    match state {
        ListState::Scheduled | ListState::Due => Ok(()),
        s => Err(InvalidInput::Query(format!(
            "only scheduled or due jobs can be cancelled in bulk, not {s}"
        ))),
    }
}

/// Which jobs a listing covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListState {
    /// Waiting for a due time still in the future.
    Scheduled,
    /// Due now and waiting for a consumer.
    Due,
    /// Under a lease (ordered by lease deadline).
    Leased,
    /// Dead-lettered (ordered by failure time).
    Dead,
    /// Completed and kept (ordered by when retention ends).
    Done,
    /// Waiting for their dependencies to end ([`crate::deps`]; ordered by due time).
    Waiting,
}

impl ListState {
    /// Every listing, in display order.
    pub const ALL: [ListState; 6] = [
        ListState::Waiting,
        ListState::Scheduled,
        ListState::Due,
        ListState::Leased,
        ListState::Dead,
        ListState::Done,
    ];

    /// Its name in the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            ListState::Scheduled => "scheduled",
            ListState::Due => "due",
            ListState::Leased => "leased",
            ListState::Dead => "dead",
            ListState::Done => "done",
            ListState::Waiting => "waiting",
        }
    }
}

impl fmt::Display for ListState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ListState {
    type Err = InvalidInput;

    fn from_str(s: &str) -> Result<Self, InvalidInput> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| {
                InvalidInput::Query(format!(
                    "state must be one of waiting, scheduled, due, leased, dead, done; not {s:?}"
                ))
            })
    }
}

/// Where a listing continues: strictly after the job with this score and id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    /// The score (ms since epoch) of the last job handed out.
    pub score: u64,
    /// Its id.
    pub id: String,
}

/// The opaque text form: `<score hex>.<id as hex bytes>`.
impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}.", self.score)?;
        for b in self.id.bytes() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for Cursor {
    type Err = InvalidInput;

    fn from_str(s: &str) -> Result<Self, InvalidInput> {
        let bad = || InvalidInput::Query(format!("{s:?} is not a cursor this server gave out"));
        let (score, id) = s.split_once('.').ok_or_else(bad)?;
        let score = u64::from_str_radix(score, 16).map_err(|_| bad())?;
        if id.is_empty() || id.len() % 2 != 0 || id.len() > 2 * crate::limits::MAX_ID_BYTES {
            return Err(bad());
        }
        let bytes = (0..id.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&id[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| bad())?;
        let id = String::from_utf8(bytes).map_err(|_| bad())?;
        Ok(Self { score, id })
    }
}

/// Which page of a listing ([`crate::Inspect::list`]): jobs in `state`, at most `limit`, after
/// the `after` of the previous page.
#[derive(Clone, Debug, PartialEq)]
pub struct ListRequest {
    /// The state listed.
    pub state: ListState,
    /// Most jobs on the page.
    pub limit: usize,
    /// The previous page's [`JobPage::next`]; `None`: the first page.
    pub after: Option<Cursor>,
}

impl ListRequest {
    /// The page of `state` after `after`, at most `limit` jobs.
    pub fn new(state: ListState, limit: usize, after: Option<Cursor>) -> Self {
        Self {
            state,
            limit,
            after,
        }
    }

    /// Its state, limit and cursor, the limit checked ([`check_limit`]): what a store reads
    /// before it lists.
    pub fn checked(self) -> Result<(ListState, usize, Option<Cursor>), InvalidInput> {
        check_limit(self.limit)?;
        Ok((self.state, self.limit, self.after))
    }
}

/// One page of a listing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobPage {
    /// The jobs, in listing order.
    pub jobs: Vec<JobInfo>,
    /// Where the next page starts; `None` when this page reached the end.
    pub next: Option<Cursor>,
}

/// What a search by id prefix found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Found {
    /// Matching jobs, by id.
    pub jobs: Vec<JobInfo>,
    /// Whether the store searched by prefix; `false`: it looked up the exact id only (Redis
    /// keeps no index by id order, and a scan of every id is not cheap).
    pub by_prefix: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let c = Cursor {
            score: 1_700_000_000_123,
            id: "order:42/é".into(),
        };
        assert_eq!(c.to_string().parse::<Cursor>().unwrap(), c);
        for bad in ["", "x", "12", "zz.61", "1.6", "1.ff", "1."] {
            assert!(bad.parse::<Cursor>().is_err(), "{bad}");
        }
        assert!("due".parse::<ListState>().is_ok());
        assert!("done".parse::<ListState>().is_ok());
        assert!("finished".parse::<ListState>().is_err());
    }
}
