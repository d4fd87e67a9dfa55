//! Where a queue's jobs live: its shard count and whether it has a one-delay lane (read from the queue's settings in Redis and
//! cached for [`REFRESH`]), the keys of each shard, and per shard what this process last learnt
//! about when it next has work — so a consumer claims from the shards that are due, earliest
//! first, instead of polling every shard.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::{DeliveryMode, DeliveryRule, QueueName};
use tokio::sync::watch;

use crate::keys::{Keys, Space};

/// How long a queue's shard count is trusted before it is read again. A shard change is
/// refused while the queue holds jobs, so a stale count can only meet an empty queue.
pub(crate) const REFRESH: Duration = Duration::from_secs(5);

/// "No job and no lease in this shard" (until a wake-up says otherwise).
const EMPTY: u64 = u64::MAX;

/// A queue's delivery rule packed into the route's atomic byte: bit 0 push, bit 1 a default
/// target.
fn pack(d: DeliveryRule) -> u8 {
    u8::from(d.mode == DeliveryMode::Push) | (u8::from(d.default_target) << 1)
}

fn unpack(c: u8) -> DeliveryRule {
    DeliveryRule {
        mode: if c & 1 == 1 {
            DeliveryMode::Push
        } else {
            DeliveryMode::Pull
        },
        default_target: c & 2 == 2,
    }
}

/// One queue's routing state in this process.
pub(crate) struct Route {
    /// Shard count.
    pub shards: u32,
    /// Keys of each shard.
    pub keys: Vec<Keys>,
    /// Whether the queue keeps a one-delay lane (`QueueSettings::lane`): its scripts are
    /// given the lane's index buckets.
    lane: AtomicBool,
    /// The queue's delivery rule as last read (packed: [`pack`]), checked by every enqueue.
    delivery: AtomicU8,
    /// The index bucket the next claim sweeps (claim.lua), in turn.
    sweep: AtomicU32,
    /// Per shard: when (µs on [`Routes::now_us`]) it next has a due job or an expiring lease;
    /// 0 = now or unknown, [`EMPTY`] = nothing.
    next: Vec<AtomicU64>,
    /// Per shard: a claim is in flight from this process.
    in_flight: Vec<AtomicBool>,
    /// Per shard: wake-ups so far. A claim's answer about the shard's next work is kept only
    /// if no wake-up came while it was in flight (the answer was computed before the job the
    /// wake-up announces, so storing it would lose the wake-up).
    wakes: Vec<AtomicU64>,
    /// Whether this process is subscribed to the shards' wake-ups (only then is "empty" or "not
    /// due yet" trusted: a wake-up resets it).
    pub subscribed: AtomicBool,
    /// Bumped on every wake-up of any shard; consumers of the queue wait on it.
    pub tx: Arc<watch::Sender<u64>>,
    /// Turn of the next "nothing known due" claim (see [`Route::shards_to_claim`]).
    turn: AtomicU64,
    /// When the shard count was last read (µs on [`Routes::now_us`]).
    loaded_us: AtomicU64,
    /// Per shard: its enqueue calls' gate (concurrent enqueues share calls, gate.rs).
    pub gates: Vec<crate::gate::Gate>,
}

impl Route {
    fn new(
        space: &Space,
        queue: &QueueName,
        shards: u32,
        tx: Arc<watch::Sender<u64>>,
        now_us: u64,
    ) -> Self {
        let shards = shards.max(1);
        Self {
            shards,
            keys: (0..shards).map(|i| space.shard(queue, i, shards)).collect(),
            lane: AtomicBool::new(false),
            delivery: AtomicU8::new(0),
            sweep: AtomicU32::new(0),
            next: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            in_flight: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            wakes: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            subscribed: AtomicBool::new(false),
            tx,
            turn: AtomicU64::new(0),
            loaded_us: AtomicU64::new(now_us),
            gates: (0..shards).map(|_| crate::gate::Gate::default()).collect(),
        }
    }

    /// Whether the queue has a lane.
    pub(crate) fn lane(&self) -> bool {
        self.lane.load(Ordering::Relaxed)
    }

    /// The queue's delivery rule as last read.
    pub(crate) fn delivery(&self) -> DeliveryRule {
        unpack(self.delivery.load(Ordering::Relaxed))
    }

    /// The lane's index bucket of each id, in order, for a script's extra keys (none when the
    /// queue has no lane: `ids` is then not even iterated).
    pub(crate) fn buckets<I: AsRef<str>>(
        &self,
        k: &Keys,
        ids: impl IntoIterator<Item = I>,
    ) -> Vec<String> {
        if !self.lane() {
            return Vec::new();
        }
        ids.into_iter().map(|id| k.bucket_of(id.as_ref())).collect()
    }

