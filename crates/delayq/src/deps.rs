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

/// Most bytes of its dependencies' results a dependent keeps for its claim (as a batch's
/// callback: [`crate::batch::MAX_CALLBACK_RESULT_BYTES`]); a result that no longer fits is
/// left out (its dependency still listed, without a result).
pub const MAX_RESULT_BYTES: usize = crate::batch::MAX_CALLBACK_RESULT_BYTES;

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

/// An order of jobs in which each comes after those it waits for (`waits_for[i]`: the
/// positions of the jobs job `i` waits for), stable otherwise; `Err(i)` names a job of a
/// cycle.
pub fn topological(waits_for: &[Vec<usize>]) -> Result<Vec<usize>, usize> {
    let n = waits_for.len();
    let mut left: Vec<usize> = waits_for.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, w) in waits_for.iter().enumerate() {
        for &j in w {
            dependents[j].push(i);
        }
    }
    // The lowest position first among the jobs free to go (a min-heap): stable.
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..n)
        .filter(|&i| left[i] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &d in &dependents[i] {
            left[d] -= 1;
            if left[d] == 0 {
                ready.push(std::cmp::Reverse(d));
            }
        }
    }
    match (0..n).find(|&i| left[i] > 0) {
        Some(i) => Err(i),
        None => Ok(order),
    }
}

/// The order a batch of jobs of `queue` is written in so that a job's dependencies in the
/// same batch exist before it registers with them (a dependency not yet written would count
/// as gone, so ended); `None` when no job waits for another of the batch (the order given).
pub fn batch_order(
    queue: &QueueName,
    jobs: &[crate::NewJob],
) -> Result<Option<Vec<usize>>, InvalidInput> {
    if jobs.iter().all(|j| j.depends.is_none()) {
        return Ok(None);
    }
    let at: std::collections::HashMap<&JobId, usize> = jobs
        .iter()
        .enumerate()
        .filter_map(|(i, j)| j.id.as_ref().map(|id| (id, i)))
        .collect();
    let mut any = false;
    let waits_for: Vec<Vec<usize>> = jobs
        .iter()
        .map(|j| {
            j.depends
                .iter()
                .flat_map(|d| &d.on)
                .filter(|d| &d.queue == queue)
                .filter_map(|d| at.get(&d.id).copied())
                .inspect(|_| any = true)
                .collect()
        })
        .collect();
    if !any {
        return Ok(None);
    }
    topological(&waits_for).map(Some).map_err(|i| {
        let id = jobs[i].id.as_ref().map_or("", JobId::as_str);
        InvalidInput::Dependencies(format!("job {i} ({id}) is in a cycle of dependencies"))
    })
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
    fn dependencies_come_first_stably_and_cycles_are_found() {
        // 0 waits for 2, 2 waits for 1.
        assert_eq!(topological(&[vec![2], vec![], vec![1]]), Ok(vec![1, 2, 0]));
        assert_eq!(topological(&[vec![], vec![], vec![]]), Ok(vec![0, 1, 2]));
        assert!(topological(&[vec![1], vec![0]]).is_err());
        assert_eq!(topological(&[vec![], vec![2], vec![1]]), Err(1));
        assert_eq!(topological(&[vec![0]]), Err(0));
        let q = QueueName::new("images").unwrap();
        let job = |id: &str, on: &[&str]| {
            let j = crate::NewJob::new(b"x".to_vec()).id(JobId::new(id).unwrap());
            if on.is_empty() {
                j
            } else {
                j.depends_on(on.iter().map(|d| r("images", d)))
            }
        };
        let jobs = [
            job("email", &["thumbs"]),
            job("thumbs", &["resize"]),
            job("resize", &[]),
        ];
        assert_eq!(batch_order(&q, &jobs).unwrap(), Some(vec![2, 1, 0]));
        assert_eq!(batch_order(&q, &[job("a", &["elsewhere"])]).unwrap(), None);
        assert!(batch_order(&q, &[job("a", &["b"]), job("b", &["a"])]).is_err());
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
