//! Conformance tests of keys ([`delayq::JobKey`]): claims share a queue round-robin among the
//! keys with due jobs, each key's in-flight and rate limits hold inside the claim, one key
//! can be held and released, and what each key has shows in [`Inspect::keys`].

use std::time::Duration;

use super::{Time, req};
use delayq::{
    AckOutcome, Backend, Inspect, JobKey, KeyHold, NewJob, Producer, QueueName, QueueSettings, Rate,
};

fn key(k: &str) -> JobKey {
    JobKey::new(k).unwrap()
}

/// `n` jobs of `k` due now, ids `<k>-<i>`.
fn keyed(k: &str, n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            let name = format!("{k}-{i:03}");
            NewJob::new(name.as_bytes().to_vec())
                .id(delayq::JobId::new(name).unwrap())
                .key(key(k))
        })
        .collect()
}

async fn enqueue<B: Backend>(b: &B, q: &QueueName, jobs: Vec<NewJob>) {
    Producer::new(b.clone(), q.clone())
        .enqueue_batch(jobs)
        .await
        .unwrap();
}

/// The keys of a claim's jobs, in order ("-" for a job without one).
async fn claim_keys<B: Backend>(b: &B, q: &QueueName, max: usize) -> Vec<String> {
    let got = b.claim(q, req(max, 60_000)).await.unwrap();
    got.jobs
        .iter()
        .map(|j| j.key.as_ref().map_or("-".into(), |k| k.to_string()))
        .collect()
}

/// A key with a backlog does not hold back another key's jobs: claims alternate between
/// the keys with due jobs, and the big key is served at full speed once it is alone.
pub async fn keys_share_claims_round_robin<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("keyed-rr").unwrap();
    enqueue(&b, &q, keyed("big", 40)).await;
    enqueue(&b, &q, keyed("small", 4)).await;
    let mut plain = NewJob::new(b"plain".to_vec());
    plain.id = Some(delayq::JobId::new("plain").unwrap());
    enqueue(&b, &q, vec![plain]).await;
    t.pass(Duration::from_millis(2)).await;
    let mut order = Vec::new();
    for _ in 0..9 {
        order.extend(claim_keys(&b, &q, 1).await);
    }
    let small = order.iter().filter(|k| *k == "small").count();
    let plain = order.iter().filter(|k| *k == "-").count();
    assert_eq!(
        (small, plain),
        (4, 1),
        "every small job and the plain one within 9 claims: {order:?}"
    );
    assert!(
        order.windows(2).all(|w| w[0] != w[1] || w[0] == "big"),
        "no key twice in a row while another waits: {order:?}"
    );
    // Alone, the big key is served as fast as the claims go.
    let rest = claim_keys(&b, &q, 20).await;
    assert_eq!(rest.len(), 20, "{rest:?}");
    assert!(rest.iter().all(|k| k == "big"));
    // A higher priority comes before every key's turn.
    enqueue(&b, &q, keyed("later", 3)).await;
    let mut urgent = keyed("urgent", 1);
    urgent[0].priority = Some(9);
    enqueue(&b, &q, urgent).await;
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(claim_keys(&b, &q, 1).await, ["urgent"]);
    // The key travels with the job.
    let info = b
        .get(&q, &delayq::JobId::new("big-039").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.key, Some(key("big")));
}

