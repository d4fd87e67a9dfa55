//! Upgrades: a store written by an earlier build opens in this one (its layout migrated) with
//! every job, setting and schedule as it was; a store of a later layout is refused untouched.
//!
//! `tests/fixtures/layout-0` was written by delayq 0.1.0 at commit 8a7281b, the last build
//! before layout versions were recorded (`user_version` 0): jobs scheduled, due, dead and done,
//! queue limits and retention, a cron schedule. Each later layout adds its own fixture
//! (`layout-2`: before results; `layout-3`: before keys).

use std::path::Path;
use std::time::Duration;

use delayq::{Backend, ClaimRequest, Inspect, JobId, JobState, ListState, QueueName, Schedules};
use delayq_embedded::{EmbeddedBackend, Error, LAYOUT};

fn fixture(name: &str) -> tempfile::TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(src).unwrap().flatten() {
        std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
    }
    dir
}

/// Job `id` of `q`, which must be there.
async fn stored(b: &EmbeddedBackend, q: &QueueName, id: &str) -> delayq::JobInfo {
    let id = JobId::new(id).unwrap();
    b.get(q, &id).await.unwrap().expect("the job is there")
}

/// Fixture `name`, written at layout `written`, opened by this build: its queue `mail` holds
/// `done-1` kept as done with its result, `dead-1` dead and `later-1` scheduled, read as
/// written. Answers the store, its directory, the queue and `done-1`.
async fn opened(
    name: &str,
    written: i64,
) -> (
    tempfile::TempDir,
    EmbeddedBackend,
    QueueName,
    delayq::JobInfo,
) {
    let dir = fixture(name);
    assert_eq!(layout(dir.path()), written);
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let q = QueueName::new("mail").unwrap();
    let done = stored(&b, &q, "done-1").await;
    assert_eq!(done.state, JobState::Done);
    assert_eq!(done.result.as_deref(), Some(&b"{\"sent\":true}\n"[..]));
    assert_eq!(stored(&b, &q, "dead-1").await.state, JobState::Dead);
    assert_eq!(stored(&b, &q, "later-1").await.state, JobState::Scheduled);
    (dir, b, q, done)
}

/// Closes the store in `dir`: it is at this build's layout.
fn closed_at_this_layout(dir: &tempfile::TempDir, b: EmbeddedBackend) {
    drop(b);
    assert_eq!(layout(dir.path()), LAYOUT);
}

