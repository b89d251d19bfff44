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
//! Leased rows (queue messages and fired claims) are not in their due index; `leases.rs` keeps
//! when each lease runs out.
//!
//! `backup.rs` copies a store consistently while its node runs (`hourglass backup`).
//!
//! The writer thread is in `writer.rs`, the schema and its migrations in `schema.rs`, rows to
//! records in `codec.rs`; the `Store` methods below hand each call to the module of its concern
//! (`jobs`, `claim`, `complete`, `stats`, `history`, `secrets`, `audit`).

mod anchors;
mod audit;
mod backup;
mod calendars;
mod claim;
mod codec;
mod complete;
mod history;
mod jobs;
mod leases;
mod schema;
mod secrets;
mod stats;
#[cfg(test)]
mod tests;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hourglass_core::{Claim, Completion, JobId, Occurrence};
use jiff::Timestamp;
use rusqlite::Connection;
use tokio::sync::mpsc;

use self::claim::Scope;
use self::codec::{load_job, unavailable};
use self::leases::LeaseSchedule;
use self::schema::{SCHEMA, migrate, open_connection};
use self::writer::{WRITE_QUEUE, WriteJob, writer_loop};
use crate::{
    Applied, AuditRecord, ClaimScope, Created, DeadLetter, JobQuery, JobRecord, JobUpdate, Lease,
    NewJob, NodeBeat, Purged, QueueStats, Release, Result, RunCursor, RunRecord, SigningSecrets,
    Store, StoreError, StoreGauges, Transition,
};

pub use self::backup::{BackupSummary, backup};

/// The database's file name inside the data directory: a backup is restored under this name.
pub const DB_FILE: &str = "hourglass.db";

pub struct SqliteStore {
    writer: mpsc::Sender<WriteJob>,
    /// When each lease (of a queue message or a fired claim) runs out; see `leases.rs`.
    leases: Arc<LeaseSchedule>,
    /// Claimed specs decoded before; see `codec::SpecCache`.
    specs: codec::SpecCache,
    readers: Arc<ReaderPool>,
    path: PathBuf,
    /// Held for the store's lifetime: the OS lock that keeps a second node off this directory.
    _lock: File,
    /// Heartbeats, in memory: the directory's lock keeps every other node off this store.
    nodes: crate::nodes::NodeTable,
    /// A test seam, off (-1) outside tests: see `writer::commit_fault`.
    #[cfg_attr(not(test), allow(dead_code, reason = "set only by the unit tests"))]
    commit_faults: Arc<AtomicI64>,
    /// Crashes of the writer thread around its commit, armed by the unit tests only.
    #[cfg_attr(not(test), allow(dead_code, reason = "armed only by the unit tests"))]
    failpoints: Arc<crate::failpoint::Failpoints>,
}

