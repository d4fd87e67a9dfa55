//! Fair shares of `POST /v1/claim` by weight: for each list of queues claimed together, the
//! jobs handed out from each queue divided by its weight (its virtual time), kept by this
//! server across requests. Each claim asks the queues furthest behind first, so every worker
//! that claims the same list shares one account: 3 : 1 weights give 3 : 1 jobs while both queues
//! have due jobs, interleaved — the consumer's own fair queuing (`delayq::QueueOrder`), server
//! side. A queue asked while it had nothing due starts again at the current virtual time, so a
//! queue idle for a while gets no burst of credit.

use std::collections::HashMap;
use std::sync::Mutex;

use delayq::QueueName;

/// Most queue lists kept; past it the least recently used is forgotten (it starts even).
const MAX_LISTS: usize = 1024;

/// One list's account.
struct Account {
    /// Per queue of the list: jobs handed out ÷ weight.
    served: Vec<f64>,
    /// The virtual time of the last queue that got jobs.
    now: f64,
    /// When the list was last claimed (a counter), for forgetting the least recent.
    used: u64,
}

/// Each list of queues (with weights) claimed together, and its account.
type Lists = HashMap<Vec<(QueueName, u32)>, Account>;

/// The accounts of this server's claims over several queues.
#[derive(Default)]
pub(crate) struct FairShares {
    /// The accounts, and a counter of claims (the accounts' `used`).
    lists: Mutex<(Lists, u64)>,
}

impl FairShares {
    /// The order in which a claim over `queues` asks them: furthest behind first (the order
    /// given on a tie).
    pub(crate) fn order(&self, queues: &[(QueueName, u32)]) -> Vec<usize> {
        let mut lists = self.lists.lock().expect("fair shares lock");
        let (map, tick) = &mut *lists;
        *tick += 1;
        let used = *tick;
        let mut idx: Vec<usize> = (0..queues.len()).collect();
        if let Some(a) = map.get_mut(queues) {
            a.used = used;
            // Compared at a nanojob's resolution: sums of 1/weight that are equal but for
            // rounding are a tie, which the order given breaks.
            let key = |i: usize| (a.served[i] * 1e9).round() as i64;
            idx.sort_by_key(|i| key(*i));
        }
        idx
    }

    /// Records what a claim over `queues` handed out: `got[i]` jobs from queue `i`, where
    /// `asked[i]` says whether the claim asked it (one asked that gave nothing had nothing due).
    pub(crate) fn claimed(&self, queues: &[(QueueName, u32)], asked: &[bool], got: &[usize]) {
        let mut lists = self.lists.lock().expect("fair shares lock");
        let (map, tick) = &mut *lists;
        *tick += 1;
        let used = *tick;
        if !map.contains_key(queues) && map.len() >= MAX_LISTS {
            let oldest = map
                .iter()
                .min_by_key(|(_, a)| a.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        let a = map.entry(queues.to_vec()).or_insert_with(|| Account {
            served: vec![0.0; queues.len()],
            now: 0.0,
            used,
        });
        a.used = used;
        for (i, (_, w)) in queues.iter().enumerate() {
            if got[i] > 0 {
                let start = a.served[i].max(a.now);
                a.now = a.now.max(start);
                a.served[i] = start + got[i] as f64 / f64::from(*w);
            }
        }
        for i in 0..queues.len() {
            if asked[i] && got[i] == 0 {
                a.served[i] = a.served[i].max(a.now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qs() -> Vec<(QueueName, u32)> {
        vec![
            (QueueName::new("heavy").unwrap(), 3),
            (QueueName::new("light").unwrap(), 1),
        ]
    }

    /// One job per claim, both backlogged: exactly 3 : 1, never more than 3 in a row.
    #[test]
    fn weights_give_their_share_interleaved() {
        let f = FairShares::default();
        let q = qs();
        let mut seq = Vec::new();
        for _ in 0..400 {
            let first = f.order(&q)[0];
            let mut got = [0, 0];
            got[first] = 1;
            f.claimed(&q, &[true, first == 1], &got);
            seq.push(first);
        }
        assert_eq!(seq.iter().filter(|i| **i == 0).count(), 300);
        assert!(
            seq.chunk_by(|a, b| a == b).all(|run| run.len() <= 3),
            "{seq:?}"
        );
    }

    /// A queue that had nothing due for a while starts even, not with a burst of credit.
    #[test]
    fn an_idle_queue_gets_no_credit() {
        let f = FairShares::default();
        let q = qs();
        // 100 claims while only the light queue has jobs: the heavy one is asked and empty.
        for _ in 0..100 {
            f.claimed(&q, &[true, true], &[0, 1]);
        }
        let mut heavy_run = 0;
        while f.order(&q)[0] == 0 {
            f.claimed(&q, &[true, false], &[1, 0]);
            heavy_run += 1;
            // Its share of one light job's worth of virtual time (3), and a tie: not the 300
            // its 100 idle claims would have been worth.
            assert!(heavy_run <= 4, "a burst of {heavy_run}");
        }
    }
}
