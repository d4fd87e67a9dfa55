//! Jobs that wait for other jobs on Redis (`lua/deps.lua` says how the keys hold them): a
//! dependent is written waiting in its shard, then registered as a waiter in each of its
//! dependencies' shards, then told which had already ended; an end a script posts to its
//! shard's outbox is delivered to the dependent's shard by the call that ended the job
//! (and by the sweep after a crash). No script spans two slots; each step is idempotent.

use std::collections::BTreeMap;

use delayq::{DepOutcome, DepRef, DepStatus, Dependencies, Enqueued, JobId, JobState, NewJob};
use delayq::{QueueName, Result};

use crate::backend::RedisBackend;
use crate::error;
use crate::keys::{Keys, shard_of};
use crate::reply::Reply;
use crate::route::{Route, group};
use crate::transitions::dep_release::DepEnd;
use crate::transitions::dep_wait::field_of;

/// A hash field of two texts joined by `\0` (`<queue>\0<id>` in `dg:<id>`, `<key prefix>\0<id>`
/// in `dw:<id>`), split; `None` for one that is not.
fn split_field(f: &[u8]) -> Option<(&str, &str)> {
    let at = f.iter().position(|b| *b == 0)?;
    Some((
        std::str::from_utf8(&f[..at]).ok()?,
        std::str::from_utf8(&f[at + 1..]).ok()?,
    ))
}

/// Outbox entries read per call.
const DELIVER_BATCH: isize = 200;

/// How long a dependent may stay in `dreg` (its registration in progress) before the sweep
/// takes it for one a crash cut short and registers it again.
const REGISTER_GRACE_MS: u64 = 10_000;

impl RedisBackend {
    /// Enqueues `job` (id `id`, with dependencies) into `queue` of `route`: waiting, then
    /// registered with its dependencies, then settled by those that had ended.
    pub(crate) async fn enqueue_waiting(
        &self,
        queue: &QueueName,
        route: &Route,
        id: JobId,
        job: NewJob,
    ) -> Result<Enqueued> {
        let deps = job.depends.clone().unwrap_or_default();
        let k = &route.keys[shard_of(id.as_str(), route.shards) as usize];
        let c = self.dep_wait(k, id.clone(), job).await?;
        let existing = match c.code {
            Reply::Ok => None,
            Reply::Done => Some(JobState::Done),
            _ => Some(JobState::Scheduled),
        };
        if existing.is_none() {
            self.mark_dependent(queue).await?;
            self.register(k, &id, &deps).await?;
        }
        Ok(Enqueued {
            id,
            due_at_ms: c.value.max(0) as u64,
            created: existing.is_none(),
            replaced: false,
            existing: existing.filter(|s| *s == JobState::Done),
        })
    }

    /// Registers dependent `id` of shard `k` with each of `deps`' shards and tells it of the
    /// dependencies that had ended (then it leaves the shard's `dreg`). Repeated by the sweep
    /// for a registration a crash cut short: every step is idempotent.
    pub(crate) async fn register(&self, k: &Keys, id: &JobId, deps: &Dependencies) -> Result<()> {
        let mut waiter = k.prefix().as_bytes().to_vec();
        waiter.push(0);
        waiter.extend_from_slice(id.as_str().as_bytes());
        let mut by_queue: BTreeMap<&QueueName, Vec<&DepRef>> = BTreeMap::new();
        for d in &deps.on {
            by_queue.entry(&d.queue).or_default().push(d);
        }
        let mut ends = Vec::new();
        for (q, refs) in by_queue {
            let route = self.route(q).await?;
            self.mark_watched(q).await?;
            let ids: Vec<JobId> = refs.iter().map(|d| d.id.clone()).collect();
            let by = group(ids, route.shards, |i| i.as_str());
            for (s, (_, ids)) in by.into_iter().enumerate() {
                if ids.is_empty() {
                    continue;
                }
                let states = self
                    .dep_watch(
                        &route,
                        &route.keys[s],
                        ids.clone(),
                        &waiter,
                        deps.include_results,
                    )
                    .await?;
                for (x, st) in ids.into_iter().zip(states) {
                    if st.how != b"p" {
                        let d = DepRef {
                            queue: q.clone(),
                            id: x,
                        };
                        ends.push(DepEnd {
                            field: field_of(&d),
                            how: st.how,
                            result: st.result,
                        });
                    }
                }
            }
        }
        if self.dep_release(k, id.clone(), true, ends).await? > 0 {
            self.deliver(k).await?;
        }
        Ok(())
    }

    /// Notes that jobs of `q` are waited for: in the queue's settings, for every process
    /// (their routes read it), in this one at once, and in the registry the sweep reads.
    async fn mark_watched(&self, q: &QueueName) -> Result<()> {
        if self.inner.watched.lock().expect("lock").contains(q) {
            return Ok(());
        }
        // (Two commands: the keys are in two slots on a Cluster.)
        let mut conn = self.connection();
        let () = redis::cmd("HSET")
            .arg(self.inner.space.conf(q))
            .arg("deps")
            .arg(1)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let () = redis::cmd("ZADD")
            .arg(self.inner.space.dep_queues())
            .arg(0)
            .arg(q.as_str())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        self.inner.watched.lock().expect("lock").insert(q.clone());
        Ok(())
    }

