//! Storing one shard's copy of its queue's throttle (rate and in-flight), retention and lane
//! layout: `lua/shard_settings.lua`.

use delayq::{QueueSettings, Result};

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;

script! {
    file: "shard_settings.lua",
    keys: [Stat, Wake],
    args: {
        /// Tokens per second (0: no rate limit).
        per_s: f64,
        /// The rate limit's burst.
        burst: u32,
        /// Most jobs leased at once (0: no limit).
        mif: u32,
        /// How long completed jobs are kept, ms.
        keep: u64,
        /// How long a completed job's id stays taken, ms.
        dedupe: u64,
        /// The queue has a one-delay lane.
        lane_on: bool,
        /// Its time windows' width, ms (0: none).
        width: u32,
        /// Most jobs of one key leased at once (0: no limit).
        key_mif: u32,
        /// Jobs of one key started per second (0: no limit).
        key_per_s: f64,
        /// The key rate's burst.
        key_burst: u32,
    },
    reply: i64,
}

impl RedisBackend {
    /// Stores the shard copy of `s` in shard `k`.
    pub(crate) async fn store_limits(&self, k: &Keys, s: &QueueSettings) -> Result<()> {
        let lim = s.shard_throttle();
        let args = Args {
            per_s: lim.per_s.unwrap_or(0.0),
            burst: lim.burst,
            mif: lim.max_in_flight.unwrap_or(0),
            keep: s.retention.keep_done_ms,
            dedupe: s.retention.dedupe_ms,
            lane_on: s.lane,
            width: if s.lane { s.lane_window_ms } else { 0 },
            key_mif: s.key_max_in_flight.unwrap_or(0),
            key_per_s: s.key_rate.map_or(0.0, |r| r.per_s),
            key_burst: s.key_rate.map_or(0, |r| r.burst),
        };
        self.run(&SCRIPT, k, args, true).await.map(|_| ())
    }
}