    /// The index bucket a claim on a queue with a lane sweeps (each in turn), as extra keys.
    pub(crate) fn sweep_bucket(&self, k: &Keys) -> Vec<String> {
        if !self.lane() {
            return Vec::new();
        }
        let b = self.sweep.fetch_add(1, Ordering::Relaxed) % crate::keys::LANE_BUCKETS;
        vec![k.bucket(b)]
    }

    /// A wake-up of shard `i`: it may have a due job now.
    pub(crate) fn woken(&self, i: usize) {
        self.wakes[i].fetch_add(1, Ordering::SeqCst);
        self.next[i].store(0, Ordering::SeqCst);
        self.tx.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wake-ups of shard `i` so far (see [`Route::learnt`]).
    pub(crate) fn wakes(&self, i: usize) -> u64 {
        self.wakes[i].load(Ordering::SeqCst)
    }

    /// Records what a claim on shard `i`, sent when the shard had had `wakes_before`
    /// wake-ups, said about its next work — unless a wake-up came since: then the shard stays
    /// due (the answer predates the job the wake-up announced).
    pub(crate) fn learnt(
        &self,
        i: usize,
        now_us: u64,
        next_in: Option<Duration>,
        wakes_before: u64,
    ) {
        let at = next_in.map_or(EMPTY, |d| now_us.saturating_add(d.as_micros() as u64));
        self.next[i].store(at, Ordering::SeqCst);
        if self.wakes[i].load(Ordering::SeqCst) != wakes_before {
            self.next[i].store(0, Ordering::SeqCst);
        }
    }

    /// Shards worth claiming from now, earliest first, shards without a claim in flight first;
    /// without a subscription every shard (its "not due" knowledge may be stale).
    pub(crate) fn due_shards(&self, now_us: u64) -> Vec<usize> {
        let trusted = self.subscribed.load(Ordering::Relaxed);
        let mut v: Vec<(bool, u64, usize)> = (0..self.shards as usize)
            .filter_map(|i| {
                let at = self.next[i].load(Ordering::Relaxed);
                (!trusted || at <= now_us)
                    .then(|| (self.in_flight[i].load(Ordering::Relaxed), at, i))
            })
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, _, i)| i).collect()
    }

    /// The shards a claim should try: the due ones; when none is known due, one shard in
    /// turn — a consumer claims without a wake-up only at its idle limit, and a lost
    /// wake-up must not leave a shard unserved forever.
    pub(crate) fn shards_to_claim(&self, now_us: u64) -> Vec<usize> {
        let due = self.due_shards(now_us);
        if !due.is_empty() {
            return due;
        }
        vec![(self.turn.fetch_add(1, Ordering::Relaxed) % u64::from(self.shards)) as usize]
    }

    /// Time until the earliest shard has work, as far as this process knows.
    pub(crate) fn next_in(&self, now_us: u64) -> Option<Duration> {
        let at = self
            .next
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .min()
            .unwrap_or(EMPTY);
        (at != EMPTY).then(|| Duration::from_micros(at.saturating_sub(now_us)))
    }

    /// Marks a claim on shard `i` in flight until the guard drops.
    pub(crate) fn claiming(self: &Arc<Self>, i: usize) -> InFlight {
        self.in_flight[i].store(true, Ordering::Relaxed);
        InFlight(self.clone(), i)
    }
}

/// Items grouped by shard (index = shard), each group with the items' positions in the input.
pub(crate) type Groups<T> = Vec<(Vec<usize>, Vec<T>)>;

/// Groups `items` by the shard (of `n`) of the job id `id` gives for each.
pub(crate) fn group<T>(
    items: impl IntoIterator<Item = T>,
    n: u32,
    id: impl Fn(&T) -> &str,
) -> Groups<T> {
    let mut by: Groups<T> = (0..n.max(1)).map(|_| (Vec::new(), Vec::new())).collect();
    for (pos, item) in items.into_iter().enumerate() {
        let s = crate::keys::shard_of(id(&item), n) as usize;
        by[s].0.push(pos);
        by[s].1.push(item);
    }
    by
}

/// A claim in flight on one shard.
pub(crate) struct InFlight(Arc<Route>, usize);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight[self.1].store(false, Ordering::Relaxed);
    }
}

