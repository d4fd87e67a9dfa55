//! Every Redis key and channel name of a queue, built in this one place.
//!
//! All names of a queue share the hash tag `{queue}`, so every script touches one slot and runs
//! unchanged on Redis Cluster. Queue names cannot contain braces (see `QueueName`), so the tag
//! is exactly the queue name.

use delayq::QueueName;

/// One of a queue's keys, as scripts declare them (see `scripts.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    Sched,
    Lease,
    Jobs,
    Dead,
    Fence,
    Wake,
}

impl Key {
    /// The name a script header uses for it (`-- KEYS[n] <field>`), also the key's suffix.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Key::Sched => "sched",
            Key::Lease => "lease",
            Key::Jobs => "jobs",
            Key::Dead => "dead",
            Key::Fence => "fence",
            Key::Wake => "wake",
        }
    }
}

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
        let name = |key: Key| format!("dq:{{{queue}}}:{}", key.field());
        Self {
            sched: name(Key::Sched),
            lease: name(Key::Lease),
            jobs: name(Key::Jobs),
            dead: name(Key::Dead),
            fence: name(Key::Fence),
            wake: name(Key::Wake),
        }
    }

    /// The name of one key.
    pub(crate) fn name(&self, key: Key) -> &str {
        match key {
            Key::Sched => &self.sched,
            Key::Lease => &self.lease,
            Key::Jobs => &self.jobs,
            Key::Dead => &self.dead,
            Key::Fence => &self.fence,
            Key::Wake => &self.wake,
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
        for key in [
            Key::Sched,
            Key::Lease,
            Key::Jobs,
            Key::Dead,
            Key::Fence,
            Key::Wake,
        ] {
            let name = k.name(key);
            assert_eq!(name, format!("dq:{{orders}}:{}", key.field()));
            let key = name;
            assert_eq!(queue_of(key).unwrap().as_str(), "orders");
        }
        assert!(queue_of("other").is_none());
    }
}
