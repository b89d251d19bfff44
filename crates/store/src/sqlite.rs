//! The embedded store: one SQLite file in WAL mode with `synchronous=FULL`, so a commit is on disk
//! before its caller hears about it.
//!
//! All writes go through one writer thread that group-commits: it takes every request waiting in
//! its queue, runs each inside its own savepoint, commits once, and only then answers them all. A
//! thousand concurrent creates cost one fsync. Reads run on a small pool of separate connections,
//! which WAL lets proceed while the writer works.
//!
//! The data directory is locked exclusively, so exactly one node uses it; at open every lease left
//! by a previous (crashed) process is released, and its claimed occurrences fire again at once.
//! Leased queue messages are not in their queue's due index; `leases.rs` keeps when each lease
//! runs out.

mod leases;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hourglass_core::{Completion, JobId, JobSpec, JobState, Occurrence, from_ms};
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, Row, params};
use tokio::sync::{mpsc, oneshot};

use self::leases::{Entry, LeaseSchedule};
use crate::rules::{
    PlannedRun, RowChange, TransitionPlan, plan_completion, plan_transition, plan_update,
    state_code, state_from_code,
};
use crate::{
    Applied, ClaimScope, Created, DeadLetter, JobQuery, JobRecord, JobUpdate, KeyedTrigger, Lease,
    NewJob, PURGE_DEAD_LETTERS, Purged, QueueStats, Release, Result, RunCursor, RunRecord,
    SigningSecrets, Store, StoreError, StoreGauges, Transition,
};

/// How many queued requests one transaction may take. Bounds the latency one commit adds.
const MAX_GROUP: usize = 512;
/// Requests waiting for the writer. When full, callers wait: this is the store's backpressure.
const WRITE_QUEUE: usize = 4096;

const SCHEMA: &str = r#"
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
const MIGRATIONS: &[&str] = &[
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
];

const JOB_COLUMNS: &str = "id, namespace, key, state, spec, payload, due_ms, attempt, runs, skipped, created_ms, updated_ms, lease_token, trigger_key, trigger_due_ms";

type Reply = Box<dyn FnOnce(Option<StoreError>) + Send>;
/// A unit of work for the writer. It gets no connection when the transaction could not begin.
type WriteJob = Box<dyn FnOnce(Option<&Connection>) -> (bool, Reply) + Send>;

pub struct SqliteStore {
    writer: mpsc::Sender<WriteJob>,
    /// When each leased queue message's lease runs out; see `leases.rs`.
    leases: Arc<LeaseSchedule>,
    readers: Arc<ReaderPool>,
    path: PathBuf,
    /// Held for the store's lifetime: the OS lock that keeps a second node off this directory.
    _lock: File,
    /// A test seam, off (-1) outside tests: see [`commit_fault`].
    #[cfg_attr(not(test), allow(dead_code, reason = "set only by the unit tests"))]
    commit_faults: Arc<AtomicI64>,
}

/// Whether the group commit about to run must fail, as a full disk would make it. `faults` at
/// n ≥ 0 lets n more commits through and fails the one after; -1 is off. Only the unit tests
/// below set it: a failed commit is otherwise hard to bring about at a chosen moment.
fn commit_fault(faults: &AtomicI64) -> bool {
    faults
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n >= 0).then(|| n - 1)
        })
        .is_ok_and(|n| n == 0)
}

struct ReaderPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store in `dir`, taking an exclusive lock on it.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Unavailable(format!("cannot create {}: {e}", dir.display()))
        })?;
        let lock = File::create(dir.join("LOCK"))
            .map_err(|e| StoreError::Unavailable(format!("cannot create lock file: {e}")))?;
        lock.try_lock().map_err(|_| {
            StoreError::Unavailable(format!(
                "{} is in use by another hourglass process",
                dir.display()
            ))
        })?;
        let path = dir.join("hourglass.db");
        let conn = open_connection(&path)?;
        // The writer inserts into the due-time index at random positions (due times are not
        // creation order), so its working set is the whole index; SQLite's default 2 MB page
        // cache made large submits read pages back again and again.
        conn.execute_batch("PRAGMA cache_size = -32768;")
            .map_err(unavailable)?;
        conn.execute_batch(SCHEMA).map_err(unavailable)?;
        migrate(&conn)?;
        // Single node by construction (the lock above): every lease belongs to a dead process.
        let released = conn
            .execute(
                "UPDATE jobs SET fire_ms = lease_fire_ms, lease_owner = NULL, lease_fire_ms = NULL
                 WHERE lease_owner IS NOT NULL AND state = 0",
                [],
            )
            .map_err(unavailable)?;
        if released > 0 {
            tracing::info!(released, "released claims left by a previous process");
        }
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let commit_faults = Arc::new(AtomicI64::new(-1));
        let faults = commit_faults.clone();
        std::thread::Builder::new()
            .name("hourglass-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, &faults))
            .map_err(|e| StoreError::Unavailable(format!("cannot start writer thread: {e}")))?;
        Ok(Self {
            writer: tx,
            leases: Arc::default(),
            readers: Arc::new(ReaderPool {
                path: path.clone(),
                idle: Mutex::new(Vec::new()),
            }),
            path,
            _lock: lock,
            commit_faults,
        })
    }

    /// The database file, for operators and the bench's footprint figures.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` inside the next group commit; answers only after the commit is durable.
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: WriteJob = Box::new(move |conn| {
            let result = match conn {
                Some(conn) => f(conn),
                None => Err(StoreError::Unavailable("cannot begin a transaction".into())),
            };
            let ok = result.is_ok();
            let reply: Reply = Box::new(move |commit_error| {
                let _ = tx.send(match commit_error {
                    Some(e) => Err(e),
                    None => result,
                });
            });
            (ok, reply)
        });
        self.writer
            .send(job)
            .await
            .map_err(|_| StoreError::Unavailable("store is closed".into()))?;
        rx.await
            .map_err(|_| StoreError::Unavailable("store writer stopped".into()))?
    }

    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let pool = self.readers.clone();
        tokio::task::spawn_blocking(move || {
            let conn = match pool.idle.lock().expect("reader pool poisoned").pop() {
                Some(conn) => conn,
                None => open_connection(&pool.path)?,
            };
            let result = f(&conn);
            pool.idle.lock().expect("reader pool poisoned").push(conn);
            result
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("reader task failed: {e}")))?
    }
}

