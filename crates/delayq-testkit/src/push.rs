//! Conformance tests of push targets (issue 14): a job's target travels with it through
//! claims, retries, reads and replaces; a queue is a push queue by its `delivery` setting
//! (never by a job), and a job that does not fit its queue's delivery is refused with nothing
//! written; bad targets and deadlines are refused with nothing written.

use std::time::Duration;

use super::{Time, id, job, req};
use delayq::{
    Backend, DeliveryMode, Error, Inspect, InvalidInput, Nack, Producer, QueueName, QueueSettings,
    Target,
};

fn push_settings() -> QueueSettings {
    QueueSettings {
        delivery: DeliveryMode::Push,
        ..QueueSettings::default()
    }
}

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
    b.configure(&pq, push_settings()).await.unwrap();
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
        ..push_settings()
    };
    b.configure(&dq, s.clone()).await.unwrap();
    assert_eq!(b.settings(&dq).await.unwrap(), s);
    let mut queues = b.push_queues().await.unwrap();
    queues.sort();
    assert_eq!(queues, vec![dq.clone(), pq.clone()]);
    b.configure(&dq, QueueSettings::default()).await.unwrap();
    assert!(b.settings(&dq).await.unwrap().target.is_none());
    assert_eq!(
        b.push_queues().await.unwrap(),
        vec![pq.clone()],
        "dq is pull again"
    );
}

/// A produce-only caller cannot change a queue's delivery with a job: a target on a pull
/// queue is refused, a job without one on a push queue without a default target too, and
/// neither writes anything; a default target lets plain jobs in; pull again refuses targets.
pub async fn delivery_decides_what_a_queue_takes<B: Backend + Inspect>(b: B, _t: Time) {
    let q = QueueName::new("orders").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let hook = Target::post("https://example.com/hook");
    p.enqueue(job("plain", 60_000)).await.unwrap();
    let e = p
        .enqueue(job("t", 60_000).target(hook.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::Delivery(_))),
        "{e:?}"
    );
    // A batch with one misfit writes none of its jobs.
    let e = p
        .enqueue_batch(vec![job("b1", 0), job("b2", 0).target(hook.clone())])
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::Delivery(_))),
        "{e:?}"
    );
    for gone in ["t", "b1", "b2"] {
        assert!(b.get(&q, &id(gone)).await.unwrap().is_none(), "{gone}");
    }
    assert!(
        b.push_queues().await.unwrap().is_empty(),
        "still a pull queue"
    );
    assert_eq!(b.settings(&q).await.unwrap().delivery, DeliveryMode::Pull);

    // Push without a default target: each job needs its own.
    let hooks = QueueName::new("hooks").unwrap();
    b.configure(&hooks, push_settings()).await.unwrap();
    let ph = Producer::new(b.clone(), hooks.clone());
    let e = ph.enqueue(job("bare", 0)).await.unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::Delivery(_))),
        "{e:?}"
    );
    assert!(b.get(&hooks, &id("bare")).await.unwrap().is_none());
    ph.enqueue(job("aimed", 0).target(hook.clone()))
        .await
        .unwrap();
    // With a default target, plain jobs go there.
    let with_default = QueueSettings {
        target: Some(hook.clone()),
        ..push_settings()
    };
    b.configure(&hooks, with_default).await.unwrap();
    ph.enqueue(job("bare", 0)).await.unwrap();
    assert_eq!(b.push_queues().await.unwrap(), vec![hooks.clone()]);
    // Back to pull: targets are refused again, and pushers leave the queue.
    b.configure(&hooks, QueueSettings::default()).await.unwrap();
    let e = ph
        .enqueue(job("late", 0).target(hook.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Invalid(InvalidInput::Delivery(_))),
        "{e:?}"
    );
    assert!(b.push_queues().await.unwrap().is_empty());
}

/// A bad target, or a dispatch deadline over 30 min, writes nothing.
pub async fn bad_targets_are_refused<B: Backend + Inspect>(b: B, _t: Time) {
    let q = QueueName::new("hooks").unwrap();
    b.configure(&q, push_settings()).await.unwrap();
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
    let bad = QueueSettings {
        target: Some(Target::post("https://example.com/").header("Host", "x")),
        ..push_settings()
    };
    assert!(b.configure(&q, bad).await.is_err());
    assert!(b.settings(&q).await.unwrap().target.is_none());
}
