//! The conformance suite on the other topologies: one server over TLS as an ACL user with
//! exactly `ACL_RULE`, a 3-master Cluster with an 8-shard queue, Sentinel, and an 8-shard queue
//! on one plain server. Each test starts its own servers.

use delayq::testkit::Time;
use delayq::{Inspect, QueueName, QueueSettings};
use delayq_redis::{ACL_RULE, ConnectOptions, RedisBackend};
use delayq_test_support::cluster::RedisCluster;
use delayq_test_support::sentinel::SentinelSet;
use delayq_test_support::tls::TlsServer;

/// The queue the conformance suite uses, made an 8-shard queue.
async fn shard(b: &RedisBackend) {
    let q = QueueName::new("conformance").unwrap();
    b.configure(&q, QueueSettings::with_shards(8))
        .await
        .unwrap();
}

mod tls_acl {
    use super::*;

    async fn setup() -> (TlsServer, RedisBackend, Time) {
        let s = TlsServer::start();
        s.server.add_user("delayq", "s3cret", ACL_RULE);
        let certs = s.certs();
        let mut o = ConnectOptions::new(s.url(Some(("delayq", "s3cret"))));
        o.tls.ca = Some(certs.ca);
        o.tls.cert = Some(certs.client_cert);
        o.tls.key = Some(certs.client_key);
        let b = RedisBackend::connect_with(o).await.unwrap();
        (s, b, Time::Real)
    }

    delayq::conformance_tests!(setup);
}

mod cluster {
    use super::*;

    async fn setup() -> (RedisCluster, RedisBackend, Time) {
        let c = RedisCluster::start(3, 0);
        let b = RedisBackend::connect(&c.url(None)).await.unwrap();
        shard(&b).await;
        (c, b, Time::Real)
    }

    delayq::conformance_tests!(setup);
}

mod sentinel {
    use super::*;

    async fn setup() -> (SentinelSet, RedisBackend, Time) {
        let s = SentinelSet::start();
        let b = RedisBackend::connect(&s.url()).await.unwrap();
        (s, b, Time::Real)
    }

    delayq::conformance_tests!(setup);
}

mod sharded_single {
    use super::*;

    async fn setup() -> (delayq_test_support::RedisServer, RedisBackend, Time) {
        let s = delayq_test_support::RedisServer::start();
        let b = RedisBackend::connect(&s.url()).await.unwrap();
        shard(&b).await;
        (s, b, Time::Real)
    }

    delayq::conformance_tests!(setup);
}

/// The lane's time windows on a Cluster, as an ACL user with exactly `ACL_RULE`: the scripts
/// build the windows' key names from the lane's (same hash tag, so the same slot), and the
/// suite's queue is an 8-shard lane queue with the narrowest windows (100 ms: its jobs due
/// more than 200 ms ahead wait in windows and move while it runs).
mod cluster_windows {
    use super::*;

    async fn setup() -> (RedisCluster, RedisBackend, Time) {
        let c = RedisCluster::start(3, 0);
        c.add_user("delayq", "s3cret", ACL_RULE);
        let b = RedisBackend::connect(&c.url(Some(("delayq", "s3cret"))))
            .await
            .unwrap();
        let s = QueueSettings {
            lane: true,
            lane_window_ms: delayq::settings::MIN_LANE_WINDOW_MS,
            ..QueueSettings::with_shards(8)
        };
        b.configure(&QueueName::new("conformance").unwrap(), s)
            .await
            .unwrap();
        (c, b, Time::Real)
    }

    delayq::conformance_tests!(setup);
}
