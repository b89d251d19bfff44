//! The audit log's shapes: what one API request that changed something leaves behind — when,
//! which key (its id, never the key), in which namespace, what it did, to which jobs or dead
//! letter, and for an edit the names of the fields it changed.
//!
//! The log is append-only: an entry is added with the change it records, `audit_entries` pages
//! through a namespace's newest first, and only retention (`purge_audit`, or DynamoDB's TTL)
//! deletes. One entry per request, not per job: a batch create of a thousand jobs is one entry
//! with its count and its first [`AUDIT_JOB_IDS`] ids, so creates stay cheap.
//!
//! **An entry commits with its change.** Every store method that makes a change the API asks for
//! (`create_jobs`, `update_job`, `transition`, `delete_dead_letter`, `rotate_signing_secret`,
//! `put_calendar`/`delete_calendar`, `put_anchor`/`delete_anchor`) takes the entry as an
//! `audit: Option<AuditRecord>` and writes it in the change's own transaction (the memory store:
//! under the same lock; SQLite: in the same savepoint of the writer's group commit; PostgreSQL:
//! the same transaction), and only when the change is applied: a refusal (a stale read token,
//! an invalid state, a key conflict), a no-op (cancelling a cancelled job, a keyed trigger
//! repeated) or an idempotent repeat (a keyed create finding its job) writes none. So a crash or
//! a failed write can never leave a change without its entry, or an entry without its change.
//! Where the change's result decides what the entry names, the store fills it in: the jobs a
//! create made (`of_created`), the jobs an anchor's move moved, the count its delete
//! cancelled ([`AuditRecord::naming`]).
//!
//! Exceptions, each said where it lives: DynamoDB holds neither a create batch nor an anchor's
//! move or delete in one transaction (see its `audit.rs`); a bulk action is many writes with one
//! entry (the engine's `scheduler/bulk.rs`); and [`crate::Store::append_audit`] still appends an
//! entry on its own, for the one the engine cannot attach to a change.

use hourglass_core::JobId;
use jiff::Timestamp;

use crate::Created;

/// The most job ids an entry lists; a larger batch lists its first ones and its count.
pub const AUDIT_JOB_IDS: usize = 20;

/// The most field names an edit's entry lists (there are fewer fields than that).
pub const AUDIT_FIELDS: usize = 16;

/// What a request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    /// Jobs created (one, or a batch).
    Create,
    /// A job's definition changed (`PATCH`); the entry names the fields.
    Change,
    Pause,
    Resume,
    Cancel,
    Trigger,
    /// A dead letter replayed as a new job (the entry names both).
    Replay,
    /// A dead letter deleted.
    Purge,
    /// The namespace's webhook signing secret rotated.
    RotateSecret,
    /// A calendar written (created, or replaced with its jobs re-planned): the entry names it.
    PutCalendar,
    DeleteCalendar,
    /// An anchor written (created, or moved with its jobs): the entry names it.
    PutAnchor,
    /// An anchor deleted (its jobs cancelled): the entry names it.
    DeleteAnchor,
}

impl AuditAction {
    pub const ALL: [AuditAction; 13] = [
        AuditAction::Create,
        AuditAction::Change,
        AuditAction::Pause,
        AuditAction::Resume,
        AuditAction::Cancel,
        AuditAction::Trigger,
        AuditAction::Replay,
        AuditAction::Purge,
        AuditAction::RotateSecret,
        AuditAction::PutCalendar,
        AuditAction::DeleteCalendar,
        AuditAction::PutAnchor,
        AuditAction::DeleteAnchor,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Create => "create",
            AuditAction::Change => "change",
            AuditAction::Pause => "pause",
            AuditAction::Resume => "resume",
            AuditAction::Cancel => "cancel",
            AuditAction::Trigger => "trigger",
            AuditAction::Replay => "replay",
            AuditAction::Purge => "purge",
            AuditAction::RotateSecret => "rotate_secret",
            AuditAction::PutCalendar => "put_calendar",
            AuditAction::DeleteCalendar => "delete_calendar",
            AuditAction::PutAnchor => "put_anchor",
            AuditAction::DeleteAnchor => "delete_anchor",
        }
    }

    pub fn parse(name: &str) -> Option<AuditAction> {
        AuditAction::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

/// One entry as appended. Bounded: at most [`AUDIT_JOB_IDS`] ids and [`AUDIT_FIELDS`] fields
/// (the caller bounds them; a store keeps what it is given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub at: Timestamp,
    pub namespace: String,
    /// The id of the API key that made the request (never the key itself).
    pub key_id: String,
    pub action: AuditAction,
    /// The jobs it concerns: created, changed, or made by a replay; the first ones of a batch.
    pub jobs: Vec<JobId>,
    /// How many jobs it concerns (a batch's size, of which `jobs` lists the first).
    pub count: u32,
    /// The dead letter a replay or purge concerns.
    pub dead_letter: Option<i64>,
    /// For a change, the names of the fields it changed.
    pub fields: Vec<String>,
    /// The calendar or anchor a put or delete concerns.
    pub name: Option<String>,
}

