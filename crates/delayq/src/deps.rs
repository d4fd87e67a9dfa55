//! Jobs that wait for other jobs (issue 47): a job enqueued with dependencies
//! ([`Dependencies`]: up to [`MAX_DEPENDENCIES`] jobs of any queue) is `waiting` — never
//! claimed — until every one of them has ended; then it is due at the later of its own due
//! time and the end of its last dependency. How each dependency ended ([`DepOutcome`]) decides
//! with the job's [`OnDependencyFailure`]: a dead or cancelled dependency sends it to the dead
//! letters (the default), cancels it, or lets it run anyway.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::name::{JobId, QueueName};

/// Most dependencies one job may have.
pub const MAX_DEPENDENCIES: usize = 1000;

/// A job another job waits for: its queue and id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DepRef {
    /// Its queue.
    pub queue: QueueName,
    /// Its id.
    pub id: JobId,
}

impl fmt::Display for DepRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.queue, self.id)
    }
}

/// What a waiting job does when one of its dependencies ends without succeeding (dead-lettered
/// or cancelled).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnDependencyFailure {
    /// It goes to the dead letters, its `last_error` naming the dependency (so it can be
    /// requeued once the dependency is fixed).
    #[default]
    Dead,
    /// It is cancelled.
    Cancel,
    /// It runs anyway once every dependency has ended.
    Run,
}

impl OnDependencyFailure {
    /// Its code in stores.
    pub const fn code(self) -> u8 {
        match self {
            OnDependencyFailure::Dead => 0,
            OnDependencyFailure::Cancel => 1,
            OnDependencyFailure::Run => 2,
        }
    }

    /// The policy of a store code (an unknown one reads as the default).
    pub fn from_code(code: i64) -> Self {
        match code {
            1 => OnDependencyFailure::Cancel,
            2 => OnDependencyFailure::Run,
            _ => OnDependencyFailure::Dead,
        }
    }
}

/// How a dependency stands, as its dependent sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DepOutcome {
    /// Not ended yet.
    Pending,
    /// Acknowledged (or unknown when the dependent was enqueued: it ended before).
    Done,
    /// Dead-lettered.
    Dead,
    /// Cancelled.
    Cancelled,
}

impl DepOutcome {
    /// Its code in stores: `p`, `o`, `d`, `c` (as a batch counts its jobs' ends).
    pub const fn code(self) -> char {
        match self {
            DepOutcome::Pending => 'p',
            DepOutcome::Done => 'o',
            DepOutcome::Dead => 'd',
            DepOutcome::Cancelled => 'c',
        }
    }

    /// The outcome of a store code.
    pub fn from_code(c: char) -> Option<Self> {
        match c {
            'p' => Some(DepOutcome::Pending),
            'o' => Some(DepOutcome::Done),
            'd' => Some(DepOutcome::Dead),
            'c' => Some(DepOutcome::Cancelled),
            _ => None,
        }
    }

    /// The outcome of a job's end.
    pub fn of(end: crate::batch::Ending) -> Self {
        match end {
            crate::batch::Ending::Succeeded => DepOutcome::Done,
            crate::batch::Ending::Dead => DepOutcome::Dead,
            crate::batch::Ending::Cancelled => DepOutcome::Cancelled,
        }
    }

    /// Whether it ended without succeeding.
    pub fn failed(self) -> bool {
        matches!(self, DepOutcome::Dead | DepOutcome::Cancelled)
    }
}

impl fmt::Display for DepOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DepOutcome::Pending => "pending",
            DepOutcome::Done => "done",
            DepOutcome::Dead => "dead",
            DepOutcome::Cancelled => "cancelled",
        })
    }
}

/// A job's dependencies as it is enqueued ([`crate::NewJob::depends_on`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dependencies {
    /// The jobs it waits for (1–[`MAX_DEPENDENCIES`], each once).
    pub on: Vec<DepRef>,
    /// What a failed dependency does to it.
    pub on_failure: OnDependencyFailure,
    /// Whether its claim carries its dependencies' results ([`DepStatus::result`]).
    pub include_results: bool,
}

impl Dependencies {
    /// Checks the list: 1–[`MAX_DEPENDENCIES`] jobs, none twice, not the job itself.
    pub fn check(&self, queue: &QueueName, id: Option<&JobId>) -> Result<(), InvalidInput> {
        if self.on.is_empty() || self.on.len() > MAX_DEPENDENCIES {
            return Err(InvalidInput::Dependencies(format!(
                "depends_on takes 1-{MAX_DEPENDENCIES} jobs, not {}",
                self.on.len()
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(self.on.len());
        for d in &self.on {
            if !seen.insert(d) {
                return Err(InvalidInput::Dependencies(format!("{d} is named twice")));
            }
            if Some(&d.id) == id && &d.queue == queue {
                return Err(InvalidInput::Dependencies(format!(
                    "{d} cannot depend on itself"
                )));
            }
        }
        Ok(())
    }
}

/// One dependency of a job as its store holds it: what `GET` shows of a waiting job, and what a
/// claim carries with `include_results`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepStatus {
    /// The dependency.
    #[serde(flatten)]
    pub dep: DepRef,
    /// How it stands.
    pub state: DepOutcome,
    /// Its handler's result, when it succeeded with one and the dependent asked for results.
    #[serde(default, skip)]
    pub result: Option<Vec<u8>>,
}

/// The `last_error` of a job dead-lettered because dependency `dep` ended `how`.
pub fn failure_error(dep: &DepRef, how: DepOutcome) -> String {
    format!("dependency {dep} {how}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(q: &str, id: &str) -> DepRef {
        DepRef {
            queue: QueueName::new(q).unwrap(),
            id: JobId::new(id).unwrap(),
        }
    }

    #[test]
    fn dependency_lists_are_checked() {
        let q = QueueName::new("images").unwrap();
        let me = JobId::new("thumbs").unwrap();
        let deps = |on: Vec<DepRef>| Dependencies {
            on,
            ..Dependencies::default()
        };
        assert!(
            deps(vec![r("images", "resize")])
                .check(&q, Some(&me))
                .is_ok()
        );
        assert!(deps(vec![]).check(&q, Some(&me)).is_err());
        assert!(
            deps(vec![r("images", "a"), r("images", "a")])
                .check(&q, Some(&me))
                .is_err()
        );
        assert!(
            deps(vec![r("images", "thumbs")])
                .check(&q, Some(&me))
                .is_err()
        );
        assert!(
            deps(vec![r("mail", "thumbs")]).check(&q, Some(&me)).is_ok(),
            "the same id in another queue is another job"
        );
        let many = (0..=MAX_DEPENDENCIES)
            .map(|i| r("images", &format!("j{i}")))
            .collect();
        assert!(deps(many).check(&q, Some(&me)).is_err());
    }

    #[test]
    fn outcomes_round_trip_their_codes() {
        for o in [
            DepOutcome::Pending,
            DepOutcome::Done,
            DepOutcome::Dead,
            DepOutcome::Cancelled,
        ] {
            assert_eq!(DepOutcome::from_code(o.code()), Some(o));
        }
        for p in [
            OnDependencyFailure::Dead,
            OnDependencyFailure::Cancel,
            OnDependencyFailure::Run,
        ] {
            assert_eq!(OnDependencyFailure::from_code(i64::from(p.code())), p);
        }
        assert_eq!(
            failure_error(&r("images", "resize"), DepOutcome::Dead),
            "dependency images/resize dead"
        );
    }
}