fn migrate(conn: &Connection) -> Result<()> {
    let applied: usize = conn
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map_err(unavailable)? as usize;
    if applied > MIGRATIONS.len() {
        return Err(StoreError::Unavailable(format!(
            "the store has schema version {applied}, newer than this binary's {}",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
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

fn open_connection(path: &Path) -> Result<Connection> {
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

fn writer_loop(conn: Connection, mut rx: mpsc::Receiver<WriteJob>, faults: &AtomicI64) {
    let mut group: Vec<WriteJob> = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = rx.blocking_recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let began = conn.execute_batch("BEGIN IMMEDIATE").is_ok();
        let mut replies = Vec::with_capacity(group.len());
        for job in group.drain(..) {
            if !began {
                replies.push(job(None).1);
                continue;
            }
            if conn.execute_batch("SAVEPOINT op").is_err() {
                replies.push(job(None).1);
                continue;
            }
            let (ok, reply) = job(Some(&conn));
            let end = if ok {
                "RELEASE op"
            } else {
                "ROLLBACK TO op; RELEASE op"
            };
            if let Err(e) = conn.execute_batch(end) {
                tracing::error!(error = %e, "savepoint cleanup failed");
            }
            replies.push(reply);
        }
        let commit_error = if began {
            let committed = if commit_fault(faults) {
                Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                    Some("injected by a test".into()),
                ))
            } else {
                conn.execute_batch("COMMIT")
            };
            committed.err().map(|e| {
                tracing::error!(error = %e, "group commit failed; answering every request with the error");
                let _ = conn.execute_batch("ROLLBACK");
                unavailable(e)
            })
        } else {
            None
        };
        for reply in replies {
            reply(commit_error.clone());
        }
    }
}

fn unavailable(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

fn encode_spec(spec: &JobSpec) -> String {
    serde_json::to_string(spec).expect("job spec serializes")
}

fn decode_spec(text: &str) -> Result<JobSpec> {
    serde_json::from_str(text).map_err(corrupt)
}

fn id_from_blob(bytes: Vec<u8>) -> Result<JobId> {
    JobId::from_slice(&bytes).map_err(corrupt)
}

fn job_from_row(row: &Row<'_>) -> Result<JobRecord> {
    let get_err = |e: rusqlite::Error| corrupt(e);
    let spec: String = row.get(4).map_err(get_err)?;
    Ok(JobRecord {
        id: id_from_blob(row.get(0).map_err(get_err)?)?,
        namespace: row.get(1).map_err(get_err)?,
        key: row.get(2).map_err(get_err)?,
        state: state_from_code(row.get(3).map_err(get_err)?)?,
        spec: decode_spec(&spec)?,
        payload: row.get(5).map_err(get_err)?,
        next_due: row.get::<_, Option<i64>>(6).map_err(get_err)?.map(from_ms),
        attempt: row.get(7).map_err(get_err)?,
        runs: row.get::<_, i64>(8).map_err(get_err)? as u64,
        skipped: row.get::<_, i64>(9).map_err(get_err)? as u64,
        created_at: from_ms(row.get(10).map_err(get_err)?),
        updated_at: from_ms(row.get(11).map_err(get_err)?),
        token: row.get(12).map_err(get_err)?,
        last_trigger: match (
            row.get::<_, Option<String>>(13).map_err(get_err)?,
            row.get::<_, Option<i64>>(14).map_err(get_err)?,
        ) {
            (Some(key), Some(due)) => Some(KeyedTrigger {
                key,
                due: from_ms(due),
            }),
            _ => None,
        },
    })
}

fn query_jobs(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> Result<Vec<JobRecord>> {
    let mut stmt = conn.prepare_cached(sql).map_err(unavailable)?;
    let mut rows = stmt.query(params).map_err(unavailable)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(unavailable)? {
        out.push(job_from_row(row)?);
    }
    Ok(out)
}

/// Loads one job, scoped to a namespace unless `namespace` is `None`.
fn load_job(conn: &Connection, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
    let sql =
        format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1 AND (?2 IS NULL OR namespace = ?2)");
    Ok(
        query_jobs(conn, &sql, &[&id.as_bytes().as_slice(), &namespace])?
            .into_iter()
            .next(),
    )
}

/// The key of a namespace's queue, given it on first use.
fn queue_key(conn: &Connection, namespace: &str, queue: &str) -> Result<i64> {
    if let Some(key) = find_queue_key(conn, namespace, queue)? {
        return Ok(key);
    }
    conn.prepare_cached("INSERT INTO queues (namespace, name) VALUES (?1, ?2)")
        .map_err(unavailable)?
        .execute(params![namespace, queue])
        .map_err(unavailable)?;
    Ok(conn.last_insert_rowid())
}

/// The key of a namespace's queue, if it was ever used.
fn find_queue_key(conn: &Connection, namespace: &str, queue: &str) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT key FROM queues WHERE namespace = ?1 AND name = ?2")
        .map_err(unavailable)?
        .query_row(params![namespace, queue], |r| r.get(0))
        .optional()
        .map_err(unavailable)
}

/// Queue keys looked up so far, within one write: a batch's jobs mostly share a queue or two.
#[derive(Default)]
struct QueueKeys(Vec<(String, String, i64)>);

impl QueueKeys {
    /// The queue key a job with `spec` in `namespace` is stored with: none for fired targets.
    fn of(&mut self, conn: &Connection, namespace: &str, spec: &JobSpec) -> Result<Option<i64>> {
        let Some(queue) = spec.target.queue() else {
            return Ok(None);
        };
        if let Some((.., key)) = self
            .0
            .iter()
            .find(|(ns, name, _)| ns == namespace && name == queue)
        {
            return Ok(Some(*key));
        }
        let key = queue_key(conn, namespace, queue)?;
        self.0.push((namespace.to_owned(), queue.to_owned(), key));
        Ok(Some(key))
    }
}

fn insert_job(conn: &Connection, job: &NewJob, queue_key: Option<i64>) -> Result<()> {
    let now = job.now.as_millisecond();
    let due = job.first_due.as_millisecond();
    conn.prepare_cached(
        "INSERT INTO jobs (id, namespace, key, job_type, state, spec, payload, fingerprint,
                           due_ms, fire_ms, created_ms, updated_ms, queue, queue_key)
         VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?8, ?9, ?9, ?10, ?11)",
    )
    .map_err(unavailable)?
    .execute(params![
        job.id.as_bytes().as_slice(),
        job.namespace,
        job.key,
        job.spec.job_type,
        encode_spec(&job.spec),
        job.payload,
        job.fingerprint,
        due,
        now,
        job.spec.target.queue(),
        queue_key,
    ])
    .map_err(unavailable)?;
    Ok(())
}

fn create_in_tx(conn: &Connection, jobs: Vec<NewJob>) -> Result<Vec<Created>> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut queue_keys = QueueKeys::default();
    for (index, job) in jobs.into_iter().enumerate() {
        if let Some(key) = &job.key {
            let existing: Option<(Vec<u8>, i64)> = conn
                .prepare_cached(
                    "SELECT id, fingerprint FROM jobs WHERE namespace = ?1 AND key = ?2",
                )
                .map_err(unavailable)?
                .query_row(params![job.namespace, key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(unavailable)?;
            if let Some((id, fingerprint)) = existing {
                let id = id_from_blob(id)?;
                if fingerprint != job.fingerprint {
                    return Err(StoreError::KeyConflict {
                        index,
                        key: key.clone(),
                        existing: id,
                    });
                }
                let record = load_job(conn, None, id)?.ok_or(StoreError::NotFound)?;
                out.push(Created::Existing(record));
                continue;
            }
        }
        let queue_key = queue_keys.of(conn, &job.namespace, &job.spec)?;
        insert_job(conn, &job, queue_key)?;
        out.push(Created::New(job.into_record()));
    }
    Ok(out)
}

/// A claim scope in owned form, so it can travel to the writer thread.
enum Scope {
    Fired,
    Queue {
        namespace: String,
        queue: String,
        types: Option<Vec<String>>,
    },
}

impl Scope {
    fn from(scope: ClaimScope<'_>) -> Self {
        match scope {
            ClaimScope::Fired => Scope::Fired,
            ClaimScope::Queue {
                namespace,
                queue,
                types,
            } => Scope::Queue {
                namespace: namespace.to_owned(),
                queue: queue.to_owned(),
                types: types.map(<[String]>::to_vec),
            },
        }
    }
}

/// The occurrence's own fire time is `fire_ms` when unclaimed. A row still marked as leased is
/// being claimed again because that lease lapsed: its `fire_ms` is the lapsed lease's expiry, and
/// its fire time is the one the first claim kept in `lease_fire_ms` (which may still lie ahead,
/// if the lease was shorter than the claimer's lookahead).
macro_rules! own_fire_ms {
    () => {
        "CASE WHEN lease_owner IS NULL THEN fire_ms ELSE COALESCE(lease_fire_ms, fire_ms) END"
    };
}
const OWN_FIRE_MS: &str = own_fire_ms!();

/// What a claim reads: the occurrence's own fire time is the sixth column; the row number, by
/// which the claim then updates the row without another lookup by id, the eleventh.
const CLAIM_COLUMNS: &str = concat!(
    "id, namespace, spec, payload, due_ms, ",
    own_fire_ms!(),
    ", attempt, lease_token, runs, lease_owner, seq"
);

/// A claimed row as the writer read it. Its spec is decoded by the caller, off the writer thread,
/// which every write waits for.
struct Claimed {
    job_id: JobId,
    namespace: String,
    spec: String,
    payload: Option<String>,
    due_ms: i64,
    fire_ms: i64,
    attempt: u32,
    token: i64,
    runs: u64,
}

impl Claimed {
    fn into_occurrence(self) -> Result<Occurrence> {
        Ok(Occurrence {
            job_id: self.job_id,
            namespace: self.namespace.into(),
            due: from_ms(self.due_ms),
            fire_at: from_ms(self.fire_ms),
            attempt: self.attempt,
            token: self.token,
            runs_done: self.runs,
            spec: Arc::new(decode_spec(&self.spec)?),
            payload: self.payload.map(Into::into),
        })
    }
}

fn claim_rows(
    conn: &Connection,
    scope: &Scope,
    horizon: i64,
    limit: usize,
    lease: &Lease,
    leases: &LeaseSchedule,
    taken: &mut Vec<(JobId, Entry)>,
) -> Result<Vec<Claimed>> {
    let now = lease.now.as_millisecond();
    let lease_until = now.saturating_add(hourglass_core::duration_ms(lease.ttl));
    let mut claimed = Vec::new();
    // Per claimed row: whether its earlier lease lapsed, and its row number.
    let mut rows_to_claim = Vec::new();
    let mut picked = Picked {
        is_queue: matches!(scope, Scope::Queue { .. }),
        claimed: &mut claimed,
        rows: &mut rows_to_claim,
        taken,
    };
    let queue_key = match scope {
        Scope::Fired => {
            // A row still leased (its fire time is the lease expiry) is claimable only once that
            // expiry has passed by the claimer's clock, even when it lies within the horizon.
            let mut select = conn
                .prepare_cached(&format!(
                    "SELECT {CLAIM_COLUMNS} FROM jobs
                     WHERE state = 0 AND queue IS NULL AND fire_ms <= ?1
                       AND (lease_owner IS NULL OR fire_ms <= ?3)
                     ORDER BY fire_ms LIMIT ?2"
                ))
                .map_err(unavailable)?;
            let mut rows = select
                .query(params![horizon, limit as i64, now])
                .map_err(unavailable)?;
            while let Some(row) = rows.next().map_err(unavailable)? {
                picked.push(row)?;
            }
            None
        }
        Scope::Queue {
            namespace,
            queue,
            types,
        } => {
            let Some(key) = find_queue_key(conn, namespace, queue)? else {
                return Ok(Vec::new());
            };
            let types = types.as_deref();
            take_lapsed(conn, key, types, now, limit, leases, &mut picked)?;
            claim_unleased(conn, key, types, horizon, limit, &mut picked)?;
            Some(key)
        }
    };
    let mut update = conn
        .prepare_cached(&format!(
            "UPDATE jobs SET fire_ms = ?2, lease_fire_ms = {OWN_FIRE_MS}, lease_owner = ?3,
                                 lease_token = lease_token + 1, attempt = attempt + ?4
                 WHERE seq = ?1"
        ))
        .map_err(unavailable)?;
    for &(lapsed, seq) in &rows_to_claim {
        update
            .execute(params![seq, lease_until, lease.owner, lapsed as i64])
            .map_err(unavailable)?;
    }
    if let Some(queue_key) = queue_key {
        leases.add_all(claimed.iter().zip(rows_to_claim).map(|(c, (lapsed, seq))| {
            // A lapsed lease taken again is looked at once more right away: should this
            // transaction not commit, the row keeps the lapsed lease, and its entry must not wait
            // for the new expiry. The look finds the new lease and moves the entry to its expiry.
            let check_at = if lapsed { now } else { lease_until };
            let entry = Entry {
                seq,
                queue_key,
                token: c.token,
                check_at,
            };
            (c.job_id, entry)
        }));
    }
    Ok(claimed)
}

/// What a claim has picked so far: the messages, and per message whether an earlier lease of it
/// lapsed and its row number; and the entries it took from the lease schedule, to be put back if
/// the claim fails.
struct Picked<'a> {
    is_queue: bool,
    claimed: &'a mut Vec<Claimed>,
    rows: &'a mut Vec<(bool, i64)>,
    taken: &'a mut Vec<(JobId, Entry)>,
}

impl Picked<'_> {
    fn push(&mut self, row: &Row<'_>) -> Result<()> {
        let (c, lapsed, seq) = read_claimed(row, self.is_queue)?;
        self.claimed.push(c);
        self.rows.push((lapsed, seq));
        Ok(())
    }

    fn len(&self) -> usize {
        self.claimed.len()
    }
}

/// Reads a row of `CLAIM_COLUMNS` into the message a claim hands out, whether an earlier lease
/// of it lapsed, and its row number.
fn read_claimed(row: &Row<'_>, is_queue: bool) -> Result<(Claimed, bool, i64)> {
    let mut attempt: u32 = row.get(6).map_err(corrupt)?;
    let token: i64 = row.get(7).map_err(corrupt)?;
    let runs: i64 = row.get(8).map_err(corrupt)?;
    // A queue message still marked as leased is claimed again because its lease ran out unacked:
    // that lease was a failed attempt.
    let lapsed = is_queue && row.get::<_, Option<String>>(9).map_err(corrupt)?.is_some();
    if lapsed {
        attempt += 1;
    }
    let claimed = Claimed {
        job_id: id_from_blob(row.get(0).map_err(corrupt)?)?,
        namespace: row.get(1).map_err(corrupt)?,
        spec: row.get(2).map_err(corrupt)?,
        payload: row.get(3).map_err(corrupt)?,
        due_ms: row.get(4).map_err(corrupt)?,
        fire_ms: row.get(5).map_err(corrupt)?,
        attempt: attempt + 1,
        token: token + 1,
        runs: runs as u64,
    };
    Ok((claimed, lapsed, row.get(10).map_err(corrupt)?))
}

/// Takes the queue's lapsed leases, earliest expiry first, up to `limit`, looking at each row:
/// an entry whose lease has ended is dropped, one whose lease was extended goes back at its new
/// expiry, and one of a type this claim does not take stays for another claim.
fn take_lapsed(
    conn: &Connection,
    queue_key: i64,
    types: Option<&[String]>,
    now: i64,
    limit: usize,
    leases: &LeaseSchedule,
    picked: &mut Picked<'_>,
) -> Result<()> {
    let mut kept = Vec::new();
    let mut look = conn
        .prepare_cached(&format!(
            "SELECT {CLAIM_COLUMNS}, job_type, fire_ms FROM jobs
             WHERE seq = ?1 AND id = ?2 AND state = 0 AND lease_owner IS NOT NULL
               AND queue_key = ?3"
        ))
        .map_err(unavailable)?;
    while picked.len() < limit {
        let Some((job, entry)) = leases.pop_due(queue_key, now) else {
            break;
        };
        picked.taken.push((job, entry));
        // The row must still be on this queue: an entry outlives an edit that moved its job to
        // another queue or to a webhook, whose new lease is not this queue's to take.
        let mut rows = look
            .query(params![entry.seq, job.as_bytes().as_slice(), queue_key])
            .map_err(unavailable)?;
        let Some(row) = rows.next().map_err(unavailable)? else {
            continue;
        };
        let token: i64 = row.get(7).map_err(corrupt)?;
        let expiry: i64 = row.get(12).map_err(corrupt)?;
        if expiry > now {
            kept.push((
                job,
                Entry {
                    token,
                    check_at: expiry,
                    ..entry
                },
            ));
            continue;
        }
        if let Some(types) = types {
            let job_type: Option<String> = row.get(11).map_err(corrupt)?;
            if !job_type.is_some_and(|t| types.contains(&t)) {
                kept.push((job, Entry { token, ..entry }));
                continue;
            }
        }
        picked.push(row)?;
    }
    for (job, entry) in kept {
        leases.add(job, entry);
    }
    Ok(())
}

/// Fills the claim up to `limit` with the queue's unleased messages due by `horizon`, in due
/// order.
fn claim_unleased(
    conn: &Connection,
    queue_key: i64,
    types: Option<&[String]>,
    horizon: i64,
    limit: usize,
    picked: &mut Picked<'_>,
) -> Result<()> {
    if picked.len() >= limit {
        return Ok(());
    }
    // Types filter: a JSON array checked with json_each, so one cached statement serves every
    // filter. `lease_owner IS NULL` lets SQLite use the partial due index.
    let mut select = conn
        .prepare_cached(&format!(
            "SELECT {CLAIM_COLUMNS} FROM jobs
             WHERE state = 0 AND queue_key = ?3 AND lease_owner IS NULL AND fire_ms <= ?1
               AND (?4 IS NULL OR job_type IN (SELECT value FROM json_each(?4)))
             ORDER BY fire_ms LIMIT ?2"
        ))
        .map_err(unavailable)?;
    let types = types.map(|t| serde_json::to_string(t).expect("strings encode"));
    let mut rows = select
        .query(params![
            horizon,
            (limit - picked.len()) as i64,
            queue_key,
            types
        ])
        .map_err(unavailable)?;
    while let Some(row) = rows.next().map_err(unavailable)? {
        picked.push(row)?;
    }
    Ok(())
}

/// One `runs` row, inserted with others of its batch.
struct RunRow<'a> {
    job_id: JobId,
    due_ms: i64,
    run: PlannedRun<'a>,
}

