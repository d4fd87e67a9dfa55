//! What a queue's lane holds on the server, for `delayq doctor`: the entries of each shard's
//! one-delay lane, the jobs in its time windows, and whether its id index is still kept in
//! Redis's compact encoding (a listpack per bucket, ~28 B an id) or has outgrown it (a
//! hashtable, ~50 B more an id).

use delayq::{QueueName, Result};

use crate::backend::RedisBackend;
use crate::error;
use crate::keys::LANE_BUCKETS;

/// Index buckets per shard: a lane's index stays compact while each holds at most the server's
/// `hash-max-listpack-entries` ids (and no id is longer than `hash-max-listpack-value`).
pub const LANE_INDEX_BUCKETS: u32 = LANE_BUCKETS;

/// Most jobs one of a lane's time windows holds (a job due in a full window uses the sorted
/// sets).
pub const LANE_WINDOW_ENTRIES: usize = crate::keys::WINDOW_MAX_ENTRIES;

/// Index buckets looked at per shard (spread over all of them).
const SAMPLED: u32 = 16;

/// One shard's lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneShard {
    /// Entries of the lane list: its jobs, and cancelled entries a claim has not passed yet.
    pub entries: u64,
    /// Of those, cancelled entries (each a 7-byte tombstone until a claim passes it).
    pub cancelled: u64,
    /// Time windows holding jobs (or tombstones) until they move to the sorted sets.
    pub windows: u64,
    /// The jobs in those windows.
    pub in_windows: u64,
    /// Index buckets looked at that exist (of 16 spread over the shard's buckets).
    pub sampled: u32,
    /// Of those, the buckets Redis keeps as a hashtable instead of a listpack.
    pub hashtable: u32,
}

impl LaneShard {
    /// The one-delay lane's jobs: its entries less the tombstones (which have left the id
    /// index too).
    pub fn live(&self) -> u64 {
        self.entries - self.cancelled
    }

    /// The jobs the lane's id index holds: the one-delay lane's and the windows'.
    pub fn indexed(&self) -> u64 {
        self.live() + self.in_windows
    }
}

impl RedisBackend {
    /// The lane of `queue`, shard by shard; `None` when the queue has no lane.
    pub async fn lane_report(&self, queue: &QueueName) -> Result<Option<Vec<LaneShard>>> {
        let route = self.route(queue).await?;
        if !route.lane() {
            return Ok(None);
        }
        let mut conn = self.connection();
        let mut out = Vec::with_capacity(route.keys.len());
        for k in &route.keys {
            // One round trip a shard (its keys share a hash slot), and one more for the count
            // of tombstones when the lane is not empty.
            let mut pipe = redis::pipe();
            pipe.cmd("LLEN").arg(&k.lane);
            pipe.cmd("HGET").arg(&k.lanemeta).arg("h");
            pipe.cmd("HGET").arg(&k.lanemeta).arg("b");
            pipe.cmd("ZCARD").arg(k.windows());
            pipe.cmd("HGET").arg(&k.lanemeta).arg("wn");
            for b in (0..LANE_BUCKETS).step_by((LANE_BUCKETS / SAMPLED) as usize) {
                pipe.cmd("OBJECT").arg("ENCODING").arg(k.bucket(b));
            }
            // LLEN, h, b, windows, their jobs, then one encoding a sampled bucket (none for a
            // bucket not there).
            let replies: Vec<Option<String>> =
                pipe.query_async(&mut conn).await.map_err(error::map)?;
            // (An absent field counts 0: a lane that never had a tombstone has no `b`.)
            let count = |i: usize| -> Result<u64> {
                match replies.get(i).cloned().flatten() {
                    None => Ok(0),
                    Some(v) => v
                        .parse()
                        .map_err(|_| error::shape("lane report: a count expected")),
                }
            };
            let (entries, h, base) = (count(0)?, count(1)?, count(2)?);
            let (windows, in_windows) = (count(3)?, count(4)?);
            let cancelled = if entries == 0 {
                0
            } else {
                // The bits of the lane's entries: from its head's on (lane.lua: lane_tombs).
                let from = h.saturating_sub(base);
                redis::cmd("BITCOUNT")
                    .arg(&k.lanegone)
                    .arg(from)
                    .arg(from + entries - 1)
                    .arg("BIT")
                    .query_async(&mut conn)
                    .await
                    .map_err(error::map)?
            };
            let encodings = replies.get(5..).unwrap_or_default();
            let sampled = encodings.iter().flatten().count() as u32;
            let hashtable = encodings
                .iter()
                .flatten()
                .filter(|e| *e == "hashtable")
                .count() as u32;
            out.push(LaneShard {
                entries,
                cancelled,
                windows,
                in_windows,
                sampled,
                hashtable,
            });
        }
        Ok(Some(out))
    }
}
