//! Wake-ups over Pub/Sub: one dedicated connection per backend, subscribed to the wake channel
//! of every queue a consumer waits on. Scripts publish on it when a job arrives ahead of the
//! queue's head; this hub turns messages into bumps of a `watch` counter.
//!
//! The hub heals itself: when the connection drops it reconnects with backoff, resubscribes,
//! and bumps every counter so that consumers claim again (a message sent while it was away is
//! lost, a claim is not).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};

type Senders = Arc<Mutex<HashMap<String, watch::Sender<u64>>>>;
type Request = (String, oneshot::Sender<()>);

/// Owner of the Pub/Sub connection. Dropping it stops its task.
pub(crate) struct WakeHub {
    senders: Senders,
    requests: mpsc::UnboundedSender<Request>,
}

impl WakeHub {
    /// Starts the hub's task on the current runtime.
    pub(crate) fn start(client: redis::Client) -> Self {
        let senders: Senders = Arc::default();
        let (requests, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(client, senders.clone(), rx));
        Self { senders, requests }
    }

    /// A receiver bumped on every wake-up of `channel`; waits until the subscription is live,
    /// at most `timeout`.
    pub(crate) async fn subscribe(
        &self,
        channel: &str,
        timeout: Duration,
    ) -> delayq::Result<watch::Receiver<u64>> {
        let rx = {
            let mut map = self.senders.lock().expect("wake hub lock");
            if let Some(tx) = map.get(channel) {
                return Ok(tx.subscribe());
            }
            let (tx, rx) = watch::channel(0);
            map.insert(channel.to_owned(), tx);
            rx
        };
        let (done, confirmed) = oneshot::channel();
        let unavailable = || delayq::Error::Unavailable("wake-up subscription not live".into());
        self.requests
            .send((channel.to_owned(), done))
            .map_err(|_| unavailable())?;
        match tokio::time::timeout(timeout, confirmed).await {
            Ok(Ok(())) => Ok(rx),
            // Still queued: the hub subscribes it once connected, and bumps the counter then.
            _ => {
                tracing::warn!(channel, "wake-up subscription not confirmed yet");
                Ok(rx)
            }
        }
    }
}

async fn run(
    client: redis::Client,
    senders: Senders,
    mut requests: mpsc::UnboundedReceiver<Request>,
) {
    let mut delay = Duration::from_millis(50);
    let mut subscribed: Vec<String> = Vec::new();
    loop {
        let pubsub =
            match tokio::time::timeout(Duration::from_secs(2), client.get_async_pubsub()).await {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "wake-up connection failed");
                    if requests.is_closed() {
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                    continue;
                }
                Err(_) => continue,
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
        // Anything published while we were away is lost: make every consumer claim again.
        bump_all(&senders);
        loop {
            tokio::select! {
                req = requests.recv() => match req {
                    Some((ch, done)) => {
                        if sink.subscribe(&ch).await.is_err() {
                            subscribed.push(ch);
                            break;
                        }
                        subscribed.push(ch);
                        let _ = done.send(());
                    }
                    None => return,
                },
                msg = stream.next() => match msg {
                    Some(msg) => {
                        let map = senders.lock().expect("wake hub lock");
                        if let Some(tx) = map.get(msg.get_channel_name()) {
                            tx.send_modify(|n| *n = n.wrapping_add(1));
                        }
                    }
                    None => {
                        tracing::info!("wake-up connection lost; reconnecting");
                        break;
                    }
                },
            }
        }
    }
}

fn bump_all(senders: &Senders) {
    for tx in senders.lock().expect("wake hub lock").values() {
        tx.send_modify(|n| *n = n.wrapping_add(1));
    }
}