/// `key_max_in_flight` and `key_rate` bound each key inside the claim; a key at its limit
/// waits while the other keys' jobs go, and comes back when a lease ends or a token is due.
pub async fn key_limits_hold_each_key<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("keyed-limits").unwrap();
    let s = QueueSettings {
        key_max_in_flight: Some(2),
        ..QueueSettings::default()
    };
    assert_eq!(b.configure(&q, s.clone()).await.unwrap(), s);
    assert_eq!(b.settings(&q).await.unwrap(), s);
    enqueue(&b, &q, keyed("a", 6)).await;
    enqueue(&b, &q, keyed("b", 6)).await;
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&q, req(10, 60_000)).await.unwrap();
    let count = |k: &str| {
        first
            .jobs
            .iter()
            .filter(|j| j.key.as_ref().map(JobKey::as_str) == Some(k))
            .count()
    };
    assert_eq!((count("a"), count("b")), (2, 2), "two of each key");
    assert!(
        b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty(),
        "both keys at their limit"
    );
    let keys = b.keys(&q, 10).await.unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys.iter().all(|k| k.in_flight == 2 && k.due == 4),
        "{keys:?}"
    );
    // An ack of a's job frees one of a's slots.
    let a = first.jobs.iter().find(|j| j.key == Some(key("a"))).unwrap();
    assert_eq!(
        b.ack(&q, vec![a.to_ack()]).await.unwrap(),
        [AckOutcome::Acked]
    );
    assert_eq!(claim_keys(&b, &q, 10).await, ["a"]);
    // A failed attempt frees a slot too.
    let bj = first.jobs.iter().find(|j| j.key == Some(key("b"))).unwrap();
    let later = delayq::Nack {
        retry_in: Some(Duration::from_secs(60)),
        ..delayq::Nack::error("later")
    };
    b.nack(&q, bj.lease_ref(), later).await.unwrap();
    assert_eq!(claim_keys(&b, &q, 10).await, ["b"]);

    // A rate per key: a burst of 2 each, then one token a second.
    let q = QueueName::new("keyed-rate").unwrap();
    let s = QueueSettings {
        key_rate: Some(Rate {
            per_s: 1.0,
            burst: 2,
        }),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    enqueue(&b, &q, keyed("a", 5)).await;
    enqueue(&b, &q, keyed("b", 5)).await;
    t.pass(Duration::from_millis(2)).await;
    let mut got = claim_keys(&b, &q, 10).await;
    got.sort();
    assert_eq!(got, ["a", "a", "b", "b"]);
    let held = b.claim(&q, req(10, 60_000)).await.unwrap();
    assert!(held.jobs.is_empty());
    let next = held.next_due_in.expect("told when a token is due");
    assert!(next <= Duration::from_millis(1000), "{next:?}");
    t.pass(Duration::from_millis(1100)).await;
    let mut got = claim_keys(&b, &q, 10).await;
    got.sort();
    assert_eq!(got, ["a", "b"], "one token a key");
    assert!(
        QueueSettings {
            key_max_in_flight: Some(0),
            ..QueueSettings::default()
        }
        .validate()
        .is_err()
    );
    assert!(
        b.configure(
            &q,
            QueueSettings {
                key_rate: Some(Rate {
                    per_s: 0.0,
                    burst: 1
                }),
                ..QueueSettings::default()
            }
        )
        .await
        .is_err(),
        "a rate of 0 is refused"
    );
}

/// A held key's jobs wait while the other keys' are claimed; lifting the hold (or its end)
/// lets them go.
pub async fn keys_pause_and_resume<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("keyed-hold").unwrap();
    let end = b
        .pause_key(&q, &key("a"), KeyHold::For(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("held");
    assert!(end >= t.now_ms() + 59_000, "{end}");
    enqueue(&b, &q, keyed("a", 3)).await;
    enqueue(&b, &q, keyed("b", 3)).await;
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(claim_keys(&b, &q, 10).await, ["b", "b", "b"]);
    let keys = b.keys(&q, 10).await.unwrap();
    let a = keys.iter().find(|k| k.key == key("a")).expect("a listed");
    assert_eq!((a.due, a.paused_until_ms), (3, Some(end)), "{keys:?}");
    assert_eq!(
        b.pause_key(&q, &key("a"), KeyHold::Lifted).await.unwrap(),
        None
    );
    assert_eq!(claim_keys(&b, &q, 10).await, ["a", "a", "a"]);
    // A hold that ends by itself.
    enqueue(&b, &q, keyed("c", 2)).await;
    let until = t.now_ms() + 500;
    b.pause_key(&q, &key("c"), KeyHold::Until(until))
        .await
        .unwrap();
    t.pass(Duration::from_millis(2)).await;
    let held = b.claim(&q, req(10, 60_000)).await.unwrap();
    assert!(held.jobs.is_empty());
    let next = held.next_due_in.expect("told when the hold ends");
    assert!(next <= Duration::from_millis(500), "{next:?}");
    t.pass(Duration::from_millis(600)).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.extend(claim_keys(&b, &q, 10).await);
    }
    assert_eq!(got, ["c", "c"]);
}

