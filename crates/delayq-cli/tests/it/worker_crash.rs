//! `delayq worker --exec` processes: 4 workers share 20,000 jobs due over a few seconds, one is
//! killed with SIGKILL mid-run. Every job is handled at least once, none is lost, and
//! duplicates are no more than the jobs leased to the killed process (its concurrency plus its
//! prefetch: a job finished but whose ack was waiting for the next claim runs again).

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use delayq::{NewJob, Producer, QueueName};
use delayq_redis::RedisBackend;
use delayq_test_support::RedisServer;

const N: usize = 20_000;
const CONCURRENCY: usize = 8;

fn worker(server: &RedisServer, out: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--redis", &server.url(), "--queue", "crash", "worker"])
        .args(["--concurrency", &CONCURRENCY.to_string(), "--lease", "3s"])
        .args([
            "--exec",
            &format!("echo \"$DELAYQ_JOB_ID\" >> {}", out.display()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_loses_nothing() {
    let server = RedisServer::start();
    let (_dir, out) = delayq_test_support::temp_path("handled.txt");
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let p = Producer::new(b, QueueName::new("crash").unwrap());
    let jobs: Vec<NewJob> = (0..N)
        .map(|i| {
            NewJob::new(Vec::new())
                .id(delayq::JobId::new(format!("{i}")).unwrap())
                .delay(Duration::from_millis(300 + (i * 7919 % 3000) as u64))
        })
        .collect();
    for chunk in jobs.chunks(1000) {
        p.enqueue_batch(chunk.to_vec()).await.unwrap();
    }
    let mut workers: Vec<Child> = (0..4).map(|_| worker(&server, &out)).collect();

    let deadline = Instant::now() + Duration::from_secs(120);
    while lines(&out).len() < N / 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut victim = workers.remove(0);
    victim.kill().unwrap(); // SIGKILL
    victim.wait().unwrap();
    let at_kill = lines(&out).len();

    let mut count: HashMap<String, usize> = HashMap::new();
    while Instant::now() < deadline {
        count.clear();
        for l in lines(&out) {
            *count.entry(l).or_default() += 1;
        }
        if count.len() >= N {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for w in &workers {
        let _ = Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status();
    }
    for mut w in workers {
        w.wait().unwrap();
    }
    let missing: Vec<usize> = (0..N)
        .filter(|i| !count.contains_key(&i.to_string()))
        .collect();
    assert!(at_kill < N, "the kill happened mid-run");
    assert!(
        missing.is_empty(),
        "lost {} jobs, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    let duplicates: usize = count.values().map(|c| c - 1).sum();
    let leased = CONCURRENCY + delayq::consumer::DEFAULT_PREFETCH;
    assert!(
        duplicates <= leased,
        "{duplicates} duplicates; the killed worker held at most {leased} leases"
    );
    eprintln!("handled before kill {at_kill}, duplicates {duplicates}");
}

/// F5 at small scale: a worker stopped (SIGSTOP) for longer than its lease loses its jobs to
/// the other worker; when it resumes, its late acks are refused (lease lost) and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_has_its_late_acks_refused() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let p = Producer::new(b, QueueName::new("pause").unwrap());
    let n = 200;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new(Vec::new()).id(delayq::JobId::new(format!("{i}")).unwrap()))
        .collect();
    p.enqueue_batch(jobs).await.unwrap();
    let spawn = |name: &str| {
        let out = dir.path().join(format!("{name}.txt"));
        let child = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["--redis", &server.url(), "--queue", "pause", "worker"])
            .args(["--concurrency", "4", "--lease", "1s", "--grace", "5s"])
            .args([
                "--exec",
                &format!("sleep 0.05; echo \"$DELAYQ_JOB_ID\" >> {}", out.display()),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (child, out)
    };
    let (paused, paused_out) = spawn("paused");
    // Let it take jobs (it has finished a few, so it holds leases on the next ones), then stop
    // it mid-handler until its leases have expired and its jobs are done by the other.
    let started = Instant::now();
    while lines(&paused_out).len() < 8 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the first worker took no job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = paused.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let (other, other_out) = spawn("other");
    // Real time: the stopped worker's leases expire on Redis's clock and the other process
    // takes their jobs back and finishes them; resume the stopped one only then, so every ack
    // it sends is late (an expired lease nobody took yet still accepts its holder's ack).
    let admin = RedisBackend::connect(&server.url()).await.unwrap();
    let queue = QueueName::new("pause").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let st = delayq::Inspect::stats(&admin, &queue).await.unwrap();
        if st.waiting() == 0 && st.leased == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the other worker finished: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .unwrap()
            .success()
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    let handled = |p: &std::path::Path| lines(p);
    loop {
        let mut all: Vec<String> = handled(&paused_out);
        all.extend(handled(&other_out));
        all.sort();
        all.dedup();
        if all.len() == n || Instant::now() > deadline {
            assert_eq!(all.len(), n, "every job handled");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut reports = Vec::new();
    for c in [paused, other] {
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let o = c.wait_with_output().unwrap();
        reports.push(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    let stopped = reports[0]
        .lines()
        .find(|l| l.starts_with("delayq worker stopped"))
        .unwrap_or_default()
        .to_owned();
    let lost: u64 = stopped
        .split(", ")
        .find(|p| p.ends_with("lease lost"))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    assert!(
        lost >= 1,
        "the paused worker's late acks were refused: {stopped}"
    );
    let st = delayq::Inspect::stats(
        &RedisBackend::connect(&server.url()).await.unwrap(),
        &QueueName::new("pause").unwrap(),
    )
    .await
    .unwrap();
    assert_eq!((st.waiting(), st.leased, st.dead), (0, 0, 0), "{st:?}");
}

/// SIGHUP does not end a worker (it used to exit 129, orphaning its `--exec` programs): the
/// running program finishes, its job is acked, and the worker serves the next job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_outlives_sighup_and_its_programs_finish() {
    let server = RedisServer::start();
    let (dir, out) = delayq_test_support::temp_path("handled.txt");
    let started = dir.path().join("started");
    let b = RedisBackend::connect(&server.url()).await.unwrap();
    let q = QueueName::new("hup").unwrap();
    let p = Producer::new(b.clone(), q.clone());
    let job = |id: &str| NewJob::new(Vec::new()).id(delayq::JobId::new(id).unwrap());
    p.enqueue(job("first")).await.unwrap();
    // The program says it started, then waits until the test lets it go.
    let gate = dir.path().join("gate");
    let mut w = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["--redis", &server.url(), "--queue", "hup", "worker"])
        .args([
            "--exec",
            &format!(
                "touch {s}; while [ ! -e {g} ]; do sleep 0.02; done; echo \"$DELAYQ_JOB_ID\" >> {o}",
                s = started.display(),
                g = gate.display(),
                o = out.display()
            ),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for("the program starts", &|| started.exists());
    let hup = Command::new("kill")
        .args(["-HUP", &w.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    std::thread::sleep(Duration::from_millis(200)); // a death would have come by now
    assert!(w.try_wait().unwrap().is_none(), "the worker died of SIGHUP");
    std::fs::write(&gate, "").unwrap();
    p.enqueue(job("second")).await.unwrap();
    wait_for("both jobs run", &|| lines(&out).len() >= 2);
    let mut ran = lines(&out);
    ran.sort();
    assert_eq!(ran, ["first", "second"]);
    let _ = Command::new("kill")
        .args(["-TERM", &w.id().to_string()])
        .status();
    assert!(w.wait().unwrap().success());
}
