//! Conformance tests of schedules (issue 13): stored and read back, fired once however many
//! tickers race, a stale fire refused, a change of payload keeping the next fire, bad input
//! refused with nothing stored.

use std::time::Duration;

use super::{Time, req};
use delayq::schedule::{self, ScheduleSpec, Schedules, Timing};
use delayq::{Backend, Inspect, InvalidInput, QueueName, Ticker};

fn pq() -> QueueName {
    QueueName::new("periodic").unwrap()
}

fn every(ms: u64, payload: &str) -> ScheduleSpec {
    ScheduleSpec {
        max_attempts: Some(3),
        ..ScheduleSpec::every(ms, payload)
    }
}

fn ticker<B: Schedules>(b: &B, _t: &Time) -> Ticker<B> {
    // (The ticker reads the store's clock: a driven store's is the test's.)
    Ticker::new(b.clone()).queues(vec![pq()])
}

/// Every fire is enqueued once, with the id `NAME@<fire ms>`, however many tickers race for
/// it; a fire with a stale next time writes nothing.
pub async fn schedules_fire_once<B: Backend + Inspect + Schedules>(b: B, t: Time) {
    let max = delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES;
    let now = t.now_ms();
    let info = schedule::put(&b, &pq(), "tick", every(1000, "v1"), max, now)
        .await
        .unwrap();
    assert_eq!(info.next_ms, now + 1000);
    let stored = b.schedule(&pq(), "tick").await.unwrap().unwrap();
    assert_eq!(stored, info);
    assert!(b.scheduled_queues().await.unwrap().contains(&pq()));
    // Not due yet: nothing fires.
    assert_eq!(ticker(&b, &t).tick().await.unwrap().0, 0);
    t.pass(Duration::from_millis(1100)).await;
    // Four tickers at once: one fire.
    let tickers: Vec<_> = (0..4).map(|_| ticker(&b, &t)).collect();
    let fired: usize = futures::future::join_all(tickers.iter().map(|tk| tk.tick()))
        .await
        .into_iter()
        .map(|r| r.unwrap().0)
        .sum();
    assert_eq!(fired, 1, "one fire for four tickers");
    let after = b.schedule(&pq(), "tick").await.unwrap().unwrap();
    assert_eq!(after.next_ms, info.next_ms + 1000);
    let id = schedule::fire_id("tick", info.next_ms);
    let job = b.get(&pq(), &id).await.unwrap().expect("the fire's job");
    assert_eq!(job.payload, b"v1");
    assert_eq!(job.max_attempts, 3);
    assert!(job.due_at_ms >= info.next_ms, "never before its fire time");
    // A fire that read the old next time is refused and writes nothing.
    let stale = every(1000, "v1").plan(info.next_ms, info.next_ms).unwrap();
    assert!(!b.fire(&pq(), "tick", stale).await.unwrap());
    assert_eq!(b.stats(&pq()).await.unwrap().waiting(), 1);
    // A new payload keeps the next fire; a new timing starts from now.
    let kept = schedule::put(&b, &pq(), "tick", every(1000, "v2"), max, t.now_ms())
        .await
        .unwrap();
    assert_eq!(kept.next_ms, after.next_ms);
    let at = t.now_ms();
    let moved = schedule::put(&b, &pq(), "tick", every(5000, "v2"), max, at)
        .await
        .unwrap();
    assert_eq!(moved.next_ms, at + 5000);
    let claimed = b.claim(&pq(), req(10, 30_000)).await.unwrap().jobs;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, id);
    // Listing and deleting.
    schedule::put(
        &b,
        &pq(),
        "nightly",
        cron("30 2 * * *", "Europe/Paris"),
        max,
        now,
    )
    .await
    .unwrap();
    let names: Vec<String> = b
        .schedules(&pq())
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["nightly", "tick"]);
    assert!(b.delete_schedule(&pq(), "tick").await.unwrap());
    assert!(!b.delete_schedule(&pq(), "tick").await.unwrap());
    assert!(b.schedule(&pq(), "tick").await.unwrap().is_none());
    // Jobs it enqueued stay; a deleted schedule does not fire.
    let gone = every(1000, "v1")
        .plan(moved.next_ms, moved.next_ms)
        .unwrap();
    assert!(!b.fire(&pq(), "tick", gone).await.unwrap());
}

fn cron(expr: &str, tz: &str) -> ScheduleSpec {
    ScheduleSpec {
        timing: Timing::Cron {
            cron: expr.into(),
            tz: tz.into(),
        },
        ..every(1000, "c")
    }
}

/// Unknown time zones, bad cron syntax, too short intervals and bad names are refused with a
/// typed error; nothing is stored.
pub async fn bad_schedules_are_refused<B: Backend + Inspect + Schedules>(b: B, t: Time) {
    let max = delayq::limits::DEFAULT_MAX_PAYLOAD_BYTES;
    let bad = [
        ("tz", cron("0 9 * * *", "Mars/Olympus")),
        ("syntax", cron("0 9 * *", "UTC")),
        ("range", cron("0 25 * * *", "UTC")),
        ("short", every(10, "x")),
    ];
    for (name, spec) in bad {
        let e = schedule::put(&b, &pq(), name, spec, max, t.now_ms())
            .await
            .unwrap_err();
        assert!(
            matches!(e, delayq::Error::Invalid(InvalidInput::Schedule(_))),
            "{name}: {e}"
        );
    }
    let e = schedule::put(&b, &pq(), "a@b", every(1000, "x"), max, t.now_ms())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        delayq::Error::Invalid(InvalidInput::Schedule(_))
    ));
    let e = schedule::put(&b, &pq(), "big", every(1000, "xx"), 1, t.now_ms())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        delayq::Error::Invalid(InvalidInput::PayloadTooLarge { .. })
    ));
    assert!(b.schedules(&pq()).await.unwrap().is_empty());
}
