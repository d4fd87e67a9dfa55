//! The [`Inspect`] trait over Redis: reads and dead-letter tools aggregate over a queue's
//! shards; a queue's settings live in `dq:{queue}:conf`.

use delayq::{
    Error, Inspect, JobId, JobInfo, JobState, QueueName, QueueSettings, QueueStats, Result,
};
use futures::future::try_join_all;
use redis::Value;

use crate::backend::{MAX_CLAIM, RedisBackend, arg};
use crate::error::{self, shape};
use crate::keys::{self, Keys};
use crate::reply::{Reply, array, bytes, int, job_id, job_info, reply, state};
use crate::scripts;

/// Jobs per script call when requeueing or purging all dead jobs (keeps each call short).
const ADMIN_CHUNK: usize = 1000;

impl RedisBackend {
    async fn shard_stats(&self, k: &Keys) -> Result<QueueStats> {
        let v = self.call(&scripts::STATS, k, vec![], false).await?;
        let a = array(v)?;
        let n = |i: usize| -> Result<u64> {
            a.get(i)
                .ok_or_else(|| shape("stats: 6 values expected"))
                .and_then(int)
                .map(|x| x as u64)
        };
        Ok(QueueStats {
            scheduled: n(0)?,
            due: n(1)?,
            due_next_minute: n(2)?,
            leased: n(3)?,
            dead: n(4)?,
            oldest_overdue_ms: n(5)?,
        })
    }

    /// Runs an admin script in chunks on every shard until a chunk comes back short.
    async fn chunked(
        &self,
        queue: &QueueName,
        def: &scripts::ScriptDef,
        args: &[Vec<u8>],
    ) -> Result<u64> {
        let route = self.route(queue).await?;
        let per_shard = route.keys.iter().map(|k| async move {
            let mut total = 0;
            loop {
                let n = int(&self.call(def, k, args.to_vec(), false).await?)? as u64;
                total += n;
                if n < ADMIN_CHUNK as u64 {
                    return Ok::<u64, Error>(total);
                }
            }
        });
        Ok(try_join_all(per_shard).await?.into_iter().sum())
    }

    /// Every key matching `pattern` on every master (`SCAN` is per node).
    async fn scan_all(&self, pattern: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (_, mut conn) in crate::nodes::masters(self).await? {
            let mut cursor: u64 = 0;
            loop {
                let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await
                    .map_err(error::map)?;
                out.extend(keys);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(out)
    }
}

impl Inspect for RedisBackend {
    async fn get(&self, queue: &QueueName, id: &JobId) -> Result<Option<JobInfo>> {
        let k = self.keys_of(queue, id).await?;
        let v = self
            .call(
                &scripts::GET,
                &k,
                vec![id.as_str().as_bytes().to_vec()],
                false,
            )
            .await?;
        match v {
            Value::Nil => Ok(None),
            v => {
                let [st, extra, raw]: [Value; 3] = array(v)?
                    .try_into()
                    .map_err(|_| shape("get: 3 values expected"))?;
                job_info(id.clone(), state(int(&st)?)?, int(&extra)?, &bytes(raw)?).map(Some)
            }
        }
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let keys = self.scan_all(keys::SCAN_PATTERN).await?;
        let names: std::collections::BTreeSet<QueueName> =
            keys.iter().filter_map(|k| keys::queue_of(k)).collect();
        Ok(names.into_iter().collect())
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let route = self.route(queue).await?;
        let all = try_join_all(route.keys.iter().map(|k| self.shard_stats(k))).await?;
        Ok(all
            .into_iter()
            .fold(QueueStats::default(), |a, s| QueueStats {
                scheduled: a.scheduled + s.scheduled,
                due: a.due + s.due,
                due_next_minute: a.due_next_minute + s.due_next_minute,
                leased: a.leased + s.leased,
                dead: a.dead + s.dead,
                oldest_overdue_ms: a.oldest_overdue_ms.max(s.oldest_overdue_ms),
            }))
    }

    async fn dead_list(&self, queue: &QueueName, from: usize, n: usize) -> Result<Vec<JobInfo>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let route = self.route(queue).await?;
        let n = n.min(MAX_CLAIM);
        // One shard: the page itself; several: each shard's first from + n, merged by
        // failure time.
        let (skip, at, want) = if route.shards == 1 {
            (0, from, n)
        } else {
            (from, 0, from + n)
        };
        let per_shard = route.keys.iter().map(|k| async move {
            let v = self
                .call(&scripts::DEAD_LIST, k, vec![arg(at), arg(want)], false)
                .await?;
            array(v)?
                .chunks(3)
                .map(|c| match c {
                    [id, at, raw] => job_info(
                        job_id(id.clone())?,
                        JobState::Dead,
                        int(at)?,
                        &bytes(raw.clone())?,
                    ),
                    _ => Err(shape("dead_list: 3 values per job expected")),
                })
                .collect::<Result<Vec<_>>>()
        });
        let mut all: Vec<JobInfo> = try_join_all(per_shard)
            .await?
            .into_iter()
            .flatten()
            .collect();
        all.sort_by(|a, b| (a.failed_at_ms, &a.id).cmp(&(b.failed_at_ms, &b.id)));
        Ok(all.into_iter().skip(skip).take(n).collect())
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        let k = self.keys_of(queue, id).await?;
        let args = vec![arg("one"), id.as_str().as_bytes().to_vec()];
        match reply(&self.call(&scripts::DEAD_REQUEUE, &k, args, true).await?)? {
            Reply::Ok => Ok(()),
            r => Err(r.refusal(id, JobState::Dead)),
        }
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        self.chunked(
            queue,
            &scripts::DEAD_REQUEUE,
            &[arg("all"), arg(ADMIN_CHUNK)],
        )
        .await
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        self.chunked(queue, &scripts::DEAD_PURGE, &[arg(ADMIN_CHUNK)])
            .await
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        Ok(QueueSettings {
            shards: self.stored_shards(queue).await?,
        })
    }

    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        s.validate()?;
        let current = self.stored_shards(queue).await?;
        if current != s.shards {
            // Jobs are placed by shard count: moving them is not atomic across slots, so a
            // queue changes its count only while empty (in both layouts).
            // Layouts share shard tags ({q#0} is shard 0 of 2 and of 4): count each once.
            let mut shards: Vec<Keys> = [current, s.shards]
                .into_iter()
                .flat_map(|n| (0..n).map(move |i| Keys::shard(queue, i, n)))
                .collect();
            shards.sort_by(|a, b| a.sched.cmp(&b.sched));
            shards.dedup_by(|a, b| a.sched == b.sched);
            let (mut scheduled, mut leased, mut dead) = (0, 0, 0);
            for k in &shards {
                let st = self.shard_stats(k).await?;
                scheduled += st.scheduled;
                leased += st.leased;
                dead += st.dead;
            }
            if scheduled + leased + dead > 0 {
                return Err(Error::Conflict(format!(
                    "queue {queue} holds jobs ({scheduled} scheduled, {leased} leased, {dead} \
                     dead): its shard count ({current}) can only change while it is empty; \
                     drain it, or create a new queue with {} shards and move producers to it",
                    s.shards
                )));
            }
        }
        let mut conn = self.connection();
        let _: () = redis::cmd("HSET")
            .arg(keys::conf(queue))
            .arg("shards")
            .arg(s.shards)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        self.inner.routes.loaded(queue, s.shards);
        Ok(s)
    }
}
