//! Dead-letter tools: list with paging, get, requeue one / all, purge; a dead job keeps its
//! payload, attempts and last error.

use std::time::Duration;

use crate::common::*;
use delayq::{Backend, Error, Inspect, JobState, Nack, Producer, QueueName};
use delayq_redis::RedisBackend;

/// Enqueues `n` jobs and kills each with a nack(dead); returns their ids in failure order.
async fn make_dead(b: &RedisBackend, q: &QueueName, n: usize) -> Vec<String> {
    let p = Producer::new(b.clone(), q.clone());
    let mut ids = Vec::new();
    for i in 0..n {
        let name = format!("d{i:03}");
        p.enqueue(job(&name, 0)).await.unwrap();
        let got = b.claim(q, claim_req(1, 30_000)).await.unwrap();
        let nack = Nack {
            dead: true,
            ..Nack::error(format!("failed {name}"))
        };
        b.nack(q, got.jobs[0].lease_ref(), nack).await.unwrap();
        ids.push(name);
        // Distinct failure times keep the order deterministic.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    ids
}

#[tokio::test]
async fn list_pages_through_dead_jobs_with_their_history() {
    let (_s, b, q) = setup().await;
    let ids = make_dead(&b, &q, 25).await;
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let page = b
            .list(
                &q,
                delayq::ListRequest::new(delayq::ListState::Dead, 10, cursor),
            )
            .await
            .unwrap();
        listed.extend(page.jobs);
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(
        listed.iter().map(|j| j.id.to_string()).collect::<Vec<_>>(),
        ids
    );
    let first = &listed[0];
    assert_eq!(first.state, JobState::Dead);
    assert_eq!(first.attempt, 1);
    assert_eq!(first.payload, b"d000");
    assert_eq!(first.last_error.as_deref(), Some("failed d000"));
    assert!(first.failed_at_ms.is_some());
    assert_eq!(
        b.get(&q, &id("d003")).await.unwrap().unwrap().state,
        JobState::Dead
    );
    assert_eq!(b.stats(&q).await.unwrap().dead, 25);
}

#[tokio::test]
async fn requeue_one_puts_it_back_due_now_with_attempts_reset() {
    let (_s, b, q) = setup().await;
    make_dead(&b, &q, 2).await;
    b.dead_requeue(&q, &id("d001")).await.unwrap();
    let info = b.get(&q, &id("d001")).await.unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempt, info.last_error),
        (JobState::Scheduled, 0, None)
    );
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.dead, st.due), (1, 1));
    let got = b.claim(&q, claim_req(5, 30_000)).await.unwrap();
    assert_eq!(got.jobs.len(), 1);
    assert_eq!(got.jobs[0].payload, b"d001");
    // Not dead (leased now) and unknown ids are refused with typed errors.
    assert!(matches!(
        b.dead_requeue(&q, &id("d001")).await,
        Err(Error::WrongState {
            state: JobState::Leased,
            ..
        })
    ));
    assert!(matches!(
        b.dead_requeue(&q, &id("nope")).await,
        Err(Error::NotFound { .. })
    ));
}

#[tokio::test]
async fn requeue_all_and_purge() {
    let (s, b, q) = setup().await;
    make_dead(&b, &q, 30).await;
    assert_eq!(b.dead_requeue_all(&q).await.unwrap(), 30);
    let st = b.stats(&q).await.unwrap();
    assert_eq!((st.dead, st.waiting()), (0, 30));
    // Kill them again, then purge: records are deleted too.
    let got = b.claim(&q, claim_req(100, 30_000)).await.unwrap();
    for j in got.jobs {
        b.nack(
            &q,
            j.lease_ref(),
            Nack {
                dead: true,
                ..Nack::error("again")
            },
        )
        .await
        .unwrap();
    }
    assert_eq!(b.stats(&q).await.unwrap().dead, 30);
    assert_eq!(b.dead_purge(&q).await.unwrap(), 30);
    assert_eq!(b.dead_purge(&q).await.unwrap(), 0);
    assert!(b.get(&q, &id("d000")).await.unwrap().is_none());
    assert_eq!(
        s.command(&["DBSIZE"]),
        "2",
        "only the fence counter and the series are left"
    );
}