/// On a sharded queue a key's jobs with generated ids share the key's shard, so its limits
/// and hold hold over the whole queue (Redis runs this on a Cluster and on one server).
pub async fn keys_on_a_sharded_queue<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("keyed-sharded").unwrap();
    let s = QueueSettings {
        key_max_in_flight: Some(2),
        ..QueueSettings::with_shards(4)
    };
    b.configure(&q, s).await.unwrap();
    let unnamed = |k: &str, n: usize| -> Vec<NewJob> {
        (0..n)
            .map(|i| NewJob::new(format!("{k}{i}").into_bytes()).key(key(k)))
            .collect()
    };
    let p = Producer::new(b.clone(), q.clone());
    let mut shards = std::collections::HashSet::new();
    for k in ["a", "b"] {
        for e in p.enqueue_batch(unnamed(k, 10)).await.unwrap() {
            shards.insert((k, delayq::placement_hash(e.id.as_str()) % 4));
        }
    }
    assert_eq!(shards.len(), 2, "one shard per key: {shards:?}");
    t.pass(Duration::from_millis(2)).await;
    let mut leased = Vec::new();
    for _ in 0..8 {
        leased.extend(b.claim(&q, req(32, 60_000)).await.unwrap().jobs);
    }
    let of = |jobs: &[delayq::Job], k: &str| {
        jobs.iter()
            .filter(|j| j.key.as_ref().map(JobKey::as_str) == Some(k))
            .count()
    };
    assert_eq!(
        (of(&leased, "a"), of(&leased, "b")),
        (2, 2),
        "key_max_in_flight holds over every shard"
    );
    // A held key: its freed slots go to nobody while the other key's go on.
    b.pause_key(&q, &key("a"), KeyHold::For(Duration::from_secs(60)))
        .await
        .unwrap();
    let acks: Vec<_> = leased.iter().map(delayq::Job::to_ack).collect();
    b.ack(&q, acks).await.unwrap();
    let mut next = Vec::new();
    for _ in 0..8 {
        next.extend(b.claim(&q, req(32, 60_000)).await.unwrap().jobs);
    }
    assert_eq!((of(&next, "a"), of(&next, "b")), (0, 2));
    let keys = b.keys(&q, 10).await.unwrap();
    let a = keys.iter().find(|k| k.key == key("a")).expect("a listed");
    assert!(a.paused_until_ms.is_some() && a.due == 8, "{keys:?}");
}

/// A key at `key_max_in_flight` gets its slot back whenever its lease ends, not only by an ack
/// or a nack: when the lease expires unacked (a consumer died) and when it is released (a
/// consumer stopped) — else the key's other jobs would wait forever.
pub async fn key_slots_come_back_when_leases_end<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("keyed-slots").unwrap();
    let s = QueueSettings {
        key_max_in_flight: Some(1),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    enqueue(&b, &q, keyed("a", 3)).await;
    // Another key's job stays leased throughout, so no store can tell "no lease left" and
    // reset every key's count: each ended lease must free its own key.
    let mut other = keyed("b", 1);
    other[0].priority = Some(9);
    enqueue(&b, &q, other).await;
    t.pass(Duration::from_millis(2)).await;
    assert_eq!(claim_keys(&b, &q, 1).await, ["b"]);
    let first = b.claim(&q, req(10, 1_000)).await.unwrap().jobs;
    assert_eq!(first.len(), 1, "one slot");
    assert!(b.claim(&q, req(10, 1_000)).await.unwrap().jobs.is_empty());
    // The lease expires unacked: the claim that recovers it may lease a job of the key again.
    t.pass(Duration::from_millis(1_100)).await;
    let second = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert_eq!(second.len(), 1, "the expired lease freed the slot");
    assert!(b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty());
    // Released (a consumer's shutdown): the slot is free again.
    b.release(&q, vec![second[0].lease_ref()], true)
        .await
        .unwrap();
    let third = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert_eq!(third.len(), 1, "the released lease freed the slot");
}
