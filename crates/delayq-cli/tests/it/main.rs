//! The `delayq` binary's integration tests, one test binary: each test runs the binary (and
//! the servers it needs) itself.

mod common;

mod architecture;
mod batches;
mod cli;
mod clients;
mod clock;
mod config;
mod console;
mod console_batches;
mod console_cold;
mod console_jobs;
mod deadlines;
mod deploy;
mod first_hour;
mod postgres;
mod push;
mod python;
mod queues;
mod readme;
mod release;
mod results;
mod schedules;
mod ship;
mod startup;
mod topologies;
mod trace;
mod trace_export;
mod worker_crash;
mod workers;
