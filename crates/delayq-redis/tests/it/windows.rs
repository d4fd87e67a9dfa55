//! The lane's time windows (`QueueSettings::lane_window_ms`; lane.lua, above win_key): what a
//! job with a random delay costs there, that look-up, dedupe, cancel, counts, listings and
//! cancel-all see into the windows, that a full window sends jobs to the sorted sets, and that
//! windows move to the sorted sets before they start — no job early, each once, no index entry
//! left behind. (The conformance suite and the model check run on 100-ms windows too:
//! conformance.rs, `mod windows`.)

use std::collections::HashSet;
use std::time::Duration;

use crate::common::*;
use delayq::Clock as _;
use delayq::{
    Backend, Cursor, Due, Error, Inspect, JobId, ListState, NewJob, Producer, QueueName,
    QueueSettings,
};
use delayq_redis::RedisBackend;

/// A queue with the lane and windows `window_ms` wide.
async fn windows_on(b: &RedisBackend, q: &QueueName, window_ms: u32) {
    let s = QueueSettings {
        lane: true,
        lane_window_ms: window_ms,
        ..QueueSettings::default()
    };
    b.configure(q, s).await.unwrap();
}

/// A small seeded PRNG (the same delays every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn w4_id(i: usize) -> JobId {
    JobId::new(format!("1{i:019}")).unwrap()
}

/// A W4-shaped job (20-byte id, 100-byte payload) due in `delay_ms`.
fn w4_job(i: usize, delay_ms: u64) -> NewJob {
    let id = w4_id(i);
    let payload = format!(
        r#"{{"orderId":"{id}","action":"cancel","pad":"{}"}}"#,
        "x".repeat(39)
    );
    NewJob::new(payload.into_bytes())
        .id(id)
        .due(Due::Delay(Duration::from_millis(delay_ms)))
}

/// Delays uniform in `lo..hi` ms, one a job.
fn delays(n: usize, lo: u64, hi: u64, seed: u64) -> Vec<u64> {
    let mut r = Lcg(seed);
    (0..n).map(|_| lo + r.below(hi - lo)).collect()
}

/// Enqueues jobs `0..delays.len()` due in their delays, in batches of 1,000; returns each
/// one's due time.
async fn fill(p: &Producer<RedisBackend>, delays: &[u64]) -> Vec<u64> {
    fill_from(p, 0, delays).await
}

/// [`fill`] with the jobs `first..first + delays.len()`.
async fn fill_from(p: &Producer<RedisBackend>, first: usize, delays: &[u64]) -> Vec<u64> {
    let mut due = Vec::new();
    for (c, chunk) in delays.chunks(1000).enumerate() {
        let jobs = chunk
            .iter()
            .enumerate()
            .map(|(i, &d)| w4_job(first + c * 1000 + i, d))
            .collect();
        let out = p.enqueue_batch(jobs).await.unwrap();
        assert!(out.iter().all(|e| e.created));
        due.extend(out.iter().map(|e| e.due_at_ms));
    }
    due
}

/// An integer reply of `command` (RESP `:n`).
fn int(s: &RedisServer, args: &[&str]) -> i64 {
    let r = s.command(args);
    r.trim().trim_start_matches(':').parse().unwrap_or(0)
}

/// The windows of queue `q`: how many, and their entries in all.
fn windows(s: &RedisServer, q: &QueueName) -> (i64, i64) {
    let wins = format!("dq:{{{q}}}:lane:w");
    let n = int(s, &["ZCARD", &wins]);
    let starts = s.command(&["ZRANGE", &wins, "0", "-1"]);
    let entries = starts
        .lines()
        .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
        .map(|start| int(s, &["LLEN", &format!("dq:{{{q}}}:lane:{}", start.trim())]))
        .sum();
    (n, entries)
}

/// The server's clock (`TIME`), ms.
fn server_ms(s: &RedisServer) -> u64 {
    let t = s.command(&["TIME"]);
    let mut parts = t.lines().map(|l| l.trim().parse::<u64>().unwrap());
    parts.next().unwrap() * 1000 + parts.next().unwrap() / 1000
}

/// Index entries of window jobs left in the queue's buckets (a window's is tagged `W`, the
/// one-delay lane's `L`, swept by claims a bucket at a time).
fn index_entries(s: &RedisServer, q: &QueueName) -> i64 {
    let count = "local n = 0 for b = 0, 1023 do \
        for _, v in ipairs(redis.call('HVALS', KEYS[1] .. b)) do \
        if string.sub(v, 1, 1) == 'W' then n = n + 1 end end end return n";
    int(s, &["EVAL", count, "1", &format!("dq:{{{q}}}:ix:")])
}

