//! [`health`]: what `delayq doctor` checks of an embedded store without taking it over —
//! whether it exists, SQLite's own consistency check, the sizes of the database and its
//! write-ahead log, and which process holds it.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::Error;

/// The state of an embedded store directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// `PRAGMA quick_check`'s answer: `ok`, or the first problems it found.
    pub integrity: String,
    /// Size of the database file, bytes.
    pub db_bytes: u64,
    /// Size of its write-ahead log, bytes (0 when there is none).
    pub wal_bytes: u64,
    /// The process holding the store's lock (a `serve` or a `worker`), when one does.
    pub owner_pid: Option<u32>,
    /// Whether the lock is held at all (the pid may be unknown).
    pub locked: bool,
}

/// Checks the store in `dir` read-only, beside whichever process owns it; `Ok(None)` when there
/// is no store there.
pub fn health(dir: &Path) -> Result<Option<Health>, Error> {
    let db = dir.join("delayq.sqlite3");
    if !db.exists() {
        return Ok(None);
    }
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let conn = Connection::open_with_flags(
        &db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "busy_timeout", 5000)?;
    let mut stmt = conn.prepare("PRAGMA quick_check")?;
    let lines: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    let lock_path = dir.join("LOCK");
    let locked = std::fs::File::open(&lock_path).is_ok_and(|f| {
        let held = f.try_lock_shared().is_err();
        if !held {
            let _ = f.unlock();
        }
        held
    });
    let owner_pid = locked
        .then(|| std::fs::read_to_string(&lock_path).ok())
        .flatten()
        .and_then(|s| s.trim().parse().ok());
    Ok(Some(Health {
        integrity: lines.join("; "),
        db_bytes: size(&db),
        wal_bytes: size(&dir.join("delayq.sqlite3-wal")),
        owner_pid,
        locked,
    }))
}