    /// Finishes what a crash left, on every queue of the registry: outbox entries not yet
    /// delivered, and dependents whose registration was cut short (in `dreg` for over
    /// [`REGISTER_GRACE_MS`]: registered again, every step idempotent). Run by the store's
    /// sweep (`Batches::finish_batches`, every `delayq serve` and Redis `delayq worker`).
    pub(crate) async fn sweep_deps(&self) -> Result<()> {
        let queues = self.queue_registry(self.inner.space.dep_queues()).await?;
        if queues.is_empty() {
            return Ok(());
        }
        let before = self
            .server_time_ms()
            .await?
            .saturating_sub(REGISTER_GRACE_MS);
        for q in queues {
            let route = self.route(&q).await?;
            for k in &route.keys {
                self.deliver(k).await?;
                let mut conn = self.connection();
                let stuck: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                    .arg(&k.dreg)
                    .arg("-inf")
                    .arg(before)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(100)
                    .query_async(&mut conn)
                    .await
                    .map_err(error::map)?;
                for d in stuck {
                    let id = JobId::new(d)?;
                    let deps = self.pending_deps(k, &id).await?;
                    self.register(k, &id, &deps).await?;
                }
            }
        }
        Ok(())
    }

    /// The dependencies of dependent `id` in shard `k` still pending, as registering them
    /// again needs them (none when it is gone).
    async fn pending_deps(&self, k: &Keys, id: &JobId) -> Result<Dependencies> {
        let mut conn = self.connection();
        let raw: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(&k.jobs)
            .arg(id.as_str())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let include_results = raw
            .as_deref()
            .map(crate::record::decode)
            .transpose()?
            .and_then(|r| r.deps)
            .is_some_and(|(_, results)| results);
        let on = self
            .dep_statuses(k, id)
            .await?
            .into_iter()
            .filter(|s| s.state == DepOutcome::Pending)
            .map(|s| s.dep)
            .collect();
        Ok(Dependencies {
            on,
            include_results,
            ..Dependencies::default()
        })
    }

    /// Notes that `q` holds jobs that wait for others, in the registry the sweep reads.
    async fn mark_dependent(&self, q: &QueueName) -> Result<()> {
        if self.inner.dependents.lock().expect("lock").contains(q) {
            return Ok(());
        }
        let mut conn = self.connection();
        let () = redis::cmd("ZADD")
            .arg(self.inner.space.dep_queues())
            .arg(0)
            .arg(q.as_str())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        self.inner
            .dependents
            .lock()
            .expect("lock")
            .insert(q.clone());
        Ok(())
    }

    /// Whether jobs of `q` are waited for, as far as this process knows.
    pub(crate) fn is_watched(&self, q: &QueueName) -> bool {
        self.inner.watched.lock().expect("lock").contains(q)
    }

    /// After a call that may have ended jobs of `q`: delivers what its shards posted — only
    /// for a queue whose jobs are waited for (one set look-up for any other).
    pub(crate) async fn deliver_queue(&self, q: &QueueName) -> Result<()> {
        if !self.is_watched(q) {
            return Ok(());
        }
        for k in &self.route(q).await?.keys {
            self.deliver(k).await?;
        }
        Ok(())
    }

