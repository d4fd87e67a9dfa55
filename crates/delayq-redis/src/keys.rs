//! Every Redis key and channel name of a queue, built in this one place.
//!
//! All names of one shard of a queue share a hash tag, so every script touches one slot and
//! runs unchanged on Redis Cluster: `{queue}` for a queue of one shard (the layout every
//! queue had before shards existed), `{queue#i}` for shard `i` of a sharded queue. Queue names
//! cannot contain braces or `#` (see `QueueName`), so tags never collide. A queue's settings
//! live in `dq:{queue}:conf`. A namespace ([`Space`]) puts every name under `dq:<ns>:`.

use delayq::QueueName;

/// One of a queue's keys, as scripts declare them (see `scripts.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    Sched,
    Lease,
    Jobs,
    Dead,
    Fence,
    Wake,
    Stat,
    CronNext,
    Done,
    Ready,
    Fired,
    Lane,
    LaneMeta,
    LaneGone,
    Turns,
    InFlight,
    Holds,
    Buckets,
    Waits,
    Members,
    Batches,
    BatchIndex,
    Cancelled,
    Tenants,
    Waiting,
    DepReg,
}

impl Key {
    /// The name a script header uses for it (`-- KEYS[n] <field>`), also the key's suffix.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Key::Sched => "sched",
            Key::Lease => "lease",
            Key::Jobs => "jobs",
            Key::Dead => "dead",
            Key::Fence => "fence",
            Key::Wake => "wake",
            Key::Stat => "stat",
            Key::CronNext => "cronnext",
            Key::Done => "done",
            Key::Ready => "ready",
            Key::Fired => "fired",
            Key::Lane => "lane",
            Key::LaneMeta => "lanemeta",
            Key::LaneGone => "lanegone",
            Key::Turns => "kvt",
            Key::InFlight => "kinfl",
            Key::Holds => "khold",
            Key::Buckets => "krate",
            Key::Waits => "kwait",
            Key::Members => "bm",
            Key::Batches => "batch",
            Key::BatchIndex => "bopen",
            Key::Cancelled => "cxl",
            Key::Tenants => "kj",
            Key::Waiting => "waiting",
            Key::DepReg => "dreg",
        }
    }
}

/// How many index buckets (`ix:<b>`) a lane's id index is spread over: ~100 ids each at
/// 100,000 jobs, so each stays a listpack under the server's default
/// `hash-max-listpack-entries` (512).
pub(crate) const LANE_BUCKETS: u32 = 1024;

/// Most entries of one of a lane's time windows (`<lane>:<start>`, lane.lua: win_key): what
/// a claim moves to the sorted sets, a listing reads and a count walks through at once stays
/// bounded; a job due in a full window uses the sorted sets.
pub(crate) const WINDOW_MAX_ENTRIES: usize = 8192;

/// Most time windows one call of the listing reads (each at most [`WINDOW_MAX_ENTRIES`]; the
/// listing stops at 8,192 entries read too).
pub(crate) const WINDOWS_LISTED: usize = 256;

/// An entry of a lane's id index (`ix:<b>`, lane.lua: ix_entry): where the job is, tagged by
/// its first byte. The scripts write and read it; the tags are defined here (the prelude's
/// `IX_LANE` and `IX_WINDOW`), and the tests read and write entries with [`IndexEntry`].
pub(crate) struct IndexTag;

impl IndexTag {
    /// The tag of an entry in the one-delay lane: `L`, then the decimal sequence number.
    pub(crate) const LANE: u8 = b'L';
    /// The tag of an entry in a time window: `W`, then its start (u48) and place (u24).
    pub(crate) const WINDOW: u8 = b'W';
}

/// A lane index entry, decoded (what lane.lua's `ix_entry` returns).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndexEntry {
    /// In the one-delay lane, at this sequence number.
    Lane(u64),
    /// In the time window that starts at `start` (ms), at place `pos`.
    Window {
        /// The window's start, ms.
        start: u64,
        /// The entry's place in the window.
        pos: u32,
    },
}

#[cfg(test)]
impl IndexEntry {
    /// The tag of [`IndexEntry::Lane`].
    pub(crate) const LANE: u8 = IndexTag::LANE;
    /// The tag of [`IndexEntry::Window`].
    pub(crate) const WINDOW: u8 = IndexTag::WINDOW;

