//! The Redis backend's integration tests, one binary: the servers a test does not need for
//! itself are shared (`delayq_test_support::shared`), each test in a namespace of its own.

mod common;

mod chaos;
mod conformance;
mod consumer;
mod dead_letters;
mod deps;
mod failover;
mod gate;
mod healing;
mod lane;
mod layout;
mod producer;
mod races;
mod restart;
mod scheduling;
mod topologies;
mod upgrade;
mod windows;
