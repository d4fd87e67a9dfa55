//! Moving a schedule's next fire on after its fires went into their shards: `lua/advance.lua`.

use delayq::Result;

use crate::backend::RedisBackend;
use crate::keys::Keys;
use crate::protocol::script;

script! {
    file: "advance.lua",
    keys: [CronNext],
    args: {
        /// The schedule.
        name: String,
        /// The next fire the ticker read, ms.
        expected: u64,
        /// The next fire to store, ms.
        next_fire: u64,
    },
    reply: bool,
}

impl RedisBackend {
    /// Moves schedule `name`'s next fire from `expected` to `next_fire` (`own`: the queue's
    /// own keys); whether it was still `expected`.
    pub(crate) async fn advance_schedule(
        &self,
        own: &Keys,
        name: &str,
        expected: u64,
        next_fire: u64,
    ) -> Result<bool> {
        let args = Args {
            name: name.to_owned(),
            expected,
            next_fire,
        };
        self.run(&SCRIPT, own, args, true).await
    }
}
