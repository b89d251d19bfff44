//! The API suite: nodes started in this process (`hourglass_server::Node` on port 0 with a
//! temporary data directory) and driven over HTTP on loopback, with a local webhook receiver.
//! One module per area; the harness is in `support/`. The tests that need the `hourglass`
//! process itself (signals, restarts, its logs) are the binary crate's (`crates/hourglass/tests`).
//!
//! `postgres_nodes` needs `HOURGLASS_TEST_DATABASE_URL` (`scripts/test` sets it) and
//! `full_disk` needs root (to mount a tmpfs); both fail, never skip, without them.

#![allow(
    clippy::disallowed_methods,
    reason = "the tests play the API's clients and receivers, whose clock is the wall clock"
)]

mod support;

mod anchors;
mod answer_budget;
mod audit;
mod backfill;
mod bad_input;
mod batched;
mod body_budget;
mod browser_guard;
mod by_key;
mod calendars;
mod callbacks;
mod dashboard;
mod dead_letters;
mod delivery;
mod edit_race;
mod fences;
mod full_disk;
mod http_limits;
mod labels;
mod metrics;
mod openapi;
mod postgres_nodes;
mod preview;
mod queues;
mod retries;
mod roles;
mod summary;
mod targets;