    /// Its bytes: the tag, then the decimal sequence number, or the start (u48) and place
    /// (u24), big-endian.
    pub(crate) fn encode(self) -> Vec<u8> {
        match self {
            IndexEntry::Lane(s) => {
                let mut out = vec![Self::LANE];
                out.extend_from_slice(s.to_string().as_bytes());
                out
            }
            IndexEntry::Window { start, pos } => {
                let mut out = vec![Self::WINDOW];
                out.extend_from_slice(&start.to_be_bytes()[2..]);
                out.extend_from_slice(&pos.to_be_bytes()[1..]);
                out
            }
        }
    }

    /// Reads an entry (also one written before the tags: a decimal number, or the 9 bytes of
    /// start and place).
    pub(crate) fn decode(v: &[u8]) -> Option<Self> {
        let window = |b: &[u8]| -> Option<Self> {
            let b: &[u8; 9] = b.try_into().ok()?;
            let mut start = [0u8; 8];
            start[2..].copy_from_slice(&b[..6]);
            let mut pos = [0u8; 4];
            pos[1..].copy_from_slice(&b[6..]);
            Some(IndexEntry::Window {
                start: u64::from_be_bytes(start),
                pos: u32::from_be_bytes(pos),
            })
        };
        let lane = |b: &[u8]| {
            std::str::from_utf8(b)
                .ok()?
                .parse()
                .ok()
                .map(IndexEntry::Lane)
        };
        match *v.first()? {
            Self::LANE => lane(&v[1..]),
            Self::WINDOW => window(&v[1..]),
            b if b >= b'0' => lane(v),
            _ => window(v),
        }
    }
}

/// The names of one queue's keys.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    /// ZSET id → due ms: scheduled jobs.
    pub sched: String,
    /// ZSET id → lease deadline ms: leased jobs.
    pub lease: String,
    /// HASH id → record: every stored job, whatever its state.
    pub jobs: String,
    /// ZSET id → failed-at ms: dead-lettered jobs.
    pub dead: String,
    /// STRING: counter of lease (fencing) tokens.
    pub fence: String,
    /// Pub/Sub channel: "a job due at <ms> may be earlier than the head".
    pub wake: String,
    /// STRING, read and written with `BITFIELD`: the paused flag, the series' totals and its
    /// ring of intervals (`delayq::series::layout`).
    pub stat: String,
    /// ZSET schedule name → next fire ms (a queue of one shard: the queue's tag).
    pub cronnext: String,
    /// ZSET id → when its retention ends: completed jobs kept as done.
    pub done: String,
    /// ZSET id → due ms minus priority × aging: the due jobs of a queue with priorities.
    pub ready: String,
    /// HASH schedule name → the latest of its fires enqueued into this shard (sharded queues).
    pub fired: String,
    /// LIST: the one-delay lane, entries (id, record) in due order (lane.lua: lane_entry).
    pub lane: String,
    /// HASH `h` (the lane's head sequence number), `t` (the due time of its last entry), `b`
    /// (the sequence number of `lanegone`'s bit 0).
    pub lanemeta: String,
    /// STRING: a bitmap of the lane's tombstones (cancelled entries not yet passed by a
    /// claim), bit `s - b` for sequence number `s` (`b`: `lanemeta`'s field).
    pub lanegone: String,
    /// HASH: each key's last turn in `ready` ("\\0V": the queue's; keyed.lua).
    pub kvt: String,
    /// HASH: each key's leased jobs (keyed.lua: key_take, key_free).
    pub kinfl: String,
    /// HASH: each paused key's end, ms (key_pause.lua).
    pub khold: String,
    /// HASH: each key's token bucket (tokens, µs; keyed.lua: key_take).
    pub krate: String,
    /// ZSET: key → when one of its parked jobs comes back; `kwait:<key>` holds the key's parked jobs (keyed.lua).
    pub kwait: String,
    /// HASH per batch with jobs in this shard, `bm:<batch>`: job id → `p` (pending), `o`
    /// (acked), `d` (dead) or `c` (cancelled); `\0p`, `\0o`, `\0d`, `\0c` their counts;
    /// `\0x` once the batch is closed (no job joins after it); `\0R` when the batch keeps
    /// results, `\0r<id>` each one (batch.lua).
    pub bm: String,
    /// HASH per batch whose home is this shard, `batch:<batch>`: `s` its state (`o` open, `c`
    /// closed, `f` done with callbacks being enqueued, `d` done), `spec`, `c` created ms, `d`
    /// done ms, `n` its counts when done (batch_home.lua).
    pub batch: String,
    /// ZSET batch → created ms: the batches whose home is this shard and that are not done
    /// yet (what the sweeps look at), then → done ms with the prefix `d:` once done (what they
    /// forget after `delayq::batch::BATCH_KEPT`).
    pub bopen: String,
    /// ZSET `<token>:<id>` → until when (ms) this store answers `cancelled` to the lease: the
    /// leases of jobs cancelled while they ran (cancel.lua with `running`).
    pub cxl: String,
    /// STRING: written once the key index holds every keyed job of the shard; `kj:<key>`
    /// ZSET (all scores 0, so by id) each key's jobs (keyed.lua, above key_index_add).
    pub kj: String,
    /// ZSET id → due ms: jobs waiting for their dependencies (deps.lua).
    pub waiting: String,
    /// ZSET id → ms: dependents whose waiters are not all registered yet (deps.lua).
    pub dreg: String,
    /// `dq:{tag}:ix:` — the prefix of the lane's index buckets (HASH id → sequence number).
    ix: String,
}

