//! [`RedisBackend`]: the [`Backend`] trait over Redis, each transition one script on one
//! shard. A call finds the queue's [`Route`] (its shard count), then the shard: by the job
//! id's hash for anything about one job, every due shard for a claim (concurrently, earliest
//! due first), one script call per shard for a batch.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use delayq::{
    Ack, AckOutcome, Backend, CancelOutcome, ClaimBatch, ClaimRequest, Due, Enqueued, Job, JobId,
    LeaseRef, Nack, NackOutcome, NewJob, QueueName, Result, Wakeups,
};
use futures::future::join_all;
use redis::{ErrorKind, RedisError, ServerErrorKind, Value};

use crate::conn::{Conn, Live};
use crate::error;
use crate::keys::{Keys, Space, shard_of};
use crate::protocol::{Encode, FromReply};
use crate::route::{Route, Routes, group};
use crate::scripts::{Script, ScriptDef};
use crate::target::Target;
use crate::wake::WakeHub;

/// Most jobs leased in one claim (bounded by Lua's `unpack` limit and by reply size).
pub const MAX_CLAIM: usize = 1000;
/// Fewest jobs a sharded claim asks of one shard (unless it wants fewer in all).
const MIN_SHARE: usize = 16;
/// How long an enqueue or ack waits for `--wait-replicas` replicas.
const WAIT_MS: u64 = 1000;

/// The Redis backend, on one server, a Cluster or behind Sentinel. Cheap to clone: clones
/// share one command connection (replaced when it stops answering) and one Pub/Sub connection
/// for wake-ups.
#[derive(Clone)]
pub struct RedisBackend {
    pub(crate) inner: Arc<Inner>,
}

/// A queue's settings as `stored_layout` reads them: shards, lane, delivery, whether it has a
/// default target, whether its jobs are waited for.
type StoredLayout = (
    Option<u32>,
    Option<u8>,
    Option<String>,
    Option<Vec<u8>>,
    Option<u8>,
);

pub(crate) struct Inner {
    pub conn: Conn,
    hub: WakeHub,
    pub routes: Routes,
    /// Where this backend's keys live (its namespace).
    pub space: Space,
    /// The test clock whose offset the scripts add to `TIME` (tests only).
    #[cfg(feature = "test-clock")]
    pub test_clock: std::sync::OnceLock<delayq::TestClock>,
    /// Wake-ups use sharded Pub/Sub (Cluster).
    sharded_pubsub: bool,
    /// Connections to each Cluster master by address (per-node commands: `SCAN`).
    pub nodes: std::sync::Mutex<std::collections::HashMap<String, redis::aio::ConnectionManager>>,
    /// Queues this process has written to the push registry (one write per queue).
    push_marked: std::sync::Mutex<std::collections::HashSet<QueueName>>,
    /// Queues whose jobs other jobs wait for (deps.rs): the calls that end their jobs
    /// deliver the ends posted to the outbox.
    pub watched: std::sync::Mutex<std::collections::HashSet<QueueName>>,
    /// Queues this process has written to the dependencies' registry as holding dependents.
    pub dependents: std::sync::Mutex<std::collections::HashSet<QueueName>>,
}

impl RedisBackend {
    /// The backend over a connection just made to `target`.
    pub(crate) fn over(conn: Conn, target: Target) -> Self {
        let sharded_pubsub = conn.is_cluster();
        let space = Space::new(target.namespace.as_deref());
        let hub = WakeHub::start(target);
        Self {
            inner: Arc::new(Inner {
                conn,
                hub,
                routes: Routes::new(space.clone()),
                space,
                // Tests only: a process a test started with DELAYQ_TEST_CLOCK follows its clock.
                #[cfg(feature = "test-clock")]
                test_clock: delayq::clock::from_env()
                    .map(std::sync::OnceLock::from)
                    .unwrap_or_default(),
                sharded_pubsub,
                nodes: Default::default(),
                push_marked: Default::default(),
                watched: Default::default(),
                dependents: Default::default(),
            }),
        }
    }

    /// The command connection, for tools that need plain commands (`INFO`, …); on a Cluster
    /// commands are routed by key (keyless ones go to a random node).
    pub fn connection(&self) -> crate::Connection {
        self.inner.conn.get().1
    }