struct ReaderPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// Creates `dir` and any missing parents readable by their owner only (0700): the store holds
/// every namespace's signing secret in plaintext. A directory that exists keeps its mode.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the database file empty with mode 0600 when there is none, before SQLite opens it:
/// SQLite would create it 0644, and gives its `-wal` and `-shm` files the database file's mode.
/// An existing file (or a symlink to one) keeps its mode.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the store in `dir`, taking an exclusive lock on it.
    pub fn open(dir: &Path) -> Result<Self> {
        create_private_dir(dir).map_err(|e| {
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
        let path = dir.join(DB_FILE);
        create_private_file(&path).map_err(|e| {
            StoreError::Unavailable(format!("cannot create {}: {e}", path.display()))
        })?;
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
        let failpoints = Arc::new(crate::failpoint::Failpoints::default());
        let points = failpoints.clone();
        std::thread::Builder::new()
            .name("hourglass-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, &faults, &points))
            .map_err(|e| StoreError::Unavailable(format!("cannot start writer thread: {e}")))?;
        Ok(Self {
            writer: tx,
            leases: Arc::default(),
            specs: codec::SpecCache::default(),
            readers: Arc::new(ReaderPool {
                path: path.clone(),
                idle: Mutex::new(Vec::new()),
            }),
            path,
            _lock: lock,
            nodes: Default::default(),
            commit_faults,
            failpoints,
        })
    }

    /// The database file, for operators and the bench's footprint figures.
    pub fn path(&self) -> &Path {
        &self.path
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

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn create_jobs(
        &self,
        jobs: Vec<NewJob>,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<Created>> {
        let jobs = jobs
            .into_iter()
            .map(|job| {
                let spec = codec::encode_spec(&job.spec);
                (job, spec)
            })
            .collect();
        self.write(move |conn| {
            let created = jobs::create_in_tx(conn, jobs)?;
            if let Some(entry) = crate::audit::of_created(audit, &created) {
                audit::append(conn, &entry)?;
            }
            Ok(created)
        })
        .await
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        self.claim(scope, horizon, limit, lease).await
    }

    async fn extend_claims(
        &self,
        claims: Vec<Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        let (until, now) = (until.as_millisecond(), now.as_millisecond());
        let leases = self.leases.clone();
        self.write(move |conn| claim::extend_in_tx(conn, &leases, claims, until, now))
            .await
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        let before = before.as_millisecond();
        self.write(move |conn| history::purge(conn, before, limit))
            .await
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        let before = before.as_millisecond();
        self.write(move |conn| history::purge_dead_letters(conn, before, limit))
            .await
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        let now = now.as_millisecond();
        let leases = self.leases.clone();
        self.read(move |conn| stats::gauges(conn, &leases, now))
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
        self.read(move |conn| stats::queue_stats(conn, &leases, &namespace, queue, now))
            .await
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        self.complete_batch(batch, now).await
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        let ended: Vec<Claim> = claims
            .iter()
            .map(|c| Claim::new(c.job_id, c.token))
            .collect();
        self.write(move |conn| claim::release_in_tx(conn, claims))
            .await?;
        // Committed: these leases have ended (a stale release matches no entry's token).
        self.leases.forget(ended);
        Ok(())
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        let scope = Scope::from(scope);
        let leases = self.leases.clone();
        self.read(move |conn| claim::next_due(conn, &leases, &scope))
            .await
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| load_job(conn, namespace.as_deref(), id))
            .await
    }

    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        let (namespace, key) = (namespace.to_owned(), key.to_owned());
        self.read(move |conn| jobs::load_job_by_key(conn, &namespace, &key))
            .await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        self.read(move |conn| jobs::list_jobs(conn, query)).await
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| jobs::count_jobs(conn, namespace.as_deref()))
            .await
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        let namespace = namespace.map(str::to_owned);
        self.write(move |conn| {
            let updated = jobs::update_in_tx(conn, namespace.as_deref(), id, update)?;
            audit::append_some(conn, audit.as_ref())?;
            Ok(updated)
        })
        .await
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        let namespace = namespace.map(str::to_owned);
        self.write(move |conn| {
            jobs::transition_in_tx(conn, namespace.as_deref(), id, transition, audit.as_ref())
        })
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
        self.read(move |conn| history::runs(conn, namespace.as_deref(), id, before, limit))
            .await
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| history::dead_letters(conn, namespace.as_deref(), after, limit))
            .await
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        let namespace = namespace.map(str::to_owned);
        self.read(move |conn| history::get_dead_letter(conn, namespace.as_deref(), id))
            .await
    }

    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        let namespace = namespace.map(str::to_owned);
        self.write(move |conn| {
            let deleted = history::delete_dead_letter(conn, namespace.as_deref(), id)?;
            audit::append_some(conn, audit.as_ref().filter(|_| deleted))?;
            Ok(deleted)
        })
        .await
    }

    async fn append_audit(&self, record: AuditRecord) -> Result<()> {
        self.write(move |conn| audit::append(conn, &record)).await
    }

    async fn audit_entries(&self, query: crate::AuditQuery) -> Result<Vec<crate::AuditEntry>> {
        self.read(move |conn| audit::read(conn, &query)).await
    }

    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64> {
        let before = before.as_millisecond();
        self.write(move |conn| audit::purge(conn, before, limit))
            .await
    }

    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()> {
        self.nodes.beat(beat)
    }

    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        self.nodes.live(now)
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        let namespace = namespace.to_owned();
        self.read(move |conn| secrets::signing_secrets(conn, &namespace))
            .await
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        let (namespace, secret) = (namespace.to_owned(), secret.to_owned());
        self.write(move |conn| secrets::init_signing_secret(conn, &namespace, &secret))
            .await
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        let (namespace, secret) = (namespace.to_owned(), secret.to_owned());
        let until = previous_until.map(|t| t.as_millisecond());
        self.write(move |conn| {
            secrets::rotate_signing_secret(conn, &namespace, &secret, until)?;
            audit::append_some(conn, audit.as_ref())
        })
        .await
    }

    async fn signing_namespaces(&self) -> Result<Vec<String>> {
        self.read(secrets::signing_namespaces).await
    }

    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool> {
        let (namespace, expected, replacement) =
            (namespace.to_owned(), expected.clone(), replacement.clone());
        self.write(move |conn| {
            secrets::replace_signing_secrets(conn, &namespace, &expected, &replacement)
        })
        .await
    }

    async fn put_calendar(
        &self,
        record: &crate::CalendarRecord,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        let record = record.clone();
        self.write(move |conn| {
            calendars::put(conn, &record)?;
            audit::append_some(conn, audit.as_ref())
        })
        .await
    }

    async fn get_calendar(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<crate::CalendarRecord>> {
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        self.read(move |conn| calendars::get(conn, &namespace, &name))
            .await
    }

    async fn list_calendars(&self, namespace: &str) -> Result<Vec<crate::CalendarRecord>> {
        let namespace = namespace.to_owned();
        self.read(move |conn| calendars::list(conn, &namespace))
            .await
    }

    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        self.write(move |conn| {
            let deleted = calendars::delete(conn, &namespace, &name)?;
            audit::append_some(conn, audit.as_ref().filter(|_| deleted))?;
            Ok(deleted)
        })
        .await
    }

    async fn put_anchor(
        &self,
        record: &crate::AnchorRecord,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<JobRecord>> {
        let record = record.clone();
        self.write(move |conn| {
            let moved = anchors::put(conn, &record)?;
            let entry = audit.map(|entry| entry.naming(moved.iter().map(|job| job.id)));
            audit::append_some(conn, entry.as_ref())?;
            Ok(moved)
        })
        .await
    }

    async fn get_anchor(&self, namespace: &str, name: &str) -> Result<Option<crate::AnchorRecord>> {
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        self.read(move |conn| anchors::get(conn, &namespace, &name))
            .await
    }

    async fn list_anchors(&self, namespace: &str) -> Result<Vec<crate::AnchorRecord>> {
        let namespace = namespace.to_owned();
        self.read(move |conn| anchors::list(conn, &namespace)).await
    }

    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: crate::AnchorDelete,
        audit: Option<AuditRecord>,
    ) -> Result<crate::AnchorDeleted> {
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        self.write(move |conn| {
            let deleted = anchors::delete(conn, &namespace, &name, how)?;
            if let (crate::AnchorDeleted::Deleted { cancelled }, Some(mut entry)) =
                (&deleted, audit)
            {
                entry.count = u32::try_from(*cancelled).unwrap_or(u32::MAX);
                audit::append(conn, &entry)?;
            }
            Ok(deleted)
        })
        .await
    }
}
