//! Conformance tests of every job of one key ([`Inspect::key_jobs`], [`Inspect::cancel_key`],
//! [`Inspect::reschedule_key`]): a key's jobs listed by id and state, cancelled and moved in
//! one call — and nothing of another key touched.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{
    AckOutcome, Backend, Inspect, JobId, JobKey, JobState, KeyJobsRequest, KeyMove, ListState,
    Nack, NewJob, Producer, QueueName, QueueSettings,
};

use super::{Time, id, req};

fn key(k: &str) -> JobKey {
    JobKey::new(k).unwrap()
}

/// Job `name` of key `k` (none: `""`), due in `delay_ms`.
fn kjob(name: &str, k: &str, delay_ms: u64) -> NewJob {
    let j = NewJob::new(name.as_bytes().to_vec())
        .id(id(name))
        .delay(Duration::from_millis(delay_ms));
    if k.is_empty() { j } else { j.key(key(k)) }
}

/// Every job of `k` in `q` in `state` (all four when `None`), walking pages of `limit`: each
/// id with the listing it was in; panics on a repeat or a page out of id order.
async fn walk<B: Inspect>(
    b: &B,
    q: &QueueName,
    k: &str,
    state: Option<ListState>,
    limit: usize,
) -> BTreeMap<String, ListState> {
    let mut out = BTreeMap::new();
    let mut after: Option<JobId> = None;
    for _ in 0..100 {
        let page = b
            .key_jobs(
                q,
                &key(k),
                KeyJobsRequest {
                    state,
                    limit,
                    after: after.clone(),
                },
            )
            .await
            .unwrap();
        assert!(page.jobs.len() <= limit);
        for j in &page.jobs {
            assert_eq!(j.key.as_ref().map(|k| k.as_str()), Some(k), "{}", j.id);
            if let Some(a) = &after {
                assert!(j.id.as_str() > a.as_str(), "{} after {a}", j.id);
            }
            let listed = delayq::key_jobs::listed_as(j, page.now_ms).expect("never done");
            let again = out.insert(j.id.to_string(), listed);
            assert!(again.is_none(), "{} twice", j.id);
        }
        match page.next {
            Some(n) => after = Some(n),
            None => return out,
        }
    }
    panic!("the pages never ended");
}

/// Sets up queue `q` with key "acct-1" in every state — `s-1`, `s-2` scheduled, `d-1` due,
/// `l-1` leased, `x-1` dead, `o-1` acked — beside key "acct-2" (`b-1`, `b-2`) and a job
/// without a key (`plain`); returns the leased job.
async fn every_state<B: Backend + Inspect>(b: &B, t: &Time, q: &QueueName) -> delayq::Job {
    let p = Producer::new(b.clone(), q.clone());
    let jobs = vec![
        kjob("l-1", "acct-1", 0),
        kjob("x-1", "acct-1", 0),
        kjob("o-1", "acct-1", 0),
    ];
    p.enqueue_batch(jobs).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let mut leased = None;
    for j in b.claim(q, req(10, 60_000)).await.unwrap().jobs {
        match j.id.as_str() {
            "x-1" => {
                let nack = Nack {
                    dead: true,
                    ..Nack::error("broken")
                };
                b.nack(q, j.lease_ref(), nack).await.unwrap();
            }
            "o-1" => {
                let acked = b.ack(q, vec![j.to_ack()]).await.unwrap();
                assert_eq!(acked, [AckOutcome::Acked]);
            }
            _ => leased = Some(j),
        }
    }
    let jobs = vec![
        kjob("s-2", "acct-1", 120_000),
        kjob("s-1", "acct-1", 60_000),
        kjob("d-1", "acct-1", 0),
        kjob("b-1", "acct-2", 0),
        kjob("b-2", "acct-2", 60_000),
        kjob("plain", "", 0),
    ];
    p.enqueue_batch(jobs).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    leased.expect("l-1 was claimed")
}