/// Runs rows go in by this many a statement, the rest one by one: one statement per row cost
/// about as much again as the row's own insert.
const RUNS_PER_INSERT: usize = 64;
const RUN_COLUMNS: usize = 8;

fn insert_runs_sql(rows: usize) -> String {
    let row = format!("({})", ["?"; RUN_COLUMNS].join(", "));
    format!(
        "INSERT INTO runs (job_id, due_ms, attempt, started_ms, latency_ms, status, error, outcome)
         VALUES {}",
        vec![row; rows].join(", ")
    )
}

/// Binds `r` to the run's columns after the first `at` parameters.
fn bind_run(
    stmt: &mut rusqlite::CachedStatement<'_>,
    at: usize,
    r: &RunRow<'_>,
) -> rusqlite::Result<()> {
    let a = r.run.attempt;
    stmt.raw_bind_parameter(at + 1, r.job_id.as_bytes().as_slice())?;
    stmt.raw_bind_parameter(at + 2, r.due_ms)?;
    stmt.raw_bind_parameter(at + 3, a.attempt)?;
    stmt.raw_bind_parameter(at + 4, a.started_at.as_millisecond())?;
    stmt.raw_bind_parameter(at + 5, a.latency_ms)?;
    stmt.raw_bind_parameter(at + 6, a.status)?;
    stmt.raw_bind_parameter(at + 7, a.error.as_deref())?;
    stmt.raw_bind_parameter(at + 8, r.run.outcome.as_str())
}

