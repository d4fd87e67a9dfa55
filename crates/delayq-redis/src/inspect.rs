//! The [`Inspect`] trait over Redis: reads, listings (merged by score over a queue's shards),
//! pause, the series and the dead-letter and bulk tools aggregate over a queue's shards; a
//! queue's settings live in `dq:{queue}:conf`.

use crate::backend::RedisBackend;
use crate::error;
use crate::keys::Keys;
use crate::transitions::ADMIN_CHUNK;
use delayq::listing::{check_cancellable, check_limit};
use delayq::{
    Counts, Cursor, Error, Found, Inspect, JobId, JobInfo, JobKey, JobPage, JobState, KeyHold,
    ListRequest, ListState, QueueName, QueueSeries, QueueSettings, QueueStats, Rate, Result,
};
use futures::future::try_join_all;

/// A bulk change, run a chunk at a time ([`ADMIN_CHUNK`] jobs a call).
#[derive(Clone, Copy)]
enum Bulk {
    RequeueDead,
    PurgeDead,
    Cancel { due_ones: bool },
}

impl RedisBackend {
    /// Runs a bulk call on every shard until a chunk comes back short; the total.
    async fn chunked(&self, queue: &QueueName, bulk: Bulk) -> Result<u64> {
        let route = self.route(queue).await?;
        let per_shard = route.keys.iter().map(|k| async move {
            let mut total = 0;
            loop {
                let n = match bulk {
                    Bulk::RequeueDead => self.dead_chunk(k, true).await?,
                    Bulk::PurgeDead => self.dead_chunk(k, false).await?,
                    Bulk::Cancel { due_ones } => self.cancel_chunk(k, due_ones).await?,
                };
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
        self.get_job(queue, id).await
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let keys = self.scan_all(&self.inner.space.scan_pattern()).await?;
        let names: std::collections::BTreeSet<QueueName> = keys
            .iter()
            .filter_map(|k| self.inner.space.queue_of(k))
            .collect();
        Ok(names.into_iter().collect())
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let route = self.route(queue).await?;
        let all = try_join_all(route.keys.iter().map(|k| self.shard_stats(k))).await?;
        // A shard counts every waiting job as scheduled; `scheduled` here is the jobs due
        // later (`due` the ones due now), as a listing by state shows them.
        Ok(all
            .into_iter()
            .fold(QueueStats::default(), |a, s| QueueStats {
                scheduled: a.scheduled + s.scheduled.saturating_sub(s.due),
                due: a.due + s.due,
                due_next_minute: a.due_next_minute + s.due_next_minute,
                leased: a.leased + s.leased,
                dead: a.dead + s.dead,
                oldest_overdue_ms: a.oldest_overdue_ms.max(s.oldest_overdue_ms),
                paused: a.paused || s.paused,
                waiting_on_limit: a.waiting_on_limit + s.waiting_on_limit,
                done: a.done + s.done,
                awaiting: a.awaiting + s.awaiting,
            }))
    }

    async fn list(&self, queue: &QueueName, page: ListRequest) -> Result<JobPage> {
        let (which, limit, after) = page.checked()?;
        let route = self.route(queue).await?;
        let state = match which {
            ListState::Scheduled | ListState::Due => JobState::Scheduled,
            ListState::Leased => JobState::Leased,
            ListState::Dead => JobState::Dead,
            ListState::Done => JobState::Done,
            ListState::Waiting => JobState::Waiting,
        };
        let from = after.map(|c| (c.score, c.id));
        // Each shard gives its first limit + 1 after the cursor; merged by (score, id), the
        // first `limit` are the page and anything beyond says a next page exists.
        let per_shard = route.keys.iter().map(|k| {
            let from = from.clone();
            async move {
                let mut got = Vec::new();
                let mut at = from;
                // A call that read its share of a lane's tombstones says where it stopped
                // (list.lua): asked again from there, each call holds Redis briefly.
                while let Some(next) = self
                    .list_call(k, which, state, limit, at.take(), &mut got)
                    .await?
                {
                    if got.len() > limit {
                        break;
                    }
                    at = Some((next, String::new()));
                }
                Ok::<_, Error>(got)
            }
        });
        let mut all: Vec<(u64, JobInfo)> = try_join_all(per_shard)
            .await?
            .into_iter()
            .flatten()
            .collect();
        all.sort_by(|a, b| (a.0, a.1.id.as_str()).cmp(&(b.0, b.1.id.as_str())));
        let more = all.len() > limit;
        all.truncate(limit);
        let next = if more {
            all.last().map(|(score, j)| Cursor {
                score: *score,
                id: j.id.to_string(),
            })
        } else {
            None
        };
        Ok(JobPage {
            jobs: all.into_iter().map(|(_, j)| j).collect(),
            next,
        })
    }

    /// Redis keeps no index by id order (a scan of the whole `jobs` hash is not cheap): the
    /// exact id only.
    async fn search(&self, queue: &QueueName, prefix: &str, limit: usize) -> Result<Found> {
        check_limit(limit)?;
        let jobs = match JobId::new(prefix) {
            Ok(id) => self.get(queue, &id).await?.into_iter().collect(),
            Err(_) => Vec::new(),
        };
        Ok(Found {
            jobs,
            by_prefix: false,
        })
    }

    async fn dead_requeue(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.dead_one(queue, id, true).await
    }

    async fn dead_requeue_all(&self, queue: &QueueName) -> Result<u64> {
        self.chunked(queue, Bulk::RequeueDead).await
    }

    async fn dead_purge(&self, queue: &QueueName) -> Result<u64> {
        self.chunked(queue, Bulk::PurgeDead).await
    }

    async fn dead_delete(&self, queue: &QueueName, id: &JobId) -> Result<()> {
        self.dead_one(queue, id, false).await
    }

    async fn cancel_all(&self, queue: &QueueName, which: ListState) -> Result<u64> {
        check_cancellable(which)?;
        let due_ones = which == ListState::Due;
        self.chunked(queue, Bulk::Cancel { due_ones }).await
    }

    async fn set_paused(&self, queue: &QueueName, paused: bool) -> Result<()> {
        let route = self.route(queue).await?;
        try_join_all(route.keys.iter().map(|k| self.pause_shard(k, paused))).await?;
        if !paused {
            // This process's consumers take the resumed shards at once; other processes hear
            // each shard's wake-up (and until a shard's arrives, a claim here would skip it as
            // "nothing due", which it learnt while paused).
            (0..route.keys.len()).for_each(|i| route.woken(i));
        }
        Ok(())
    }

    async fn series(&self, queue: &QueueName) -> Result<QueueSeries> {
        let route = self.route(queue).await?;
        let per_shard = route.keys.iter().map(|k| async move {
            let mut conn = self.connection();
            redis::cmd("GETRANGE")
                .arg(&k.stat)
                .arg(0)
                .arg(-1)
                .query_async::<Vec<u8>>(&mut conn)
                .await
                .map_err(error::map)
        });
        let mut parts = Vec::new();
        let mut totals = Counts::default();
        for raw in try_join_all(per_shard).await? {
            let (_, t, p) = delayq::series::decode(&raw);
            totals.add(&t);
            parts.extend(p);
        }
        Ok(QueueSeries::collect(self.host_now_ms(), parts, totals))
    }

    async fn settings(&self, queue: &QueueName) -> Result<QueueSettings> {
        let mut conn = self.connection();
        let fields = [
            "shards",
            "lane",
            "lane_window_ms",
            "rate_per_s",
            "rate_burst",
            "max_in_flight",
            "keep_done_ms",
            "dedupe_ms",
            "delivery",
            "target",
            "key_max_in_flight",
            "key_rate_per_s",
            "key_rate_burst",
            "pause_key_on_429",
        ];
        let values: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.inner.space.conf(queue))
            .arg(&fields)
            .query_async(&mut conn)
            .await
            .map_err(error::map)?;
        let text = |f: &str| {
            let i = fields.iter().position(|x| *x == f)?;
            values.get(i)?.as_deref()
        };
        let num = |f: &str| text(f)?.parse::<f64>().ok();
        let rate_of = |per_s: &str, burst: &str| match (num(per_s), num(burst)) {
            (Some(per_s), Some(burst)) => Some(Rate {
                per_s,
                burst: burst as u32,
            }),
            _ => None,
        };
        let rate = rate_of("rate_per_s", "rate_burst");
        let target = text("target")
            .map(|t| delayq::Target::from_json(t.as_bytes()))
            .transpose()?;
        Ok(QueueSettings {
            delivery: delayq::DeliveryMode::stored(text("delivery"), target.is_some())?,
            target,
            shards: num("shards").map_or(1, |n| (n as u32).max(1)),
            lane: num("lane") == Some(1.0),
            // Absent from stored settings: a queue configured before windows existed (its
            // shards have none); no settings stored: the defaults.
            lane_window_ms: num("lane_window_ms").map_or(
                if num("shards").is_some() {
                    0
                } else {
                    delayq::settings::DEFAULT_LANE_WINDOW_MS
                },
                |n| n as u32,
            ),
            rate,
            max_in_flight: num("max_in_flight").map(|n| n as u32),
            retention: delayq::Retention {
                keep_done_ms: num("keep_done_ms").unwrap_or(0.0) as u64,
                dedupe_ms: num("dedupe_ms").unwrap_or(0.0) as u64,
            },
            key_max_in_flight: num("key_max_in_flight").map(|n| n as u32),
            key_rate: rate_of("key_rate_per_s", "key_rate_burst"),
            pause_key_on_429: num("pause_key_on_429") == Some(1.0),
            cold_after_ms: None,
        })
    }

    /// The registry's queues whose settings say push (a queue set back to pull stays in the
    /// registry, as every queue ever pushed does; another process's change is seen within the
    /// routes' 5 s).
    async fn push_queues(&self) -> Result<Vec<QueueName>> {
        // Each queue's route holds its delivery (read with its layout, refreshed every 5 s):
        // no settings read per queue at every discovery.
        let listed = self.queue_registry(self.inner.space.push_queues()).await?;
        let routes = try_join_all(listed.iter().map(|q| self.route(q))).await?;
        Ok(listed
            .into_iter()
            .zip(routes)
            .filter(|(_, r)| r.delivery().mode == delayq::DeliveryMode::Push)
            .map(|(q, _)| q)
            .collect())
    }

    async fn configure(&self, queue: &QueueName, s: QueueSettings) -> Result<QueueSettings> {
        s.validate()?;
        s.check_without_cold_tier()?;
        let before = self.settings(queue).await?;
        let (current, lane, width) = (before.shards, before.lane, before.lane_window_ms);
        // Windows are placed by their width: on a lane queue it changes only while the queue
        // is empty too.
        let rewidened = lane && s.lane && width != s.lane_window_ms;
        if current != s.shards || lane != s.lane || rewidened {
            // Jobs are placed by shard count: moving them is not atomic across slots, so a
            // queue changes its count only while empty (in both layouts). The lane likewise:
            // a queue without one reads none.
            // Layouts share shard tags ({q#0} is shard 0 of 2 and of 4): count each once.
            let mut shards: Vec<Keys> = [current, s.shards]
                .into_iter()
                .flat_map(|n| (0..n).map(move |i| self.inner.space.shard(queue, i, n)))
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
                let what = if current != s.shards {
                    format!(
                        "its shard count ({current}) can only change while it is empty; drain \
                         it, or create a new queue with {} shards and move producers to it",
                        s.shards
                    )
                } else if lane != s.lane {
                    format!(
                        "its lane ({}) can only be switched while it is empty; drain it, or \
                         create a new queue and move producers to it",
                        if lane { "on" } else { "off" }
                    )
                } else {
                    format!(
                        "its lane's window width ({width} ms) can only change while it is \
                         empty; drain it, or create a new queue and move producers to it"
                    )
                };
                return Err(Error::Conflict(format!(
                    "queue {queue} holds jobs ({scheduled} scheduled, {leased} leased, {dead} \
                     dead): {what}"
                )));
            }
        }
        // The settings first (what `settings` reads), then each shard's copy of its limits
        // (what its claims enforce); a second PUT repairs a half-applied one.
        // Plain HSET and HDEL (the ACL rule allows no MULTI): a reader between the two sees
        // the new values with a removed limit still there for a moment.
        let mut conn = self.connection();
        let conf = self.inner.space.conf(queue);
        let mut set = redis::cmd("HSET");
        set.arg(&conf).arg("shards").arg(s.shards);
        set.arg("lane").arg(u8::from(s.lane));
        set.arg("lane_window_ms").arg(s.lane_window_ms);
        let mut gone = Vec::new();
        match s.rate {
            Some(r) => {
                set.arg("rate_per_s").arg(r.per_s);
                set.arg("rate_burst").arg(r.burst);
            }
            None => gone.extend(["rate_per_s", "rate_burst"]),
        }
        match s.max_in_flight {
            Some(m) => {
                set.arg("max_in_flight").arg(m);
            }
            None => gone.push("max_in_flight"),
        }
        match s.key_rate {
            Some(r) => {
                set.arg("key_rate_per_s").arg(r.per_s);
                set.arg("key_rate_burst").arg(r.burst);
            }
            None => gone.extend(["key_rate_per_s", "key_rate_burst"]),
        }
        match s.key_max_in_flight {
            Some(m) => {
                set.arg("key_max_in_flight").arg(m);
            }
            None => gone.push("key_max_in_flight"),
        }
        set.arg("pause_key_on_429")
            .arg(u8::from(s.pause_key_on_429));
        set.arg("keep_done_ms").arg(s.retention.keep_done_ms);
        set.arg("dedupe_ms").arg(s.retention.dedupe_ms);
        if s.delivery == delayq::DeliveryMode::Push {
            self.mark_push(queue).await?;
        }
        set.arg("delivery").arg(s.delivery.as_str());
        match &s.target {
            Some(t) => {
                set.arg("target").arg(t.to_json());
            }
            None => gone.push("target"),
        }
        let _: () = set.query_async(&mut conn).await.map_err(error::map)?;
        if !gone.is_empty() {
            let _: () = redis::cmd("HDEL")
                .arg(&conf)
                .arg(&gone)
                .query_async(&mut conn)
                .await
                .map_err(error::map)?;
        }
        self.inner
            .routes
            .loaded(queue, s.shards, s.lane, s.delivery_rule());
        let route = self.route(queue).await?;
        try_join_all(route.keys.iter().map(|k| self.store_limits(k, &s))).await?;
        Ok(s)
    }

    /// Held in every shard: a key's jobs live in its shard when their ids were generated, in
    /// their ids' shards when the producer chose them.
    async fn pause_key(&self, q: &QueueName, key: &JobKey, hold: KeyHold) -> Result<Option<u64>> {
        let (until, for_ms) = match hold {
            KeyHold::Until(t) => (t, 0),
            KeyHold::For(d) => (0, (d.as_millis() as u64).max(1)),
            KeyHold::Lifted => (0, 0),
        };
        let route = self.route(q).await?;
        let ends = try_join_all(
            route
                .keys
                .iter()
                .map(|k| self.key_pause_shard(k, key.as_str(), until, for_ms)),
        )
        .await?;
        Ok(ends.into_iter().max().filter(|e| *e > 0))
    }

    async fn keys(&self, queue: &QueueName, limit: usize) -> Result<Vec<delayq::KeyStats>> {
        let route = self.route(queue).await?;
        let per_shard =
            try_join_all(route.keys.iter().map(|k| self.key_stats_shard(k, 1000))).await?;
        let mut by_key: std::collections::HashMap<Vec<u8>, delayq::KeyStats> =
            std::collections::HashMap::new();
        for row in per_shard.into_iter().flatten() {
            let Some(key) = std::str::from_utf8(&row.key)
                .ok()
                .and_then(|k| JobKey::new(k).ok())
            else {
                continue;
            };
            let e = by_key.entry(row.key).or_insert(delayq::KeyStats {
                key,
                in_flight: 0,
                due: 0,
                paused_until_ms: None,
            });
            e.in_flight += row.in_flight.max(0) as u64;
            e.due += row.due.max(0) as u64;
            if row.held > 0 {
                e.paused_until_ms = e.paused_until_ms.max(Some(row.held as u64));
            }
        }
        let mut rows: Vec<delayq::KeyStats> = by_key.into_values().collect();
        delayq::KeyStats::busiest_first(&mut rows);
        rows.truncate(limit);
        Ok(rows)
    }

    async fn key_jobs(
        &self,
        q: &QueueName,
        key: &JobKey,
        req: delayq::KeyJobsRequest,
    ) -> Result<delayq::KeyJobsPage> {
        self.key_page(q, key, req).await
    }

    async fn cancel_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        running: bool,
    ) -> Result<delayq::KeyCancelled> {
        self.cancel_key_jobs(q, key, running).await
    }

    async fn reschedule_key(
        &self,
        q: &QueueName,
        key: &JobKey,
        to: delayq::KeyMove,
    ) -> Result<u64> {
        self.move_key_jobs(q, key, to).await
    }
}
