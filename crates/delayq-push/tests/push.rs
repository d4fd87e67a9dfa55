//! The pusher against a real receiver (an axum server on a free port): acks on 2xx, honours
//! `Retry-After`, retries by backoff and dead-letters with the status, times out slow
//! receivers, survives closed connections, signs every request, keeps `webhook-id` stable,
//! and refuses private addresses unless allowed — on the embedded store and on Redis.

use std::time::{Duration, Instant};

use delayq::{
    Backend, Backoff, Inspect, JobId, JobState, NewJob, Producer, QueueName, QueueSettings, Target,
};
use delayq_push::signing::{self, Secret};
use delayq_push::{Pusher, PusherOptions};
use delayq_test_support::receiver::{Received, Receiver};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER: &str = "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCE=";

/// A scenario run on each store, as `<scenario>::embedded` and `<scenario>::redis`.
macro_rules! on_both_stores {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                let dir = tempfile::tempdir().unwrap();
                super::$name(delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                let server = delayq_test_support::RedisServer::start();
                let url = server.url();
                super::$name(delayq_redis::RedisBackend::connect(&url).await.unwrap()).await;
            }
        }
    };
}

/// A pusher that signs with `SECRET`, may reach this machine's receivers and looks for new
/// push queues every 100 ms.
fn signing_locally() -> PusherOptions {
    PusherOptions {
        secrets: vec![Secret::parse(SECRET).unwrap()],
        allow_private: true,
        discover_every: Duration::from_millis(100),
        ..PusherOptions::default()
    }
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

/// Makes `queue` a push queue (its delivery setting), as an admin does before targeted jobs.
async fn push_queue<B: Inspect>(b: &B, queue: &QueueName) {
    let s = QueueSettings {
        delivery: delayq::DeliveryMode::Push,
        ..QueueSettings::default()
    };
    b.configure(queue, s).await.unwrap();
}

fn job(id: &str, url: String) -> NewJob {
    NewJob::json(&serde_json::json!({ "order": id }))
        .unwrap()
        .id(JobId::new(id).unwrap())
        .target(Target::post(url))
        .backoff(Backoff::Fixed { delay_ms: 200 })
}

/// Waits until every `(queue, id)` is done (gone) or dead; returns the dead ones' errors.
async fn settle<B: Inspect>(b: &B, jobs: &[(QueueName, &str)]) -> Vec<(String, Option<String>)> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let mut out = Vec::new();
        let mut open = false;
        for (queue, id) in jobs {
            match b.get(queue, &JobId::new(*id).unwrap()).await.unwrap() {
                None => out.push((id.to_string(), None)),
                Some(j) if j.state == JobState::Dead => out.push((id.to_string(), j.last_error)),
                Some(_) => open = true,
            }
        }
        if !open {
            return out;
        }
        assert!(Instant::now() < until, "jobs did not settle: {out:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Resolves once `stop` is set: a run's shutdown.
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

fn of<'a>(reqs: &'a [Received], id: &str) -> Vec<&'a Received> {
    reqs.iter()
        .filter(|r| r.header("webhook-id") == Some(id))
        .collect()
}

