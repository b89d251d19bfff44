//! Runs the store conformance suite against the in-memory backend. Every case runs: none is
//! specific to a backend. `events_announce_due_work` checks only stores that announce events;
//! this one, like the embedded SQLite store, has no other writers to hear from and announces none.

use std::sync::Arc;

use hourglass_store::{MemoryStore, Store};

async fn fresh_store() -> (Arc<dyn Store>, ()) {
    (Arc::new(MemoryStore::new()), ())
}

hourglass_store::conformance_tests!(fresh_store);
// A move in one transaction, and an anchor's bound in live jobs (DynamoDB's move is not one
// transaction and its bound counts creates: see its `anchors.rs`).
hourglass_store::conformance_tests!(@cases fresh_store; a_reader_never_sees_half_a_move,
    an_anchor_is_bounded_and_moves_all_its_jobs);
