//! The embedded store's integration tests, one binary.

mod conformance;
mod crash;
mod engine;
mod scheduling;
mod spans;
mod upgrade;
