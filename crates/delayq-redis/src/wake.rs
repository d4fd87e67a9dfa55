//! Wake-ups over Pub/Sub: one dedicated connection per backend, subscribed to the wake channel
//! of every queue shard a consumer waits on. Scripts publish on it when a job arrives ahead of
//! the shard's head; this hub calls the channel's [`Notify`] for each message.
//!
//! On one server (or the master the sentinels name) it is a RESP2 `SUBSCRIBE` connection,
//! pinged every [`crate::ConnectOptions::health_check`] so that a silently dead socket is noticed and replaced. On a
//! Cluster it is a RESP3 cluster connection using sharded Pub/Sub (`SSUBSCRIBE`, Redis ≥ 7.0):
//! each channel lives on the node of its shard's slot, so a wake-up is not broadcast to every
//! node, and the redis crate resubscribes after a failover or slot move.
//!
//! The hub heals itself: whenever the connection is (re)established every notifier is called,
//! so consumers claim again (a message sent while it was away is lost, a claim is not).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use redis::{ProtocolVersion, PushKind, Value};
use tokio::sync::{mpsc, oneshot};

use crate::conn::{cluster_builder, confirm_master, master_client};
use crate::target::{Target, Topology};

/// Called on every wake-up of a channel (and after every reconnection).
pub(crate) type Notify = Arc<dyn Fn() + Send + Sync>;
type Notifiers = Arc<Mutex<HashMap<String, Notify>>>;
type Request = (String, oneshot::Sender<()>);

/// Owner of the Pub/Sub connection. Dropping it stops its task.
pub(crate) struct WakeHub {
    notifiers: Notifiers,
    requests: mpsc::UnboundedSender<Request>,
}

impl WakeHub {
    /// Starts the hub's task on the current runtime.
    pub(crate) fn start(target: Target) -> Self {
        let notifiers: Notifiers = Arc::default();
        let (requests, rx) = mpsc::unbounded_channel();
        if matches!(target.topology, Topology::Cluster(_)) {
            tokio::spawn(run_cluster(target, notifiers.clone(), rx));
        } else {
            tokio::spawn(run(target, notifiers.clone(), rx));
        }
        Self {
            notifiers,
            requests,
        }
    }

    /// Calls `notify` on every wake-up of `channel`; waits until the subscription is live, at
    /// most `timeout` (after that it is still made, and `notify` is called once it is).
    pub(crate) async fn subscribe(&self, channel: &str, notify: Notify, timeout: Duration) {
        {
            let mut map = self.notifiers.lock().expect("wake hub lock");
            if map.contains_key(channel) {
                return;
            }
            map.insert(channel.to_owned(), notify);
        }
        let (done, confirmed) = oneshot::channel();
        if self.requests.send((channel.to_owned(), done)).is_err() {
            return;
        }
        if !matches!(tokio::time::timeout(timeout, confirmed).await, Ok(Ok(()))) {
            tracing::warn!(channel, "wake-up subscription not confirmed yet");
        }
    }
}

fn notify(notifiers: &Notifiers, channel: &[u8]) {
    let f = {
        let map = notifiers.lock().expect("wake hub lock");
        std::str::from_utf8(channel)
            .ok()
            .and_then(|c| map.get(c).cloned())
    };
    if let Some(f) = f {
        f();
    }
}

fn notify_all(notifiers: &Notifiers) {
    let all: Vec<Notify> = notifiers
        .lock()
        .expect("wake hub lock")
        .values()
        .cloned()
        .collect();
    for f in all {
        f();
    }
}