    /// The connection string with its password masked.
    pub fn url(&self) -> &str {
        &self.target().shown
    }

    pub(crate) fn target(&self) -> &Target {
        self.inner.conn.target()
    }

    /// Runs a declared script on keys `k` (the queue's shard) with `args`; with `wait`, then
    /// waits for the `--wait-replicas` replicas.
    pub(crate) async fn run<A: Encode, R: FromReply>(
        &self,
        script: &Script<A, R>,
        k: &Keys,
        args: A,
        wait: bool,
    ) -> Result<R> {
        let (extra, mut argv) = args.encode();
        argv.insert(0, self.clock_offset_us().to_string().into_bytes());
        R::from_reply(self.eval(&script.def, k, &extra, argv, wait).await?)
    }

    /// One call of `def` with its declared keys, the key tails `extra` and `argv`.
    async fn eval(
        &self,
        def: &ScriptDef,
        k: &Keys,
        extra: &[String],
        args: Vec<Vec<u8>>,
        wait: bool,
    ) -> Result<Value> {
        let built = def.built(self.inner.sharded_pubsub);
        let script = |eval: bool| {
            let mut c = if eval {
                redis::cmd("EVAL").arg(&built.text).to_owned()
            } else {
                redis::cmd("EVALSHA").arg(&built.sha).to_owned()
            };
            c.arg(def.keys.len() + extra.len());
            for name in def.key_names(k) {
                c.arg(name);
            }
            for name in extra {
                c.arg(name);
            }
            for a in &args {
                c.arg(a);
            }
            c
        };
        let replicas = if wait { self.target().wait_replicas } else { 0 };
        let (generation, mut live) = self.inner.conn.get();
        let mut res = send(&mut live, script(false), replicas).await;
        if matches!(&res, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) {
            // EVAL is routed by key and caches the script on that node.
            res = send(&mut live, script(true), replicas).await;
        }
        let (value, acked) = res.map_err(|e| {
            self.inner.conn.failed(generation, &e);
            error::map(e)
        })?;
        match acked {
            Some(n) if n < i64::from(replicas) => Err(delayq::Error::Unavailable(format!(
                "written, but only {n} of {replicas} replicas confirmed it within {WAIT_MS} ms"
            ))),
            _ => Ok(value),
        }
    }

    /// The queue's route: its shard count, read from Redis at most every few seconds.
    pub(crate) async fn route(&self, queue: &QueueName) -> Result<Arc<Route>> {
        if let Some(r) = self.inner.routes.fresh(queue) {
            return Ok(r);
        }
        let (shards, lane, delivery) = self.stored_layout(queue).await?;
        let route = self.inner.routes.loaded(queue, shards, lane, delivery);
        if self.inner.routes.wants_wakeups(queue) && !route.subscribed.load(Ordering::Relaxed) {
            self.subscribe(&route).await;
        }
        Ok(route)
    }

    /// The shard count (1 when none is stored), the lane flag and the delivery in the queue's
    /// settings.
    pub(crate) async fn stored_layout(
        &self,
        queue: &QueueName,
    ) -> Result<(u32, bool, delayq::DeliveryRule)> {
        let (generation, mut live) = self.inner.conn.get();
        // (`target` only for whether one is set: `HEXISTS` would be a second round trip.)
        let (shards, lane, delivery, target, deps): StoredLayout = redis::cmd("HMGET")
            .arg(self.inner.space.conf(queue))
            .arg("shards")
            .arg("lane")
            .arg("delivery")
            .arg("target")
            .arg("deps")
            .query_async(&mut live)
            .await
            .map_err(|e| {
                self.inner.conn.failed(generation, &e);
                error::map(e)
            })?;
        if deps == Some(1) {
            // Jobs of this queue are waited for: the calls that end them deliver (deps.rs).
            self.inner
                .watched
                .lock()
                .expect("lock")
                .insert(queue.clone());
        }
        let delivery = delayq::DeliveryRule {
            mode: delayq::DeliveryMode::stored(delivery.as_deref(), target.is_some())?,
            default_target: target.is_some(),
        };
        Ok((shards.unwrap_or(1).max(1), lane == Some(1), delivery))
    }

