//! Firing a schedule on a queue of one shard: `lua/fire.lua`.

use delayq::Result;
use delayq::schedule::Firing;

use crate::backend::RedisBackend;
use crate::protocol::{item, script};
use crate::record;
use crate::route::Route;

script! {
    file: "fire.lua",
    keys: [Sched, Jobs, Wake, Stat, CronNext, Lane, LaneMeta],
    key_tails: [ix],
    args: {
        /// The schedule.
        name: String,
        /// The next fire the ticker read, ms.
        expected: u64,
        /// The next fire to store, ms.
        next_fire: u64,
        /// The jobs' attempts.
        max_attempts: u32,
        /// The jobs' record flags.
        flags: u8,
        /// The jobs' record after its header (`record::tail`).
        rest: Vec<u8>,
    },
    tail: fires: Fire,
    reply: bool,
}

item! {
    /// One fire.
    pub(crate) struct Fire {
        /// A fire time, ms in decimal (as the job's id carries it).
        at: String,
    }
}

impl RedisBackend {
    /// Fires schedule `name` of a queue of one shard (`route`: its route, whose one shard's
    /// keys are the schedule's); whether it fired.
    pub(crate) async fn fire_one_shard(
        &self,
        route: &Route,
        name: &str,
        f: Firing,
    ) -> Result<bool> {
        let own = &route.keys[0];
        let max_attempts = f.job.max_attempts.unwrap_or(delayq::DEFAULT_MAX_ATTEMPTS);
        let ids = f
            .fires
            .iter()
            .map(|&t| delayq::schedule::fire_id(name, t).to_string());
        let ix = route.buckets(own, ids);
        let (flags, rest) = record::tail(f.job);
        let args = Args {
            ix,
            name: name.to_owned(),
            expected: f.expected,
            next_fire: f.next,
            max_attempts,
            flags,
            rest,
            fires: f.fires.iter().map(|t| Fire { at: t.to_string() }).collect(),
        };
        self.run(&SCRIPT, own, args, true).await
    }
}
