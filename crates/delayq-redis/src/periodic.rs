//! [`Schedules`] over Redis: a queue's schedule definitions in `dq:{q}:crondef` (HASH name →
//! JSON), their next fires in `dq:{q}:cronnext` (ZSET), the queues that have any in
//! `dq:{~}:crons`; a fire is one script (`fire.lua`) that enqueues and moves the next fire
//! on together, only while the next fire is the one the ticker read.
//!
//! Schedules need a queue of one shard: a sharded queue's fires land in different hash
//! slots, which one script cannot touch on a Cluster.

use delayq::periodic::{Firing, PeriodicInfo, PeriodicSpec, Schedules, check_name};
use delayq::{InvalidInput, QueueName, Result};

use crate::backend::{RedisBackend, arg};
use crate::error;
use crate::keys::{self, Keys};
use crate::record;
use crate::reply::int;
use crate::scripts;

impl RedisBackend {
    /// The keys of a queue that may hold schedules (of one shard), or the refusal.
    async fn schedule_keys(&self, queue: &QueueName) -> Result<Keys> {
        let shards = self.stored_shards(queue).await?;
        if shards != 1 {
            return Err(InvalidInput::Schedule(format!(
                "queue {queue} has {shards} shards: schedules need a queue of one shard (a \
                 fire and its next fire are stored in one script, in one hash slot)"
            ))
            .into());
        }
        Ok(Keys::shard(queue, 0, 1))
    }
}

impl Schedules for RedisBackend {
    async fn put_schedule(&self, queue: &QueueName, info: PeriodicInfo) -> Result<()> {
        check_name(&info.name)?;
        let k = self.schedule_keys(queue).await?;
        let json = info.spec.to_json();
        let mut conn = self.connection();
        // The definition first: a ticker lists names from cronnext, so it never sees a next
        // fire without its definition.
        let _: () = redis::cmd("HSET")
            .arg(keys::crondef(queue))
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
            .arg(keys::CRON_QUEUES)
            .arg(0)
            .arg(queue.as_str())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        Ok(())
    }

    async fn schedule(&self, queue: &QueueName, name: &str) -> Result<Option<PeriodicInfo>> {
        Ok(self
            .schedules(queue)
            .await?
            .into_iter()
            .find(|s| s.name == name))
    }

    async fn schedules(&self, queue: &QueueName) -> Result<Vec<PeriodicInfo>> {
        let k = Keys::shard(queue, 0, 1);
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
            .arg(keys::crondef(queue))
            .arg(next.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let mut out = next
            .into_iter()
            .zip(defs)
            .filter_map(|((name, next_ms), def)| Some((name, next_ms, def?)))
            .map(|(name, next_ms, def)| {
                Ok(PeriodicInfo {
                    name,
                    spec: PeriodicSpec::from_json(&def)?,
                    next_ms,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn delete_schedule(&self, queue: &QueueName, name: &str) -> Result<bool> {
        let k = Keys::shard(queue, 0, 1);
        let mut conn = self.connection();
        let n: i64 = redis::cmd("ZREM")
            .arg(&k.cronnext)
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let d: i64 = redis::cmd("HDEL")
            .arg(keys::crondef(queue))
            .arg(name)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        Ok(n + d > 0)
    }

    async fn scheduled_queues(&self) -> Result<Vec<QueueName>> {
        let mut conn = self.connection();
        let names: Vec<String> = redis::cmd("ZRANGE")
            .arg(keys::CRON_QUEUES)
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

    async fn fire(&self, queue: &QueueName, name: &str, f: Firing) -> Result<bool> {
        check_name(name)?;
        let k = self.schedule_keys(queue).await?;
        let max_attempts = f.job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS);
        let (flags, tail) = record::tail(f.job);
        let mut args = vec![
            arg(name),
            arg(f.expected),
            arg(f.next),
            arg(max_attempts),
            arg(flags),
            tail,
        ];
        args.extend(f.fires.iter().map(arg));
        let v = self.call(&scripts::FIRE, &k, args, true).await?;
        Ok(int(&v)? == 1)
    }
}
