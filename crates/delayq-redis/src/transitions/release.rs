//! Giving leases back: `lua/release.lua`.

use delayq::{LeaseRef, QueueName, Result};
use futures::future::join_all;

use crate::backend::RedisBackend;
use crate::protocol::{item, script};
use crate::route::group;

script! {
    file: "release.lua",
    keys: [Sched, Lease, Jobs, Wake, Stat, Ready, InFlight, Waits],
    args: {
        /// The attempts never started: each is given back.
        undo: bool,
    },
    tail: leases: Given,
    reply: u64,
}

item! {
    /// One lease to give back.
    pub(crate) struct Given {
        /// The job.
        id: delayq::JobId,
        /// Its lease's token.
        token: u64,
    }
}

impl RedisBackend {
    /// Gives `leases` back (due again at once), each shard in one call.
    pub(crate) async fn release_leases(
        &self,
        queue: &QueueName,
        leases: Vec<LeaseRef>,
        undo: bool,
    ) -> Result<()> {
        if leases.is_empty() {
            return Ok(());
        }
        let route = self.route(queue).await?;
        let by = group(leases, route.shards, |l| l.id.as_str());
        let calls = by
            .into_iter()
            .enumerate()
            .filter(|(_, (p, _))| !p.is_empty())
            .map(|(s, (_, leases))| {
                let args = Args {
                    undo,
                    leases: leases
                        .into_iter()
                        .map(|l| Given {
                            id: l.id,
                            token: l.token,
                        })
                        .collect(),
                };
                let k = &route.keys[s];
                async move { self.run(&SCRIPT, k, args, false).await }
            });
        for r in join_all(calls).await {
            r?;
        }
        Ok(())
    }
}