/// Every outcome on one store.
async fn outcomes<B: Backend + Inspect>(b: B) {
    let rx = Receiver::start().await;
    let hooks = q("hooks");
    push_queue(&b, &hooks).await;
    let p = Producer::new(b.clone(), hooks.clone());
    p.enqueue(job("ok", rx.url("/ok"))).await.unwrap();
    p.enqueue(job("fail", rx.url("/fail")).max_attempts(2))
        .await
        .unwrap();
    p.enqueue(job("busy", rx.url("/busy")).max_attempts(2))
        .await
        .unwrap();
    p.enqueue(
        job("slow", rx.url("/slow"))
            .timeout(Duration::from_millis(300))
            .max_attempts(1),
    )
    .await
    .unwrap();
    p.enqueue(job("closed", rx.closing_url()).max_attempts(1))
        .await
        .unwrap();
    // A queue with a default target, and a job that sets none.
    let defaulted = q("defaulted");
    b.configure(
        &defaulted,
        QueueSettings {
            target: Some(Target::post(rx.url("/nocontent")).header("x-tenant", "acme")),
            delivery: delayq::DeliveryMode::Push,
            ..QueueSettings::default()
        },
    )
    .await
    .unwrap();
    Producer::new(b.clone(), defaulted.clone())
        .enqueue(NewJob::new(b"raw bytes".to_vec()).id(JobId::new("plain").unwrap()))
        .await
        .unwrap();

    let opts = signing_locally();
    let pusher = Pusher::new(b.clone(), opts).unwrap();
    let log = pusher.log();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(pusher.run(stopped(stop_rx)));
    let ids = ["ok", "fail", "busy", "slow", "closed"];
    let mut all: Vec<(QueueName, &str)> = ids.iter().map(|i| (hooks.clone(), *i)).collect();
    all.push((defaulted.clone(), "plain"));
    let ended = settle(&b, &all).await;
    let _ = stop.send(true);
    run.await.unwrap();
    let err = |id: &str| {
        ended
            .iter()
            .find(|(i, _)| i == id)
            .unwrap_or_else(|| panic!("{id} not settled"))
            .1
            .clone()
    };
    assert_eq!(err("ok"), None, "acked and deleted");
    assert_eq!(err("busy"), None, "delivered after Retry-After");
    assert_eq!(err("plain"), None, "the queue's default target");
    let fail = err("fail").expect("dead");
    assert!(
        fail.starts_with("HTTP 500: boom from the receiver"),
        "{fail}"
    );
    let slow = err("slow").expect("dead");
    assert!(slow.contains("timeout"), "{slow}");
    let closed = err("closed").expect("dead");
    assert!(closed.contains("connection"), "{closed}");

    let reqs = rx.requests();
    let secret = Secret::parse(SECRET).unwrap();
    let other = Secret::parse(OTHER).unwrap();
    let now = delayq::job::system_now_ms() / 1000;
    for r in &reqs {
        let (id, ts, sig) = (
            r.header("webhook-id").unwrap(),
            r.header("webhook-timestamp").unwrap(),
            r.header("webhook-signature").unwrap(),
        );
        signing::verify(
            std::slice::from_ref(&secret),
            id,
            ts,
            sig,
            &r.body,
            now,
            300,
        )
        .unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(
            signing::verify(std::slice::from_ref(&other), id, ts, sig, &r.body, now, 300).is_err(),
            "another secret must fail"
        );
        assert!(r.header("delayq-due-at").unwrap().ends_with('Z'));
    }
    let ok = of(&reqs, "ok");
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].body, br#"{"order":"ok"}"#);
    assert_eq!(ok[0].header("content-type"), Some("application/json"));
    assert_eq!(ok[0].header("delayq-attempt"), Some("1"));
    assert_eq!(ok[0].header("delayq-queue"), Some("hooks"));
    // Retried by backoff: the same webhook-id, attempts 1 and 2, then dead.
    let fail = of(&reqs, "fail");
    assert_eq!(fail.len(), 2);
    assert_eq!(
        fail.iter()
            .map(|r| r.header("delayq-attempt").unwrap())
            .collect::<Vec<_>>(),
        ["1", "2"]
    );
    // Retry-After: 2 honoured (not the 200 ms backoff).
    let busy = of(&reqs, "busy");
    assert_eq!(busy.len(), 2);
    let gap = busy[1].at.duration_since(busy[0].at).unwrap();
    assert!(gap >= Duration::from_millis(1900), "retried after {gap:?}");
    assert_eq!(of(&reqs, "slow").len(), 1, "one attempt");
    let plain = of(&reqs, "plain");
    assert_eq!(plain[0].path, "/nocontent");
    assert_eq!(plain[0].header("x-tenant"), Some("acme"));
    assert_eq!(
        plain[0].header("content-type"),
        Some("application/octet-stream")
    );
    // The delivery log has each attempt.
    let logged = log.of(&hooks, &JobId::new("fail").unwrap());
    assert_eq!(logged.len(), 2);
    assert!(
        logged
            .iter()
            .all(|d| d.status == Some(500) && d.outcome == "http_error")
    );
    let busy_log = log.of(&hooks, &JobId::new("busy").unwrap());
    assert_eq!(busy_log[0].outcome, "throttled");
    assert_eq!(busy_log[1].outcome, "delivered");
}

/// Without `allow_private`, loopback targets — by address and by name — are refused: dead at
/// once, and the receiver sees nothing.
async fn private_targets_refused<B: Backend + Inspect>(b: B) {
    let rx = Receiver::start().await;
    let hooks = q("guarded");
    push_queue(&b, &hooks).await;
    let p = Producer::new(b.clone(), hooks.clone());
    p.enqueue(job("by-ip", rx.url("/ok"))).await.unwrap();
    p.enqueue(job("by-name", rx.url_by_name("/ok")))
        .await
        .unwrap();
    p.enqueue(job(
        "metadata",
        "http://169.254.169.254/latest/meta-data".into(),
    ))
    .await
    .unwrap();
    let opts = PusherOptions {
        discover_every: Duration::from_millis(100),
        ..PusherOptions::default()
    };
    let pusher = Pusher::new(b.clone(), opts).unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(pusher.run(stopped(stop_rx)));
    let ended = settle(
        &b,
        &[
            (hooks.clone(), "by-ip"),
            (hooks.clone(), "by-name"),
            (hooks.clone(), "metadata"),
        ],
    )
    .await;
    let _ = stop.send(true);
    run.await.unwrap();
    for (id, e) in ended {
        let e = e.unwrap_or_else(|| panic!("{id} was delivered"));
        assert!(e.starts_with("refused:"), "{id}: {e}");
    }
    assert_eq!(rx.requests().len(), 0, "no request reached the receiver");
}

