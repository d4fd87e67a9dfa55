//! # delayq-push — delivering due jobs as HTTP requests
//!
//! Jobs that carry an HTTP target ([`delayq::Target`], or their queue's default one) are
//! delivered by a [`Pusher`] instead of a worker: at the due time the payload is sent to the
//! target, a `2xx` acknowledges the job, `429`/`503` with `Retry-After` retries after that
//! time, anything else retries by the job's backoff and then dead-letters it with the status
//! and the first bytes of the answer.
//!
//! Parts: [`pusher`] (discovery and one consumer per push queue), [`deliver`] (one request
//! and what its answer means), [`client`] (pooled HTTP/1.1 + HTTP/2 client, rustls, no
//! redirects), [`hosts`] (per-host concurrency and rate), [`signing`] (the
//! [Standard Webhooks](https://www.standardwebhooks.com/) scheme, so that a receiver can check
//! that a request comes from its delayq and was not altered or replayed) and [`ssrf`] (targets
//! resolving to loopback, private, link-local or metadata addresses are refused).

pub mod client;
pub mod deliver;
pub mod hosts;
pub mod pusher;
pub mod signing;
pub mod ssrf;

pub use client::PushError;
pub use hosts::HostLimits;
pub use pusher::{Pusher, PusherOptions, Reloads};
pub use signing::Secret;
