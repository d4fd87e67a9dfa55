//! Writing one job that waits for other jobs: `lua/dep_wait.lua`.

use delayq::{JobId, NewJob, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::{item, script};
use crate::record;
use crate::transitions::Coded;

script! {
    file: "dep_wait.lua",
    keys: [Jobs, Waiting, Stat, Done, DepReg],
    args: {
        /// The job.
        id: JobId,
        /// Its flags byte and record (`record::spec`, with X_DEPS).
        spec: Vec<u8>,
    },
    tail: deps: DepField,
    reply: Coded,
}

item! {
    /// One dependency as its dependent's `dg:<id>` names it.
    pub(crate) struct DepField {
        /// `<queue>\0<id>`.
        field: Vec<u8>,
    }
}

/// The field naming dependency `d` in a dependent's `dg:<id>` (deps.lua).
pub(crate) fn field_of(d: &delayq::DepRef) -> Vec<u8> {
    let mut f = d.queue.as_str().as_bytes().to_vec();
    f.push(0);
    f.extend_from_slice(d.id.as_str().as_bytes());
    f
}

impl RedisBackend {
    /// Writes `job` (its id set, its dependencies given) waiting into shard `k`.
    pub(crate) async fn dep_wait(&self, k: &Keys, id: JobId, job: NewJob) -> Result<Coded> {
        let deps = job
            .depends
            .as_ref()
            .map(|d| {
                d.on.iter()
                    .map(|d| DepField { field: field_of(d) })
                    .collect()
            })
            .unwrap_or_default();
        let args = Args {
            id,
            spec: record::spec(job),
            deps,
        };
        self.run(&SCRIPT, k, args, true).await
    }
}