    async fn subscribe(&self, route: &Arc<Route>) {
        for (i, k) in route.keys.iter().enumerate() {
            let r = route.clone();
            let notify = Arc::new(move || r.woken(i));
            self.inner
                .hub
                .subscribe(&k.wake, notify, Duration::from_secs(2))
                .await;
        }
        route.subscribed.store(true, Ordering::Relaxed);
    }

    /// The queues named in a registry sorted set (`dq:{~}:crons`, `dq:{~}:push`).
    pub(crate) async fn queue_registry(&self, key: String) -> Result<Vec<QueueName>> {
        let mut conn = self.connection();
        let names: Vec<String> = redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        Ok(names
            .into_iter()
            .filter_map(|n| QueueName::new(n).ok())
            .collect())
    }

    /// The server's clock (`TIME`), ms since the Unix epoch — the scripts' clock.
    pub(crate) async fn server_time_ms(&self) -> Result<u64> {
        let mut conn = self.connection();
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        Ok(secs * 1000 + (micros + self.clock_offset_us()) / 1000)
    }

    /// This host's clock as the store reads time (with the test clock's offset, in tests).
    pub(crate) fn host_now_ms(&self) -> u64 {
        delayq::job::system_now_ms() + self.clock_offset_us() / 1000
    }

    /// What the scripts add to `TIME`, µs: the test clock's offset, or 0.
    pub(crate) fn clock_offset_us(&self) -> u64 {
        #[cfg(feature = "test-clock")]
        if let Some(c) = self.inner.test_clock.get() {
            return c.offset().as_micros() as u64;
        }
        0
    }

    /// Tests only (feature `test-clock`): the scripts read `TIME` plus `clock`'s offset, so
    /// [`delayq::TestClock::advance`] moves this store's time as it moves the test's
    /// (`delayq_testkit::Time::Driven`). Set once.
    #[cfg(feature = "test-clock")]
    pub fn drive_clock(&self, clock: delayq::TestClock) {
        let _ = self.inner.test_clock.set(clock);
    }

    /// Lists `queue` among the push queues (before its first targeted job is written, so a
    /// pusher that finds the job finds the queue); once per queue and process.
    pub(crate) async fn mark_push(&self, queue: &QueueName) -> Result<()> {
        if self.inner.push_marked.lock().expect("lock").contains(queue) {
            return Ok(());
        }
        let mut conn = self.connection();
        let _: () = redis::cmd("ZADD")
            .arg(self.inner.space.push_queues())
            .arg(0)
            .arg(queue.as_str())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        self.inner
            .push_marked
            .lock()
            .expect("lock")
            .insert(queue.clone());
        Ok(())
    }