/// A key's jobs are listed by id in every state but done, each page after the last, one state
/// at a time or all; another key's and keyless jobs never show; done jobs drop out.
pub async fn a_keys_jobs_are_listed<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("key-list").unwrap();
    let leased = every_state(&b, &t, &q).await;
    let all = walk(&b, &q, "acct-1", None, 100).await;
    let want: BTreeMap<String, ListState> = [
        ("d-1", ListState::Due),
        ("l-1", ListState::Leased),
        ("s-1", ListState::Scheduled),
        ("s-2", ListState::Scheduled),
        ("x-1", ListState::Dead),
    ]
    .into_iter()
    .map(|(i, s)| (i.to_owned(), s))
    .collect();
    assert_eq!(all, want);
    for limit in [1, 2, 3] {
        assert_eq!(
            walk(&b, &q, "acct-1", None, limit).await,
            want,
            "pages of {limit}"
        );
    }
    for s in [
        ListState::Scheduled,
        ListState::Due,
        ListState::Leased,
        ListState::Dead,
    ] {
        let only: BTreeMap<_, _> = want
            .iter()
            .filter(|(_, v)| **v == s)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(walk(&b, &q, "acct-1", Some(s), 1).await, only, "{s}");
    }
    let other = walk(&b, &q, "acct-2", None, 10).await;
    assert_eq!(other.keys().collect::<Vec<_>>(), ["b-1", "b-2"]);
    assert!(walk(&b, &q, "nobody", None, 10).await.is_empty());
    // The leased job finishes: it leaves the key's listing.
    b.ack(&q, vec![leased.to_ack()]).await.unwrap();
    assert!(!walk(&b, &q, "acct-1", None, 10).await.contains_key("l-1"));
    // Bad pages are refused.
    for bad in [
        KeyJobsRequest {
            state: Some(ListState::Done),
            limit: 10,
            after: None,
        },
        KeyJobsRequest {
            state: None,
            limit: 0,
            after: None,
        },
    ] {
        let e = b.key_jobs(&q, &key("acct-1"), bad).await.unwrap_err();
        assert!(matches!(e, delayq::Error::Invalid(_)), "{e:?}");
    }
}

/// One call cancels a key's scheduled and due jobs and leaves its running and dead ones (and
/// every other key's); with `running` it ends the running one too, whose lease then answers
/// `cancelled`. A second call finds nothing.
pub async fn a_key_is_cancelled_in_one_call<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("key-cancel").unwrap();
    let leased = every_state(&b, &t, &q).await;
    let done = b.cancel_key(&q, &key("acct-1"), false).await.unwrap();
    assert_eq!((done.cancelled, done.running), (3, 0));
    for gone in ["s-1", "s-2", "d-1"] {
        assert!(b.get(&q, &id(gone)).await.unwrap().is_none(), "{gone}");
    }
    let state = |n: &'static str| {
        let (b, q) = (b.clone(), q.clone());
        async move { b.get(&q, &id(n)).await.unwrap().map(|i| i.state) }
    };
    assert_eq!(state("l-1").await, Some(JobState::Leased));
    assert_eq!(state("x-1").await, Some(JobState::Dead));
    for other in ["b-1", "b-2", "plain"] {
        assert_eq!(state(other).await, Some(JobState::Scheduled), "{other}");
    }
    let left = walk(&b, &q, "acct-1", None, 10).await;
    assert_eq!(left.keys().collect::<Vec<_>>(), ["l-1", "x-1"]);
    let done = b.cancel_key(&q, &key("acct-1"), true).await.unwrap();
    assert_eq!((done.cancelled, done.running), (1, 1));
    assert_eq!(state("l-1").await, None);
    assert_eq!(state("x-1").await, Some(JobState::Dead), "dead jobs stay");
    assert_eq!(
        b.ack(&q, vec![leased.to_ack()]).await.unwrap(),
        [AckOutcome::Cancelled]
    );
    let again = b.cancel_key(&q, &key("acct-1"), true).await.unwrap();
    assert_eq!(again.cancelled, 0, "nothing left");
    // The other key's jobs still run.
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    let mut ids: Vec<_> = got.iter().map(|j| j.id.to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["b-1", "plain"]);
    // A key with nothing: 0.
    let none = b.cancel_key(&q, &key("nobody"), true).await.unwrap();
    assert_eq!(none.cancelled, 0);
}

