//! Record formats stay readable: `tests/fixtures/records-v1.json` holds every key a Redis had
//! after an earlier build (delayq 0.1.0 at 8a7281b, record format 1) wrote jobs scheduled, due,
//! dead and done, a lane queue, a queue sharded over 4 slots, queue limits and a cron schedule.
//! Loaded into a fresh Redis, this build reads, claims and acknowledges all of it.
//! `tests/fixtures/keys-before-index.json` holds keyed jobs written by the build before the key
//! index (c23a7ff: in every state, in a lane and a time window, on 4 shards): this build indexes
//! them once and lists, cancels and moves them by key. (Two builds at once on one Redis:
//! `scripts/upgrade-check`.)

use base64::Engine;
use delayq::{Backend, Inspect, JobState, QueueName, Schedules};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use redis::AsyncCommands;

use crate::common::{claim_req, id};

async fn load(server: &RedisServer, fixture: &str) {
    let path = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let fixture: serde_json::Value = serde_json::from_str(&text).unwrap();
    let b64 = |v: &serde_json::Value| {
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap()
    };
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    for k in fixture["keys"].as_array().unwrap() {
        let key = k["key"].as_str().unwrap();
        let v = &k["value"];
        let items = || v.as_array().unwrap().iter();
        match k["type"].as_str().unwrap() {
            "string" => c.set::<_, _, ()>(key, b64(v)).await.unwrap(),
            "hash" => {
                let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                    items().map(|p| (b64(&p[0]), b64(&p[1]))).collect();
                c.hset_multiple::<_, _, _, ()>(key, &pairs).await.unwrap();
            }
            "zset" => {
                for p in items() {
                    let score: f64 = p[1].as_str().unwrap().parse().unwrap();
                    c.zadd::<_, _, _, ()>(key, b64(&p[0]), score).await.unwrap();
                }
            }
            "list" => {
                for item in items() {
                    c.rpush::<_, _, ()>(key, b64(item)).await.unwrap();
                }
            }
            other => panic!("a {other} key in the fixture"),
        }
    }
}

#[tokio::test]
async fn records_written_by_an_earlier_build_are_read_claimed_and_acked() {
    let server = RedisServer::start();
    load(&server, "records-v1.json").await;
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let q = |n: &str| QueueName::new(n).unwrap();
    let (orders, mail) = (q("orders"), q("mail"));

    let later = b.get(&orders, &id("later-2")).await.unwrap().unwrap();
    assert_eq!(
        (
            later.state,
            later.max_attempts,
            later.priority,
            later.due_at_ms
        ),
        (JobState::Scheduled, 3, 7, 2_051_222_400_000)
    );
    let due2 = b.get(&orders, &id("due-2")).await.unwrap().unwrap();
    assert_eq!(due2.timeout_ms, Some(30_000));
    assert!(due2.expires_at_ms.is_some());
    let state = |q: QueueName, i: &'static str| {
        let b = b.clone();
        async move { b.get(&q, &id(i)).await.unwrap().map(|j| j.state) }
    };
    assert_eq!(state(mail.clone(), "dead-1").await, Some(JobState::Dead));
    assert_eq!(state(mail.clone(), "done-1").await, Some(JobState::Done));
    for i in ["lane-1", "lane-2", "lane-3"] {
        assert_eq!(state(q("lane"), i).await, Some(JobState::Scheduled), "{i}");
    }
    for i in ["sh-1", "sh-2", "sh-3"] {
        assert_eq!(
            state(q("sharded"), i).await,
            Some(JobState::Scheduled),
            "{i}"
        );
    }
    assert_eq!(b.stats(&q("lane")).await.unwrap().scheduled, 3);
    assert_eq!(b.stats(&q("sharded")).await.unwrap().scheduled, 3);
    let settings = b.settings(&orders).await.unwrap();
    assert_eq!(settings.max_in_flight, Some(100), "{settings:?}");
    assert!(settings.rate.is_some(), "{settings:?}");
    assert_eq!(b.settings(&q("sharded")).await.unwrap().shards, 4);
    assert!(b.settings(&q("lane")).await.unwrap().lane);
    let s = b.schedules(&orders).await.unwrap();
    assert_eq!(
        s.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["nightly"]
    );

    let batch = b.claim(&orders, claim_req(10, 30_000)).await.unwrap();
    let mut ids: Vec<String> = batch.jobs.iter().map(|j| j.id.to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["due-1", "due-2"]);
    let acks = batch.jobs.iter().map(|j| j.to_ack()).collect();
    let out = b.ack(&orders, acks).await.unwrap();
    assert!(
        out.iter().all(|o| *o == delayq::AckOutcome::Acked),
        "{out:?}"
    );
    // And the queues take new jobs beside the old ones.
    let p = delayq::Producer::new(b.clone(), q("lane"));
    p.enqueue(crate::common::job("lane-4", 3_600_000))
        .await
        .unwrap();
    assert_eq!(b.stats(&q("lane")).await.unwrap().scheduled, 4);
}