    /// A claim on a sharded queue: acks go to their shards, jobs come from the due shards
    /// (each its share of `max`, concurrently), topped up from further shards when the first
    /// ones had less than their share.
    async fn claim_sharded(
        &self,
        queue: &QueueName,
        route: &Arc<Route>,
        req: ClaimRequest,
    ) -> Result<ClaimBatch> {
        let n = route.shards as usize;
        let now = self.inner.routes.now_us();
        let mut acks_by: Vec<Vec<(usize, Ack)>> = vec![Vec::new(); n];
        let ack_count = req.acks.len();
        for (pos, a) in req.acks.into_iter().enumerate() {
            acks_by[shard_of(a.lease.id.as_str(), route.shards) as usize].push((pos, a));
        }
        let mut candidates = if req.max > 0 {
            route.shards_to_claim(now)
        } else {
            Vec::new()
        }
        .into_iter();
        let mut acks = vec![AckOutcome::NotFound; ack_count];
        let mut jobs: Vec<Job> = Vec::new();
        let mut first = true;
        let mut failure = None;
        loop {
            let want = req.max - jobs.len();
            // Each shard is asked for at least MIN_SHARE jobs: a claim's fixed cost (server
            // time, lease head, next due) is paid per shard, so small shares cost more than
            // the concurrency they buy.
            let take = want.div_ceil(MIN_SHARE).max(1);
            let chosen: Vec<usize> = candidates.by_ref().take(take).collect();
            let mut calls = Vec::new();
            for (j, &s) in chosen.iter().enumerate() {
                let share = want / chosen.len() + usize::from(j < want % chosen.len());
                calls.push((s, share, std::mem::take(&mut acks_by[s])));
            }
            if first {
                // Shards that only have acks get an ACK call (cheaper than a claim of 0).
                for (s, a) in acks_by.iter_mut().enumerate() {
                    if !a.is_empty() {
                        calls.push((s, 0, std::mem::take(a)));
                    }
                }
                first = false;
            }
            if calls.is_empty() {
                break;
            }
            let results = join_all(calls.into_iter().map(|(s, share, a)| {
                let guard = (share > 0).then(|| route.claiming(s));
                let wakes_before = route.wakes(s);
                let (pos, finished): (Vec<usize>, Vec<Ack>) = a.into_iter().unzip();
                async move {
                    let k = &route.keys[s];
                    let r = if share > 0 {
                        self.claim_shard(queue, route, k, share, req.lease, finished)
                            .await
                            .map(|b| (b, true))
                    } else {
                        self.ack_shard(route, k, finished).await.map(|acks| {
                            let b = ClaimBatch {
                                acks,
                                ..ClaimBatch::default()
                            };
                            (b, false)
                        })
                    };
                    drop(guard);
                    (s, pos, r, wakes_before)
                }
            }))
            .await;
            for (s, pos, r, wakes_before) in results {
                match r {
                    Ok((b, claimed)) => {
                        if claimed {
                            let now = self.inner.routes.now_us();
                            route.learnt(s, now, b.next_due_in, wakes_before);
                        }
                        for (p, o) in pos.into_iter().zip(b.acks) {
                            acks[p] = o;
                        }
                        jobs.extend(b.jobs);
                    }
                    Err(e) => failure = Some(e),
                }
            }
            if failure.is_some() || jobs.len() >= req.max || chosen.is_empty() {
                break;
            }
        }
        if let Some(e) = failure {
            // Give back what other shards leased: the caller sees an error and never runs them.
            let leased: Vec<LeaseRef> = jobs.iter().map(Job::lease_ref).collect();
            if !leased.is_empty() {
                let _ = self.release(queue, leased, true).await;
            }
            return Err(e);
        }
        // The queue's order across shards: what a shard's claim orders by (a shard that has
        // seen no priority holds every job at the default one: the due time's order there).
        jobs.sort_by_key(|j| {
            (
                delayq::limits::claim_order_key(j.due_at_ms, j.priority),
                j.due_at_ms,
            )
        });
        Ok(ClaimBatch {
            jobs,
            acks,
            next_due_in: route.next_in(self.inner.routes.now_us()),
        })
    }
}

/// Sends one script call, and with `replicas > 0` a `WAIT` in the same round trip (a
/// pipeline on one connection; on a Cluster it follows the script's key to its node).
async fn send(
    live: &mut Live,
    script: redis::Cmd,
    replicas: u32,
) -> std::result::Result<(Value, Option<i64>), RedisError> {
    if replicas == 0 {
        return script.query_async(live).await.map(|v| (v, None));
    }
    let (v, n): (Value, i64) = redis::pipe()
        .add_command(script)
        .cmd("WAIT")
        .arg(replicas)
        .arg(WAIT_MS)
        .query_async(live)
        .await?;
    Ok((v, Some(n)))
}

impl Backend for RedisBackend {
    async fn enqueue(&self, queue: &QueueName, jobs: Vec<NewJob>) -> Result<Vec<Enqueued>> {
        let route = self.route(queue).await?;
        let delivery = route.delivery();
        for j in &jobs {
            delivery.admits(queue.as_str(), j.target.is_some())?;
        }
        if jobs.iter().any(|j| j.depends.is_some()) {
            return self.enqueue_mixed(queue, &route, jobs).await;
        }
        self.enqueue_plain(&route, jobs).await
    }

    async fn claim(&self, queue: &QueueName, req: ClaimRequest) -> Result<ClaimBatch> {
        delayq::limits::check_acks(&req.acks)?;
        let route = self.route(queue).await?;
        let batch = if route.shards == 1 {
            self.claim_shard(queue, &route, &route.keys[0], req.max, req.lease, req.acks)
                .await?
        } else {
            self.claim_sharded(queue, &route, req).await?
        };
        self.deliver_queue(queue).await?;
        Ok(batch)
    }

