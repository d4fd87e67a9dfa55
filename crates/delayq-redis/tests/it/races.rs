//! Atomic transitions (guarantee 5): concurrent callers racing on the same jobs never both
//! win. Each test would fail if a transition were a read-then-write over two round trips.

use std::collections::HashSet;

use crate::common::*;
use delayq::{Backend, CancelOutcome, NewJob, Producer};
use delayq_redis::RedisBackend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_racing_claims_has_exactly_one_winner_per_job() {
    let server = RedisServer::start();
    let q = queue();
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let n = 2000;
    let jobs: Vec<_> = (0..n).map(|i| job(&format!("{i}"), 0)).collect();
    p.enqueue_batch(jobs).await.unwrap();

    let mut claimers = Vec::new();
    for _ in 0..3 {
        let bc = RedisBackend::connect(&server.url()).await.unwrap();
        let q = q.clone();
        claimers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let req = claim_req(7, 60_000);
                let batch = bc.claim(&q, req).await.unwrap();
                if batch.jobs.is_empty() {
                    return got;
                }
                got.extend(batch.jobs.into_iter().map(|j| j.id.to_string()));
            }
        }));
    }
    let canceller = {
        let p = Producer::new(
            RedisBackend::connect(&server.url()).await.unwrap(),
            q.clone(),
        );
        tokio::spawn(async move {
            let mut won = Vec::new();
            for i in (0..n).rev() {
                let id = delayq::JobId::new(format!("{i}")).unwrap();
                if p.cancel(&id).await.unwrap() == CancelOutcome::Cancelled {
                    won.push(id.to_string());
                }
            }
            won
        })
    };
    let mut claimed = Vec::new();
    for c in claimers {
        claimed.extend(c.await.unwrap());
    }
    let cancelled = canceller.await.unwrap();
    let claimed_set: HashSet<_> = claimed.iter().cloned().collect();
    assert_eq!(claimed_set.len(), claimed.len(), "a job was claimed twice");
    let cancelled_set: HashSet<_> = cancelled.iter().cloned().collect();
    assert!(
        claimed_set.is_disjoint(&cancelled_set),
        "a job was both cancelled and claimed"
    );
    assert_eq!(
        claimed.len() + cancelled.len(),
        n,
        "every job went exactly one way"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_enqueues_of_one_id_create_it_once() {
    let server = RedisServer::start();
    let q = queue();
    let mut tasks = Vec::new();
    for t in 0..4 {
        let b = RedisBackend::connect(&server.url()).await.unwrap();
        let q = q.clone();
        tasks.push(tokio::spawn(async move {
            let p = Producer::new(b, q);
            let mut created = 0;
            for i in 0..300 {
                let j = NewJob::new(format!("from {t}").into_bytes())
                    .id(delayq::JobId::new(format!("same-{i}")).unwrap());
                if p.enqueue(j).await.unwrap().created {
                    created += 1;
                }
            }
            created
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 300, "each id created by exactly one producer");
}
