//! The one place a step that ends a job (ack, dead-lettering, cancel) tells what depends on
//! its end: its batch counts it (batches.rs) and the jobs waiting for it settle (deps.rs), in
//! the same transaction.

use delayq::Result;
use delayq::batch::Ending;
use rusqlite::Connection;

/// Job `id` of queue `q` (of batch `batch`, when it has one) ended as `ending` with `result`;
/// its row already changed in this transaction.
pub(crate) fn ended(
    c: &Connection,
    q: &str,
    id: &str,
    batch: Option<&str>,
    ending: Ending,
    result: Option<&[u8]>,
    now: i64,
) -> Result<()> {
    if let Some(b) = batch {
        crate::batches::ended(c, q, b, id, ending, result, now)?;
    }
    crate::deps::ended(c, q, id, ending, result, now)
}