    /// Delivers shard `k`'s outbox: each entry to its dependent's shard (dep_release.lua),
    /// then removes it; then what those deliveries posted in turn (a dependent dead-lettered
    /// or cancelled by a failed dependency is itself a dependency that ended).
    pub(crate) async fn deliver(&self, k: &Keys) -> Result<()> {
        let mut todo = vec![k.prefix().to_owned()];
        let mut rounds = 0;
        while let Some(p) = todo.pop() {
            rounds += 1;
            if rounds > 256 {
                // The sweep carries on with whatever is left.
                break;
            }
            let (out, outr) = (format!("{p}dout"), format!("{p}doutr"));
            let mut conn = self.connection();
            loop {
                let members: Vec<Vec<u8>> = redis::cmd("ZRANGE")
                    .arg(&out)
                    .arg(0)
                    .arg(DELIVER_BATCH - 1)
                    .query_async(&mut conn)
                    .await
                    .map_err(error::map)?;
                if members.is_empty() {
                    break;
                }
                let results: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
                    .arg(&outr)
                    .arg(&members)
                    .query_async(&mut conn)
                    .await
                    .map_err(error::map)?;
                let mut by: BTreeMap<(String, String), Vec<DepEnd>> = BTreeMap::new();
                for (m, r) in members.iter().zip(results) {
                    let parts: Vec<&[u8]> = m.split(|b| *b == 0).collect();
                    let [dp, did, xq, xid, how] = parts[..] else {
                        continue;
                    };
                    let (Ok(dp), Ok(did)) = (std::str::from_utf8(dp), std::str::from_utf8(did))
                    else {
                        continue;
                    };
                    let mut field = xq.to_vec();
                    field.push(0);
                    field.extend_from_slice(xid);
                    by.entry((dp.to_owned(), did.to_owned()))
                        .or_default()
                        .push(DepEnd {
                            field,
                            how: how.to_vec(),
                            result: r.unwrap_or_default(),
                        });
                }
                for ((dp, did), ends) in by {
                    let keys = Keys::at(&dp);
                    if self
                        .dep_release(&keys, JobId::new(did)?, false, ends)
                        .await?
                        > 0
                    {
                        todo.push(dp);
                    }
                }
                let () = redis::pipe()
                    .cmd("ZREM")
                    .arg(&out)
                    .arg(&members)
                    .ignore()
                    .cmd("HDEL")
                    .arg(&outr)
                    .arg(&members)
                    .ignore()
                    .query_async(&mut conn)
                    .await
                    .map_err(error::map)?;
                if (members.len() as isize) < DELIVER_BATCH {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The jobs waiting for job `id` of shard `k` (its waiters in `dw:<id>`, until it ends).
    pub(crate) async fn dependents_of(&self, k: &Keys, id: &JobId) -> Result<Vec<DepRef>> {
        let mut conn = self.connection();
        let all: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(format!("{}dw:{id}", k.prefix()))
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let mut out = Vec::new();
        for (f, _) in all {
            let Some((prefix, d)) = split_field(&f) else {
                continue;
            };
            // `dq:[ns:]{queue}:` or `dq:[ns:]{queue#i}:`.
            let Some(tag) = prefix.split('{').nth(1).and_then(|t| t.split('}').next()) else {
                continue;
            };
            let queue = tag.split('#').next().unwrap_or(tag);
            out.push(DepRef {
                queue: QueueName::new(queue)?,
                id: JobId::new(d)?,
            });
        }
        out.sort();
        Ok(out)
    }

    /// Job `id`'s dependencies in shard `k`, with how each stands (and kept results), while
    /// its dependency state exists (until it ends).
    pub(crate) async fn dep_statuses(&self, k: &Keys, id: &JobId) -> Result<Vec<DepStatus>> {
        let mut conn = self.connection();
        let all: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(format!("{}dg:{id}", k.prefix()))
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let mut results: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut out = Vec::new();
        for (f, v) in &all {
            if let Some(rest) = f.strip_prefix(b"\0r") {
                results.insert(rest.to_vec(), v.clone());
            }
        }
        for (f, v) in all {
            // (`\0n`, `\0x`, `\0r…`: the counts and results, not dependencies.)
            if f.first() == Some(&0) {
                continue;
            }
            let Some((q, i)) = split_field(&f) else {
                continue;
            };
            let state = v
                .first()
                .and_then(|c| DepOutcome::from_code(*c as char))
                .unwrap_or(DepOutcome::Pending);
            out.push(DepStatus {
                dep: DepRef {
                    queue: QueueName::new(q)?,
                    id: JobId::new(i)?,
                },
                state,
                result: results.get(&f).cloned(),
            });
        }
        out.sort_by(|a, b| a.dep.cmp(&b.dep));
        Ok(out)
    }
}

impl RedisBackend {
    /// An enqueue of jobs some of which wait for others: the plain ones as one call, each
    /// waiting one on its own ([`RedisBackend::enqueue_waiting`]); the answers in order.
    pub(crate) async fn enqueue_mixed(
        &self,
        queue: &QueueName,
        route: &std::sync::Arc<Route>,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<Enqueued>> {
        let n = jobs.len();
        let (mut plain, mut waiting) = (Vec::new(), Vec::new());
        for (i, mut job) in jobs.into_iter().enumerate() {
            if job.depends.is_some() {
                let id = job.id.take().unwrap_or_else(|| match &job.key {
                    Some(k) => JobId::generate_for(k),
                    None => JobId::generate(),
                });
                waiting.push((i, id, job));
            } else {
                plain.push((i, job));
            }
        }
        let mut out: Vec<Option<Enqueued>> = vec![None; n];
        // Dependencies first in the same call: the plain jobs exist when the waiting ones
        // register.
        let (pos, jobs): (Vec<usize>, Vec<NewJob>) = plain.into_iter().unzip();
        if !jobs.is_empty() {
            for (p, e) in pos.into_iter().zip(self.enqueue_plain(route, jobs).await?) {
                out[p] = Some(e);
            }
        }
        for (i, id, job) in waiting {
            out[i] = Some(self.enqueue_waiting(queue, route, id, job).await?);
        }
        Ok(out.into_iter().flatten().collect())
    }
}