impl AuditRecord {
    /// This entry naming `jobs`: their count, and the first [`AUDIT_JOB_IDS`] of them.
    pub fn naming(mut self, jobs: impl IntoIterator<Item = JobId>) -> Self {
        self.jobs.clear();
        let mut count: u64 = 0;
        for id in jobs {
            if self.jobs.len() < AUDIT_JOB_IDS {
                self.jobs.push(id);
            }
            count += 1;
        }
        self.count = u32::try_from(count).unwrap_or(u32::MAX);
        self
    }

    /// The stored form of `jobs`: ids separated by spaces (a job filter looks for one in it).
    pub fn jobs_text(&self) -> String {
        let mut out = String::with_capacity(self.jobs.len() * 37);
        for (i, id) in self.jobs.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&id.to_string());
        }
        out
    }

    /// The stored form of `fields`: names separated by commas.
    pub fn fields_text(&self) -> String {
        self.fields.join(",")
    }

    /// The inverse of [`AuditRecord::jobs_text`].
    pub fn jobs_from_text(text: &str) -> crate::Result<Vec<JobId>> {
        text.split(' ')
            .filter(|s| !s.is_empty())
            .map(|s| {
                JobId::parse_str(s)
                    .map_err(|_| crate::StoreError::Corrupt(format!("audit job id {s:?}")))
            })
            .collect()
    }

    /// The inverse of [`AuditRecord::fields_text`].
    pub fn fields_from_text(text: &str) -> Vec<String> {
        text.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Whether the entry concerns `job`.
    pub fn concerns(&self, job: JobId) -> bool {
        self.jobs.contains(&job)
    }
}

/// An entry's place in its namespace's log, newest first: the time it was appended, then a
/// number the store gave it (its order of appending on the SQL stores). A page ends at its last
/// entry's cursor; the next page starts after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AuditCursor {
    pub at_ms: i64,
    pub seq: i64,
}

impl AuditCursor {
    /// Before every entry: where the first page starts.
    pub const NEWEST: AuditCursor = AuditCursor {
        at_ms: i64::MAX,
        seq: i64::MAX,
    };

    /// The opaque text the API hands out (`<at_ms>.<seq>`).
    pub fn encode(&self) -> String {
        format!("{}.{}", self.at_ms, self.seq)
    }

    /// The inverse of [`AuditCursor::encode`]; `None` for anything it could not have produced.
    pub fn parse(text: &str) -> Option<Self> {
        let crate::RunCursor { started_ms, seq } = crate::RunCursor::parse(text)?;
        Some(AuditCursor {
            at_ms: started_ms,
            seq,
        })
    }
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub cursor: AuditCursor,
    pub record: AuditRecord,
}

/// Which entries of a namespace's log to read: up to `limit` older than `before` (newest first
/// when `None`), only those concerning `job` when given.
#[derive(Debug, Clone)]
pub struct AuditQuery {
    pub namespace: String,
    pub before: Option<AuditCursor>,
    pub job: Option<JobId>,
    pub limit: usize,
}

/// The entry a create batch writes: `audit` naming the jobs it created, or none when it created
/// none (every job was found by its key: an idempotent repeat).
pub(crate) fn of_created(audit: Option<AuditRecord>, created: &[Created]) -> Option<AuditRecord> {
    let new = created.iter().filter_map(|c| match c {
        Created::New(record) => Some(record.id),
        Created::Existing(_) => None,
    });
    let entry = audit?.naming(new);
    (entry.count > 0).then_some(entry)
}
