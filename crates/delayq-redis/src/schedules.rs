//! [`Schedules`] over Redis: a queue's schedule definitions in `dq:{q}:crondef` (HASH name →
//! JSON), their next fires in `dq:{q}:cronnext` (ZSET), the queues that have any in
//! `dq:{~}:crons`; a fire is one script (`fire.lua`) that enqueues and moves the next fire
//! on together, only while the next fire is the one the ticker read.
//!
//! On a queue of several shards a fire's job lands in the shard its id hashes to, another
//! hash slot than the schedule's: there `fire_shard.lua` enqueues each fire into its shard
//! unless that shard already took it or a later fire (a per-shard marker), then `advance.lua`
//! moves the next fire on — two steps, each atomic, and a fire is still enqueued once.

use delayq::schedule::{Firing, ScheduleInfo, ScheduleSpec, Schedules, check_name};
use delayq::{QueueName, Result};

use crate::backend::RedisBackend;
use crate::error;
use crate::keys;
use crate::record;
use crate::transitions::fire_shard::ShardFire;

impl Schedules for RedisBackend {
    async fn put_schedule(&self, queue: &QueueName, info: ScheduleInfo) -> Result<()> {
        check_name(&info.name)?;
        // The schedule's keys are the queue's own tag (a queue of one shard's keys).
        let k = self.inner.space.shard(queue, 0, 1);
        let json = info.spec.to_json();
        // A schedule's fires must fit the queue's delivery, as every enqueue must.
        self.route(queue)
            .await?
            .delivery()
            .admits(queue.as_str(), info.spec.target.is_some())?;
        let mut conn = self.connection();
        // The definition first: a ticker lists names from cronnext, so it never sees a next
        // fire without its definition.
        let _: () = redis::cmd("HSET")
            .arg(self.inner.space.crondef(queue))
            .arg(&info.name)
            .arg(json)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let _: () = redis::cmd("ZADD")
            .arg(&k.cronnext)
            .arg(info.next_ms)
            .arg(&info.name)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let _: () = redis::cmd("ZADD")
            .arg(self.inner.space.cron_queues())
            .arg(0)
            .arg(queue.as_str())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        Ok(())
    }

    async fn schedules(&self, queue: &QueueName) -> Result<Vec<ScheduleInfo>> {
        let k = self.inner.space.shard(queue, 0, 1);
        let mut conn = self.connection();
        let next: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg(&k.cronnext)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        if next.is_empty() {
            return Ok(Vec::new());
        }
        let defs: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.inner.space.crondef(queue))
            .arg(next.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let mut out = next
            .into_iter()
            .zip(defs)
            .filter_map(|((name, next_ms), def)| Some((name, next_ms, def?)))
            .map(|(name, next_ms, def)| {
                Ok(ScheduleInfo {
                    name,
                    spec: ScheduleSpec::from_json(&def)?,
                    next_ms,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        let k = self.inner.space.shard(queue, 0, 1);
        let mut conn = self.connection();
        let n: i64 = redis::cmd("ZREM")
            .arg(&k.cronnext)
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let d: i64 = redis::cmd("HDEL")
            .arg(self.inner.space.crondef(queue))
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        Ok(n + d > 0)
    }

    /// Redis `TIME` (on a Cluster, of the node the queue's own tag lives on).
    async fn clock_ms(&self) -> Result<u64> {
        self.server_time_ms().await
    }

    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        self.queue_registry(self.inner.space.cron_queues()).await
    }

    async fn fire(&self, queue: &QueueName, name: &str, f: Firing) -> Result<bool> {
        check_name(name)?;
        let route = self.route(queue).await?;
        if route.shards <= 1 {
            // One shard: its keys are the queue's own (the schedule's) keys.
            return self.fire_one_shard(&route, name, f).await;
        }
        let own = self.inner.space.shard(queue, 0, 1);
        // Several shards: each fire into its shard (marked there), then the next fire.
        let max_attempts = f.job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS);
        let record = record::tail(f.job);
        for &at in &f.fires {
            let id = delayq::schedule::fire_id(name, at);
            let k = &route.keys[keys::shard_of(id.as_str(), route.shards) as usize];
            let ix = route.buckets(k, [id.as_str()]);
            let fire = ShardFire {
                name,
                at,
                max_attempts,
                record: record.clone(),
            };
            self.fire_into_shard(k, ix, fire).await?;
        }
        self.advance_schedule(&own, name, f.expected, f.next).await
    }
}