/// Where a backend's keys live: `dq:` by default, `dq:<namespace>:` with a namespace
/// ([`crate::ConnectOptions::namespace`]), so several applications (or tests) share one
/// server without seeing each other's queues. Every key name comes from here.
#[derive(Clone, Debug)]
pub(crate) struct Space {
    prefix: String,
}

impl Default for Space {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Space {
    /// The keys of `namespace` (already checked: `target::check_namespace`), or the default.
    pub(crate) fn new(namespace: Option<&str>) -> Self {
        let prefix = match namespace {
            Some(ns) => format!("dq:{ns}:"),
            None => "dq:".to_owned(),
        };
        Space { prefix }
    }

    /// The keys of shard `i` of a queue of `n` shards.
    pub(crate) fn shard(&self, queue: &QueueName, i: u32, n: u32) -> Keys {
        let tag = if n <= 1 {
            queue.to_string()
        } else {
            format!("{queue}#{i}")
        };
        Keys::at(&format!("{}{{{tag}}}:", self.prefix))
    }

    /// The key of a queue's settings (HASH: `shards`, …).
    pub(crate) fn conf(&self, queue: &QueueName) -> String {
        format!("{}{{{queue}}}:conf", self.prefix)
    }

    /// The key of a queue's schedule definitions (HASH name → JSON of
    /// `delayq::ScheduleSpec`); their next fires are the queue's [`Keys::cronnext`].
    pub(crate) fn crondef(&self, queue: &QueueName) -> String {
        format!("{}{{{queue}}}:crondef", self.prefix)
    }

    /// ZSET of the queues that have (or had) schedules, for tickers of every queue. Its tag
    /// is not a queue name, so no queue's keys collide with it.
    pub(crate) fn cron_queues(&self) -> String {
        format!("{}{{~}}:crons", self.prefix)
    }

    /// ZSET of the queues that have (or had) batches, for the sweeps that finish them.
    pub(crate) fn batch_queues(&self) -> String {
        format!("{}{{~}}:batches", self.prefix)
    }

    /// ZSET of the queues with jobs that wait for others or that others wait for, for the
    /// sweep that finishes what a crash left of their dependencies (deps.rs).
    pub(crate) fn dep_queues(&self) -> String {
        format!("{}{{~}}:deps", self.prefix)
    }

    /// Sorted set (all scores 0) of the queues delivered by HTTP push, read by pushers.
    pub(crate) fn push_queues(&self) -> String {
        format!("{}{{~}}:push", self.prefix)
    }

    /// `SCAN` pattern matching every key of this space.
    pub(crate) fn scan_pattern(&self) -> String {
        format!("{}{{*}}:*", self.prefix)
    }

    /// The queue a key of this space belongs to.
    pub(crate) fn queue_of(&self, key: &str) -> Option<QueueName> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('{')?;
        let (tag, _) = rest.split_once("}:")?;
        let name = tag.split_once('#').map_or(tag, |(q, _)| q);
        QueueName::new(name).ok()
    }
}