on_both_stores!(outcomes);

on_both_stores!(private_targets_refused);

/// Two pushers on one Redis deliver 300 jobs exactly once between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pushers_share_the_work() {
    let server = delayq_test_support::RedisServer::start();
    let b = delayq_redis::RedisBackend::connect(&server.url())
        .await
        .unwrap();
    let rx = Receiver::start().await;
    let hooks = q("shared");
    push_queue(&b, &hooks).await;
    let p = Producer::new(b.clone(), hooks.clone());
    let n = 300;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new(format!("{i}")).target(Target::post(rx.url("/ok"))))
        .collect();
    p.enqueue_batch(jobs).await.unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let pusher = Pusher::new(
            b.clone(),
            PusherOptions {
                allow_private: true,
                concurrency: 8,
                discover_every: Duration::from_millis(100),
                ..PusherOptions::default()
            },
        )
        .unwrap();
        runs.push(tokio::spawn(pusher.run(stopped(stop_rx.clone()))));
    }
    let until = Instant::now() + Duration::from_secs(30);
    while b.stats(&hooks).await.unwrap().waiting() + b.stats(&hooks).await.unwrap().leased > 0 {
        assert!(Instant::now() < until, "not drained");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    for r in runs {
        r.await.unwrap();
    }
    let reqs = rx.requests();
    let mut bodies: Vec<String> = reqs
        .iter()
        .map(|r| String::from_utf8(r.body.clone()).unwrap())
        .collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), n, "every job delivered");
    assert_eq!(reqs.len(), n, "none twice");
}