    async fn ack(&self, queue: &QueueName, acks: Vec<Ack>) -> Result<Vec<AckOutcome>> {
        delayq::limits::check_acks(&acks)?;
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let route = self.route(queue).await?;
        let count = acks.len();
        let by = group(acks, route.shards, |a| a.lease.id.as_str());
        let calls = by
            .into_iter()
            .enumerate()
            .filter(|(_, (p, _))| !p.is_empty())
            .map(|(s, (pos, acks))| {
                let route = &route;
                async move { (pos, self.ack_shard(route, &route.keys[s], acks).await) }
            });
        let mut out = vec![AckOutcome::NotFound; count];
        for (pos, r) in join_all(calls).await {
            for (p, o) in pos.into_iter().zip(r?) {
                out[p] = o;
            }
        }
        self.deliver_queue(queue).await?;
        Ok(out)
    }

    async fn nack(&self, queue: &QueueName, lease: LeaseRef, nack: Nack) -> Result<NackOutcome> {
        let out = self.nack_job(queue, lease, nack).await?;
        if matches!(out, NackOutcome::Dead { .. }) {
            self.deliver_queue(queue).await?;
        }
        Ok(out)
    }

    async fn extend(&self, queue: &QueueName, lease: LeaseRef, lease_len: Duration) -> Result<u64> {
        self.extend_lease(queue, lease, lease_len).await
    }

    async fn release(&self, queue: &QueueName, leases: Vec<LeaseRef>, undo: bool) -> Result<()> {
        self.release_leases(queue, leases, undo).await
    }

    async fn cancel(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let out = self.cancel_job(queue, id, false).await?;
        self.deliver_queue(queue).await?;
        Ok(out)
    }

    async fn cancel_running(&self, queue: &QueueName, id: &JobId) -> Result<CancelOutcome> {
        let out = self.cancel_job(queue, id, true).await?;
        self.deliver_queue(queue).await?;
        Ok(out)
    }

    async fn cancelled(&self, queue: &QueueName, leases: Vec<LeaseRef>) -> Result<Vec<bool>> {
        self.cancelled_leases(queue, leases).await
    }

    async fn reschedule(&self, queue: &QueueName, id: &JobId, schedule: Due) -> Result<u64> {
        self.reschedule_job(queue, id, schedule).await
    }

    async fn wakeups(&self, queue: &QueueName) -> Result<Wakeups> {
        self.inner.routes.want_wakeups(queue);
        let route = self.route(queue).await?;
        if !route.subscribed.load(Ordering::Relaxed) {
            self.subscribe(&route).await;
        }
        Ok(route.tx.subscribe())
    }
}

impl RedisBackend {
    /// Enqueues jobs that wait for nothing: one call per shard, at once.
    pub(crate) async fn enqueue_plain(
        &self,
        route: &Arc<Route>,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<Enqueued>> {
        let with_ids = jobs.into_iter().map(|mut job| {
            let id = job.id.take().unwrap_or_else(|| match &job.key {
                Some(k) => JobId::generate_for(k),
                None => JobId::generate(),
            });
            (id, job)
        });
        if route.shards == 1 {
            return self.enqueue_shard(route, 0, with_ids.collect()).await;
        }
        let jobs: Vec<(JobId, NewJob)> = with_ids.collect();
        let total = jobs.len();
        let by = group(jobs, route.shards, |(id, _)| id.as_str());
        let calls = by
            .into_iter()
            .enumerate()
            .filter(|(_, (p, _))| !p.is_empty())
            .map(|(s, (pos, jobs))| async move { (pos, self.enqueue_shard(route, s, jobs).await) });
        let mut out: Vec<Option<Enqueued>> = vec![None; total];
        for (pos, r) in join_all(calls).await {
            for (p, e) in pos.into_iter().zip(r?) {
                out[p] = Some(e);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The keys of the shard holding job `id` and, on a queue with a lane, its index bucket
    /// (the extra key of the scripts that find a job by id).
    pub(crate) async fn keys_and_bucket(
        &self,
        queue: &QueueName,
        id: &JobId,
    ) -> Result<(Keys, Vec<String>)> {
        let route = self.route(queue).await?;
        let k = route.keys[shard_of(id.as_str(), route.shards) as usize].clone();
        let bucket = route.buckets(&k, [id.as_str()]);
        Ok((k, bucket))
    }
}
