//! The conformance suite on the other topologies: one server over TLS as an ACL user with
//! exactly `ACL_RULE`, a 3-master Cluster with an 8-shard queue, Sentinel, and an 8-shard queue
//! on one plain server. The tests of a topology share its servers (started once for this
//! binary), each test in a namespace of its own, moving time with the test clock.

use std::sync::Once;

use delayq::{Inspect, QueueName, QueueSettings};
use delayq_redis::{ACL_RULE, ConnectOptions, RedisBackend};
use delayq_test_support::shared::{self, ACL_USER};
use delayq_testkit::Time;

/// The queue the conformance suite uses, made an 8-shard queue.
async fn shard(b: &RedisBackend) {
    let q = QueueName::new("conformance").unwrap();
    b.configure(&q, QueueSettings::with_shards(8))
        .await
        .unwrap();
}

/// A backend with options `o`, in a fresh namespace, whose scripts read the test clock.
async fn connect(mut o: ConnectOptions) -> (RedisBackend, Time) {
    o.namespace = Some(shared::namespace());
    let b = RedisBackend::connect_with(o).await.unwrap();
    let clock = delayq::TestClock::new();
    b.drive_clock(clock.clone());
    (b, Time::Driven(clock))
}

mod tls_acl {
    use super::*;

    async fn setup() -> ((), RedisBackend, Time) {
        let s = shared::tls();
        static USER: Once = Once::new();
        USER.call_once(|| s.server.add_user(ACL_USER.0, ACL_USER.1, ACL_RULE));
        let certs = s.certs();
        let mut o = ConnectOptions::new(s.url(Some(ACL_USER)));
        o.tls.ca = Some(certs.ca);
        o.tls.cert = Some(certs.client_cert);
        o.tls.key = Some(certs.client_key);
        let (b, time) = connect(o).await;
        ((), b, time)
    }

    delayq_testkit::conformance_tests!(setup);
    delayq_testkit::conformance_tests!(@batches setup);
    delayq_testkit::conformance_tests!(@deps setup);
}

mod cluster {
    use super::*;

    async fn setup() -> ((), RedisBackend, Time) {
        let (b, time) = connect(ConnectOptions::new(shared::cluster().url(None))).await;
        shard(&b).await;
        ((), b, time)
    }

    delayq_testkit::conformance_tests!(setup);
    delayq_testkit::conformance_tests!(@batches setup);
    delayq_testkit::conformance_tests!(@deps setup);
    delayq_testkit::conformance_tests!(@sharded setup);
}

mod sentinel {
    use super::*;

    async fn setup() -> ((), RedisBackend, Time) {
        let (b, time) = connect(ConnectOptions::new(shared::sentinel().url())).await;
        ((), b, time)
    }

    delayq_testkit::conformance_tests!(setup);
    delayq_testkit::conformance_tests!(@batches setup);
    delayq_testkit::conformance_tests!(@deps setup);
}

mod sharded_single {
    use super::*;

    async fn setup() -> ((), RedisBackend, Time) {
        let (b, time) = connect(ConnectOptions::new(shared::redis().url())).await;
        shard(&b).await;
        ((), b, time)
    }

    delayq_testkit::conformance_tests!(setup);
    delayq_testkit::conformance_tests!(@batches setup);
    delayq_testkit::conformance_tests!(@deps setup);
    delayq_testkit::conformance_tests!(@sharded setup);
}

/// The lane's time windows on a Cluster, as an ACL user with exactly `ACL_RULE`: the scripts
/// build the windows' key names from the lane's (same hash tag, so the same slot), and the
/// suite's queue is an 8-shard lane queue with the narrowest windows (100 ms: its jobs due
/// more than 200 ms ahead wait in windows and move while it runs).
mod cluster_windows {
    use super::*;

    async fn setup() -> ((), RedisBackend, Time) {
        let c = shared::cluster();
        static USER: Once = Once::new();
        USER.call_once(|| c.add_user(ACL_USER.0, ACL_USER.1, ACL_RULE));
        let (b, time) = connect(ConnectOptions::new(c.url(Some(ACL_USER)))).await;
        let s = QueueSettings {
            lane: true,
            lane_window_ms: delayq::settings::MIN_LANE_WINDOW_MS,
            ..QueueSettings::with_shards(8)
        };
        b.configure(&QueueName::new("conformance").unwrap(), s)
            .await
            .unwrap();
        ((), b, time)
    }

    delayq_testkit::conformance_tests!(setup);
    delayq_testkit::conformance_tests!(@batches setup);
    delayq_testkit::conformance_tests!(@deps setup);
}
