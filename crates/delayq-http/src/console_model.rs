//! Bodies of the console endpoints: job listings, the series, and the events of the live
//! stream — the wire crate's types ([`delayq_wire`]).

pub use delayq_wire::{Action, CountsView, JobList, ListQuery, SeriesView, StateQuery};
