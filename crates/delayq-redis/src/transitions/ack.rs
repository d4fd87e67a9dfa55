//! Acknowledging leases of one shard: `lua/ack.lua`.

use delayq::{Ack, AckOutcome, Result};
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::shape;
use crate::keys::Keys;
use crate::protocol::{FromReply, item, script};
use crate::reply::Reply;
use crate::route::Route;

script! {
    file: "ack.lua",
    keys: [
        Lease, Jobs, Stat, Wake, Done, Lane, LaneMeta, Ready, InFlight, Waits, Members, Cancelled,
        Tenants,
    ],
    key_tails: [ix],
    args: {},
    tail: acks: Finish,
    reply: Vec<AckOutcome>,
}

item! {
    /// One ack of `ack.lua` and `claim.lua`: a lease to finish, with the handler's result
    /// (empty: none).
    pub(crate) struct Finish {
        /// The job.
        id: delayq::JobId,
        /// Its lease's token.
        token: u64,
        /// The result kept with a job kept as done.
        result: Vec<u8>,
    }
}

impl Finish {
    /// The script's acks of `acks`, in order.
    pub(crate) fn of(acks: Vec<Ack>) -> Vec<Finish> {
        acks.into_iter()
            .map(|a| Finish {
                id: a.lease.id,
                token: a.lease.token,
                result: a.result.unwrap_or_default(),
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
            Reply::Cancelled => Ok(AckOutcome::Cancelled),
            r => Err(shape(&format!("ack: {r:?}"))),
        }
    }
}

impl RedisBackend {
    /// Acknowledges finished jobs of one shard, each with its result.
    pub(crate) async fn ack_shard(
        &self,
        route: &Route,
        k: &Keys,
        acks: Vec<Ack>,
    ) -> Result<Vec<AckOutcome>> {
        let args = Args {
            ix: route.buckets(k, acks.iter().map(|a| a.lease.id.as_str())),
            acks: Finish::of(acks),
        };
        self.run(&SCRIPT, k, args, true).await
    }
}