/// Bytes per job of `n` W4-shaped jobs with random delays of 1–2 h, with or without windows.
async fn bytes_per_job(window_ms: Option<u32>, n: usize) -> f64 {
    let (s, b, q) = setup().await;
    if let Some(w) = window_ms {
        windows_on(&b, &q, w).await;
    }
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(w4_job(n, 3_600_000)).await.unwrap();
    let base = s.info_field("memory", "used_memory").unwrap();
    fill(&p, &delays(n, 3_600_000, 7_200_000, 7)).await;
    let used = s.info_field("memory", "used_memory").unwrap();
    assert_eq!(b.stats(&q).await.unwrap().waiting(), n as u64 + 1);
    if window_ms.is_some() {
        let (_, entries) = windows(&s, &q);
        assert!(
            entries as usize > n * 99 / 100,
            "{entries} of {n} in windows"
        );
    }
    (used - base) / n as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_a_random_delay_costs_under_200_bytes_in_a_window() {
    let n = 100_000;
    let windowed = bytes_per_job(Some(10_000), n).await;
    let sets = bytes_per_job(None, n).await;
    assert!(windowed < 200.0, "windows: {windowed:.0} B per job");
    assert!(sets > 300.0, "sorted sets: {sets:.0} B per job");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_jobs_are_found_deduped_rescheduled_and_cancelled_by_id() {
    let (s, b, q) = setup().await;
    windows_on(&b, &q, 10_000).await;
    let p = Producer::new(b.clone(), q.clone());
    let waits = delays(300, 60_000, 3_600_000, 11);
    let before = server_ms(&s);
    let due = fill(&p, &waits).await;
    let after = server_ms(&s);
    let (wins, entries) = windows(&s, &q);
    assert!(
        wins > 100 && entries >= 290,
        "{wins} windows, {entries} entries"
    );
    // Guarantee 7: a window job's due time is the server's clock plus its delay.
    for (d, w) in due.iter().zip(&waits) {
        assert!((before + w..=after + w).contains(d), "due {d}, delay {w}");
    }
    // Guarantee 3: a token for a job waiting in a window (or the lane) is a lost lease, not a
    // missing job, and changes nothing.
    let stale = (0..300)
        .map(|i| {
            delayq::Ack::from(delayq::LeaseRef {
                id: w4_id(i),
                token: 12_345,
            })
        })
        .collect();
    let acks = b.ack(&q, stale).await.unwrap();
    assert!(
        acks.iter().all(|a| *a == delayq::AckOutcome::LeaseLost),
        "{acks:?}"
    );
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 300);
    for i in [0usize, 17, 150, 299] {
        let j = b
            .get(&q, &w4_id(i))
            .await
            .unwrap()
            .expect("found in its window");
        assert_eq!(j.state, delayq::JobState::Scheduled);
        assert_eq!(j.due_at_ms, due[i]);
        assert!(String::from_utf8_lossy(&j.payload).contains(w4_id(i).as_str()));
        // The same id again: refused, with the stored due time.
        let again = p.enqueue(w4_job(i, 5_000_000)).await.unwrap();
        assert!(!again.created);
        assert_eq!(again.due_at_ms, due[i]);
    }
    // Cancel: gone from its window, its index entry and the counts.
    assert_eq!(
        b.cancel(&q, &w4_id(17)).await.unwrap(),
        delayq::CancelOutcome::Cancelled
    );
    assert!(b.get(&q, &w4_id(17)).await.unwrap().is_none());
    assert_eq!(
        b.cancel(&q, &w4_id(17)).await.unwrap(),
        delayq::CancelOutcome::NotFound
    );
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 299);
    // A cancelled id is free again.
    assert!(p.enqueue(w4_job(17, 120_000)).await.unwrap().created);
    // Reschedule moves a window job to the sorted sets, due then.
    let at = b
        .reschedule(&q, &w4_id(150), Due::Delay(Duration::from_secs(30)))
        .await
        .unwrap();
    let j = b.get(&q, &w4_id(150)).await.unwrap().unwrap();
    assert_eq!(j.due_at_ms, at);
    assert_eq!(int(&s, &["ZCARD", &format!("dq:{{{q}}}:sched")]), 1);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 300);
}

