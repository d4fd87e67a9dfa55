//! Every Redis key and channel name of a queue, built in this one place.
//!
//! All names of a queue share the hash tag `{queue}`, so every script touches one slot and runs
//! unchanged on Redis Cluster. Queue names cannot contain braces (see `QueueName`), so the tag
//! is exactly the queue name.

use delayq::QueueName;

/// The names of one queue's keys.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    /// ZSET id → due ms: scheduled jobs.
    pub sched: String,
    /// ZSET id → lease deadline ms: leased jobs.
    pub lease: String,
    /// HASH id → record: every stored job, whatever its state.
    pub jobs: String,
    /// ZSET id → failed-at ms: dead-lettered jobs.
    pub dead: String,
    /// STRING: counter of lease (fencing) tokens.
    pub fence: String,
    /// Pub/Sub channel: "a job due at <ms> may be earlier than the head".
    pub wake: String,
}

impl Keys {
    pub(crate) fn new(queue: &QueueName) -> Self {
        let p = format!("dq:{{{queue}}}:");
        Self {
            sched: format!("{p}sched"),
            lease: format!("{p}lease"),
            jobs: format!("{p}jobs"),
            dead: format!("{p}dead"),
            fence: format!("{p}fence"),
            wake: format!("{p}wake"),
        }
    }
}

/// `SCAN` pattern matching every delayq key.
pub(crate) const SCAN_PATTERN: &str = "dq:{*}:*";

/// The queue a delayq key belongs to.
pub(crate) fn queue_of(key: &str) -> Option<QueueName> {
    let rest = key.strip_prefix("dq:{")?;
    let (name, _) = rest.split_once("}:")?;
    QueueName::new(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_share_the_queue_hash_tag() {
        let k = Keys::new(&QueueName::new("orders").unwrap());
        for key in [&k.sched, &k.lease, &k.jobs, &k.dead, &k.fence, &k.wake] {
            assert!(key.starts_with("dq:{orders}:"), "{key}");
            assert_eq!(queue_of(key).unwrap().as_str(), "orders");
        }
        assert!(queue_of("other").is_none());
    }
}
