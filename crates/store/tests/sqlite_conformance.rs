//! Runs the store conformance suite against the embedded SQLite backend.

use std::sync::Arc;

use hourglass_store::{SqliteStore, Store};

async fn fresh_store() -> (Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path()).expect("open store");
    (Arc::new(store), dir)
}

hourglass_store::conformance_tests!(fresh_store);
// A move in one transaction, and an anchor's bound in live jobs (DynamoDB's move is not one
// transaction and its bound counts creates: see its `anchors.rs`).
hourglass_store::conformance_tests!(@cases fresh_store; a_reader_never_sees_half_a_move,
    an_anchor_is_bounded_and_moves_all_its_jobs);
