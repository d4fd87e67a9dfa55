//! The PostgreSQL companion against real servers (a throwaway PostgreSQL cluster and
//! redis-server per run, a database and a Redis namespace per test): the schema's versions,
//! `delayq.enqueue` in an application's transaction (commit, rollback, a retried transaction,
//! bad input), the relay on both stores, and its faults.

mod chaos;
mod cold;
mod cold_bulk;
mod cold_topologies;
mod common;
mod faults;
mod migrate;
mod relay;
