//! The Lua scripts, one per transition, each with `common.lua` prepended. `Script` sends
//! EVALSHA and reloads the script after `NOSCRIPT` (a restarted or flushed server).

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        #[doc = concat!("`lua/", $file, "` with `common.lua` prepended.")]
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../lua/common.lua"),
                "\n",
                include_str!(concat!("../lua/", $file))
            ))
        });
    };
}

script!(ENQUEUE, "enqueue.lua");
script!(CLAIM, "claim.lua");
script!(ACK, "ack.lua");
script!(NACK, "nack.lua");
script!(EXTEND, "extend.lua");
script!(RELEASE, "release.lua");
script!(CANCEL, "cancel.lua");
script!(RESCHEDULE, "reschedule.lua");
script!(GET, "get.lua");
script!(STATS, "stats.lua");
script!(DEAD_LIST, "dead_list.lua");
script!(DEAD_REQUEUE, "dead_requeue.lua");
script!(DEAD_PURGE, "dead_purge.lua");