/// A key's waiting jobs move in one call: by a shift from each one's own due time (never
/// before now; a due job stays due), or all to one time. Running, dead and other keys' jobs
/// stay, and a moved job is never claimed before its new time.
pub async fn a_key_is_rescheduled_in_one_call<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("key-move").unwrap();
    let leased = every_state(&b, &t, &q).await;
    let due_of = |n: &'static str| {
        let (b, q) = (b.clone(), q.clone());
        async move { b.get(&q, &id(n)).await.unwrap().expect(n).due_at_ms }
    };
    let before: Vec<u64> = vec![
        due_of("s-1").await,
        due_of("s-2").await,
        due_of("d-1").await,
    ];
    let (b1, b2) = (due_of("b-1").await, due_of("b-2").await);
    let leased_due = due_of("l-1").await;
    let moved = b
        .reschedule_key(&q, &key("acct-1"), KeyMove::Shift(3_600_000))
        .await
        .unwrap();
    assert_eq!(moved, 3, "scheduled and due jobs");
    assert_eq!(due_of("s-1").await, before[0] + 3_600_000);
    assert_eq!(due_of("s-2").await, before[1] + 3_600_000);
    assert_eq!(due_of("d-1").await, before[2] + 3_600_000);
    assert_eq!((due_of("b-1").await, due_of("b-2").await), (b1, b2));
    assert_eq!(due_of("l-1").await, leased_due, "a running job stays");
    // Nothing of the key is due now: a claim takes only the other key's and keyless jobs.
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert!(got.iter().all(|j| !j.id.as_str().starts_with(['s', 'd'])));
    for j in got {
        b.ack(&q, vec![j.to_ack()]).await.unwrap();
    }
    // Far back: not before now.
    let now = t.now_ms();
    let moved = b
        .reschedule_key(&q, &key("acct-1"), KeyMove::Shift(-86_400_000))
        .await
        .unwrap();
    assert_eq!(moved, 3);
    for n in ["s-1", "s-2", "d-1"] {
        let d = due_of(n).await;
        assert!(
            d >= now && d <= t.now_ms() + 1_000,
            "{n} due {d}, now {now}"
        );
    }
    // All to one time.
    let at = t.now_ms() + 30_000;
    let moved = b
        .reschedule_key(&q, &key("acct-1"), KeyMove::To(at))
        .await
        .unwrap();
    assert_eq!(moved, 3);
    for n in ["s-1", "s-2", "d-1"] {
        assert_eq!(due_of(n).await, at, "{n}");
    }
    t.pass(Duration::from_millis(29_000)).await;
    let early = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert!(early.is_empty(), "never before the new time: {early:?}");
    t.pass(Duration::from_millis(1_100)).await;
    let got = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert_eq!(got.len(), 3);
    b.ack(&q, vec![leased.to_ack()]).await.unwrap();
    // Bad moves are refused and change nothing.
    let e = b
        .reschedule_key(&q, &key("acct-2"), KeyMove::Shift(i64::MAX))
        .await
        .unwrap_err();
    assert!(matches!(e, delayq::Error::Invalid(_)), "{e:?}");
    assert_eq!(due_of("b-2").await, b2);
}