impl Keys {
    /// The keys of the shard whose keys start with `prefix` (`dq:{tag}:`, as a dependency's
    /// waiter names its dependent's shard: deps.lua).
    pub(crate) fn at(prefix: &str) -> Self {
        let name = |key: Key| format!("{prefix}{}", key.field());
        Keys {
            sched: name(Key::Sched),
            lease: name(Key::Lease),
            jobs: name(Key::Jobs),
            dead: name(Key::Dead),
            fence: name(Key::Fence),
            wake: name(Key::Wake),
            stat: name(Key::Stat),
            cronnext: name(Key::CronNext),
            done: name(Key::Done),
            ready: name(Key::Ready),
            fired: name(Key::Fired),
            lane: name(Key::Lane),
            lanemeta: name(Key::LaneMeta),
            lanegone: name(Key::LaneGone),
            kvt: name(Key::Turns),
            kinfl: name(Key::InFlight),
            khold: name(Key::Holds),
            krate: name(Key::Buckets),
            kwait: name(Key::Waits),
            bm: name(Key::Members),
            batch: name(Key::Batches),
            bopen: name(Key::BatchIndex),
            cxl: name(Key::Cancelled),
            kj: name(Key::Tenants),
            waiting: name(Key::Waiting),
            dreg: name(Key::DepReg),
            ix: format!("{prefix}ix:"),
        }
    }

    /// The prefix every key of this shard starts with (`dq:{tag}:`).
    pub(crate) fn prefix(&self) -> &str {
        &self.ix[..self.ix.len() - 3]
    }

    /// The keys of a queue of one shard, in the default space.
    #[cfg(test)]
    pub(crate) fn new(queue: &QueueName) -> Self {
        Space::default().shard(queue, 0, 1)
    }

    /// The keys of shard `i` of a queue of `n` shards, in the default space.
    #[cfg(test)]
    pub(crate) fn shard(queue: &QueueName, i: u32, n: u32) -> Self {
        Space::default().shard(queue, i, n)
    }

    /// The lane's index bucket `b` (of [`LANE_BUCKETS`]).
    pub(crate) fn bucket(&self, b: u32) -> String {
        format!("{}{b}", self.ix)
    }

    /// LIST: the lane's time window that starts at `start` ms (lane.lua: win_key).
    #[cfg(test)]
    pub(crate) fn window(&self, start: u64) -> String {
        format!("{}:{start}", self.lane)
    }

    /// ZSET: the starts of the lane's time windows (lane.lua: wins_key).
    pub(crate) fn windows(&self) -> String {
        format!("{}:w", self.lane)
    }

    /// HASH: start → tombstones of each of the lane's time windows that has any (lane.lua:
    /// wtombs_key).
    #[cfg(test)]
    pub(crate) fn window_tombs(&self) -> String {
        format!("{}:t", self.lane)
    }

    /// The lane's index bucket that holds job `id`.
    pub(crate) fn bucket_of(&self, id: &str) -> String {
        self.bucket(bucket_of(id))
    }

    /// The name of one key.
    pub(crate) fn name(&self, key: Key) -> &str {
        match key {
            Key::Sched => &self.sched,
            Key::Lease => &self.lease,
            Key::Jobs => &self.jobs,
            Key::Dead => &self.dead,
            Key::Fence => &self.fence,
            Key::Wake => &self.wake,
            Key::Stat => &self.stat,
            Key::CronNext => &self.cronnext,
            Key::Done => &self.done,
            Key::Ready => &self.ready,
            Key::Fired => &self.fired,
            Key::Lane => &self.lane,
            Key::LaneMeta => &self.lanemeta,
            Key::LaneGone => &self.lanegone,
            Key::Turns => &self.kvt,
            Key::InFlight => &self.kinfl,
            Key::Holds => &self.khold,
            Key::Buckets => &self.krate,
            Key::Waits => &self.kwait,
            Key::Members => &self.bm,
            Key::Batches => &self.batch,
            Key::BatchIndex => &self.bopen,
            Key::Cancelled => &self.cxl,
            Key::Tenants => &self.kj,
            Key::Waiting => &self.waiting,
            Key::DepReg => &self.dreg,
        }
    }
}

