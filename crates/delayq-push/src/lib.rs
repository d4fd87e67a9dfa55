//! # delayq-push — delivering due jobs as HTTP requests
//!
//! Jobs that carry an HTTP target are delivered by a pusher instead of a consumer. This crate
//! holds the parts of it that stand on their own; [`signing`] signs and verifies requests by
//! the [Standard Webhooks](https://www.standardwebhooks.com/) scheme, so that a receiver can
//! check that a request comes from its delayq and was not altered or replayed; [`ssrf`]
//! refuses targets that resolve to loopback, private, link-local or metadata addresses.

pub mod signing;
pub mod ssrf;