/// A key's jobs are held back by its limit (parked, on Redis): they are listed as due, and
/// cancelled and moved like any waiting job; the key's running job finishes and nothing of the
/// key is left.
pub async fn a_keys_parked_jobs_are_listed_cancelled_and_moved<B: Backend + Inspect>(
    b: B,
    t: Time,
) {
    let q = QueueName::new("key-parked").unwrap();
    let s = QueueSettings {
        key_max_in_flight: Some(1),
        ..QueueSettings::default()
    };
    b.configure(&q, s).await.unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let jobs = (0..4)
        .map(|i| kjob(&format!("k-{i}"), "acct-9", 0))
        .collect();
    p.enqueue_batch(jobs).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    let first = b.claim(&q, req(10, 60_000)).await.unwrap().jobs;
    assert_eq!(first.len(), 1);
    assert!(b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty());
    let due = walk(&b, &q, "acct-9", Some(ListState::Due), 10).await;
    assert_eq!(due.len(), 3, "the parked jobs are due");
    let moved = b
        .reschedule_key(&q, &key("acct-9"), KeyMove::Shift(60_000))
        .await
        .unwrap();
    assert_eq!(moved, 3);
    let later = walk(&b, &q, "acct-9", Some(ListState::Scheduled), 10).await;
    assert_eq!(later.len(), 3);
    let done = b.cancel_key(&q, &key("acct-9"), false).await.unwrap();
    assert_eq!(done.cancelled, 3);
    b.ack(&q, vec![first[0].to_ack()]).await.unwrap();
    t.pass(Duration::from_millis(61_000)).await;
    assert!(b.claim(&q, req(10, 60_000)).await.unwrap().jobs.is_empty());
    assert!(walk(&b, &q, "acct-9", None, 10).await.is_empty());
}

/// On a queue of 4 shards, a key whose jobs (named ids) sit in every shard is listed as one
/// list by id, page after page, and cancelled and moved in every shard by one call.
pub async fn a_keys_jobs_across_shards<B: Backend + Inspect>(b: B, t: Time) {
    let q = QueueName::new("key-sharded").unwrap();
    b.configure(&q, QueueSettings::with_shards(4))
        .await
        .unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let names: Vec<String> = (0..40).map(|i| format!("job-{i:02}")).collect();
    let shards: std::collections::HashSet<u64> = names
        .iter()
        .map(|n| delayq::placement_hash(n) % 4)
        .collect();
    assert_eq!(shards.len(), 4, "named ids spread over the shards");
    let mut jobs: Vec<NewJob> = names.iter().map(|n| kjob(n, "acct-s", 60_000)).collect();
    jobs.push(kjob("other", "acct-t", 60_000));
    p.enqueue_batch(jobs).await.unwrap();
    t.pass(Duration::from_millis(2)).await;
    for limit in [7, 40, 100] {
        let all = walk(&b, &q, "acct-s", None, limit).await;
        assert_eq!(
            all.keys().cloned().collect::<Vec<_>>(),
            names,
            "by id, pages of {limit}"
        );
    }
    let moved = b
        .reschedule_key(&q, &key("acct-s"), KeyMove::Shift(-60_000))
        .await
        .unwrap();
    assert_eq!(moved, 40);
    t.pass(Duration::from_millis(2)).await;
    let due = walk(&b, &q, "acct-s", Some(ListState::Due), 1000).await;
    assert_eq!(due.len(), 40, "every shard's jobs moved");
    let done = b.cancel_key(&q, &key("acct-s"), false).await.unwrap();
    assert_eq!(done.cancelled, 40);
    assert!(walk(&b, &q, "acct-s", None, 10).await.is_empty());
    let other = b.get(&q, &id("other")).await.unwrap().expect("kept");
    assert_eq!(other.state, JobState::Scheduled);
}

/// A job replaced under another key (debounce) moves to that key: the old key no longer lists
/// it, and cancelling the old key leaves it alone (a key's index is trusted only for jobs that
/// still carry the key).
pub async fn a_job_replaced_under_another_key_moves_with_it<B: Backend + Inspect>(b: B, _t: Time) {
    let q = QueueName::new("key-replace").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(kjob("r-1", "old", 60_000)).await.unwrap();
    let moved = p
        .enqueue(kjob("r-1", "new", 60_000).replace())
        .await
        .unwrap();
    assert!(moved.replaced, "{moved:?}");
    assert!(walk(&b, &q, "old", None, 10).await.is_empty());
    assert_eq!(
        walk(&b, &q, "new", None, 10)
            .await
            .keys()
            .collect::<Vec<_>>(),
        ["r-1"]
    );
    let done = b.cancel_key(&q, &key("old"), false).await.unwrap();
    assert_eq!(done.cancelled, 0);
    let j = b.get(&q, &id("r-1")).await.unwrap().expect("still there");
    assert_eq!(j.key.as_ref().map(|k| k.as_str()), Some("new"));
}