/// The ids of `key`'s jobs in `q` with their states, one page.
async fn key_ids(b: &RedisBackend, q: &QueueName, key: &str) -> Vec<(String, JobState)> {
    let req = delayq::KeyJobsRequest {
        state: None,
        limit: 100,
        after: None,
    };
    let page = b
        .key_jobs(q, &delayq::JobKey::new(key).unwrap(), req)
        .await
        .unwrap();
    assert!(page.next.is_none());
    page.jobs
        .into_iter()
        .map(|j| (j.id.to_string(), j.state))
        .collect()
}

#[tokio::test]
async fn keyed_jobs_written_before_the_key_index_are_found_by_key() {
    let server = RedisServer::start();
    load(&server, "keys-before-index.json").await;
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let q = |n: &str| QueueName::new(n).unwrap();
    let key = |k: &str| delayq::JobKey::new(k).unwrap();
    let (keyed, lanes, sharded) = (q("keyed"), q("lanes"), q("keyed4"));
    let lanes_before = b.stats(&lanes).await.unwrap();
    assert_eq!(
        lanes_before.scheduled + lanes_before.due,
        5,
        "{lanes_before:?}"
    );
    use JobState::{Dead, Leased, Scheduled};
    assert_eq!(
        key_ids(&b, &keyed, "acct-1").await,
        [
            ("k-dead".into(), Dead),
            ("k-due".into(), Scheduled),
            ("k-leased".into(), Leased),
            ("k-sched".into(), Scheduled)
        ]
    );
    assert_eq!(
        key_ids(&b, &keyed, "acct-2").await,
        [("m-sched".into(), Scheduled)]
    );
    // The lane's and the window's keyed jobs, moved out of them once; the keyless one stays.
    let lane1: Vec<String> = key_ids(&b, &lanes, "acct-1")
        .await
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    assert_eq!(lane1, ["lane-0", "lane-2", "win-0"]);
    assert_eq!(
        key_ids(&b, &lanes, "acct-2").await,
        [("lane-1".into(), Scheduled)]
    );
    let lanes_after = b.stats(&lanes).await.unwrap();
    assert_eq!(
        (lanes_after.scheduled, lanes_after.due),
        (lanes_before.scheduled, lanes_before.due),
        "the same jobs, counted once"
    );
    for i in ["lane-0", "lane-1", "lane-2", "win-0", "lane-plain"] {
        let j = b.get(&lanes, &id(i)).await.unwrap().expect(i);
        assert_eq!(j.state, Scheduled, "{i}");
    }
    let sharded_ids = key_ids(&b, &sharded, "acct-1").await;
    assert_eq!(sharded_ids.len(), 12, "every shard indexed");
    // Cancelled and moved by key like jobs written now.
    let done = b.cancel_key(&lanes, &key("acct-1"), false).await.unwrap();
    assert_eq!(done.cancelled, 3);
    assert!(b.get(&lanes, &id("lane-0")).await.unwrap().is_none());
    assert!(b.get(&lanes, &id("lane-plain")).await.unwrap().is_some());
    let after = b.stats(&lanes).await.unwrap();
    assert_eq!(after.scheduled + after.due, 2);
    let at = 2_000_000_000_000;
    let moved = b
        .reschedule_key(&sharded, &key("acct-1"), delayq::KeyMove::To(at))
        .await
        .unwrap();
    assert_eq!(moved, 12);
    assert_eq!(
        b.get(&sharded, &id("s-07"))
            .await
            .unwrap()
            .unwrap()
            .due_at_ms,
        at
    );
    let done = b.cancel_key(&keyed, &key("acct-1"), true).await.unwrap();
    assert_eq!((done.cancelled, done.running), (3, 1));
    assert_eq!(
        b.get(&keyed, &id("k-dead")).await.unwrap().map(|j| j.state),
        Some(Dead)
    );
    assert_eq!(
        key_ids(&b, &keyed, "acct-2").await.len(),
        1,
        "another key untouched"
    );
}