fn insert_runs(conn: &Connection, rows: &[RunRow<'_>]) -> Result<()> {
    static CHUNK_SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| insert_runs_sql(RUNS_PER_INSERT));
    static ONE_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| insert_runs_sql(1));
    let mut chunks = rows.chunks_exact(RUNS_PER_INSERT);
    let insert = |sql: &str, chunk: &[RunRow<'_>]| -> Result<()> {
        let mut stmt = conn.prepare_cached(sql).map_err(unavailable)?;
        for (i, row) in chunk.iter().enumerate() {
            bind_run(&mut stmt, i * RUN_COLUMNS, row).map_err(unavailable)?;
        }
        stmt.raw_execute().map_err(unavailable)?;
        Ok(())
    };
    for chunk in &mut chunks {
        insert(&CHUNK_SQL, chunk)?;
    }
    for row in chunks.remainder() {
        insert(&ONE_SQL, std::slice::from_ref(row))?;
    }
    Ok(())
}

/// Applies each completion's plan ([`plan_completion`]) under its fencing token. `rows` holds the
/// row number of each completion's job where the lease schedule knows it: the update then finds
/// the row by it instead of through the id index (and checks the id).
fn complete_in_tx(
    conn: &Connection,
    batch: Vec<Completion>,
    rows: Vec<Option<i64>>,
    now: i64,
) -> Result<Vec<Applied>> {
    let mut out = Vec::with_capacity(batch.len());
    let mut runs = Vec::with_capacity(batch.len());
    // Prepared once for the batch: looking a statement up in the cache hashes its text.
    let mut retry = conn
        .prepare_cached(
            "UPDATE jobs SET fire_ms = ?3, attempt = attempt + 1, lease_owner = NULL,
                             lease_fire_ms = NULL, updated_ms = ?4
             WHERE seq = COALESCE(?5, (SELECT seq FROM jobs WHERE id = ?1))
               AND id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    let mut advance = conn
        .prepare_cached(
            "UPDATE jobs SET due_ms = ?3, fire_ms = ?3, attempt = 0,
                 runs = runs + ?4, skipped = skipped + ?5, lease_owner = NULL,
                 lease_fire_ms = NULL, updated_ms = ?6
             WHERE seq = COALESCE(?7, (SELECT seq FROM jobs WHERE id = ?1))
               AND id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    let mut finish = conn
        .prepare_cached(
            "UPDATE jobs SET state = ?3, fire_ms = NULL, runs = runs + ?4,
                 skipped = skipped + ?5, lease_owner = NULL, lease_fire_ms = NULL,
                 updated_ms = ?6, attempt = COALESCE(?8, attempt)
             WHERE seq = COALESCE(?7, (SELECT seq FROM jobs WHERE id = ?1))
               AND id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    for (c, row) in batch.iter().zip(rows) {
        let id = c.job_id.as_bytes().as_slice();
        let plan = plan_completion(c);
        let changed = match plan.row {
            RowChange::Retry { fire } => retry
                .execute(params![id, c.token, fire, now, row])
                .map_err(unavailable)?,
            RowChange::Advance { due, ran, skipped } => advance
                .execute(params![
                    id,
                    c.token,
                    due,
                    ran as i64,
                    skipped as i64,
                    now,
                    row
                ])
                .map_err(unavailable)?,
            RowChange::Finish {
                state,
                ran,
                skipped,
                attempt,
            } => finish
                .execute(params![
                    id,
                    c.token,
                    state_code(state),
                    ran as i64,
                    skipped as i64,
                    now,
                    row,
                    attempt,
                ])
                .map_err(unavailable)?,
        };
        if changed == 0 {
            out.push(Applied::StaleLease);
            continue;
        }
        if let Some(run) = plan.run {
            runs.push(RunRow {
                job_id: c.job_id,
                due_ms: c.due.as_millisecond(),
                run,
            });
        }
        if let Some(letter) = plan.dead_letter {
            conn.prepare_cached(
                "INSERT INTO dead_letters (namespace, job_id, due_ms, attempts, reason, spec, payload, created_ms)
                 SELECT namespace, id, ?2, ?3, ?4, spec, payload, ?5 FROM jobs WHERE id = ?1",
            )
            .map_err(unavailable)?
            .execute(params![
                id,
                c.due.as_millisecond(),
                letter.attempts,
                letter.reason,
                now
            ])
            .map_err(unavailable)?;
        }
        out.push(Applied::Yes);
    }
    insert_runs(conn, &runs)?;
    Ok(out)
}

fn transition_in_tx(
    conn: &Connection,
    namespace: Option<&str>,
    id: JobId,
    transition: Transition,
) -> Result<JobRecord> {
    let job = load_job(conn, namespace, id)?.ok_or(StoreError::NotFound)?;
    let (state, due, fire, clear_key, trigger_key, now) = match plan_transition(&job, transition)? {
        TransitionPlan::Unchanged => return Ok(job),
        TransitionPlan::Apply {
            state,
            due,
            fire,
            clear_key,
            trigger_key,
            now,
        } => (state, due, fire, clear_key, trigger_key, now),
    };
    conn.prepare_cached(
        "UPDATE jobs SET state = ?2, due_ms = ?3, fire_ms = ?4, attempt = 0, lease_owner = NULL,
                         lease_fire_ms = NULL, lease_token = lease_token + 1, updated_ms = ?5,
                         key = CASE WHEN ?6 THEN NULL ELSE key END,
                         trigger_key = COALESCE(?7, trigger_key),
                         trigger_due_ms = CASE WHEN ?7 IS NULL THEN trigger_due_ms ELSE ?5 END
         WHERE id = ?1",
    )
    .map_err(unavailable)?
    .execute(params![
        id.as_bytes().as_slice(),
        state_code(state),
        due,
        fire,
        now,
        clear_key,
        trigger_key,
    ])
    .map_err(unavailable)?;
    load_job(conn, None, id)?.ok_or(StoreError::NotFound)
}

fn dead_letter_from_row(row: &Row<'_>) -> Result<DeadLetter> {
    let spec: String = row.get(6).map_err(corrupt)?;
    Ok(DeadLetter {
        id: row.get(0).map_err(corrupt)?,
        namespace: row.get(1).map_err(corrupt)?,
        job_id: id_from_blob(row.get(2).map_err(corrupt)?)?,
        due: from_ms(row.get(3).map_err(corrupt)?),
        attempts: row.get(4).map_err(corrupt)?,
        reason: row.get(5).map_err(corrupt)?,
        spec: decode_spec(&spec)?,
        payload: row.get(7).map_err(corrupt)?,
        created_at: from_ms(row.get(8).map_err(corrupt)?),
    })
}

/// The leased messages of some queues, as queue statistics count them.
#[derive(Debug, Default, Clone, Copy)]
struct LeasedCounts {
    /// Leases still running.
    in_flight: u64,
    /// Lapsed leases: their messages are available again, each since its lease's expiry.
    lapsed: u64,
    oldest_lapsed: Option<i64>,
}

impl LeasedCounts {
    fn add(self, other: Self) -> Self {
        Self {
            in_flight: self.in_flight + other.in_flight,
            lapsed: self.lapsed + other.lapsed,
            oldest_lapsed: self
                .oldest_lapsed
                .into_iter()
                .chain(other.oldest_lapsed)
                .min(),
        }
    }
}

/// Counts, per queue key, the leases the schedule knows on these queues (all for `None`), each
/// checked against its row: an entry whose lease has ended counts nothing. One row lookup per
/// lease, on a reader connection.
fn leased_counts(
    conn: &Connection,
    leases: &LeaseSchedule,
    queue_keys: Option<&[i64]>,
    now: i64,
) -> Result<HashMap<i64, LeasedCounts>> {
    let mut look = conn
        .prepare_cached(
            "SELECT fire_ms FROM jobs
             WHERE seq = ?1 AND id = ?2 AND state = 0 AND lease_owner IS NOT NULL
               AND queue_key = ?3",
        )
        .map_err(unavailable)?;
    let mut out: HashMap<i64, LeasedCounts> = HashMap::new();
    for (key, job, seq) in leases.leased(queue_keys) {
        let expiry: Option<i64> = look
            .query_row(params![seq, job.as_bytes().as_slice(), key], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        let Some(expiry) = expiry else { continue };
        let counts = out.entry(key).or_default();
        if expiry > now {
            counts.in_flight += 1;
        } else {
            counts.lapsed += 1;
            counts.oldest_lapsed = Some(counts.oldest_lapsed.map_or(expiry, |o| o.min(expiry)));
        }
    }
    Ok(out)
}

const DEAD_LETTER_COLUMNS: &str =
    "id, namespace, job_id, due_ms, attempts, reason, spec, payload, created_ms";

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<Created>> {
        self.write(move |conn| create_in_tx(conn, jobs)).await
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        let lease = lease.clone();
        let horizon = horizon.as_millisecond();
        let scope = Scope::from(scope);
        let leases = self.leases.clone();
        let popped = Arc::new(Mutex::new(Vec::new()));
        let record = popped.clone();
        let claimed = self
            .write(move |conn| {
                let mut taken = Vec::new();
                let claimed = claim_rows(conn, &scope, horizon, limit, &lease, &leases, &mut taken);
                *record.lock().expect("popped entries poisoned") = taken;
                claimed
            })
            .await;
        if claimed.is_err() {
            // The claim (its savepoint rolled back), or its group's commit, failed. Each entry it
            // took from the schedule is still a lease's, or was judged against its row as the
            // transaction saw it, which may include an earlier request of the group that is now
            // rolled back: an ack (the entry was dropped) or a new lease (the entry went back at
            // that lease's expiry). Each goes back as it was, due for a look now, which settles
            // it against the row again. Without this, a failed commit could leave a leased
            // message with no entry, never to be available again until a restart.
            let popped = std::mem::take(&mut *popped.lock().expect("popped entries poisoned"));
            self.leases.add_all(popped);
        }
        claimed?.into_iter().map(Claimed::into_occurrence).collect()
    }

    async fn extend_claims(
        &self,
        claims: Vec<(JobId, i64)>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        let (until, now) = (until.as_millisecond(), now.as_millisecond());
        let leases = self.leases.clone();
        self.write(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE jobs SET fire_ms = ?3, updated_ms = ?4
                     WHERE id = ?1 AND lease_token = ?2 AND state = 0 AND lease_owner IS NOT NULL",
                )
                .map_err(unavailable)?;
            claims
                .into_iter()
                .map(|(id, token)| {
                    let changed = stmt
                        .execute(params![id.as_bytes().as_slice(), token, until, now])
                        .map_err(unavailable)?;
                    if changed == 0 {
                        return Ok(Applied::StaleLease);
                    }
                    // A shorter extension must be looked at by its own expiry; a longer one is
                    // put back at its expiry when the schedule's earlier look finds it.
                    leases.check_by(id, token, until);
                    Ok(Applied::Yes)
                })
                .collect()
        })
        .await
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        let before = before.as_millisecond();
        self.write(move |conn| {
            let mut purged = Purged::default();
            let ids: Vec<Vec<u8>> = {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id FROM jobs WHERE state >= 2 AND updated_ms < ?1
                         ORDER BY updated_ms LIMIT ?2",
                    )
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map(params![before, limit as i64], |r| r.get(0))
                    .map_err(unavailable)?;
                rows.collect::<rusqlite::Result<_>>().map_err(unavailable)?
            };
            for id in &ids {
                purged.runs += conn
                    .prepare_cached("DELETE FROM runs WHERE job_id = ?1")
                    .map_err(unavailable)?
                    .execute([id])
                    .map_err(unavailable)? as u64;
                purged.jobs += conn
                    .prepare_cached("DELETE FROM jobs WHERE id = ?1")
                    .map_err(unavailable)?
                    .execute([id])
                    .map_err(unavailable)? as u64;
            }
            // Runs are appended in time order, so the oldest rowids are the oldest runs: take
            // them from the front and stop at the first one young enough to keep. No index on
            // the start time is needed, and a table of only young runs costs one row read.
            let old: Vec<i64> = {
                let mut stmt = conn
                    .prepare_cached("SELECT rowid, started_ms FROM runs ORDER BY rowid LIMIT ?1")
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map([limit as i64], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
                    })
                    .map_err(unavailable)?;
                let mut old = Vec::new();
                for row in rows {
                    let (rowid, started) = row.map_err(unavailable)?;
                    if started >= before {
                        break;
                    }
                    old.push(rowid);
                }
                old
            };
            for rowid in old {
                purged.runs += conn
                    .prepare_cached("DELETE FROM runs WHERE rowid = ?1")
                    .map_err(unavailable)?
                    .execute([rowid])
                    .map_err(unavailable)? as u64;
            }
            Ok(purged)
        })
        .await
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        let before = before.as_millisecond();
        self.write(move |conn| {
            conn.prepare_cached(PURGE_DEAD_LETTERS)
                .map_err(unavailable)?
                .execute(params![before, limit as i64])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
        .await
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        let now = now.as_millisecond();
        let leases = self.leases.clone();
        self.read(move |conn| {
            let mut gauges = StoreGauges {
                jobs_by_state: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
                ..Default::default()
            };
            let mut by_state = conn
                .prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state")
                .map_err(unavailable)?;
            let mut rows = by_state.query([]).map_err(unavailable)?;
            while let Some(row) = rows.next().map_err(unavailable)? {
                let state = state_from_code(row.get(0).map_err(corrupt)?)?;
                let n: i64 = row.get(1).map_err(corrupt)?;
                if let Some(slot) = gauges.jobs_by_state.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 = n as u64;
                }
            }
            drop(rows);
            // Unclaimed only: a claimed occurrence's fire_ms is its lease expiry, in the future
            // while a node holds it; a lapsed claim is backlog again, as it should be.
            let (backlog, oldest): (i64, Option<i64>) = conn
                .prepare_cached(
                    "SELECT COUNT(*), MIN(fire_ms) FROM jobs
                     WHERE state = 0 AND queue IS NULL AND fire_ms <= ?1",
                )
                .map_err(unavailable)?
                .query_row([now], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(unavailable)?;
            gauges.due_backlog = backlog as u64;
            gauges.oldest_backlog = oldest.map(from_ms);
            type QueueRow = (Option<i64>, Option<i64>, Option<i64>);
            let (available, scheduled, oldest): QueueRow = conn
                .prepare_cached(
                    "SELECT SUM(fire_ms <= ?1), SUM(fire_ms > ?1),
                            MIN(CASE WHEN fire_ms <= ?1 THEN fire_ms END)
                     FROM jobs WHERE state = 0 AND queue_key IS NOT NULL AND lease_owner IS NULL",
                )
                .map_err(unavailable)?
                .query_row([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(unavailable)?;
            let leased = leased_counts(conn, &leases, None, now)?
                .into_values()
                .fold(LeasedCounts::default(), LeasedCounts::add);
            gauges.queue_available = available.unwrap_or(0) as u64 + leased.lapsed;
            gauges.queue_in_flight = leased.in_flight;
            gauges.queue_scheduled = scheduled.unwrap_or(0) as u64;
            gauges.oldest_queue_available = oldest
                .into_iter()
                .chain(leased.oldest_lapsed)
                .min()
                .map(from_ms);
            Ok(gauges)
        })
        .await
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        let namespace = namespace.to_owned();
        let queue = queue.map(str::to_owned);
        let now = now.as_millisecond();
        let leases = self.leases.clone();
        self.read(move |conn| {
            let mut names = HashMap::new();
            let mut stmt = conn
                .prepare_cached(
                    "SELECT key, name FROM queues WHERE namespace = ?1 AND (?2 IS NULL OR name = ?2)",
                )
                .map_err(unavailable)?;
            let mut rows = stmt.query(params![namespace, queue]).map_err(unavailable)?;
            while let Some(row) = rows.next().map_err(unavailable)? {
                let key: i64 = row.get(0).map_err(corrupt)?;
                names.insert(key, row.get::<_, String>(1).map_err(corrupt)?);
            }
            drop(rows);
            let mut by_name = BTreeMap::new();
            let mut stmt = conn
                .prepare_cached(
                    // Unleased messages, from the due index. fire_ms is when each became
                    // available.
                    "SELECT j.queue_key, SUM(j.fire_ms <= ?2), SUM(j.fire_ms > ?2),
                            MIN(CASE WHEN j.fire_ms <= ?2 THEN j.fire_ms END)
                     FROM queues q JOIN jobs j ON j.queue_key = q.key
                     WHERE q.namespace = ?1 AND (?3 IS NULL OR q.name = ?3)
                       AND j.state = 0 AND j.lease_owner IS NULL
                     GROUP BY j.queue_key",
                )
                .map_err(unavailable)?;
            let mut rows = stmt
                .query(params![namespace, now, queue])
                .map_err(unavailable)?;
            while let Some(row) = rows.next().map_err(unavailable)? {
                let count = |i: usize| -> Result<u64> {
                    Ok(row.get::<_, Option<i64>>(i).map_err(corrupt)?.unwrap_or(0) as u64)
                };
                let Some(name) = names.get(&row.get::<_, i64>(0).map_err(corrupt)?) else {
                    continue;
                };
                by_name.insert(
                    name.clone(),
                    QueueStats {
                        name: name.clone(),
                        available: count(1)?,
                        in_flight: 0,
                        scheduled: count(2)?,
                        oldest_available: row
                            .get::<_, Option<i64>>(3)
                            .map_err(corrupt)?
                            .map(from_ms),
                    },
                );
            }
            drop(rows);
            // Leased messages: in flight, or available again since their lease lapsed.
            let keys: Vec<i64> = names.keys().copied().collect();
            for (key, leased) in leased_counts(conn, &leases, Some(&keys), now)? {
                let name = &names[&key];
                let stats = by_name.entry(name.clone()).or_insert_with(|| QueueStats {
                    name: name.clone(),
                    available: 0,
                    in_flight: 0,
                    scheduled: 0,
                    oldest_available: None,
                });
                stats.available += leased.lapsed;
                stats.in_flight += leased.in_flight;
                stats.oldest_available = stats
                    .oldest_available
                    .into_iter()
                    .chain(leased.oldest_lapsed.map(from_ms))
                    .min();
            }
            let mut out: Vec<QueueStats> = by_name.into_values().collect();
            if out.is_empty()
                && let Some(name) = queue
            {
                out.push(QueueStats {
                    name,
                    available: 0,
                    in_flight: 0,
                    scheduled: 0,
                    oldest_available: None,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        let now = now.as_millisecond();
        let leases: Vec<(JobId, i64)> = batch.iter().map(|c| (c.job_id, c.token)).collect();
        let rows = self.leases.rows_of(leases.iter().map(|(job, _)| *job));
        let applied = self
            .write(move |conn| complete_in_tx(conn, batch, rows, now))
            .await?;
        // Committed: these leases have ended. (A stale completion ended nothing.)
        self.leases.forget(
            leases
                .into_iter()
                .zip(&applied)
                .filter(|(_, a)| **a == Applied::Yes)
                .map(|(lease, _)| lease),
        );
        Ok(applied)
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        self.write(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE jobs SET fire_ms = ?3, lease_owner = NULL, lease_fire_ms = NULL
                     WHERE id = ?1 AND lease_token = ?2 AND state = 0",
                )
                .map_err(unavailable)?;
            for c in claims {
                stmt.execute(params![
                    c.job_id.as_bytes().as_slice(),
                    c.token,
                    c.fire_at.as_millisecond()
                ])
                .map_err(unavailable)?;
            }
            Ok(())
        })
        .await
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        let scope = Scope::from(scope);
        let leases = self.leases.clone();
        self.read(move |conn| {
            let min: Option<i64> = match &scope {
                Scope::Fired => conn
                    .prepare_cached(
                        "SELECT MIN(fire_ms) FROM jobs WHERE state = 0 AND queue IS NULL",
                    )
                    .map_err(unavailable)?
                    .query_row([], |r| r.get(0)),
                Scope::Queue {
                    namespace, queue, ..
                } => match find_queue_key(conn, namespace, queue)? {
                    None => Ok(None),
                    Some(key) => conn
                        .prepare_cached(
                            "SELECT MIN(fire_ms) FROM jobs
                             WHERE state = 0 AND queue_key = ?1 AND lease_owner IS NULL",
                        )
                        .map_err(unavailable)?
                        .query_row([key], |r| r.get::<_, Option<i64>>(0))
                        // Leased messages are not in the due index: the schedule says when the
                        // first of their leases may run out.
                        .map(|unleased| unleased.into_iter().chain(leases.next_check(key)).min()),
                },
            }
            .map_err(unavailable)?;
            Ok(min.map(from_ms))
        })
        .await
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| load_job(conn, namespace.as_deref(), id))
            .await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        self.read(move |conn| {
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM jobs
                 WHERE (?1 IS NULL OR namespace = ?1)
                   AND (?2 IS NULL OR state = ?2)
                   AND (?3 IS NULL OR job_type = ?3)
                   AND (?4 IS NULL OR due_ms < ?4)
                   AND (?5 IS NULL OR due_ms >= ?5)
                   AND (?6 IS NULL OR id > ?6)
                 ORDER BY id LIMIT ?7"
            );
            let after = query.after.map(|id| id.as_bytes().to_vec());
            query_jobs(
                conn,
                &sql,
                &[
                    &query.namespace,
                    &query.state.map(state_code),
                    &query.job_type,
                    &query.due_before.map(|t| t.as_millisecond()),
                    &query.due_after.map(|t| t.as_millisecond()),
                    &after,
                    &(query.limit as i64),
                ],
            )
        })
        .await
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| {
            let n: i64 = conn
                .prepare_cached("SELECT COUNT(*) FROM jobs WHERE (?1 IS NULL OR namespace = ?1)")
                .map_err(unavailable)?
                .query_row(params![namespace], |r| r.get(0))
                .map_err(unavailable)?;
            Ok(n as u64)
        })
        .await
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
    ) -> Result<JobRecord> {
        let namespace = namespace.map(str::to_owned);
        self.write(move |conn| {
            let job = load_job(conn, namespace.as_deref(), id)?.ok_or(StoreError::NotFound)?;
            let (state, due, fire) = plan_update(&job, &update)?;
            let queue_key = QueueKeys::default().of(conn, &job.namespace, &update.spec)?;
            conn.prepare_cached(
                "UPDATE jobs SET spec = ?2, payload = ?3, job_type = ?4, state = ?5, due_ms = ?6,
                                 fire_ms = ?7, attempt = 0, lease_owner = NULL, lease_fire_ms = NULL,
                                 lease_token = lease_token + 1, updated_ms = ?8, queue = ?9,
                                 queue_key = ?10
                 WHERE id = ?1",
            )
            .map_err(unavailable)?
            .execute(params![
                id.as_bytes().as_slice(),
                encode_spec(&update.spec),
                update.payload,
                update.spec.job_type,
                state_code(state),
                due,
                fire,
                update.now.as_millisecond(),
                update.spec.target.queue(),
                queue_key,
            ])
            .map_err(unavailable)?;
            load_job(conn, None, id)?.ok_or(StoreError::NotFound)
        })
        .await
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
    ) -> Result<JobRecord> {
        let namespace = namespace.map(str::to_owned);
        self.write(move |conn| transition_in_tx(conn, namespace.as_deref(), id, transition))
            .await
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        let namespace = namespace.map(str::to_owned);
        let before = before.unwrap_or(RunCursor::NEWEST);
        self.read(move |conn| {
            if load_job(conn, namespace.as_deref(), id)?.is_none() {
                return Err(StoreError::NotFound);
            }
            let mut stmt = conn
                .prepare_cached(
                    "SELECT due_ms, attempt, started_ms, latency_ms, status, error, outcome, rowid
                     FROM runs WHERE job_id = ?1 AND (started_ms, rowid) < (?3, ?4)
                     ORDER BY started_ms DESC, rowid DESC LIMIT ?2",
                )
                .map_err(unavailable)?;
            let mut rows = stmt
                .query(params![
                    id.as_bytes().as_slice(),
                    limit as i64,
                    before.started_ms,
                    before.seq
                ])
                .map_err(unavailable)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(unavailable)? {
                out.push(RunRecord {
                    cursor: RunCursor {
                        started_ms: row.get(2).map_err(corrupt)?,
                        seq: row.get(7).map_err(corrupt)?,
                    },
                    job_id: id,
                    due: from_ms(row.get(0).map_err(corrupt)?),
                    attempt: row.get(1).map_err(corrupt)?,
                    started_at: from_ms(row.get(2).map_err(corrupt)?),
                    latency_ms: row.get(3).map_err(corrupt)?,
                    status: row.get(4).map_err(corrupt)?,
                    error: row.get(5).map_err(corrupt)?,
                    outcome: row.get(6).map_err(corrupt)?,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| {
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters
                 WHERE (?1 IS NULL OR namespace = ?1) AND id > ?2 ORDER BY id LIMIT ?3"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(unavailable)?;
            let mut rows = stmt
                .query(params![namespace, after.unwrap_or(0), limit as i64])
                .map_err(unavailable)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(unavailable)? {
                out.push(dead_letter_from_row(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| {
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters
                 WHERE id = ?1 AND (?2 IS NULL OR namespace = ?2)"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(unavailable)?;
            let mut rows = stmt.query(params![id, namespace]).map_err(unavailable)?;
            match rows.next().map_err(unavailable)? {
                Some(row) => Ok(Some(dead_letter_from_row(row)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn delete_dead_letter(&self, namespace: Option<&str>, id: i64) -> Result<bool> {
        let namespace = namespace.map(str::to_owned);
        self.write(move |conn| {
            let n = conn
                .prepare_cached(
                    "DELETE FROM dead_letters WHERE id = ?1 AND (?2 IS NULL OR namespace = ?2)",
                )
                .map_err(unavailable)?
                .execute(params![id, namespace])
                .map_err(unavailable)?;
            Ok(n > 0)
        })
        .await
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        let namespace = namespace.to_owned();
        self.read(move |conn| {
            let row = conn
                .prepare_cached(
                    "SELECT signing_secret, previous_secret, previous_until_ms
                     FROM namespaces WHERE name = ?1",
                )
                .map_err(unavailable)?
                .query_row(params![namespace], |r| {
                    Ok((
                        r.get::<_, Option<String>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                    ))
                })
                .optional()
                .map_err(unavailable)?;
            Ok(match row {
                Some((Some(current), previous, until)) => Some(SigningSecrets {
                    current,
                    previous: previous.zip(until.map(from_ms)),
                }),
                _ => None,
            })
        })
        .await
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        let (namespace, secret) = (namespace.to_owned(), secret.to_owned());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO namespaces (name, signing_secret) VALUES (?1, ?2)
                 ON CONFLICT(name) DO UPDATE
                 SET signing_secret = COALESCE(namespaces.signing_secret, excluded.signing_secret)",
            )
            .map_err(unavailable)?
            .execute(params![namespace, secret])
            .map_err(unavailable)?;
            conn.prepare_cached("SELECT signing_secret FROM namespaces WHERE name = ?1")
                .map_err(unavailable)?
                .query_row(params![namespace], |r| r.get(0))
                .map_err(unavailable)
        })
        .await
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
    ) -> Result<()> {
        let (namespace, secret) = (namespace.to_owned(), secret.to_owned());
        let until = previous_until.map(|t| t.as_millisecond());
        self.write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO namespaces (name, signing_secret) VALUES (?1, ?2)
                 ON CONFLICT(name) DO UPDATE SET
                     previous_secret = CASE WHEN ?3 IS NULL THEN NULL
                                            ELSE namespaces.signing_secret END,
                     previous_until_ms = CASE WHEN namespaces.signing_secret IS NULL THEN NULL
                                              ELSE ?3 END,
                     signing_secret = excluded.signing_secret",
            )
            .map_err(unavailable)?
            .execute(params![namespace, secret, until])
            .map_err(unavailable)?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_job(due: Timestamp) -> NewJob {
        NewJob {
            id: uuid::Uuid::now_v7(),
            namespace: "a".into(),
            key: None,
            spec: hourglass_core::JobSpec {
                job_type: None,
                schedule: hourglass_core::Schedule::at(due),
                target: hourglass_core::Target::Queue(hourglass_core::QueueTarget {
                    name: "q".into(),
                }),
                retry: Default::default(),
                misfire: Default::default(),
            },
            payload: None,
            fingerprint: 1,
            first_due: due,
            now: due,
        }
    }

    /// A group commit that fails (a full disk) after an ack and a claim of the same message ran
    /// in it: the claim found the message acked, in the group's own uncommitted view, and took
    /// its lapse entry out of the schedule. The rollback restores the lease, so the entry must
    /// come back too, or the message would never be available again until a restart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_group_commit_loses_no_lease_from_the_schedule() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        let t0 = from_ms(1_000_000);
        let at = |ms: i64| from_ms(1_000_000 + ms);
        let lease = |now| Lease {
            owner: "w".into(),
            ttl: Duration::from_secs(1),
            now,
        };
        let scope = ClaimScope::Queue {
            namespace: "a",
            queue: "q",
            types: None,
        };
        store.create_jobs(vec![queue_job(t0)]).await.unwrap();
        let first = store.claim_due(scope, t0, 10, &lease(t0)).await.unwrap();
        assert_eq!(first.len(), 1);
        // The first lease lapses; the message is leased again, its entry due for a look now.
        let second = store
            .claim_due(scope, at(2_000), 10, &lease(at(2_000)))
            .await
            .unwrap();
        assert_eq!((second.len(), second[0].attempt), (1, 2));

        // Hold the writer, queue the ack and then a claim behind it, so that both run in the
        // next group, and make that group's commit fail.
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let blocker = tokio::spawn({
            let store = store.clone();
            async move {
                store
                    .write(move |_| {
                        started_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                        Ok(())
                    })
                    .await
            }
        });
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        store.commit_faults.store(1, Ordering::SeqCst);
        let queued = |n: usize| {
            let store = store.clone();
            async move {
                while store.writer.max_capacity() - store.writer.capacity() < n {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        };
        let ack = tokio::spawn({
            let (store, occ) = (store.clone(), second[0].clone());
            async move {
                let delivered = Completion {
                    job_id: occ.job_id,
                    token: occ.token,
                    due: occ.due,
                    attempt: None,
                    action: hourglass_core::Action::Delivered {
                        next: None,
                        skipped: 0,
                    },
                };
                store.complete(vec![delivered], at(2_500)).await
            }
        });
        queued(1).await;
        let claim = tokio::spawn({
            let store = store.clone();
            async move {
                store
                    .claim_due(scope, at(2_600), 10, &lease(at(2_600)))
                    .await
            }
        });
        queued(2).await;
        go_tx.send(()).unwrap();
        blocker
            .await
            .unwrap()
            .expect("the blocker's own commit passes");
        assert!(ack.await.unwrap().is_err(), "the ack's commit failed");
        assert!(claim.await.unwrap().is_err(), "the claim's commit failed");

        // The second lease stands, unacked: once it lapses, the message is available again.
        let third = store
            .claim_due(scope, at(3_500), 10, &lease(at(3_500)))
            .await
            .unwrap();
        assert_eq!(
            third
                .iter()
                .map(|o| (o.job_id, o.attempt))
                .collect::<Vec<_>>(),
            [(second[0].job_id, 3)],
            "the message whose ack was rolled back comes back"
        );
    }

    /// A store of schema version 4 (queues named by two strings in the due index) gives each
    /// of its queues a key, and its waiting messages stay leasable and counted.
    #[tokio::test]
    async fn a_version_4_store_keys_its_queues() {
        let dir = tempfile::tempdir().unwrap();
        let ids = [uuid::Uuid::now_v7(), uuid::Uuid::now_v7()];
        {
            let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            for sql in &MIGRATIONS[..4] {
                conn.execute_batch(sql).unwrap();
            }
            conn.execute_batch("PRAGMA user_version = 4").unwrap();
            let spec = |queue: &str| {
                encode_spec(
                    &serde_json::from_value(serde_json::json!({
                        "schedule": {"kind": {"at": "2030-01-01T00:00:00Z"}},
                        "target": {"queue": {"name": queue}},
                    }))
                    .expect("the storage encoding of a queue job"),
                )
            };
            for (id, queue) in ids.iter().zip(["emails", "sms"]) {
                conn.execute(
                    "INSERT INTO jobs (id, namespace, state, spec, fingerprint, due_ms, fire_ms,
                                       created_ms, updated_ms, queue)
                     VALUES (?1, 'a', 0, ?2, 0, 1000, 1000, 0, 0, ?3)",
                    params![id.as_bytes().as_slice(), spec(queue), queue],
                )
                .unwrap();
            }
        }
        let store = SqliteStore::open(dir.path()).unwrap();
        let stats = store.queue_stats("a", None, from_ms(2000)).await.unwrap();
        let names: Vec<_> = stats
            .iter()
            .map(|s| (s.name.as_str(), s.available))
            .collect();
        assert_eq!(names, [("emails", 1), ("sms", 1)]);
        let lease = Lease {
            owner: "n".into(),
            ttl: Duration::from_secs(30),
            now: from_ms(2000),
        };
        let scope = ClaimScope::Queue {
            namespace: "a",
            queue: "sms",
            types: None,
        };
        assert_eq!(store.next_due(scope).await.unwrap(), Some(from_ms(1000)));
        let claimed = store
            .claim_due(scope, from_ms(2000), 10, &lease)
            .await
            .unwrap();
        assert_eq!(
            claimed.iter().map(|o| o.job_id).collect::<Vec<_>>(),
            [ids[1]]
        );
    }

    /// A data directory written by the first release (schema version 0: no queue column, one due
    /// index over every active job) opens, migrates, and keeps firing its jobs.
    #[tokio::test]
    async fn a_version_0_store_migrates_and_keeps_its_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let (due_id, keyed_id) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
        let stored = {
            let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
            conn.execute_batch(SCHEMA).unwrap();
            conn.execute_batch("CREATE INDEX jobs_due ON jobs(fire_ms) WHERE state = 0;")
                .unwrap();
            let spec = r#"{"schedule":{"kind":{"at":"2030-01-01T00:00:00Z"}},"target":{"webhook":{"url":"https://example.com/"}}}"#;
            let stored: hourglass_core::JobSpec = serde_json::from_str(spec)
                .expect("the test's v0 spec must be in the storage encoding");
            for (id, key, due) in [(due_id, None, 1000), (keyed_id, Some("k"), 9_000_000)] {
                conn.execute(
                    "INSERT INTO jobs (id, namespace, key, state, spec, fingerprint, due_ms,
                                       fire_ms, created_ms, updated_ms)
                     VALUES (?1, 'default', ?2, 0, ?3, 7, ?4, ?4, 0, 0)",
                    params![id.as_bytes().as_slice(), key, encode_spec(&stored), due],
                )
                .unwrap();
            }
            stored
        };
        let store = SqliteStore::open(dir.path()).unwrap();
        let lease = Lease {
            owner: "n".into(),
            ttl: Duration::from_secs(30),
            now: from_ms(2000),
        };
        let claimed = store
            .claim_due(ClaimScope::Fired, from_ms(2000), 10, &lease)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].job_id, due_id);
        // The keyed job kept its key: creating it again with the same request finds it.
        let again = NewJob {
            id: uuid::Uuid::now_v7(),
            namespace: "default".into(),
            key: Some("k".into()),
            spec: stored,
            payload: None,
            fingerprint: 7,
            first_due: from_ms(9_000_000),
            now: from_ms(2000),
        };
        let created = store.create_jobs(vec![again]).await.unwrap();
        assert!(
            matches!(&created[0], Created::Existing(job) if job.id == keyed_id),
            "{created:?}"
        );
        drop(store);
        let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        // Reopening an up-to-date store applies nothing twice.
        drop(conn);
        SqliteStore::open(dir.path()).unwrap();
    }
}
