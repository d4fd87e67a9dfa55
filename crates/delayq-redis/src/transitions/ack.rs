//! Acknowledging leases of one shard: `lua/ack.lua`.

use delayq::{AckOutcome, LeaseRef, Result};
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::keys::Keys;
use crate::protocol::{FromReply, item, script};
use crate::reply::Reply;
use crate::route::Route;

script! {
    file: "ack.lua",
    keys: [Lease, Jobs, Stat, Wake, Done, Lane, LaneMeta, Ready, InFlight, Waits, Members],
    key_tails: [ix],
    args: {},
    tail: acks: Finish,
    reply: Vec<AckOutcome>,
}

item! {
    /// One ack: a lease to finish.
    pub(crate) struct Ack {
        /// The job.
        id: delayq::JobId,
        /// Its lease's token.
        token: u64,
    }
}

item! {
    /// One ack of `ack.lua`: a lease to finish, with the handler's result (empty: none).
    pub(crate) struct Finish {
        /// The job.
        id: delayq::JobId,
        /// Its lease's token.
        token: u64,
        /// The result kept with a job kept as done.
        result: Vec<u8>,
    }
}

impl Ack {
    /// The acks of `leases`, in order.
    pub(crate) fn of(leases: Vec<LeaseRef>) -> Vec<Ack> {
        leases
            .into_iter()
            .map(|l| Ack {
                id: l.id,
                token: l.token,
            })
            .collect()
    }
}

/// An ack's outcome: R_OK, R_LOST or R_MISSING.
impl FromReply for AckOutcome {
    fn from_reply(v: Value) -> Result<Self> {
        match Reply::from_reply(v)? {
            Reply::Ok => Ok(AckOutcome::Acked),
            Reply::LeaseLost => Ok(AckOutcome::LeaseLost),
            Reply::Missing => Ok(AckOutcome::NotFound),
            r => Err(shape(&format!("ack: {r:?}"))),
        }
    }
}

impl RedisBackend {
    /// Acknowledges leases of one shard, each with its result (empty: none).
    pub(crate) async fn ack_shard(
        &self,
        route: &Route,
        k: &Keys,
        leases: Vec<(LeaseRef, Vec<u8>)>,
    ) -> Result<Vec<AckOutcome>> {
        let args = Args {
            ix: route.buckets(k, leases.iter().map(|(l, _)| l.id.as_str())),
            acks: leases
                .into_iter()
                .map(|(l, result)| Finish {
                    id: l.id,
                    token: l.token,
                    result,
                })
                .collect(),
        };
        self.run(&SCRIPT, k, args, true).await
    }
}
