//! The core's conformance suite with the store behind HTTP: every test drives a
//! `RemoteBackend` whose calls go through the server's API to an embedded store, the test
//! clock moving the server's store.
//!
//! Left out, because over HTTP they are the server's business, not the client's:
//! `wakeups_for_earlier_jobs`, `pause_stops_leasing`, `max_in_flight_in_the_claim`,
//! `several_queues_in_strict_order` and `several_queues_wake_and_pause_each` (they
//! wait for an in-process wake-up; a remote consumer is woken by its long poll instead, and
//! the server's long polls have their own tests in delayq-http), `schedules_fire_once` (the
//! server plans fires on its own clock, so a stored schedule's next fire is the server's, not
//! the one the caller computed), `push_targets_travel` and
//! `delivery_decides_what_a_queue_takes` (they list push queues, which pushers read from the
//! store itself).

use std::time::Duration;

use delayq_client::{Client, RemoteBackend};
use delayq_http::HttpConfig;
use delayq_testkit::Time;

use crate::Server;

async fn setup() -> (Server, RemoteBackend, Time) {
    let server = Server::start(HttpConfig::default()).await;
    let remote = RemoteBackend::new(Client::new(&server.url)).long_poll(Duration::ZERO);
    let time = Time::Driven(server.clock.clone());
    (server, remote, time)
}

delayq_testkit::conformance_tests!(@each setup;
    bad_input_writes_nothing, idempotent_enqueue, never_early, one_owner_and_fencing,
    ack_deletes, nack_retries_then_dead_letters, expired_leases_come_back, cancel_outcomes,
    reschedule, release_undoes_the_attempt, dead_letter_tools, consumer_handles_each_job_once,
    long_errors_are_cut_on_a_character_boundary, listings_page_stably,
    dead_delete_and_cancel_all, series_count_transitions, rate_limit_in_the_claim,
    bad_throttles_are_refused, expired_jobs_are_never_started,
    timeouts_travel_with_the_job, replace_on_conflict, bad_schedules_are_refused,
    retention_and_dedupe, per_job_retention, priorities_order_due_jobs, low_priorities_age,
    due_listing_follows_claim_order, bad_targets_are_refused, counts_match_listings,
    traces_travel_with_the_job, several_queues_share_claims_by_weight,
    several_queues_in_strict_order, several_queues_wake_and_pause_each,
    results_stay_with_done_jobs, results_ride_on_claims, handlers_return_results, keys_share_claims_round_robin,
    key_limits_hold_each_key, keys_pause_and_resume, key_slots_come_back_when_leases_end,
    running_jobs_are_cancelled, consumers_stop_cancelled_handlers,
    cancelled_running_jobs_free_their_key, cancel_running_leaves_dead_and_done_jobs,
    a_keys_jobs_are_listed, a_key_is_cancelled_in_one_call, a_key_is_rescheduled_in_one_call,
    a_keys_parked_jobs_are_listed_cancelled_and_moved);
delayq_testkit::conformance_tests!(@batches setup);
delayq_testkit::conformance_tests!(@deps setup);