/// FNV-1a (64-bit) of the id's bytes.
fn fnv1a(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The shard (of `n`) that holds job `id`: its `delayq::placement_hash` — FNV-1a (64-bit) of
/// the id's bytes, or the key hash a keyed job's generated id ends with — modulo `n`. Stable
/// across versions and processes: every client finds a job in the same shard.
pub(crate) fn shard_of(id: &str, n: u32) -> u32 {
    if n <= 1 {
        return 0;
    }
    (delayq::placement_hash(id) % u64::from(n)) as u32
}

/// The lane index bucket of job `id`: the FNV-1a hash mixed again (MurmurHash3's 64-bit
/// finaliser: FNV-1a's bits depend little on an id's last bytes, and its lower bits choose the
/// shard) modulo [`LANE_BUCKETS`], so ids that differ in one digit, and the ids of one shard,
/// spread over every bucket. Stable across versions and processes, like [`shard_of`].
pub(crate) fn bucket_of(id: &str) -> u32 {
    let mut h = fnv1a(id);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h % u64::from(LANE_BUCKETS)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_share_the_queue_hash_tag() {
        let k = Keys::new(&QueueName::new("orders").unwrap());
        for key in [
            Key::Sched,
            Key::Lease,
            Key::Jobs,
            Key::Dead,
            Key::Fence,
            Key::Wake,
            Key::Stat,
            Key::CronNext,
            Key::Done,
            Key::Ready,
            Key::Fired,
            Key::Lane,
            Key::LaneMeta,
            Key::LaneGone,
            Key::Turns,
            Key::InFlight,
            Key::Holds,
            Key::Buckets,
            Key::Waits,
        ] {
            let name = k.name(key);
            assert_eq!(name, format!("dq:{{orders}}:{}", key.field()));
            let key = name;
            assert_eq!(Space::default().queue_of(key).unwrap().as_str(), "orders");
        }
        assert!(Space::default().queue_of("other").is_none());
        let s = Keys::shard(&QueueName::new("orders").unwrap(), 3, 8);
        assert_eq!(s.sched, "dq:{orders#3}:sched");
        assert_eq!(
            Space::default().queue_of(&s.sched).unwrap().as_str(),
            "orders"
        );
    }

    /// A namespace's keys start `dq:<ns>:`, keep the queue's hash tag, and are not the default
    /// space's (nor the default space's its).
    #[test]
    fn a_namespace_is_a_space_of_its_own() {
        let q = QueueName::new("orders").unwrap();
        let ns = Space::new(Some("shop-2"));
        let k = ns.shard(&q, 1, 4);
        assert_eq!(k.sched, "dq:shop-2:{orders#1}:sched");
        assert_eq!(k.bucket(7), "dq:shop-2:{orders#1}:ix:7");
        assert_eq!(ns.conf(&q), "dq:shop-2:{orders}:conf");
        assert_eq!(ns.push_queues(), "dq:shop-2:{~}:push");
        assert_eq!(ns.queue_of(&k.sched).unwrap().as_str(), "orders");
        assert!(Space::default().queue_of(&k.sched).is_none());
        assert!(ns.queue_of(&Keys::new(&q).sched).is_none());
        assert_eq!(ns.scan_pattern(), "dq:shop-2:{*}:*");
    }

    #[test]
    fn lane_buckets_spread_ids_that_differ_in_one_digit_and_a_shards_ids() {
        let mut all = vec![0u32; LANE_BUCKETS as usize];
        let mut shard0 = vec![0u32; LANE_BUCKETS as usize];
        for i in 0..102_400 {
            let id = format!("1{i:019}");
            let b = bucket_of(&id) as usize;
            all[b] += 1;
            if shard_of(&id, 8) == 0 {
                shard0[b] += 1;
            }
        }
        // ~100 a bucket: each stays a listpack under hash-max-listpack-entries 512.
        assert!(all.iter().all(|&n| (50..200).contains(&n)), "{all:?}");
        assert!(shard0.iter().all(|&n| n < 40), "{shard0:?}");
        assert!(shard0.iter().filter(|&&n| n == 0).count() < 10);
        assert_eq!(bucket_of("order-42"), bucket_of("order-42"));
    }

    #[test]
    fn shards_are_stable_and_spread() {
        // Fixed values: changing the hash would strand every stored job of a sharded queue.
        assert_eq!(shard_of("order-42", 8), shard_of("order-42", 8));
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(
            [
                shard_of("a", 8),
                shard_of("order-42", 8),
                shard_of("job-1", 16)
            ],
            [4, 4, 6]
        );
        let mut counts = [0u32; 8];
        for i in 0..8000 {
            counts[shard_of(&format!("job-{i}"), 8) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }
}
