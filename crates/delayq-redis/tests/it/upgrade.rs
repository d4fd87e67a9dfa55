//! Record formats stay readable: `tests/fixtures/records-v1.json` holds every key a Redis had
//! after an earlier build (delayq 0.1.0 at 8a7281b, record format 1) wrote jobs scheduled, due,
//! dead and done, a lane queue, a queue sharded over 4 slots, queue limits and a cron schedule.
//! Loaded into a fresh Redis, this build reads, claims and acknowledges all of it. (Two builds
//! at once on one Redis: `scripts/upgrade-check`.)

use base64::Engine;
use delayq::{Backend, Inspect, JobState, QueueName, Schedules};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;
use redis::AsyncCommands;

use crate::common::{claim_req, id};

async fn load(server: &RedisServer) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/records-v1.json"
    ))
    .unwrap();
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
    load(&server).await;
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
