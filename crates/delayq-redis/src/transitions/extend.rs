//! Moving a lease's deadline: `lua/extend.lua`.

use std::time::Duration;

use delayq::{JobId, JobState, LeaseRef, QueueName, Result};

use crate::backend::RedisBackend;
use crate::protocol::script;
use crate::reply::Reply;

use super::Coded;

script! {
    file: "extend.lua",
    keys: [Lease, Jobs, Lane, LaneMeta, Cancelled],
    key_tails: [ix],
    args: {
        /// The job.
        id: JobId,
        /// Its lease's token.
        token: u64,
        /// The new lease from now, ms.
        lease_ms: u64,
    },
    reply: Coded,
}

impl RedisBackend {
    /// Moves a lease's deadline to now + `lease_len`; the new deadline (ms).
    pub(crate) async fn extend_lease(
        &self,
        queue: &QueueName,
        lease: LeaseRef,
        lease_len: Duration,
    ) -> Result<u64> {
        delayq::job::validate_lease(lease_len)?;
        let (k, ix) = self.keys_and_bucket(queue, &lease.id).await?;
        let args = Args {
            ix,
            id: lease.id.clone(),
            token: lease.token,
            lease_ms: lease_len.as_millis() as u64,
        };
        let r = self.run(&SCRIPT, &k, args, false).await?;
        match r.code {
            Reply::Ok => Ok(r.value as u64),
            code => Err(code.refusal(&lease.id, JobState::Leased)),
        }
    }
}
