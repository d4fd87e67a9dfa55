//! # delayq-redis — the Redis backend of delayq
//!
//! The classic design: per queue a sorted set of scheduled ids scored by due time, a sorted
//! set of leases scored by deadline, a sorted set of dead ids, and one hash of compact binary
//! records (no Redis hash per job). Every transition is one Lua script (`lua/*.lua`) that reads
//! the server's `TIME`, so producer and consumer clocks do not matter. All keys of a queue share
//! one hash tag, so scripts run unchanged on Redis Cluster.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use delayq::{NewJob, Producer, QueueName};
//! let backend = delayq_redis::RedisBackend::connect("redis://127.0.0.1:6379").await?;
//! let producer = Producer::new(backend, QueueName::new("orders")?);
//! producer.enqueue(NewJob::new(b"order-42".to_vec())).await?;
//! # Ok(()) }
//! ```
//!
//! One connection string for every topology: `redis://`, `rediss://` (TLS), `unix://`,
//! `redis+cluster://h1:p1,h2:p2` and `redis+sentinel://h1:p1,h2:p2/MASTER` (see
//! [`ConnectOptions`]). A queue may be sharded over many hash slots (`{queue#i}`), so it
//! spreads over a Cluster's masters.
//!
//! Parts: `target` (the connection string), `conn` (the command connection and how it heals),
//! `keys` (every key name), `route` (shards of a queue), `protocol` (each script's declared
//! boundary), `transitions` (one module per script: its declaration and call), `scripts` (how
//! a script's text is built), `backend`, `inspect` and `schedules` (the trait impls), `nodes` (per-node tools), `wake` (the Pub/Sub hub),
//! `reply` (reply parsing), `lane` (what a lane holds, for the doctor), [`error`].

mod backend;
mod batches;
mod conn;
mod connect;
mod deps;
pub mod error;
mod gate;
mod helpers;
mod inspect;
mod keys;
mod lane;
mod nodes;
mod prelude;
mod protocol;
mod record;
mod reply;
mod route;
mod schedules;
mod scripts;
mod target;
mod transitions;
mod wake;

pub use backend::{MAX_CLAIM, RedisBackend};
pub use conn::Live as Connection;
pub use error::Error;
pub use lane::{LANE_INDEX_BUCKETS, LANE_WINDOW_ENTRIES, LaneShard};
pub use nodes::{Master, SentinelAnswer, SentinelView};
pub use target::{ConnectOptions, DEFAULT_CONNECT_TIMEOUT, HEALTH_EVERY, TlsFiles, mask};
pub use transitions::{ScriptText, scripts, sha1sums};

/// The ACL rule a delayq user needs (after `ACL SETUSER NAME on >PASSWORD`): its keys and
/// channels (`~dq:*`, `&dq:*` — Redis 7 denies Pub/Sub channels to new users by default) and
/// the commands delayq and its scripts run. docs/GUIDE.md shows it; the test suite runs as a
/// user with exactly this rule.
pub const ACL_RULE: &str = "resetkeys ~dq:* resetchannels &dq:* -@all \
+eval +evalsha +hget +hset +hsetnx +hdel +hmget +hincrby +incrby +set +getrange +setrange +bitfield \
+time +zadd +zcard +zcount +zrange +zrangebyscore +zrank +zrem +zscore +publish +spublish \
+hgetall +llen +lrange +lindex +lset +ltrim +rpush +del +setbit +bitcount +bitpos +strlen \
+subscribe +ssubscribe +unsubscribe +sunsubscribe +ping +wait +scan +info +hello +cluster|slots +cluster|info";

/// The commands of [`ACL_RULE`], one per word (`cluster|slots` names a subcommand).
pub fn acl_commands() -> impl Iterator<Item = &'static str> {
    ACL_RULE
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('+'))
}

#[cfg(test)]
mod tests {
    /// docs/GUIDE.md shows exactly [`super::ACL_RULE`] (what the test suite's user gets).
    #[test]
    fn readme_shows_the_acl_rule() {
        let readme = include_str!("../../../docs/GUIDE.md");
        let start = readme
            .find("ACL SETUSER delayq on >PASSWORD ")
            .expect("README has the ACL SETUSER line");
        let block = &readme[start..];
        let block = &block[..block.find("```").expect("in a code block")];
        let shown: Vec<&str> = block.split_whitespace().filter(|w| *w != "\\").collect();
        let want = format!("ACL SETUSER delayq on >PASSWORD {}", super::ACL_RULE);
        let want: Vec<&str> = want.split_whitespace().collect();
        assert_eq!(shown, want);
    }
}
