//! Removing a scheduled job: `lua/cancel.lua`.

use delayq::{CancelOutcome, JobId, LeaseRef, QueueName, Result};
use futures::future::try_join_all;

use crate::backend::RedisBackend;
use crate::error::{self, shape};
use crate::protocol::script;
use crate::reply::Reply;
use crate::route::group;

script! {
    file: "cancel.lua",
    keys: [
        Sched, Lease, Jobs, Dead, Ready, Lane, LaneMeta, LaneGone, Members, Stat, Wake, InFlight,
        Waits, Cancelled, Tenants, Waiting
    ],
    key_tails: [ix],
    args: {
        /// The job.
        id: JobId,
        /// Whether a leased job is cancelled too.
        running: bool,
    },
    reply: Reply,
}

impl RedisBackend {
    /// Cancels job `id` when it is scheduled, and with `running` when it is leased.
    pub(crate) async fn cancel_job(
        &self,
        queue: &QueueName,
        id: &JobId,
        running: bool,
    ) -> Result<CancelOutcome> {
        let (k, ix) = self.keys_and_bucket(queue, id).await?;
        let args = Args {
            ix,
            id: id.clone(),
            running,
        };
        match self.run(&SCRIPT, &k, args, true).await? {
            Reply::Ok => Ok(CancelOutcome::Cancelled),
            Reply::Cancelling => Ok(CancelOutcome::Cancelling),
            Reply::Leased => Ok(CancelOutcome::Leased),
            Reply::Dead => Ok(CancelOutcome::Dead),
            Reply::Missing => Ok(CancelOutcome::NotFound),
            r => Err(shape(&format!("cancel: {r:?}"))),
        }
    }

    /// For each of `leases` (of one queue), in order: whether `cxl` remembers it as cancelled
    /// while its job ran — a pipeline of `ZSCORE`s per shard they are in. Tokens are never
    /// reused, so an entry names exactly one lease; its score only says when cancel.lua may
    /// forget it.
    pub(crate) async fn cancelled_leases(
        &self,
        queue: &QueueName,
        leases: Vec<LeaseRef>,
    ) -> Result<Vec<bool>> {
        let mut out = vec![false; leases.len()];
        if leases.is_empty() {
            return Ok(out);
        }
        let route = self.route(queue).await?;
        let by = group(leases, route.shards, |l| l.id.as_str());
        let calls = by
            .into_iter()
            .enumerate()
            .filter(|(_, (p, _))| !p.is_empty())
            .map(|(s, (pos, ls))| {
                let key = &route.keys[s].cxl;
                async move {
                    // ZSCOREs in one pipeline (ZMSCORE is not among the commands of the one
                    // ACL rule, docs/GUIDE.md).
                    let mut pipe = redis::pipe();
                    for l in &ls {
                        pipe.cmd("ZSCORE")
                            .arg(key)
                            .arg(format!("{}:{}", l.token, l.id));
                    }
                    let mut conn = self.connection();
                    let until: Vec<Option<f64>> =
                        pipe.query_async(&mut conn).await.map_err(error::map)?;
                    Ok::<_, delayq::Error>((pos, until))
                }
            });
        for (pos, until) in try_join_all(calls).await? {
            for (p, u) in pos.into_iter().zip(until) {
                out[p] = u.is_some();
            }
        }
        Ok(out)
    }
}