/// A schedule with a target is a periodic webhook: each fire's job is pushed, with the fire's
/// id (`NAME@<fire ms>`) as `webhook-id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_with_targets_are_periodic_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let b = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
    let rx = Receiver::start().await;
    let beat = q("beat");
    let spec = delayq::ScheduleSpec {
        timing: delayq::Timing::Every { every_ms: 1000 },
        payload: b"{\"tick\":true}".to_vec(),
        catch_up: delayq::CatchUp::None,
        max_attempts: None,
        backoff: None,
        lease_ms: None,
        timeout_ms: None,
        target: Some(Target::post(rx.url("/ok"))),
        trace: None,
    };
    push_queue(&b, &beat).await;
    delayq::schedule::put(
        &b,
        &beat,
        "tick",
        spec,
        1 << 20,
        delayq::job::system_now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(b.push_queues().await.unwrap(), vec![beat.clone()]);
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let ticker = tokio::spawn(delayq::Ticker::new(b.clone()).run(stopped(stop_rx.clone())));
    let pusher = Pusher::new(
        b.clone(),
        PusherOptions {
            allow_private: true,
            discover_every: Duration::from_millis(100),
            ..PusherOptions::default()
        },
    )
    .unwrap();
    let run = tokio::spawn(pusher.run(stopped(stop_rx)));
    let until = Instant::now() + Duration::from_secs(10);
    while rx.requests().len() < 2 {
        assert!(Instant::now() < until, "no periodic pushes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(true);
    let _ = ticker.await;
    run.await.unwrap();
    for r in rx.requests() {
        assert!(
            r.header("webhook-id").unwrap().starts_with("tick@"),
            "{r:?}"
        );
        assert_eq!(r.body, b"{\"tick\":true}");
    }
}

/// An https target whose certificate a given CA signed: delivered over HTTP/2 (offered by
/// ALPN); the same target without that CA fails its TLS handshake; a missing CA file is
/// refused up front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_given_ca_and_http2() {
    let certs = delayq_test_support::tls::make_certs();
    let (rx, base) = Receiver::start_tls(
        &certs.path().join("server.crt"),
        &certs.path().join("server.key"),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let b = delayq_embedded::EmbeddedBackend::open(dir.path()).unwrap();
    let (trusted, untrusted) = (q("trusted"), q("untrusted"));
    push_queue(&b, &trusted).await;
    push_queue(&b, &untrusted).await;
    Producer::new(b.clone(), trusted.clone())
        .enqueue(job("tls", format!("{base}/ok")))
        .await
        .unwrap();
    Producer::new(b.clone(), untrusted.clone())
        .enqueue(job("no-ca", format!("{base}/ok")).max_attempts(1))
        .await
        .unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut runs = Vec::new();
    for (queue, ca) in [
        (trusted.clone(), Some(certs.path().join("ca.crt"))),
        (untrusted.clone(), None),
    ] {
        let pusher = Pusher::new(
            b.clone(),
            PusherOptions {
                allow_private: true,
                ca,
                queues: Some(vec![queue]),
                ..PusherOptions::default()
            },
        )
        .unwrap();
        runs.push(tokio::spawn(pusher.run(stopped(stop_rx.clone()))));
    }
    let ended = settle(&b, &[(trusted, "tls"), (untrusted, "no-ca")]).await;
    let _ = stop.send(true);
    for r in runs {
        r.await.unwrap();
    }
    assert_eq!(ended[0], ("tls".to_owned(), None), "delivered");
    let e = ended[1].1.clone().expect("dead");
    assert!(e.starts_with("connection error"), "{e}");
    let reqs = rx.requests();
    assert_eq!(reqs.len(), 1, "only the trusted one got through");
    assert_eq!(reqs[0].version, "HTTP/2.0");
    let bad = Pusher::new(
        b.clone(),
        PusherOptions {
            ca: Some(dir.path().join("missing.pem")),
            ..PusherOptions::default()
        },
    );
    assert!(matches!(bad, Err(delayq_push::PushError::Ca { .. })));
}

/// A target answering 429 with `Retry-After: 60` holds its job's key when the queue says so
/// (`pause_key_on_429`) — for at most `max_key_hold` (20 s here), while the job itself waits
/// the 60 s — : the queue's other keys are delivered meanwhile, and the held key's other job
/// waits. Without the setting nothing is held.
async fn a_429_holds_its_key<B: Backend + Inspect>(b: B) {
    let rx = Receiver::start().await;
    let held = q("tenants");
    let plain = q("untouched");
    for (queue, on) in [(&held, true), (&plain, false)] {
        let s = QueueSettings {
            delivery: delayq::DeliveryMode::Push,
            pause_key_on_429: on,
            ..QueueSettings::default()
        };
        b.configure(queue, s).await.unwrap();
        let key = |k: &str| delayq::JobKey::new(k).unwrap();
        let p = Producer::new(b.clone(), queue.clone());
        // (The receiver answers 429 to the first request of each webhook-id: ids apart.)
        p.enqueue(job(&format!("{queue}-a1"), rx.url("/limited")).key(key("api-a")))
            .await
            .unwrap();
        p.enqueue(job("b1", rx.url("/ok")).key(key("api-b")))
            .await
            .unwrap();
    }
    let opts = PusherOptions {
        max_key_hold: Duration::from_secs(20),
        ..signing_locally()
    };
    let pusher = Pusher::new(b.clone(), opts).unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(pusher.run(stopped(stop_rx)));
    let ended = settle(&b, &[(held.clone(), "b1"), (plain.clone(), "b1")]).await;
    assert!(ended.iter().all(|(_, e)| e.is_none()), "{ended:?}");
    // a1's first request was answered 429: its key is held on `tenants` only.
    let until = Instant::now() + Duration::from_secs(10);
    let hold = loop {
        let keys = b.keys(&held, 10).await.unwrap();
        if let Some(end) = keys
            .iter()
            .find(|k| k.key.as_str() == "api-a")
            .and_then(|k| k.paused_until_ms)
        {
            break end;
        }
        if Instant::now() > until {
            let a1 = b
                .get(&held, &JobId::new("tenants-a1").unwrap())
                .await
                .unwrap();
            panic!(
                "api-a never held: {keys:?}, a1 {a1:?}, {} requests",
                rx.requests().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let now = delayq::job::system_now_ms();
    assert!(
        hold > now + 10_000 && hold <= now + 21_000,
        "held for max_key_hold's 20 s, not Retry-After's 60 s: {hold} at {now}"
    );
    let a1 = b
        .get(&held, &JobId::new("tenants-a1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a1.state, JobState::Scheduled, "retried after Retry-After");
    assert!(
        a1.due_at_ms > now + 50_000,
        "the job waits the 60 s: {} at {now}",
        a1.due_at_ms
    );
    let untouched = b.keys(&plain, 10).await.unwrap();
    assert!(
        untouched.iter().all(|k| k.paused_until_ms.is_none()),
        "{untouched:?}"
    );
    let _ = stop.send(true);
    run.await.unwrap();
}

on_both_stores!(a_429_holds_its_key);
