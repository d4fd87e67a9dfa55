//! [`backup`]: a consistent copy of an embedded store taken beside the process that owns it
//! (SQLite's `VACUUM INTO` from a read-only connection: one read transaction, so the copy is
//! the store at one instant, compacted), restorable by pointing `--data` at its directory.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::error::Error;

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// Jobs in the copy, every state.
    pub jobs: u64,
    /// Size of the copy, bytes.
    pub bytes: u64,
}

/// Copies the store in `dir` to `dest_dir/delayq.sqlite3` (`dest_dir` is created; it must not
/// hold a store already). The store keeps serving meanwhile.
pub fn backup(dir: &Path, dest_dir: &Path) -> Result<Backup, Error> {
    let db = dir.join("delayq.sqlite3");
    if !db.exists() {
        return Err(Error::Io {
            what: format!("backing up {}", dir.display()),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no embedded store there"),
        });
    }
    let dest = dest_dir.join("delayq.sqlite3");
    if dest.exists() {
        return Err(Error::Io {
            what: format!("backing up to {}", dest_dir.display()),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a store is there already: back up to a new directory",
            ),
        });
    }
    std::fs::create_dir_all(dest_dir).map_err(|source| Error::Io {
        what: format!("creating {}", dest_dir.display()),
        source,
    })?;
    let conn = Connection::open_with_flags(
        &db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "busy_timeout", 5000)?;
    conn.execute("VACUUM INTO ?1", [dest.to_string_lossy()])?;
    let copy = Connection::open_with_flags(&dest, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let jobs: i64 = copy.query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))?;
    Ok(Backup {
        jobs: jobs.max(0) as u64,
        bytes: std::fs::metadata(&dest).map_or(0, |m| m.len()),
    })
}