/// Every page of `state`, `limit` at a time: (due, id) of each job in listing order.
async fn pages(
    b: &RedisBackend,
    q: &QueueName,
    state: ListState,
    limit: usize,
) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let mut after: Option<Cursor> = None;
    loop {
        let page = b
            .list(q, delayq::ListRequest::new(state, limit, after.clone()))
            .await
            .unwrap();
        out.extend(page.jobs.iter().map(|j| (j.due_at_ms, j.id.to_string())));
        match page.next {
            Some(c) => after = Some(c),
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_and_counts_see_into_the_windows() {
    let (s, b, q) = setup().await;
    windows_on(&b, &q, 60_000).await;
    let p = Producer::new(b.clone(), q.clone());
    // 2,000 jobs over ~1,100 one-minute windows (more than one listing call reads), then 50
    // due within the minute, in the lane (one delay, in order). Those 50 are due within one
    // width, so they never sit in a window: however long the test takes (< 30 s), no window
    // starts while it runs and the cancel below takes every window whole. (With 1-s windows
    // and 1.5-s jobs, a run slower than a second left a started window's tombstones behind.)
    let mut due = fill(&p, &delays(2_000, 120_000, 86_400_000, 5)).await;
    for i in 0..50 {
        due.push(
            p.enqueue(w4_job(2_000 + i, 30_000))
                .await
                .unwrap()
                .due_at_ms,
        );
    }
    let (wins, _) = windows(&s, &q);
    assert!(wins > 256, "{wins} windows");
    let mut want: Vec<(u64, String)> = due
        .iter()
        .enumerate()
        .map(|(i, &d)| (d, w4_id(i).to_string()))
        .collect();
    want.sort();
    assert_eq!(pages(&b, &q, ListState::Scheduled, 100).await, want);
    assert_eq!(pages(&b, &q, ListState::Scheduled, 7).await, want);
    let st = b.stats(&q).await.unwrap();
    assert_eq!(st.waiting(), 2_050);
    assert_eq!(st.due, 0);
    let minute = want.iter().filter(|(d, _)| *d <= now_ms() + 60_000).count() as u64;
    assert!(
        st.due_next_minute.abs_diff(minute) <= 2,
        "{st:?} against {minute}"
    );
    // Cancel every scheduled job: the windows and their index entries go too.
    assert_eq!(b.cancel_all(&q, ListState::Scheduled).await.unwrap(), 2_050);
    assert_eq!(windows(&s, &q), (0, 0));
    assert_eq!(index_entries(&s, &q), 0);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_window_sends_its_later_jobs_to_the_sorted_sets() {
    let (s, b, q) = setup().await;
    windows_on(&b, &q, 60_000).await;
    let p = Producer::new(b.clone(), q.clone());
    // One window: due within the same minute, two minutes ahead, in falling order (none fits
    // the one-delay lane after the first).
    let start = (now_ms() / 60_000 + 3) * 60_000;
    let n = 8_192 + 100;
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let jobs = chunk
            .iter()
            .map(|&i| {
                let at = start + 59_000 - (i as u64 * 7) % 59_000;
                w4_job(i, 0).due(Due::At(at))
            })
            .collect();
        p.enqueue_batch(jobs).await.unwrap();
    }
    let window = format!("dq:{{{q}}}:lane:{start}");
    assert_eq!(int(&s, &["LLEN", &window]), 8_192);
    let sched = int(&s, &["ZCARD", &format!("dq:{{{q}}}:sched")]);
    let lane = int(&s, &["LLEN", &format!("dq:{{{q}}}:lane")]);
    assert_eq!(sched + lane, 100);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), n as u64);
    for i in [0, 8_191, 8_192, n - 1] {
        assert!(b.get(&q, &w4_id(i)).await.unwrap().is_some(), "job {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn windows_move_before_they_start_and_no_job_starts_early() {
    let (s, b, q) = setup().await;
    // The scripts read Redis's clock plus this one's offset: time passes at once.
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    windows_on(&b, &q, 100).await;
    let p = Producer::new(b.clone(), q.clone());
    let n = 600;
    let due = fill(&p, &delays(n, 400, 2_500, 3)).await;
    let (wins, entries) = windows(&s, &q);
    assert!(
        wins > 10 && entries > 500,
        "{wins} windows, {entries} entries"
    );
    // One cancelled in its window: never delivered.
    b.cancel(&q, &w4_id(5)).await.unwrap();
    let mut seen = HashSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while seen.len() < n - 1 && std::time::Instant::now() < deadline {
        let got = b.claim(&q, claim_req(50, 30_000)).await.unwrap();
        let at = clock.now_ms();
        for j in &got.jobs {
            let i: usize = j.id.as_str()[1..].parse().unwrap();
            assert!(at >= due[i], "job {i} claimed at {at}, due {}", due[i]);
            assert!(seen.insert(i), "job {i} twice");
        }
        b.ack(&q, got.jobs.iter().map(|j| j.to_ack()).collect())
            .await
            .unwrap();
        if got.jobs.is_empty() {
            let wait = got.next_due_in.unwrap_or(Duration::from_millis(20));
            clock.advance(wait.min(Duration::from_millis(50)));
        }
    }
    assert_eq!(seen.len(), n - 1);
    assert!(!seen.contains(&5));
    assert_eq!(windows(&s, &q), (0, 0));
    assert_eq!(index_entries(&s, &q), 0, "promoted jobs leave the index");
    assert_eq!(int(&s, &["HGET", &format!("dq:{{{q}}}:lanemeta"), "wn"]), 0);
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_asleep_is_woken_for_a_new_first_window() {
    let (_s, b, q) = setup().await;
    // The scripts read Redis's clock plus this one's offset: time passes at once.
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    windows_on(&b, &q, 100).await;
    let p = Producer::new(b.clone(), q.clone());
    // A job an hour away, then the consumer sleeps towards it.
    p.enqueue(w4_job(0, 3_600_000)).await.unwrap();
    let got = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    assert!(got.jobs.is_empty());
    assert!(got.next_due_in.unwrap() > Duration::from_secs(3_000));
    let mut wake = b.wakeups(&q).await.unwrap();
    wake.borrow_and_update();
    // A job in a new window a second away (earlier than the lane's): a wake-up.
    let due = p.enqueue(w4_job(1, 1_000)).await.unwrap().due_at_ms;
    tokio::time::timeout(Duration::from_secs(2), wake.changed())
        .await
        .expect("woken")
        .unwrap();
    let got = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    let next = got.next_due_in.unwrap();
    assert!(
        next < Duration::from_millis(1_000),
        "come back to move it: {next:?}"
    );
    clock.advance(Duration::from_millis(
        due.saturating_sub(clock.now_ms()) + 20,
    ));
    let got = b.claim(&q, claim_req(10, 30_000)).await.unwrap();
    assert_eq!(got.jobs.len(), 1);
    assert_eq!(got.jobs[0].id, w4_id(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_width_changes_only_while_the_queue_is_empty() {
    let (_s, b, q) = setup().await;
    windows_on(&b, &q, 10_000).await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(w4_job(0, 3_600_000)).await.unwrap();
    let wider = QueueSettings {
        lane: true,
        lane_window_ms: 20_000,
        ..QueueSettings::default()
    };
    let err = b.configure(&q, wider.clone()).await.unwrap_err();
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    assert_eq!(b.settings(&q).await.unwrap().lane_window_ms, 10_000);
    let bad = QueueSettings {
        lane_window_ms: 50,
        ..wider.clone()
    };
    assert!(matches!(
        b.configure(&q, bad).await.unwrap_err(),
        Error::Invalid(_)
    ));
    b.cancel(&q, &w4_id(0)).await.unwrap();
    b.configure(&q, wider).await.unwrap();
    assert_eq!(b.settings(&q).await.unwrap().lane_window_ms, 20_000);
}

/// The claims' sweep of the one-delay lane's claimed ids reads index buckets that hold window
/// entries too (not sequence numbers): it leaves them, and every claim succeeds. (A sweep that
/// took a window's entry for a number failed the claim after it had cut the lane: jobs lost.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lanes_sweep_leaves_window_entries_alone() {
    let (s, b, q) = setup().await;
    windows_on(&b, &q, 10_000).await;
    let p = Producer::new(b.clone(), q.clone());
    // 4,096 lane jobs due now, one three hours away (the lane's last), then 6,000 due within
    // two hours: earlier than the lane's last, so in windows, in nearly every bucket.
    let first: Vec<_> = (0..4_096).map(|i| w4_job(i, 0)).collect();
    p.enqueue_batch(first).await.unwrap();
    p.enqueue(w4_job(4_096, 3 * 3_600_000)).await.unwrap();
    fill_from(&p, 5_000, &delays(6_000, 3_600_000, 7_200_000, 9)).await;
    assert_eq!(windows(&s, &q).1, 6_000);
    for _ in 0..64 {
        let got = b.claim(&q, claim_req(64, 30_000)).await.unwrap();
        assert_eq!(got.jobs.len(), 64);
        b.ack(&q, got.jobs.iter().map(|j| j.to_ack()).collect())
            .await
            .unwrap();
    }
    assert_eq!(index_entries(&s, &q), 6_000, "every window entry kept");
    for i in [5_000, 7_777, 10_999] {
        assert!(b.get(&q, &w4_id(i)).await.unwrap().is_some(), "job {i}");
    }
    assert_eq!(b.stats(&q).await.unwrap().waiting(), 6_001);
}

/// Windows nobody moves (no consumer runs) keep their jobs when they fall due: the counts, the
/// listing of due jobs and cancel-all of due jobs find them there, past the tombstones of jobs
/// cancelled one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_jobs_left_in_windows_are_counted_listed_and_cancelled() {
    let (s, b, q) = setup().await;
    // The scripts read Redis's clock plus this one's offset: time passes at once.
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    windows_on(&b, &q, 1_000).await;
    let p = Producer::new(b.clone(), q.clone());
    p.enqueue(w4_job(9_999, 3_600_000)).await.unwrap();
    let due = fill(&p, &delays(400, 2_500, 4_500, 13)).await;
    assert!(windows(&s, &q).1 >= 390);
    let cancelled: HashSet<usize> = (0..400).step_by(7).collect();
    for &i in &cancelled {
        b.cancel(&q, &w4_id(i)).await.unwrap();
    }
    let live = |t: u64| {
        (0..400)
            .filter(|i| !cancelled.contains(i) && due[*i] <= t)
            .count() as u64
    };
    // Wait until about half are due.
    let mut sorted = due.clone();
    sorted.sort();
    clock.advance(Duration::from_millis(
        sorted[200].saturating_sub(clock.now_ms()),
    ));
    let before = clock.now_ms();
    let st = b.stats(&q).await.unwrap();
    let after = clock.now_ms();
    assert_eq!(st.waiting(), 400 - cancelled.len() as u64 + 1);
    assert!(
        (live(before)..=live(after)).contains(&st.due),
        "{} due, {}..{} expected",
        st.due,
        live(before),
        live(after)
    );
    assert!(st.oldest_overdue_ms > 0);
    // Every live job but the hour-away one is due or due within the minute.
    assert_eq!(
        st.due + st.due_next_minute,
        400 - cancelled.len() as u64,
        "{st:?}"
    );
    // The due listing, then cancel-all of the due jobs (windows wholly due and the one across
    // now): what is left is scheduled.
    let listed = pages(&b, &q, ListState::Due, 50).await;
    assert!(listed.windows(2).all(|w| w[0] < w[1]), "in order");
    assert!(listed.iter().all(|(d, _)| *d <= clock.now_ms()));
    let at = clock.now_ms();
    assert!(listed.len() as u64 >= live(before) && listed.len() as u64 <= live(at));
    let t0 = clock.now_ms();
    let gone = b.cancel_all(&q, ListState::Due).await.unwrap();
    let t1 = clock.now_ms();
    let st = b.stats(&q).await.unwrap();
    // (Jobs may fall due while the cancels run.)
    assert!(st.due <= live(clock.now_ms()) - live(t0), "{st:?}");
    assert!((live(t0)..=live(t1)).contains(&gone), "{gone} cancelled");
    assert_eq!(gone + st.waiting(), 400 - cancelled.len() as u64 + 1);
    for (i, d) in due.iter().enumerate() {
        let found = b.get(&q, &w4_id(i)).await.unwrap().is_some();
        if cancelled.contains(&i) {
            assert!(!found, "job {i} was cancelled");
        } else if found {
            assert!(*d > t0, "job {i} due {d} stayed");
        } else {
            assert!(*d <= t1, "job {i} due {d} cancelled");
        }
    }
    // Every job left but the lane's (9,999) is in a window, with its index entry.
    assert_eq!(index_entries(&s, &q) as u64, st.waiting() - 1);
}

/// A queue never configured reads the default settings (10-s windows once its lane is on); a
/// lane queue configured before windows existed (no `lane_window_ms` stored, no width in its
/// shards) reads 0, and keeps no windows until it is configured again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_configured_before_windows_existed_reads_none() {
    let (s, b, q) = setup().await;
    assert_eq!(b.settings(&q).await.unwrap(), QueueSettings::default());
    // What an older version stored: the lane on, its shards without a width.
    let old = queue();
    windows_on(&b, &old, 0).await;
    s.command(&["HDEL", &format!("dq:{{{old}}}:conf"), "lane_window_ms"]);
    let got = b.settings(&old).await.unwrap();
    assert!(got.lane);
    assert_eq!(got.lane_window_ms, 0);
    let p = Producer::new(b.clone(), old.clone());
    p.enqueue(w4_job(0, 3_600_000)).await.unwrap();
    p.enqueue(w4_job(1, 1_800_000)).await.unwrap();
    assert_eq!(int(&s, &["LLEN", &format!("dq:{{{old}}}:lane")]), 1);
    assert_eq!(int(&s, &["ZCARD", &format!("dq:{{{old}}}:sched")]), 1);
    assert_eq!(windows(&s, &old), (0, 0), "no windows without a width");
}
