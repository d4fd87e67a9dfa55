//! Conformance tests of push targets (issue 14): a job's target travels with it through
//! claims, retries, reads and replaces; a queue becomes a push queue with its first targeted
//! job or a default target; bad targets and deadlines are refused with nothing written.

use std::time::Duration;

use super::{Time, id, job, req};
use crate::{
    Backend, Error, Inspect, InvalidInput, Nack, Producer, QueueName, QueueSettings, Target,
};

/// Targets are stored, returned and listed; push queues are known to every process.
pub async fn push_targets_travel<B: Backend + Inspect>(b: B, t: Time) {
    let (pq, plain, dq) = (
        QueueName::new("hooks").unwrap(),
        QueueName::new("plain").unwrap(),
        QueueName::new("defaulted").unwrap(),
    );
    Producer::new(b.clone(), plain.clone())
        .enqueue(job("p", 0))
        .await
        .unwrap();
    assert!(
        b.push_queues().await.unwrap().is_empty(),
        "no push queue yet"
    );
    let target = Target::post("https://example.com/hook?x=1").header("Authorization", "Bearer k");
    let p = Producer::new(b.clone(), pq.clone());
    p.enqueue(job("a", 0).target(target.clone()).max_attempts(3))
        .await
        .unwrap();
    assert_eq!(b.push_queues().await.unwrap(), vec![pq.clone()]);
    let info = b.get(&pq, &id("a")).await.unwrap().unwrap();
    assert_eq!(info.target.as_ref(), Some(&target));
    t.pass(Duration::from_millis(2)).await;
    let got = b.claim(&pq, req(1, 30_000)).await.unwrap().jobs;
    assert_eq!(got[0].target.as_ref(), Some(&target));
    // A retry keeps it (the scripts re-encode the record).
    b.nack(&pq, got[0].lease_ref(), Nack::error("HTTP 500"))
        .await
        .unwrap();
    let info = b.get(&pq, &id("a")).await.unwrap().unwrap();
    assert_eq!(info.target.as_ref(), Some(&target));
    assert_eq!(info.last_error.as_deref(), Some("HTTP 500"));
    // Replace writes the new target.
    let other = Target::post("https://example.org/other");
    let r = p
        .enqueue(
            job("a", 60_000)
                .target(other.clone())
                .replace()
                .max_attempts(3),
        )
        .await
        .unwrap();
    assert!(r.replaced);
    let info = b.get(&pq, &id("a")).await.unwrap().unwrap();
    assert_eq!(info.target.as_ref(), Some(&other));
    // Jobs without a target have none.
    assert!(
        b.get(&plain, &id("p"))
            .await
            .unwrap()
            .unwrap()
            .target
            .is_none()
    );
    // A default target makes a push queue, is read back, and can be removed.
    let s = QueueSettings {
        target: Some(Target::post("https://example.com/default")),
        ..QueueSettings::default()
    };
    b.configure(&dq, s.clone()).await.unwrap();
    assert_eq!(b.settings(&dq).await.unwrap(), s);
    let mut queues = b.push_queues().await.unwrap();
    queues.sort();
    assert_eq!(queues, vec![dq.clone(), pq.clone()]);
    b.configure(&dq, QueueSettings::default()).await.unwrap();
    assert!(b.settings(&dq).await.unwrap().target.is_none());
}

/// A bad target, or a dispatch deadline over 30 min, writes nothing.
pub async fn bad_targets_are_refused<B: Backend + Inspect>(b: B, _t: Time) {
    let q = QueueName::new("hooks").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    for bad in [
        Target::post("ftp://example.com/"),
        Target::post("https://example.com/").header("webhook-id", "x"),
        Target::post("not a url"),
    ] {
        let e = p.enqueue(job("x", 0).target(bad)).await.unwrap_err();
        assert!(
            matches!(e, Error::Invalid(InvalidInput::Target(_))),
            "{e:?}"
        );
    }
    let e = p
        .enqueue(
            job("x", 0)
                .target(Target::post("https://example.com/"))
                .timeout(Duration::from_secs(31 * 60)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::Deadline(_))),
        "{e:?}"
    );
    assert!(b.get(&q, &id("x")).await.unwrap().is_none());
    assert!(b.push_queues().await.unwrap().is_empty());
    let bad = QueueSettings {
        target: Some(Target::post("https://example.com/").header("Host", "x")),
        ..QueueSettings::default()
    };
    assert!(b.configure(&q, bad).await.is_err());
    assert!(b.settings(&q).await.unwrap().target.is_none());
}
