//! `delayq serve --push`: the pusher's options from the command line.

use anyhow::bail;
use delayq::{Backend, Inspect, QueueName};
use delayq_push::{HostLimits, Pusher, PusherOptions, Secret};

use crate::args::PushArgs;

/// The pusher `serve` runs, or `None` without `--push`. Checks every option first.
pub(crate) fn pusher<B: Backend + Inspect>(
    a: &PushArgs,
    secrets: Vec<Secret>,
    backend: B,
) -> anyhow::Result<Option<Pusher<B>>> {
    if !a.push {
        let given = !secrets.is_empty()
            || a.allow_private_targets
            || a.push_ca.is_some()
            || !a.push_queues.is_empty();
        if given {
            bail!("push options need --push");
        }
        return Ok(None);
    }
    let queues = if a.push_queues.is_empty() {
        None
    } else {
        Some(
            a.push_queues
                .iter()
                .map(|q| QueueName::new(q.clone()))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    let opts = PusherOptions {
        secrets,
        allow_private: a.allow_private_targets,
        hosts: HostLimits {
            concurrency: a.push_host_concurrency,
            per_s: a.push_host_rate,
            burst: a.push_host_burst,
        },
        concurrency: a.push_concurrency,
        ca: a.push_ca.clone(),
        queues,
        trace_mode: crate::otlp::trace_mode(),
        max_key_hold: std::time::Duration::from_secs(a.push_max_key_hold),
        ..PusherOptions::default()
    };
    Ok(Some(Pusher::new(backend, opts)?))
}
