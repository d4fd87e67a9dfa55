//! Every state change and read of a queue's shard, one module per Lua script: its declaration
//! (keys, arguments, reply: `crate::protocol::script!`) and the call that encodes the
//! arguments and decodes the reply. The trait impls (`backend`, `inspect`, `schedules`) route
//! to shards and call these.

use crate::protocol::reply;
use crate::reply::Reply;

pub(crate) mod ack;
pub(crate) mod advance;
pub(crate) mod batch_home;
pub(crate) mod batch_join;
pub(crate) mod batch_ready;
pub(crate) mod batch_scan;
pub(crate) mod batch_shard;
pub(crate) mod cancel;
pub(crate) mod cancel_all;
pub(crate) mod claim;
pub(crate) mod dead;
pub(crate) mod dep_release;
pub(crate) mod dep_wait;
pub(crate) mod dep_watch;
pub(crate) mod enqueue;
pub(crate) mod extend;
pub(crate) mod fire;
pub(crate) mod fire_shard;
pub(crate) mod get;
pub(crate) mod key_bulk;
pub(crate) mod key_jobs;
pub(crate) mod key_pause;
pub(crate) mod key_stats;
pub(crate) mod list;
pub(crate) mod nack;
pub(crate) mod pause;
pub(crate) mod release;
pub(crate) mod reschedule;
pub(crate) mod shard_settings;
pub(crate) mod stats;

/// Jobs per call when requeueing, purging or cancelling in bulk (keeps each call short).
pub(crate) const ADMIN_CHUNK: usize = 1000;

reply! {
    /// An outcome code and the number it comes with (0 when it has none).
    pub(crate) struct Coded as "coded" {
        /// The outcome.
        code: Reply,
        /// A time (ms) or a count.
        value: i64,
    }
}

/// One script as delayq sends it to Redis (`delayq debug scripts`; committed under
/// `lua/built/`).
#[derive(Debug, Clone)]
pub struct ScriptText {
    /// Its file under `lua/` (and `lua/built/`).
    pub file: &'static str,
    /// SHA1 of its text for one server or Sentinel (what `EVALSHA` names).
    pub sha1: String,
    /// SHA1 of its Cluster build (`SPUBLISH` for `PUBLISH`, the only difference).
    pub sha1_cluster: String,
    /// Its whole text for one server: header, helpers, its own file, constants written in.
    pub text: String,
}

/// Every script as this build sends it, by file name. The same text in tests and in
/// production: the tests' clock reaches the scripts as an argument (`clock_offset_us`, 0 in
/// production), never as another text.
pub fn scripts() -> Vec<ScriptText> {
    all()
        .into_iter()
        .map(|d| ScriptText {
            file: d.file,
            sha1: d.built(false).sha.clone(),
            sha1_cluster: d.built(true).sha.clone(),
            text: d.built(false).text.clone(),
        })
        .collect()
}

/// The `lua/built/SHA1SUMS` text of `scripts`: per script the SHA1 of its one-server build, of
/// its Cluster build, and its file, one line each.
pub fn sha1sums(scripts: &[ScriptText]) -> String {
    scripts
        .iter()
        .map(|s| format!("{}  {}  {}\n", s.sha1, s.sha1_cluster, s.file))
        .collect()
}

/// Every declared script.
pub(crate) fn all() -> [&'static crate::scripts::ScriptDef; 30] {
    [
        &ack::SCRIPT.def,
        &advance::SCRIPT.def,
        &batch_home::SCRIPT.def,
        &batch_join::SCRIPT.def,
        &batch_ready::SCRIPT.def,
        &batch_scan::SCRIPT.def,
        &batch_shard::SCRIPT.def,
        &cancel::SCRIPT.def,
        &cancel_all::SCRIPT.def,
        &claim::SCRIPT.def,
        &dead::SCRIPT.def,
        &dep_release::SCRIPT.def,
        &dep_wait::SCRIPT.def,
        &dep_watch::SCRIPT.def,
        &enqueue::SCRIPT.def,
        &extend::SCRIPT.def,
        &fire::SCRIPT.def,
        &fire_shard::SCRIPT.def,
        &get::SCRIPT.def,
        &key_bulk::SCRIPT.def,
        &key_jobs::SCRIPT.def,
        &key_pause::SCRIPT.def,
        &key_stats::SCRIPT.def,
        &shard_settings::SCRIPT.def,
        &list::SCRIPT.def,
        &nack::SCRIPT.def,
        &pause::SCRIPT.def,
        &release::SCRIPT.def,
        &reschedule::SCRIPT.def,
        &stats::SCRIPT.def,
    ]
}