/// One server or Sentinel: RESP2 Pub/Sub with a periodic `PING`.
async fn run(target: Target, notifiers: Notifiers, mut requests: mpsc::UnboundedReceiver<Request>) {
    let mut delay = Duration::from_millis(50);
    let mut subscribed: Vec<String> = Vec::new();
    loop {
        let client = match &target.topology {
            Topology::Single(info) => crate::conn::client(&target, info.clone()),
            _ => master_client(&target).await,
        };
        // Under Sentinel, kept only if the sentinels still name the server it reached (an old
        // master restarted empty would never hear a wake-up the real master publishes).
        let connect = async {
            let client = client?;
            let pubsub = client.get_async_pubsub().await?;
            confirm_master(&target, client.get_connection_info().addr()).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let pubsub = match tokio::time::timeout(Duration::from_secs(2), connect).await {
            Ok(Ok(p)) => p,
            other => {
                if let Ok(Err(e)) = other {
                    tracing::debug!(error = %e, "wake-up connection failed");
                }
                if requests.is_closed() {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        let (mut sink, mut stream) = pubsub.split();
        let mut ok = true;
        for ch in &subscribed {
            if sink.subscribe(ch).await.is_err() {
                ok = false;
                break;
            }
        }
        if !ok {
            continue;
        }
        delay = Duration::from_millis(50);
        notify_all(&notifiers);
        let mut health = tokio::time::interval(target.health_check);
        health.tick().await;
        loop {
            tokio::select! {
                req = requests.recv() => match req {
                    Some((ch, done)) => {
                        let res = sink.subscribe(&ch).await;
                        subscribed.push(ch);
                        if res.is_err() {
                            break;
                        }
                        let _ = done.send(());
                    }
                    None => return,
                },
                msg = stream.next() => match msg {
                    Some(msg) => notify(&notifiers, msg.get_channel_name().as_bytes()),
                    None => {
                        tracing::info!("wake-up connection lost; reconnecting");
                        break;
                    }
                },
                _ = health.tick() => {
                    let ping = tokio::time::timeout(Duration::from_secs(5), sink.ping::<Value>());
                    if !matches!(ping.await, Ok(Ok(_))) {
                        tracing::warn!("wake-up connection did not answer PING; replacing it");
                        break;
                    }
                }
            }
        }
    }
}

/// Cluster: sharded Pub/Sub over a RESP3 cluster connection that resubscribes by itself.
async fn run_cluster(
    target: Target,
    notifiers: Notifiers,
    mut requests: mpsc::UnboundedReceiver<Request>,
) {
    let Topology::Cluster(seeds) = &target.topology else {
        unreachable!()
    };
    let mut delay = Duration::from_millis(50);
    let mut subscribed: Vec<String> = Vec::new();
    loop {
        let (push_tx, mut pushes) = mpsc::unbounded_channel();
        let connect = async {
            cluster_builder(&target, seeds)
                .use_protocol(ProtocolVersion::RESP3)
                .push_sender(push_tx)
                .build()?
                .get_async_connection()
                .await
        };
        let mut conn = match tokio::time::timeout(Duration::from_secs(4), connect).await {
            Ok(Ok(c)) => c,
            other => {
                if let Ok(Err(e)) = other {
                    tracing::debug!(error = %e, "wake-up connection failed");
                }
                if requests.is_closed() {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        let mut ok = true;
        for ch in &subscribed {
            if conn.ssubscribe(ch).await.is_err() {
                ok = false;
                break;
            }
        }
        if !ok {
            tokio::time::sleep(delay).await;
            continue;
        }
        delay = Duration::from_millis(50);
        notify_all(&notifiers);
        loop {
            tokio::select! {
                req = requests.recv() => match req {
                    Some((ch, done)) => {
                        let res = conn.ssubscribe(&ch).await;
                        subscribed.push(ch);
                        if res.is_err() {
                            break;
                        }
                        let _ = done.send(());
                    }
                    None => return,
                },
                push = pushes.recv() => match push {
                    Some(p) => match p.kind {
                        PushKind::SMessage | PushKind::Message => {
                            if let Some(Value::BulkString(ch)) = p.data.first() {
                                notify(&notifiers, ch);
                            }
                        }
                        // A node's connection dropped or a slot moved: the crate resubscribes;
                        // anything published meanwhile is lost, so claim again.
                        PushKind::Disconnection | PushKind::SUnsubscribe => notify_all(&notifiers),
                        _ => {}
                    },
                    None => break,
                },
            }
        }
    }
}
