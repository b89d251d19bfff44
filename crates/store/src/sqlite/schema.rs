//! The embedded store's schema: the first version's tables, the migrations since (counted in
//! `PRAGMA user_version`), and how every connection is opened.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::codec::unavailable;
use crate::{Result, StoreError};

pub(super) const SCHEMA: &str = r#"
-- The first version's jobs table; migration 4 rebuilds it with an integer row key.
CREATE TABLE IF NOT EXISTS jobs (
    id            BLOB PRIMARY KEY,
    namespace     TEXT NOT NULL,
    key           TEXT,
    job_type      TEXT,
    state         INTEGER NOT NULL,
    spec          TEXT NOT NULL,
    payload       TEXT,
    fingerprint   INTEGER NOT NULL,
    due_ms        INTEGER,
    -- When the next attempt runs. While claimed: the lease expiry, so an abandoned claim becomes
    -- due again by itself and the due index never has to skip over claimed rows.
    fire_ms       INTEGER,
    attempt       INTEGER NOT NULL DEFAULT 0,
    runs          INTEGER NOT NULL DEFAULT 0,
    skipped       INTEGER NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    -- The fire time before the claim, restored when a claim is released unfired.
    lease_fire_ms INTEGER,
    lease_token   INTEGER NOT NULL DEFAULT 0,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_namespace_key ON jobs(namespace, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_namespace ON jobs(namespace, id);

CREATE TABLE IF NOT EXISTS runs (
    job_id      BLOB NOT NULL,
    due_ms      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    started_ms  INTEGER NOT NULL,
    latency_ms  INTEGER NOT NULL,
    status      INTEGER,
    error       TEXT,
    outcome     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_job ON runs(job_id, started_ms);

CREATE TABLE IF NOT EXISTS dead_letters (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace   TEXT NOT NULL,
    job_id      BLOB NOT NULL,
    due_ms      INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    spec        TEXT NOT NULL,
    payload     TEXT,
    created_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_namespace ON dead_letters(namespace, id);

CREATE TABLE IF NOT EXISTS namespaces (
    name            TEXT PRIMARY KEY,
    signing_secret  TEXT
);
"#;

/// Schema changes after the first release, in order; `PRAGMA user_version` counts the applied
/// ones. Each runs in one transaction with its version bump.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: pull queues. Queue jobs are leased by workers, never fired by the engine, so each kind
    // gets its own due index and neither has to skip over the other's rows.
    "ALTER TABLE jobs ADD COLUMN queue TEXT;
     DROP INDEX IF EXISTS jobs_due;
     CREATE INDEX jobs_due ON jobs(fire_ms) WHERE state = 0 AND queue IS NULL;
     CREATE INDEX jobs_queue_due ON jobs(namespace, queue, fire_ms)
         WHERE state = 0 AND queue IS NOT NULL;",
    // 2: retention. Finished jobs by last change, so the sweep never scans live ones.
    "CREATE INDEX jobs_finished ON jobs(updated_ms) WHERE state >= 2;",
    // 3: signing-secret rotation with an overlap: the replaced secret and until when it counts.
    "ALTER TABLE namespaces ADD COLUMN previous_secret TEXT;
     ALTER TABLE namespaces ADD COLUMN previous_until_ms INTEGER;",
    // 4: jobs keyed by an integer row number (`seq`), the id becoming a unique column. A claim
    // finds its rows by the due index, which now ends in that number, and updates them by it;
    // SQLite rewrites a rowid row in place, where a WITHOUT ROWID row keyed by a 16-byte blob
    // was deleted and inserted again with a blob-compared seek each time. Measured with
    // `examples/queue_cycle` under callgrind: a lease 47,400 → 37,700 instructions a message, an
    // ack 39,000 → 35,300, a create 35,600 → 34,700.
    "CREATE TABLE jobs_v4 (
         seq           INTEGER PRIMARY KEY,
         id            BLOB NOT NULL UNIQUE,
         namespace     TEXT NOT NULL,
         key           TEXT,
         job_type      TEXT,
         state         INTEGER NOT NULL,
         spec          TEXT NOT NULL,
         payload       TEXT,
         fingerprint   INTEGER NOT NULL,
         due_ms        INTEGER,
         -- When the next attempt runs. While claimed: the lease expiry, so an abandoned claim
         -- becomes due again by itself and the due index never has to skip over claimed rows.
         fire_ms       INTEGER,
         attempt       INTEGER NOT NULL DEFAULT 0,
         runs          INTEGER NOT NULL DEFAULT 0,
         skipped       INTEGER NOT NULL DEFAULT 0,
         lease_owner   TEXT,
         -- The occurrence's own fire time while claimed, restored when a claim is released.
         lease_fire_ms INTEGER,
         lease_token   INTEGER NOT NULL DEFAULT 0,
         created_ms    INTEGER NOT NULL,
         updated_ms    INTEGER NOT NULL,
         queue         TEXT
     );
     INSERT INTO jobs_v4 (id, namespace, key, job_type, state, spec, payload, fingerprint, due_ms,
                          fire_ms, attempt, runs, skipped, lease_owner, lease_fire_ms,
                          lease_token, created_ms, updated_ms, queue)
         SELECT id, namespace, key, job_type, state, spec, payload, fingerprint, due_ms,
                fire_ms, attempt, runs, skipped, lease_owner, lease_fire_ms, lease_token,
                created_ms, updated_ms, queue
         FROM jobs ORDER BY id;
     DROP TABLE jobs;
     ALTER TABLE jobs_v4 RENAME TO jobs;
     CREATE UNIQUE INDEX jobs_namespace_key ON jobs(namespace, key) WHERE key IS NOT NULL;
     CREATE INDEX jobs_namespace ON jobs(namespace, id);
     CREATE INDEX jobs_due ON jobs(fire_ms) WHERE state = 0 AND queue IS NULL;
     CREATE INDEX jobs_queue_due ON jobs(namespace, queue, fire_ms)
         WHERE state = 0 AND queue IS NOT NULL;
     CREATE INDEX jobs_finished ON jobs(updated_ms) WHERE state >= 2;",
    // 5: each (namespace, queue) gets an integer key, and the queue due index leads with it
    // instead of two strings: every seek in it (a lease moves each message within it, an ack
    // removes it) compared both strings at each step. `queue` stays beside the key; the two are
    // set together. Measured with `examples/queue_cycle` under callgrind: lease + ack
    // 73,000 → 65,800 instructions a message, a create 34,700 → 32,300.
    "CREATE TABLE queues (
         key        INTEGER PRIMARY KEY,
         namespace  TEXT NOT NULL,
         name       TEXT NOT NULL,
         UNIQUE (namespace, name)
     );
     INSERT INTO queues (namespace, name)
         SELECT DISTINCT namespace, queue FROM jobs WHERE queue IS NOT NULL;
     ALTER TABLE jobs ADD COLUMN queue_key INTEGER;
     UPDATE jobs SET queue_key = (SELECT key FROM queues q
                                  WHERE q.namespace = jobs.namespace AND q.name = jobs.queue)
         WHERE queue IS NOT NULL;
     DROP INDEX jobs_queue_due;
     CREATE INDEX jobs_queue_due ON jobs(queue_key, fire_ms)
         WHERE state = 0 AND queue_key IS NOT NULL;",
    // 6: a leased queue message leaves its queue's due index, and the lease schedule in memory
    // (`sqlite/leases.rs`) says when each lease runs out. A lease then deletes one index entry
    // where it moved one (a delete and an insert), and an ack finds nothing there to delete.
    // Leases never outlive a process here (they are released at open), so the schedule starts
    // empty and complete. Measured with `examples/queue_cycle` under callgrind: see BENCHMARKS.md.
    "DROP INDEX jobs_queue_due;
     CREATE INDEX jobs_queue_due ON jobs(queue_key, fire_ms)
         WHERE state = 0 AND queue_key IS NOT NULL AND lease_owner IS NULL;",
    // 7: the job's last trigger made with an idempotency key, and the due time of the occurrence
    // it made, so a retried trigger answers the same delivery id instead of firing again.
    "ALTER TABLE jobs ADD COLUMN trigger_key TEXT;
     ALTER TABLE jobs ADD COLUMN trigger_due_ms INTEGER;",
    // 8: the start of what the target answered to a failed attempt, kept with its run.
    "ALTER TABLE runs ADD COLUMN response TEXT;",
    // 9: the error of the job's latest failed attempt (at most 1 KiB), written by the completion
    // that records that attempt's run and cleared by a delivery, so a job shows why it is
    // retrying without a read of its runs. Existing jobs start without one.
    "ALTER TABLE jobs ADD COLUMN last_error TEXT;",
    // 10: specs are written packed (`crate::packed`, a BLOB) from here on; rows written before
    // keep their JSON text and read as they are. No table changes: the version alone makes a
    // binary from before packing refuse this store at open, instead of finding its new rows'
    // specs unreadable one by one.
    "SELECT 1;",
    // 11: a claimed fired row leaves the due index, as a leased queue message did in 6, and the
    // lease schedule in memory (`sqlite/leases.rs`) says when each claim runs out. A claim then
    // deletes one index entry where it moved one, and a one-off's completion finds nothing
    // there to delete. Leases never outlive a process here, so the schedule starts complete.
    "DROP INDEX jobs_due;
     CREATE INDEX jobs_due ON jobs(fire_ms)
         WHERE state = 0 AND queue IS NULL AND lease_owner IS NULL;",
    // 12: payloads over `codec::INLINE_PAYLOAD_MAX` bytes are stored out of the job row, which
    // every claim and completion rewrites whole. Rows written before keep theirs inline
    // (`payload_out` 0) and read as they are; a deleted job takes its payload with it.
    "ALTER TABLE jobs ADD COLUMN payload_out INTEGER NOT NULL DEFAULT 0;
     CREATE TABLE job_payloads (
         seq     INTEGER PRIMARY KEY,
         payload TEXT NOT NULL
     );
     CREATE TRIGGER job_payloads_follow AFTER DELETE ON jobs WHEN OLD.payload_out
     BEGIN
         DELETE FROM job_payloads WHERE seq = OLD.seq;
     END;",
    // 13: each namespace's named calendars (`calendars.rs`), their exclusions as JSON. A job
    // keeps its own copy in its spec; this table is what the API edits and reads.
    "CREATE TABLE calendars (
         namespace  TEXT NOT NULL,
         name       TEXT NOT NULL,
         calendar   TEXT NOT NULL,
         updated_ms INTEGER NOT NULL,
         PRIMARY KEY (namespace, name)
     );",
    // 14: the audit log (`sqlite/audit.rs`): one row per API request that changed something.
    "CREATE TABLE audit_log (
         id          INTEGER PRIMARY KEY AUTOINCREMENT,
         namespace   TEXT NOT NULL,
         at_ms       INTEGER NOT NULL,
         key_id      TEXT NOT NULL,
         action      TEXT NOT NULL,
         jobs        TEXT NOT NULL,
         job_count   INTEGER NOT NULL,
         dead_letter INTEGER,
         fields      TEXT NOT NULL
     );
     CREATE INDEX audit_log_namespace ON audit_log(namespace, at_ms, id);",
    // 15: job labels, indexed (`jobs.rs`; the spec keeps the labels too, this table only finds
    // them). A label selector reads `job_labels_pair` (an equality) or `job_labels_key` (an
    // existence) in id order from a listing's cursor, so a page of a namespace's matching jobs
    // costs a page of index entries however many jobs the store holds; the primary key answers
    // whether a job has a label. Jobs made before have no labels: nothing to fill in. A deleted
    // job takes its labels with it.
    "CREATE TABLE job_labels (
         job_id      BLOB NOT NULL,
         label_key   TEXT NOT NULL,
         label_value TEXT NOT NULL,
         namespace   TEXT NOT NULL,
         PRIMARY KEY (job_id, label_key)
     ) WITHOUT ROWID;
     CREATE INDEX job_labels_pair ON job_labels(namespace, label_key, label_value, job_id);
     CREATE INDEX job_labels_key ON job_labels(namespace, label_key, job_id);
     CREATE TRIGGER job_labels_follow AFTER DELETE ON jobs
     BEGIN
         DELETE FROM job_labels WHERE job_id = OLD.id;
     END;",
    // 16: anchors (`anchors.rs`): each namespace's named instants, and each job's anchor name
    // (copied from its spec's schedule), indexed so that a move reads only its own jobs.
    "CREATE TABLE anchors (
         namespace  TEXT NOT NULL,
         name       TEXT NOT NULL,
         at_ms      INTEGER NOT NULL,
         updated_ms INTEGER NOT NULL,
         PRIMARY KEY (namespace, name)
     );
     ALTER TABLE jobs ADD COLUMN anchor TEXT;
     CREATE INDEX jobs_anchor ON jobs(namespace, anchor, state) WHERE anchor IS NOT NULL;",
    // 17: the calendar or anchor an audit entry's put or delete concerns (`audit.rs`); empty
    // for the entries written before, none of which concerned one.
    "ALTER TABLE audit_log ADD COLUMN name TEXT;",
];

pub(super) fn migrate(conn: &Connection) -> Result<()> {
    migrate_to(conn, MIGRATIONS.len())
}

/// Applies the migrations up to schema version `version` (tests make older stores with it).
pub(super) fn migrate_to(conn: &Connection, version: usize) -> Result<()> {
    let applied: usize = conn
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map_err(unavailable)? as usize;
    if applied > MIGRATIONS.len() {
        return Err(StoreError::Unavailable(format!(
            "the store has schema version {applied}, newer than this binary's {}",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().take(version).skip(applied) {
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {sql}; PRAGMA user_version = {}; COMMIT;",
            i + 1
        ))
        .map_err(|e| {
            let _ = conn.execute_batch("ROLLBACK");
            StoreError::Unavailable(format!("schema migration {} failed: {e}", i + 1))
        })?;
    }
    Ok(())
}

pub(super) fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).map_err(unavailable)?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(unavailable)?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = OFF;
         PRAGMA temp_store = MEMORY;",
    )
    .map_err(unavailable)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}