fn layout(dir: &Path) -> i64 {
    let c = rusqlite::Connection::open(dir.join("delayq.sqlite3")).unwrap();
    c.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_store_of_the_first_layout_opens_with_everything_in_it() {
    let dir = fixture("layout-0");
    assert_eq!(layout(dir.path()), 0);
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let orders = QueueName::new("orders").unwrap();
    let mail = QueueName::new("mail").unwrap();
    let get = |q: &QueueName, id: &str| {
        let b = b.clone();
        let q = q.clone();
        let id = JobId::new(id).unwrap();
        async move { b.get(&q, &id).await.unwrap().expect("the job is there") }
    };
    let later = get(&orders, "later-2").await;
    assert_eq!(
        (later.state, later.max_attempts, later.priority),
        (JobState::Scheduled, 3, 7)
    );
    assert_eq!(later.due_at_ms, 2_051_222_400_000, "2035-01-01T00:00:00Z");
    assert_eq!(get(&mail, "dead-1").await.state, JobState::Dead);
    assert_eq!(get(&mail, "done-1").await.state, JobState::Done);
    let due2 = get(&orders, "due-2").await;
    assert_eq!(due2.timeout_ms, Some(30_000));
    assert!(due2.expires_at_ms.is_some());
    let settings = b.settings(&orders).await.unwrap();
    assert_eq!(settings.max_in_flight, Some(100), "{settings:?}");
    assert!(settings.rate.is_some(), "{settings:?}");
    let schedules = b.schedules(&orders).await.unwrap();
    assert_eq!(schedules.len(), 1);
    assert_eq!(schedules[0].name, "nightly");
    let dead = b
        .list(&mail, delayq::ListRequest::new(ListState::Dead, 10, None))
        .await
        .unwrap();
    assert_eq!(dead.jobs.len(), 1);

    // The due jobs are claimed and acknowledged by this build.
    let batch = b
        .claim(
            &orders,
            ClaimRequest {
                max: 10,
                lease: Duration::from_secs(30),
                acks: Vec::new(),
            },
        )
        .await
        .unwrap();
    let mut ids: Vec<String> = batch.jobs.iter().map(|j| j.id.to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["due-1", "due-2"]);
    let acks: Vec<delayq::Ack> = batch.jobs.iter().map(delayq::Job::to_ack).collect();
    let outcomes = b.ack(&orders, acks).await.unwrap();
    assert!(
        outcomes.iter().all(|o| *o == delayq::AckOutcome::Acked),
        "{outcomes:?}"
    );
    drop(b);
    assert_eq!(
        layout(dir.path()),
        LAYOUT,
        "the layout is recorded once migrated"
    );
}

#[tokio::test]
async fn a_store_of_a_later_layout_is_refused_and_left_as_it_is() {
    let dir = fixture("layout-0");
    let c = rusqlite::Connection::open(dir.path().join("delayq.sqlite3")).unwrap();
    c.pragma_update(None, "user_version", LAYOUT + 1).unwrap();
    drop(c);
    let before = std::fs::read(dir.path().join("delayq.sqlite3")).unwrap();
    match EmbeddedBackend::open(dir.path()) {
        Err(e @ Error::NewerLayout { .. }) => {
            assert!(e.to_string().contains("newer delayq"), "{e}");
        }
        other => panic!("opened a later layout: {:?}", other.map(|_| ())),
    }
    assert_eq!(
        std::fs::read(dir.path().join("delayq.sqlite3")).unwrap(),
        before
    );
}

#[tokio::test]
async fn a_backup_taken_while_the_store_serves_restores_every_job() {
    let dir = fixture("layout-0");
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let copy = tempfile::tempdir().unwrap();
    let dest = copy.path().join("backup");
    let done = delayq_embedded::backup(dir.path(), &dest).unwrap();
    assert_eq!(done.jobs, 6, "{done:?}");
    assert!(
        delayq_embedded::backup(dir.path(), &dest).is_err(),
        "a second backup into the same directory is refused"
    );
    drop(b);
    let restored = EmbeddedBackend::open(&dest).unwrap();
    let mail = QueueName::new("mail").unwrap();
    let id = JobId::new("dead-1").unwrap();
    assert_eq!(
        restored.get(&mail, &id).await.unwrap().map(|j| j.state),
        Some(JobState::Dead)
    );
}

/// `tests/fixtures/layout-2` was written by commit d715064 (layout 2, before results): a done
/// job kept with its trace context, a scheduled one, a dead one. This build adds the result
/// column; the old jobs read as before (no result) and a job acked now keeps its result.
#[tokio::test]
async fn a_store_of_layout_2_gains_results() {
    let dir = fixture("layout-2");
    assert_eq!(layout(dir.path()), 2);
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let q = QueueName::new("mail").unwrap();
    let done = stored(&b, &q, "done-1").await;
    assert_eq!((done.state, done.result), (JobState::Done, None));
    assert!(done.trace.is_some(), "its trace context is kept");
    assert_eq!(stored(&b, &q, "dead-1").await.state, JobState::Dead);
    assert_eq!(stored(&b, &q, "later-1").await.state, JobState::Scheduled);
    let keep = delayq::QueueSettings {
        retention: delayq::Retention {
            keep_done_ms: 60_000,
            dedupe_ms: 0,
        },
        ..delayq::QueueSettings::default()
    };
    b.configure(&q, keep).await.unwrap();
    b.dead_requeue(&q, &JobId::new("dead-1").unwrap())
        .await
        .unwrap();
    let batch = b
        .claim(
            &q,
            ClaimRequest {
                max: 10,
                lease: Duration::from_secs(30),
                acks: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert_eq!(batch.jobs.len(), 1);
    let lease = batch.jobs[0].lease_ref();
    let o = b
        .ack(
            &q,
            vec![delayq::Ack::with_result(lease, b"{\"ok\":1}".to_vec())],
        )
        .await
        .map(|o| o[0]);
    assert_eq!(o.unwrap(), delayq::AckOutcome::Acked);
    assert_eq!(
        stored(&b, &q, "dead-1").await.result.as_deref(),
        Some(&b"{\"ok\":1}"[..])
    );
    closed_at_this_layout(&dir, b);
}

/// `tests/fixtures/layout-3` was written by commit 68fd8ba (layout 3, before keys) with its
/// CLI: queue `mail` with `max_in_flight` 5 and `keep_done` 1 h, a job kept as done with its
/// result, a scheduled one, a dead one. This build adds jobs' keys: the old jobs read as
/// before (no key), the settings are kept, and the queue takes keyed jobs and shares its
/// claims among them.
#[tokio::test]
async fn a_store_of_layout_3_gains_keys() {
    let (dir, b, q, done) = opened("layout-3", 3).await;
    assert_eq!(done.key, None);
    let s = b.settings(&q).await.unwrap();
    assert_eq!(s.max_in_flight, Some(5));
    assert_eq!(s.retention.keep_done_ms, 3_600_000);
    assert_eq!((s.key_max_in_flight, s.key_rate), (None, None));
    // Keyed jobs beside the old ones: a key with a backlog shares the claims with another.
    let producer = delayq::Producer::new(b.clone(), q.clone());
    let keyed = |k: &str, n: usize| {
        (0..n)
            .map(|i| {
                delayq::NewJob::new(format!("{k}{i}").into_bytes())
                    .key(delayq::JobKey::new(k).unwrap())
            })
            .collect::<Vec<_>>()
    };
    producer.enqueue_batch(keyed("big", 6)).await.unwrap();
    producer.enqueue_batch(keyed("small", 2)).await.unwrap();
    b.dead_requeue(&q, &JobId::new("dead-1").unwrap())
        .await
        .unwrap();
    let batch = b
        .claim(
            &q,
            ClaimRequest {
                max: 5,
                lease: Duration::from_secs(30),
                acks: Vec::new(),
            },
        )
        .await
        .unwrap();
    let keys: Vec<String> = batch
        .jobs
        .iter()
        .map(|j| j.key.as_ref().map_or("-".into(), |k| k.to_string()))
        .collect();
    assert_eq!(keys.len(), 5, "max_in_flight 5: {keys:?}");
    assert_eq!(keys.iter().filter(|k| *k == "small").count(), 2, "{keys:?}");
    assert!(
        keys.contains(&"-".to_owned()),
        "the requeued old job: {keys:?}"
    );
    closed_at_this_layout(&dir, b);
}

/// `tests/fixtures/layout-4` was written by commit 714432b (layout 4, before batches) with
/// its CLI: queue `mail` with `max_in_flight` 5, `keep_done` 1 h and `key_max_in_flight` 2, a
/// keyed job kept as done with its result, a dead one, a keyed one due in 2 h and one due in
/// 1 h. This build adds batches: the old jobs read as before, and the queue takes a batch
/// whose callback comes once its jobs are done.
#[tokio::test]
async fn a_store_of_layout_4_gains_batches() {
    use delayq::{BatchId, BatchSpec, Callback};
    let (dir, b, q, done) = opened("layout-4", 4).await;
    assert_eq!(done.key.as_ref().map(|k| k.as_str()), Some("acme"));
    assert_eq!(stored(&b, &q, "due-1").await.state, JobState::Scheduled);
    let s = b.settings(&q).await.unwrap();
    assert_eq!((s.max_in_flight, s.key_max_in_flight), (Some(5), Some(2)));
    // A batch beside the old jobs: its callback once its one job is acked.
    let cb = QueueName::new("mail-done").unwrap();
    let spec = BatchSpec {
        on_complete: Some(Callback::new(cb.clone())),
        ..BatchSpec::default()
    };
    let job = delayq::NewJob::new(b"x".to_vec()).id(JobId::new("in-batch").unwrap());
    let added = delayq::Producer::new(b.clone(), q.clone())
        .create_batch(
            Some(BatchId::new("old-store").unwrap()),
            spec,
            vec![job],
            false,
        )
        .await
        .unwrap();
    let claim = ClaimRequest {
        max: 10,
        lease: Duration::from_secs(30),
        acks: Vec::new(),
    };
    let leased = b.claim(&q, claim).await.unwrap().jobs;
    let mine: Vec<delayq::Ack> = leased
        .iter()
        .filter(|j| j.id.as_str() == "in-batch")
        .map(|j| j.to_ack())
        .collect();
    assert_eq!(mine.len(), 1);
    b.ack(&q, mine).await.unwrap();
    let cb_job = b.get(&cb, &added.id.complete_job()).await.unwrap();
    assert!(cb_job.is_some(), "the callback is enqueued");
    closed_at_this_layout(&dir, b);
}
