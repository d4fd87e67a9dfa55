//! Registering a dependent as a waiter of dependencies in one shard: `lua/dep_watch.lua`.

use delayq::{JobId, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{Flat, item, reply, script};
use crate::route::Route;

script! {
    file: "dep_watch.lua",
    keys: [Sched, Jobs, Dead, Lane, LaneMeta, LaneGone],
    key_tails: [ix],
    args: {},
    tail: watch: Watch,
    reply: Flat<DepState>,
}

item! {
    /// One dependency to watch.
    pub(crate) struct Watch {
        /// The dependency.
        id: JobId,
        /// The waiter: `<its shard's key prefix>\0<its id>`.
        waiter: Vec<u8>,
        /// `r`: it wants the result; `1`: it does not.
        mode: String,
    }
}

reply! {
    /// How a dependency stands.
    pub(crate) flat struct DepState as "push_dep_state" {
        /// `p`, `o` or `d`.
        how: Vec<u8>,
        /// A done job's result, when asked ('' : none).
        result: Vec<u8>,
    }
}

impl RedisBackend {
    /// Registers `waiter` (wanting results: `results`) as a waiter of each of `ids` in shard
    /// `k` of `route`; how each stands, in order.
    pub(crate) async fn dep_watch(
        &self,
        route: &Route,
        k: &Keys,
        ids: Vec<JobId>,
        waiter: &[u8],
        results: bool,
    ) -> Result<Vec<DepState>> {
        let ix = route.buckets(k, ids.iter().map(JobId::as_str));
        let mode = if results { "r" } else { "1" };
        let watch = ids
            .into_iter()
            .map(|id| Watch {
                id,
                waiter: waiter.to_vec(),
                mode: mode.into(),
            })
            .collect();
        Ok(self.run(&SCRIPT, k, Args { ix, watch }, true).await?.0)
    }
}
