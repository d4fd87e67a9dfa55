//! Leasing due jobs of one shard, with the acks of finished ones: `lua/claim.lua`.

use std::time::Duration;

use delayq::{Ack, ClaimBatch, JobId, JobState, QueueName, Result};

use crate::backend::{MAX_CLAIM, RedisBackend};
use crate::keys::Keys;
use crate::protocol::{Flat, reply, script};
use crate::reply::job_info_deps;
use crate::route::Route;

use super::ack::Finish;

/// Most expired leases recovered per claim.
const REAP_LIMIT: u32 = 100;

script! {
    file: "claim.lua",
    keys: [
        Sched, Lease, Jobs, Dead, Fence, Stat, Wake, Done, Ready, Lane, LaneMeta, Turns,
        InFlight, Holds, Buckets, Waits, Members, Cancelled, Tenants,
    ],
    key_tails: [sweep, ix],
    args: {
        /// Most jobs to lease.
        max: usize,
        /// The lease of a job without its own, ms.
        default_lease: u64,
        /// Most expired leases to recover in this call.
        reap_limit: u32,
    },
    tail: acks: Finish,
    reply: ClaimReply,
}

reply! {
    /// What a claim did.
    pub(crate) struct ClaimReply as "claim_reply" {
        /// Per ack, in order.
        acks: Vec<delayq::AckOutcome>,
        /// The jobs leased.
        jobs: Flat<Leased>,
        /// µs until the next due job or lease expiry (-1: none).
        next_us: i64,
    }
}

reply! {
    /// A job the claim leased.
    pub(crate) flat struct Leased as "push_leased" {
        /// The job.
        id: JobId,
        /// Its lease's deadline, ms.
        deadline: i64,
        /// Its lease, ms.
        lease_ms: i64,
        /// Its record, attempt and token updated.
        rec: Vec<u8>,
    }
}

impl RedisBackend {
    /// Leases up to `max` due jobs of shard `k` and acknowledges `acks`.
    pub(crate) async fn claim_shard(
        &self,
        queue: &QueueName,
        route: &Route,
        k: &Keys,
        max: usize,
        lease: Duration,
        acks: Vec<Ack>,
    ) -> Result<ClaimBatch> {
        let wait = !acks.is_empty();
        let args = Args {
            max: max.min(MAX_CLAIM),
            default_lease: lease.as_millis() as u64,
            reap_limit: REAP_LIMIT,
            sweep: route.sweep_bucket(k),
            ix: route.buckets(k, acks.iter().map(|a| a.lease.id.as_str())),
            acks: Finish::of(acks),
        };
        let reply = self.run(&SCRIPT, k, args, wait).await?;
        let mut jobs = Vec::with_capacity(reply.jobs.0.len());
        for l in reply.jobs.0 {
            let lease = Duration::from_millis(l.lease_ms as u64);
            let (mut info, token, deps) =
                job_info_deps(l.id, JobState::Leased, l.deadline, &l.rec)?;
            if deps.is_some_and(|(_, results)| results) {
                // It asked for its dependencies' results (deps.lua: `dg:<id>` keeps them).
                info.dependencies = self.dep_statuses(k, &info.id).await?;
            }
            jobs.push(info.into_job(queue.clone(), token, lease));
        }
        Ok(ClaimBatch {
            jobs,
            acks: reply.acks,
            next_due_in: (reply.next_us >= 0).then(|| Duration::from_micros(reply.next_us as u64)),
        })
    }
}
