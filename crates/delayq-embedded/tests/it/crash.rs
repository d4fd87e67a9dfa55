//! Crash safety: a child process enqueueing, claiming and acking on the embedded store is
//! SIGKILLed; after a restart every acknowledged enqueue and ack is still there, and every
//! leased job comes back once its lease expires.
//!
//! The test runs itself as the child (same binary, `DELAYQ_CRASH_CHILD` set).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use delayq::{Backend, ClaimRequest, Inspect, JobId, NewJob, Producer, QueueName};
use delayq_embedded::EmbeddedBackend;

const CHILD: &str = "DELAYQ_CRASH_CHILD";

fn q() -> QueueName {
    QueueName::new("crash").unwrap()
}

/// The child: enqueue, claim two, ack the even ones, leave the odd ones leased; print each
/// step after it returned (and "acking" before an ack, since an ack that returned but was not
/// printed is indistinguishable from one that never ran).
async fn child(dir: &str) {
    let b = EmbeddedBackend::open(dir).unwrap();
    let p = Producer::new(b.clone(), q());
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let id = JobId::new(format!("{i}")).unwrap();
        p.enqueue(NewJob::new(vec![1]).id(id)).await.unwrap();
        writeln!(out, "E {i}").unwrap();
        out.flush().unwrap();
        let req = ClaimRequest {
            max: 2,
            lease: Duration::from_millis(1500),
            acks: vec![],
        };
        for j in b.claim(&q(), req).await.unwrap().jobs {
            let n: u64 = j.id.as_str().parse().unwrap();
            if n.is_multiple_of(2) {
                writeln!(out, "acking {n}").unwrap();
                out.flush().unwrap();
                b.ack(&q(), vec![j.to_ack()]).await.unwrap();
                writeln!(out, "A {n}").unwrap();
            } else {
                writeln!(out, "L {n}").unwrap();
            }
            out.flush().unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_enqueue_or_ack() {
    if let Ok(dir) = std::env::var(CHILD) {
        child(&dir).await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut kid = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash::sigkill_loses_no_acknowledged_enqueue_or_ack",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reader = BufReader::new(kid.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut acks = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut it = reader.lines();
    while acks < 300 && Instant::now() < deadline {
        match it.next() {
            Some(Ok(l)) => {
                acks += usize::from(l.starts_with("A "));
                lines.push(l);
            }
            _ => break,
        }
    }
    kid.kill().unwrap(); // SIGKILL, mid-run
    kid.wait().unwrap();
    // Lines the child flushed before it died.
    lines.extend(it.map_while(Result::ok));
    assert!(
        acks >= 300,
        "the child made progress before the kill ({acks} acks)"
    );

    let ids = |tag: &str| -> HashSet<String> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(tag))
            .map(str::to_owned)
            .collect()
    };
    let (enqueued, acking, acked, leased) = (ids("E "), ids("acking "), ids("A "), ids("L "));

    // Restart: the lock of the dead process is gone; the store opens cleanly (on a test
    // clock, so the leases' expiry below moves time instead of waiting for it).
    let clock = delayq::TestClock::new();
    let b =
        EmbeddedBackend::open_with_clock(dir.path(), std::sync::Arc::new(clock.clone())).unwrap();
    for id in &acked {
        let got = b.get(&q(), &JobId::new(id.clone()).unwrap()).await.unwrap();
        assert!(got.is_none(), "acked job {id} came back");
    }
    for id in &enqueued {
        let got = b.get(&q(), &JobId::new(id.clone()).unwrap()).await.unwrap();
        assert!(
            got.is_some() || acking.contains(id),
            "acknowledged enqueue {id} is lost"
        );
    }
    // Every leased job comes back after its lease (1.5 s) and can be claimed again.
    clock.advance(Duration::from_millis(1600));
    let mut again = HashSet::new();
    loop {
        let req = ClaimRequest {
            max: 1000,
            lease: Duration::from_secs(30),
            acks: vec![],
        };
        let got = b.claim(&q(), req).await.unwrap();
        if got.jobs.is_empty() {
            break;
        }
        for j in got.jobs {
            again.insert(j.id.to_string());
            b.ack(&q(), vec![j.to_ack()]).await.unwrap();
        }
    }
    for id in leased.difference(&acked) {
        assert!(again.contains(id), "leased job {id} did not come back");
    }
    for id in &acked {
        assert!(!again.contains(id), "acked job {id} was delivered again");
    }
    assert!(!leased.is_empty());
    let s = b.stats(&q()).await.unwrap();
    assert_eq!((s.waiting(), s.leased), (0, 0));
}

#[tokio::test]
async fn a_second_owner_is_refused() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first = EmbeddedBackend::open(dir.path()).unwrap();
    match EmbeddedBackend::open(dir.path()) {
        Err(delayq_embedded::Error::Locked { pid, .. }) => {
            assert_eq!(pid, Some(std::process::id()));
        }
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("a second owner was allowed"),
    }
    drop(first);
    // The lock goes with the owner.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(EmbeddedBackend::open(dir.path()).is_ok());
}

/// Batches through worker and sweeper kills (`delayq_testkit::chaos_batches`; the embedded
/// store finishes a batch in the transaction that ends its last job): every batch calls back
/// once, after its last job, and none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_call_back_once_through_kills() {
    use delayq_testkit::chaos_batches::{self, BatchPlan};
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let plan = BatchPlan {
        batches: 30,
        jobs: 20,
        kills: 5,
        fault: None,
        lease: Duration::from_secs(1),
        drain: Duration::from_secs(30),
    };
    let report = chaos_batches::run(
        QueueName::new("bchaos").unwrap(),
        || {
            let b = b.clone();
            async move { b }
        },
        plan,
    )
    .await;
    assert!(report.early.is_empty(), "early: {:?}", report.early);
    assert!(report.twice.is_empty(), "twice: {:?}", report.twice);
    assert!(report.lost.is_empty(), "lost: {:?}", report.lost);
    assert_eq!(report.called_back, 30, "{report:?}");
}
