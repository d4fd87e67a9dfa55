//! The cold tier in calls on many jobs: a key's jobs listed, moved and cancelled across both
//! tiers (each job once, never moved twice), a queue's bulk cancel and the search by id.

use delayq::{
    Due, Inspect, JobKey, KeyJobsRequest, KeyMove, ListState, NewJob, Producer, QueueName,
};
use delayq_postgres::Tiered;
use delayq_redis::RedisBackend;

use crate::common::{id, q, tiered};

const HOUR: u64 = 3_600_000;

fn key(k: &str) -> JobKey {
    JobKey::new(k).unwrap()
}

/// Every page of the key's jobs, `limit` at a time: (id, cold, due) in page order.
async fn pages(
    t: &Tiered<RedisBackend>,
    queue: &QueueName,
    k: &str,
    state: Option<ListState>,
    limit: usize,
) -> Vec<(String, bool, u64)> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = t
            .key_jobs(
                queue,
                &key(k),
                KeyJobsRequest {
                    state,
                    limit,
                    after,
                },
            )
            .await
            .unwrap();
        assert!(page.jobs.len() <= limit);
        out.extend(
            page.jobs
                .iter()
                .map(|j| (j.id.to_string(), j.cold, j.due_at_ms)),
        );
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
}

#[tokio::test]
async fn a_keys_jobs_are_listed_moved_and_cancelled_in_both_tiers() {
    let orders = q("orders");
    let t = tiered(HOUR, &orders).await.0;
    let p = Producer::new(t.clone(), orders.clone());
    let now = delayq::job::system_now_ms();
    // The key's jobs: a1, a3 near (in Redis); a2, a4, a5 far (cold); another key's and a
    // job without a key, both far.
    let mut due = std::collections::HashMap::new();
    for (name, at) in [
        ("a1", now + 60_000),
        ("a2", now + 3 * HOUR),
        ("a3", now + 120_000),
        ("a4", now + 5 * HOUR),
        ("a5", now + 4 * HOUR),
    ] {
        p.enqueue(
            NewJob::new(name)
                .id(id(name))
                .key(key("u42"))
                .due(Due::At(at)),
        )
        .await
        .unwrap();
        due.insert(name.to_string(), at);
    }
    p.enqueue(
        NewJob::new("b")
            .id(id("b1"))
            .key(key("u7"))
            .due(Due::At(now + 3 * HOUR)),
    )
    .await
    .unwrap();
    p.enqueue(NewJob::new("n").id(id("n1")).due(Due::At(now + 3 * HOUR)))
        .await
        .unwrap();
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 5);

    // Listed by id, two at a time, each once, the cold ones marked.
    let want = |due: &std::collections::HashMap<String, u64>, pairs: &[(&str, bool)]| {
        pairs
            .iter()
            .map(|(i, c)| (i.to_string(), *c, due[*i]))
            .collect::<Vec<_>>()
    };
    let all = [
        ("a1", false),
        ("a2", true),
        ("a3", false),
        ("a4", true),
        ("a5", true),
    ];
    assert_eq!(pages(&t, &orders, "u42", None, 2).await, want(&due, &all));
    assert_eq!(
        pages(&t, &orders, "u42", Some(ListState::Scheduled), 100).await,
        want(&due, &all)
    );
    assert!(
        pages(&t, &orders, "u42", Some(ListState::Leased), 100)
            .await
            .is_empty()
    );
    assert_eq!(
        pages(&t, &orders, "u7", None, 10).await,
        vec![("b1".to_string(), true, now + 3 * HOUR)]
    );

    // Shifted later: every job once, the cold ones still cold.
    assert_eq!(
        t.reschedule_key(&orders, &key("u42"), KeyMove::Shift(60_000))
            .await
            .unwrap(),
        5
    );
    for v in due.values_mut() {
        *v += 60_000;
    }
    assert_eq!(pages(&t, &orders, "u42", None, 100).await, want(&due, &all));

    // Shifted two and a half hours earlier: a2 (due in 3 h) enters the window and Redis, at
    // exactly its shifted time (moved once, not once more by the store's half of the call);
    // a4 and a5 stay cold; the near ones stop at now.
    let back = 5 * HOUR / 2;
    let before = delayq::job::system_now_ms();
    assert_eq!(
        t.reschedule_key(&orders, &key("u42"), KeyMove::Shift(-(back as i64)))
            .await
            .unwrap(),
        5
    );
    let after = delayq::job::system_now_ms();
    let got = pages(&t, &orders, "u42", None, 100).await;
    let by = |i: &str| got.iter().find(|g| g.0 == i).unwrap().clone();
    assert_eq!(by("a2"), ("a2".into(), false, due["a2"] - back));
    let a2 = t.inner().get(&orders, &id("a2")).await.unwrap().unwrap();
    assert_eq!(a2.due_at_ms, due["a2"] - back, "in Redis");
    assert_eq!(by("a4"), ("a4".into(), true, due["a4"] - back));
    assert_eq!(by("a5"), ("a5".into(), true, due["a5"] - back));
    for near in ["a1", "a3"] {
        let d = by(near).2;
        assert!((before..=after).contains(&d), "{near} at now: {d}");
    }
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 4);

    // Cancelled: every job of the key in both tiers, and nothing else.
    let c = t.cancel_key(&orders, &key("u42"), false).await.unwrap();
    assert_eq!((c.cancelled, c.running), (5, 0));
    assert!(pages(&t, &orders, "u42", None, 100).await.is_empty());
    for gone in ["a1", "a2", "a4"] {
        assert!(t.get(&orders, &id(gone)).await.unwrap().is_none(), "{gone}");
    }
    assert!(t.get(&orders, &id("b1")).await.unwrap().unwrap().cold);
    assert!(t.get(&orders, &id("n1")).await.unwrap().unwrap().cold);
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 2);
}

#[tokio::test]
async fn a_bulk_cancel_and_the_search_by_id_see_the_tier() {
    let orders = q("orders");
    let other = q("other");
    let t = tiered(HOUR, &orders).await.0;
    t.cold()
        .unwrap()
        .set_cold_after(&other, Some(HOUR))
        .await
        .unwrap();
    let now = delayq::job::system_now_ms();
    let p = Producer::new(t.clone(), orders.clone());
    for i in 0..30u64 {
        // Even ones near, odd ones far.
        let at = now + if i % 2 == 0 { 60_000 } else { 2 * HOUR + i };
        p.enqueue(NewJob::new("x").id(id(&format!("j{i}"))).due(Due::At(at)))
            .await
            .unwrap();
    }
    Producer::new(t.clone(), other.clone())
        .enqueue(NewJob::new("o").id(id("o1")).due(Due::At(now + 2 * HOUR)))
        .await
        .unwrap();
    let found = t.search(&orders, "j7", 10).await.unwrap();
    assert_eq!(found.jobs.len(), 1);
    assert!(found.jobs[0].cold && found.jobs[0].id.as_str() == "j7");
    assert!(t.search(&orders, "nope", 10).await.unwrap().jobs.is_empty());

    assert_eq!(t.cancel_all(&orders, ListState::Due).await.unwrap(), 0);
    assert_eq!(
        t.cancel_all(&orders, ListState::Scheduled).await.unwrap(),
        30
    );
    assert_eq!(t.cold().unwrap().count(&orders).await.unwrap(), 0);
    assert_eq!(t.stats(&orders).await.unwrap().scheduled, 0);
    assert!(t.get(&orders, &id("j7")).await.unwrap().is_none());
    assert!(
        t.get(&other, &id("o1")).await.unwrap().unwrap().cold,
        "untouched"
    );
}