/// Every queue's route in this process.
pub(crate) struct Routes {
    /// Where the queues' keys live.
    space: Space,
    map: Mutex<HashMap<QueueName, Arc<Route>>>,
    /// Queues a consumer of this process waits on (their routes subscribe to wake-ups).
    waited: Mutex<HashSet<QueueName>>,
    epoch: Instant,
}

impl Routes {
    pub(crate) fn new(space: Space) -> Self {
        Self {
            space,
            map: Mutex::default(),
            waited: Mutex::default(),
            epoch: Instant::now(),
        }
    }

    /// Notes that a consumer of this process waits on `queue`'s wake-ups.
    pub(crate) fn want_wakeups(&self, queue: &QueueName) {
        self.waited
            .lock()
            .expect("routes lock")
            .insert(queue.clone());
    }

    /// Whether a consumer of this process waits on `queue`'s wake-ups.
    pub(crate) fn wants_wakeups(&self, queue: &QueueName) -> bool {
        self.waited.lock().expect("routes lock").contains(queue)
    }

    /// Monotonic µs since this process started routing.
    pub(crate) fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// The cached route of `queue` when it is fresh.
    pub(crate) fn fresh(&self, queue: &QueueName) -> Option<Arc<Route>> {
        let map = self.map.lock().expect("routes lock");
        let r = map.get(queue)?;
        let age = self
            .now_us()
            .saturating_sub(r.loaded_us.load(Ordering::Relaxed));
        (age < REFRESH.as_micros() as u64).then(|| r.clone())
    }

    /// Stores the shard count and lane flag just read for `queue`; keeps the route (and what
    /// it learnt) when the count did not change.
    pub(crate) fn loaded(
        &self,
        queue: &QueueName,
        shards: u32,
        lane: bool,
        delivery: DeliveryRule,
    ) -> Arc<Route> {
        let mut map = self.map.lock().expect("routes lock");
        if let Some(r) = map.get(queue)
            && r.shards == shards.max(1)
        {
            r.lane.store(lane, Ordering::Relaxed);
            r.delivery.store(pack(delivery), Ordering::Relaxed);
            r.loaded_us.store(self.now_us(), Ordering::Relaxed);
            return r.clone();
        }
        let tx = map
            .get(queue)
            .map(|r| r.tx.clone())
            .unwrap_or_else(|| Arc::new(watch::channel(0).0));
        let route = Arc::new(Route::new(&self.space, queue, shards, tx, self.now_us()));
        route.lane.store(lane, Ordering::Relaxed);
        route.delivery.store(pack(delivery), Ordering::Relaxed);
        // Consumers of the old layout claim again under the new one.
        route.tx.send_modify(|n| *n = n.wrapping_add(1));
        map.insert(queue.clone(), route.clone());
        route
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_shards_come_earliest_first_and_trust_needs_a_subscription() {
        let routes = Routes::new(Space::default());
        let q = QueueName::new("q").unwrap();
        let r = routes.loaded(&q, 4, false, DeliveryRule::default());
        r.learnt(0, 1_000, Some(Duration::from_micros(500)), 0); // due at 1500
        r.learnt(1, 1_000, None, 0); // empty
        r.learnt(2, 1_000, Some(Duration::ZERO), 0); // due at 1000
        r.learnt(3, 1_000, Some(Duration::from_secs(9)), 0);
        assert_eq!(
            r.due_shards(1_200),
            vec![2, 0, 3, 1],
            "untrusted: all, earliest first"
        );
        r.subscribed.store(true, Ordering::Relaxed);
        assert_eq!(r.due_shards(1_200), vec![2]);
        assert_eq!(r.due_shards(2_000), vec![2, 0]);
        let _busy = r.claiming(2);
        assert_eq!(r.due_shards(2_000), vec![0, 2], "in flight last");
        r.woken(1);
        assert_eq!(r.due_shards(2_000), vec![1, 0, 2]);
        assert_eq!(r.next_in(2_000), Some(Duration::ZERO));
        // A claim's answer that predates a wake-up does not undo it.
        let before = r.wakes(3);
        r.woken(3);
        r.learnt(3, 2_000, None, before);
        assert_eq!(
            r.due_shards(2_000),
            vec![1, 3, 0, 2],
            "woken during the claim: due"
        );
        r.learnt(3, 2_000, None, r.wakes(3));
        assert_eq!(r.due_shards(2_000), vec![1, 0, 2]);
        assert!(
            Arc::ptr_eq(&r, &routes.loaded(&q, 4, false, DeliveryRule::default())),
            "same count keeps the route"
        );
        assert_eq!(
            routes.loaded(&q, 2, false, DeliveryRule::default()).shards,
            2
        );
    }
}
