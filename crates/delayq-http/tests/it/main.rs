//! The HTTP API's integration tests, one binary: both stores behind the router, real servers
//! where a test needs one. (One process: the Prometheus recorder is installed once, and each
//! test that reads metrics uses queues of its own.)

#[macro_use]
mod api_harness;
mod common;

mod api;
mod bad_input;
mod budgets;
mod claims;
mod console;
mod floods;
mod fuzz;
mod guard;
mod long_polls;
mod openapi;
mod raw;
mod results;
mod retries;
mod scheduling;
mod schema_check;
mod settings;
mod slow_clients;
mod store_full;
