//! Failing one attempt of a leased job: `lua/nack.lua`.

use delayq::limits::truncate_error;
use delayq::{JobId, JobState, LeaseRef, Nack, NackOutcome, QueueName, Result};

use crate::backend::RedisBackend;
use crate::protocol::script;
use crate::reply::Reply;

use super::Coded;

script! {
    file: "nack.lua",
    keys: [
        Sched, Lease, Jobs, Dead, Wake, Stat, Lane, LaneMeta, Ready, InFlight, Waits, Members,
        Cancelled,
    ],
    key_tails: [ix],
    args: {
        /// The job.
        id: JobId,
        /// Its lease's token.
        token: u64,
        /// The error, cut to the stored length on a character boundary.
        err: String,
        /// The retry's delay in ms; -1: the job's backoff.
        retry_ms: i64,
        /// Dead-letter now, whatever attempts are left.
        dead_now: bool,
        /// Uniform in [0, 1): the backoff's jitter.
        rnd: f64,
    },
    reply: Coded,
}

impl RedisBackend {
    /// Fails one attempt of a leased job.
    pub(crate) async fn nack_job(
        &self,
        queue: &QueueName,
        lease: LeaseRef,
        nack: Nack,
    ) -> Result<NackOutcome> {
        let (k, ix) = self.keys_and_bucket(queue, &lease.id).await?;
        let args = Args {
            ix,
            id: lease.id.clone(),
            token: lease.token,
            err: truncate_error(&nack.error).to_owned(),
            retry_ms: nack.retry_in.map_or(-1, |d| d.as_millis() as i64),
            dead_now: nack.dead,
            rnd: rand::random::<f64>(),
        };
        let r = self.run(&SCRIPT, &k, args, true).await?;
        match r.code {
            Reply::Retry => Ok(NackOutcome::Retrying {
                due_at_ms: r.value as u64,
            }),
            Reply::Buried => Ok(NackOutcome::Dead {
                failed_at_ms: r.value as u64,
            }),
            code => Err(code.refusal(&lease.id, JobState::Leased)),
        }
    }
}
