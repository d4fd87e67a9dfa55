//! The store thread: it owns the SQLite connection and runs every operation as one savepoint
//! inside a group transaction, so concurrent callers share one fsync (group commit) while each
//! operation stays atomic: an operation that fails rolls back its own savepoint only, and no
//! caller hears "done" before the commit is durable.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use rusqlite::{Connection, Transaction};
use tokio::sync::oneshot;

use crate::error::Error;

/// Most operations committed together.
const GROUP: usize = 512;

type Finish = Box<dyn FnOnce(Result<(), String>) + Send>;
type Op = Box<dyn FnOnce(&mut Transaction<'_>) -> Finish + Send>;

/// Handle to the store thread.
pub(crate) struct Store {
    tx: mpsc::Sender<Op>,
    _lock: File,
}

impl Store {
    /// Opens (creating) the store in `dir`, refusing when another process holds it.
    pub(crate) fn open(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        let lock_path = dir.join("LOCK");
        let mut lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|source| Error::Io {
                what: format!("opening {}", lock_path.display()),
                source,
            })?;
        if lock.try_lock().is_err() {
            let pid = std::fs::read_to_string(&lock_path)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            return Err(Error::Locked {
                dir: dir.to_owned(),
                pid,
            });
        }
        lock.set_len(0).ok();
        let _ = write!(lock, "{}", std::process::id());
        let path: PathBuf = dir.join("delayq.sqlite3");
        let mut conn = Connection::open(&path)?;
        let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if found > LAYOUT {
            return Err(Error::NewerLayout {
                dir: dir.to_owned(),
                found,
                known: LAYOUT,
            });
        }
        conn.execute_batch(include_str!("schema.sql"))?;
        migrate(&conn)?;
        conn.pragma_update(None, "user_version", LAYOUT)?;
        conn.pragma_update(None, "busy_timeout", 5000)?;
        // Temporary tables and sorts (a claim of hundreds of jobs) stay in memory: SQLite's
        // temporary files would go to TMPDIR or /var/tmp, which a hardened unit or a
        // read-only root does not let it write ("disk I/O error").
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        let (tx, rx) = mpsc::channel::<Op>();
        std::thread::Builder::new()
            .name("delayq-store".into())
            .spawn(move || run(&mut conn, rx))
            .map_err(|source| Error::Io {
                what: "starting the store thread".into(),
                source,
            })?;
        Ok(Self { tx, _lock: lock })
    }

    /// Runs `f` atomically; its effects are durable when this returns `Ok`.
    pub(crate) async fn exec<R, F>(&self, f: F) -> delayq::Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> delayq::Result<R> + Send + 'static,
    {
        let (done, rx) = oneshot::channel();
        let op: Op = Box::new(move |t: &mut Transaction<'_>| {
            let result = (|| {
                let sp = t.savepoint().map_err(sql)?;
                let r = f(&sp)?;
                sp.commit().map_err(sql)?;
                Ok(r)
            })();
            Box::new(move |commit: Result<(), String>| {
                let out = match (result, commit) {
                    (Err(e), _) => Err(e),
                    (Ok(_), Err(m)) => Err(delayq::Error::Unavailable(format!(
                        "embedded store commit failed: {m}"
                    ))),
                    (Ok(r), Ok(())) => Ok(r),
                };
                let _ = done.send(out);
            })
        });
        self.tx
            .send(op)
            .map_err(|_| delayq::Error::from(Error::Stopped))?;
        rx.await.map_err(|_| delayq::Error::from(Error::Stopped))?
    }
}

/// SQLite errors inside an operation are backend errors (a bug or a broken disk).
pub(crate) fn sql(e: rusqlite::Error) -> delayq::Error {
    delayq::Error::Backend(format!("embedded store: {e}"))
}

fn run(conn: &mut Connection, rx: mpsc::Receiver<Op>) {
    while let Ok(first) = rx.recv() {
        let mut ops = vec![first];
        while ops.len() < GROUP {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        let mut finishes = Vec::with_capacity(ops.len());
        let outcome = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        {
            Ok(mut t) => {
                for op in ops {
                    finishes.push(op(&mut t));
                }
                t.commit().map_err(|e| e.to_string())
            }
            Err(e) => {
                let m = e.to_string();
                // Ops never ran: tell every caller.
                for op in ops {
                    drop(op);
                }
                Err(m)
            }
        };
        if let Err(m) = &outcome {
            tracing::error!(error = %m, "embedded store transaction failed");
        }
        for f in finishes {
            f(outcome.clone());
        }
    }
}

/// The layout version of the store this build writes (SQLite's `user_version`): 1 recorded the
/// version, 2 added jobs' trace contexts, 3 handlers' results, 4 keys, 5 batches. A store of an earlier layout (0: before versions
/// were recorded) is migrated on open; a later one is
/// refused. Raise it with every change to `schema.sql` that the store must migrate older
/// stores to, and commit a fixture of the old layout (tests/fixtures).
pub const LAYOUT: i64 = 5;

/// Columns added after the first release, added to a store made before them.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let cols: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('jobs')")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for (name, ty) in [
        ("timeout_ms", "INTEGER"),
        ("expires_at", "INTEGER"),
        ("priority", "INTEGER"),
        ("keep_done_ms", "INTEGER"),
        ("dedupe_ms", "INTEGER"),
        ("completed_at", "INTEGER"),
        ("dedupe_until", "INTEGER"),
        ("target", "TEXT"),
        ("trace", "TEXT"),
        ("result", "BLOB"),
        ("key", "TEXT"),
        ("batch", "TEXT"),
    ] {
        if !cols.iter().any(|c| c == name) {
            conn.execute_batch(&format!("ALTER TABLE jobs ADD COLUMN {name} {ty}"))?;
        }
    }
    let conf: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('queue_conf')")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for name in ["prio", "keyed", "turn"] {
        if !conf.iter().any(|c| c == name) {
            conn.execute_batch(&format!(
                "ALTER TABLE queue_conf ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0"
            ))?;
        }
    }
    let limits: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('queue_limits')")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for (name, ty) in [
        ("key_mif", "INTEGER"),
        ("key_per_s", "REAL"),
        ("key_burst", "INTEGER NOT NULL DEFAULT 0"),
        ("pause_key_on_429", "INTEGER NOT NULL DEFAULT 0"),
    ] {
        if !limits.iter().any(|c| c == name) {
            conn.execute_batch(&format!("ALTER TABLE queue_limits ADD COLUMN {name} {ty}"))?;
        }
    }
    // Only keyed jobs are in it: a queue without keys pays nothing for it.
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (queue, key, state, score, id) \
         WHERE key IS NOT NULL",
    )?;
    // A store with dependents: the steps that end a job look theirs up (deps.rs).
    let dependents: bool =
        conn.query_row("SELECT EXISTS (SELECT 1 FROM dependents)", [], |r| r.get(0))?;
    if dependents {
        crate::deps::mark_used();
    }
    let push: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('push_queues')")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if !push.iter().any(|c| c == "delivery") {
        // Rows from before the setting: a queue with a default target was made a push queue
        // by an admin and stays one; the others are pull (delayq::DeliveryMode::stored).
        conn.execute_batch(
            "ALTER TABLE push_queues ADD COLUMN delivery TEXT; \
             UPDATE push_queues SET delivery = \
               CASE WHEN target IS NOT NULL THEN 'push' ELSE 'pull' END;",
        )?;
    }
    Ok(())
}
