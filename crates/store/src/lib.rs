//! The store contract: durable jobs with a due-time index, fenced claims and batched completions.
//!
//! Every backend implements [`Store`] and must pass the one conformance suite (`conformance`,
//! compiled with the `testsuite` feature for the backends' tests). Each backend is behind its own
//! feature (`sqlite`, `postgres`; both default), so a crate that needs only the trait builds
//! neither.
//! Architecture Invariant: nothing here knows HTTP or the API's wire shapes, and no backend decides
//! *when* something fires: schedules and policies are evaluated by the engine (via core); a backend
//! stores and applies decisions atomically.

mod anchors;
mod audit;
#[cfg(feature = "testsuite")]
pub mod conformance;
#[cfg(feature = "dynamodb")]
pub mod dynamodb;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod failpoint;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod filters;
pub mod memory;
mod nodes;
#[cfg(feature = "sqlite")]
mod packed;
#[cfg(feature = "postgres")]
pub mod postgres;
mod rules;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use std::time::Duration;

use async_trait::async_trait;
use hourglass_core::{Claim, Completion, FencingToken, JobId, JobSpec, JobState, Occurrence};
use jiff::Timestamp;

pub use anchors::{AnchorDelete, AnchorDeleted, AnchorRecord, cancel_reason};
pub use audit::{
    AUDIT_FIELDS, AUDIT_JOB_IDS, AuditAction, AuditCursor, AuditEntry, AuditQuery, AuditRecord,
};
#[cfg(feature = "dynamodb")]
pub use dynamodb::{DynamoOptions, DynamoStore};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore};
pub use rules::RunOutcome;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// Failures a caller can act on. Cloneable because one failed group commit answers many callers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("key {key:?} is already used by job {existing} with a different body")]
    KeyConflict {
        /// Position of the offending job within its batch.
        index: usize,
        key: String,
        existing: JobId,
    },
    #[error("job not found")]
    NotFound,
    /// A conditional update found the job changed since its caller read it
    /// ([`JobUpdate::read_token`]): nothing was written; read it again and retry.
    #[error("the job changed while it was being updated; nothing was changed")]
    Changed,
    #[error("cannot {action} a job that is {}", state.as_str())]
    InvalidState {
        state: JobState,
        action: &'static str,
    },
    /// The store cannot serve now (I/O error, disk full, shutting down). Nothing was changed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store's settings cannot work (a malformed database url, schema name or TLS root):
    /// raised only when a store is opened, and no retry mends it.
    #[error("store misconfigured: {0}")]
    Misconfigured(String),
    /// A job being created names an anchor its namespace does not have (deleted meanwhile).
    #[error("the namespace has no anchor {name:?}")]
    UnknownAnchor { name: String },
    /// A create would give the anchor more than
    /// [`hourglass_core::anchor::MAX_JOBS_PER_ANCHOR`] active or paused jobs. Nothing was created.
    #[error("anchor {name:?} has the most jobs an anchor may have")]
    AnchorFull { name: String },
    /// Stored data could not be decoded. A bug or a downgrade; never user input.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A job to create. Ids are chosen by the caller (uuid v7) so a batch needs no round trip back.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub id: JobId,
    pub namespace: String,
    pub key: Option<String>,
    pub spec: JobSpec,
    /// Raw JSON text, stored and delivered byte for byte.
    pub payload: Option<String>,
    /// Hash of the create request as submitted; an idempotent retry with the same key must match.
    pub fingerprint: i64,
    /// The first occurrence's due time.
    pub first_due: Timestamp,
    pub now: Timestamp,
}

impl NewJob {
    /// The job a completion creates ([`hourglass_core::CallbackJob`]: a callback, or the job an
    /// `allow` job hands an occurrence to) becomes: no key, due when
    /// the engine said, created at `now`. A backend creates it in the completion's transaction,
    /// and only when the completion is applied.
    pub fn callback(callback: &hourglass_core::CallbackJob, now: Timestamp) -> Self {
        Self {
            id: callback.id,
            namespace: callback.namespace.clone(),
            key: None,
            spec: callback.spec.clone(),
            payload: callback.payload.clone(),
            fingerprint: 0,
            first_due: callback.due,
            now,
        }
    }

    /// When the first occurrence fires: its due time, or later by the schedule's jitter.
    pub fn first_fire(&self) -> Timestamp {
        self.spec.schedule.fire_time(self.id, self.first_due)
    }

    /// The job as stored right after its creation: active, nothing run yet.
    pub fn into_record(self) -> JobRecord {
        let first_fire = self.first_fire();
        JobRecord {
            id: self.id,
            namespace: self.namespace,
            key: self.key,
            state: JobState::Active,
            spec: self.spec,
            payload: self.payload,
            next_due: Some(self.first_due),
            next_attempt: Some(first_fire),
            attempt: 0,
            runs: 0,
            skipped: 0,
            created_at: self.now,
            updated_at: self.now,
            token: FencingToken::from_i64(0),
            last_trigger: None,
            leased_until: None,
            last_error: None,
        }
    }
}

/// The most bytes of an error a job keeps as its [`JobRecord::last_error`]: a longer one is cut at
/// the last character boundary within it. (The error texts of failed attempts come from receivers
/// and cloud services, so nothing else bounds them.)
pub const LAST_ERROR_BYTES: usize = 1024;

/// A stored job with its progress.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: JobId,
    pub namespace: String,
    pub key: Option<String>,
    pub state: JobState,
    pub spec: JobSpec,
    pub payload: Option<String>,
    /// Nominal due time of the pending occurrence (or of the last one, for a finished job).
    pub next_due: Option<Timestamp>,
    /// When the pending occurrence's next attempt is due, while the job is active and no claim
    /// holds it: the row's fire time, later than `next_due` while a failed attempt waits out
    /// its backoff (or an open breaker holds it back). `None` while claimed (an attempt is under
    /// way, or its lease has yet to lapse) and for a job that is not active.
    pub next_attempt: Option<Timestamp>,
    /// Failed attempts of the pending occurrence so far; for a job that failed, the attempts its
    /// dead-lettered occurrence made.
    pub attempt: u32,
    /// Occurrences that ran (delivered or dead-lettered).
    pub runs: u64,
    /// Occurrences dropped by the misfire policy.
    pub skipped: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The job's fencing token as read: every claim, edit and lifecycle change raises it. After
    /// an edit or transition, claims with a lower token were made before it and are stale; a
    /// claim made after it carries a higher one.
    pub token: FencingToken,
    /// The job's most recent trigger that carried an idempotency key.
    pub last_trigger: Option<KeyedTrigger>,
    /// While a claim holds the active job (`next_attempt` is `None`): when its lease lapses, the
    /// row's fire time. A lapsed lease shows here until the job is claimed again or settled.
    /// `None` while no claim holds it and for a job that is not active. For queue targets it is
    /// when a worker's lease ends; the API shows it on a queue's messages.
    pub leased_until: Option<Timestamp>,
    /// The error of the job's most recent failed attempt (a run recorded as `retry` or
    /// `dead_letter`), at most [`LAST_ERROR_BYTES`]; `None` before any failure and once an
    /// occurrence is delivered. Written by the completion that records the run, as
    /// `plan_completion` in `rules.rs` decides; edits and transitions keep it.
    pub last_error: Option<String>,
}

/// A trigger made with an idempotency key: the key, and the due time of the occurrence it made
/// (so a retry with the same key answers the same delivery id instead of firing again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedTrigger {
    pub key: String,
    pub due: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    New(JobRecord),
    /// The key was already used with the same request: the earlier job is returned unchanged.
    Existing(JobRecord),
}

impl Created {
    pub fn record(&self) -> &JobRecord {
        match self {
            Created::New(r) | Created::Existing(r) => r,
        }
    }
}

/// A node's claim on occurrences. Claimed rows are invisible to other claims until `now + ttl`.
#[derive(Debug, Clone)]
pub struct Lease {
    pub owner: String,
    pub ttl: Duration,
    pub now: Timestamp,
}

/// Which occurrences a claim (or a due-time probe) looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimScope<'a> {
    /// Occurrences the engine fires itself: every target except queues.
    Fired,
    /// The available messages of one queue in one namespace, optionally only of some job types.
    ///
    /// A queue claim is a worker's lease: when the previous claim of an occurrence expired
    /// without being completed or released (its visibility timeout passed), that counts as a
    /// failed attempt, so the new claim's `attempt` is one higher.
    ///
    /// With `max_bytes`, a claim stops taking messages once the payloads it took reach that many
    /// bytes (it always takes one, when one is due): a lease's answer, and the memory it takes
    /// to build, stay near that size whatever the messages carry, in one round trip.
    Queue {
        namespace: &'a str,
        queue: &'a str,
        types: Option<&'a [String]>,
        max_bytes: Option<usize>,
    },
}

impl ClaimScope<'_> {
    /// The payload bytes a claim may take before it stops (see [`ClaimScope::Queue`]).
    pub fn max_bytes(&self) -> Option<usize> {
        match self {
            ClaimScope::Fired => None,
            ClaimScope::Queue { max_bytes, .. } => *max_bytes,
        }
    }
}

/// Whether a claim whose messages so far carry `taken` payload bytes may take one more under
/// `max_bytes` (always, while they carry none).
pub fn under_byte_budget(max_bytes: Option<usize>, taken: usize) -> bool {
    taken == 0 || max_bytes.is_none_or(|max| taken < max)
}

/// Counts of one queue's messages (active queue-target jobs) at an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    pub name: String,
    /// Due and not leased (including leases that expired).
    pub available: u64,
    /// Leased, lease not yet expired.
    pub in_flight: u64,
    /// Not yet due.
    pub scheduled: u64,
    /// Fire time of the oldest available message.
    pub oldest_available: Option<Timestamp>,
}

/// Whole-store figures for metrics. Meant to be sampled every few seconds, not per request: a
/// backend may count by scanning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreGauges {
    /// Jobs per state, every state present (zero when none).
    pub jobs_by_state: Vec<(JobState, u64)>,
    /// Occurrences of fired targets whose fire time has passed and that no node has claimed: work
    /// the nodes are behind on (zero on a healthy node, which claims ahead of time).
    pub due_backlog: u64,
    /// The earliest fire time in that backlog.
    pub oldest_backlog: Option<Timestamp>,
    /// Queue messages across every queue and namespace.
    pub queue_available: u64,
    pub queue_in_flight: u64,
    pub queue_scheduled: u64,
    pub oldest_queue_available: Option<Timestamp>,
}

/// A namespace's webhook signing secrets: the current one, and the one it replaced together with
/// the instant until which that one is still honoured (a rotation's overlap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSecrets {
    pub current: String,
    pub previous: Option<(String, Timestamp)>,
}

impl SigningSecrets {
    /// The three columns the SQL backends keep them in: the current secret, the previous one and
    /// the millisecond until which it is honoured (both `None` without one).
    pub fn columns(&self) -> (&str, Option<&str>, Option<i64>) {
        match &self.previous {
            Some((secret, until)) => (&self.current, Some(secret), Some(until.as_millisecond())),
            None => (&self.current, None, None),
        }
    }
}

/// What a [`Store::purge`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub jobs: u64,
    pub runs: u64,
}

/// The dead-letter sweep, the same on every backend: `$1` before, `$2` limit (SQLite numbers
/// `$`-parameters in order of appearance, so `$1` must come first in the text). Dead letters are
/// recorded in time order, so the oldest ids are the oldest letters: it looks only at the `limit`
/// oldest, and a table of young letters costs `limit` index entries, not a scan. (Across
/// PostgreSQL nodes, a letter recorded under a clock running behind may wait a sweep longer.)
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const PURGE_DEAD_LETTERS: &str = "
    DELETE FROM dead_letters
    WHERE created_ms < $1
      AND id IN (SELECT id FROM dead_letters ORDER BY id LIMIT $2)";

/// A node's latest heartbeat: who it is and how busy, as it last said. A node writes one every
/// few seconds (the engine's heartbeat stage); [`Store::nodes`] lists those still live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBeat {
    /// The node's name in leases (`--node-id`).
    pub id: String,
    /// The node's software version.
    pub version: String,
    /// When the node's engine started.
    pub started_at: Timestamp,
    /// When this heartbeat was written, by the node's clock.
    pub beat_at: Timestamp,
    /// Occurrences the node held claimed when it wrote this heartbeat, by its own count.
    pub claims_held: u64,
    /// Until when the heartbeat counts: a node that has not written another by then is not live.
    pub live_until: Timestamp,
}

/// Whether a completion was applied or refused because its fencing token is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Yes,
    StaleLease,
}

/// A claimed occurrence handed back unfired, to fire at `fire_at` without waiting for the lease to
/// expire and without counting an attempt: at shutdown (its own fire time), or held back by its
/// destination's open circuit breaker (when the breaker closes).
#[derive(Debug, Clone, Copy)]
pub struct Release {
    pub job_id: JobId,
    pub token: FencingToken,
    pub fire_at: Timestamp,
}

#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    /// `None` lists every namespace (admin only; the API enforces that).
    pub namespace: Option<String>,
    pub state: Option<JobState>,
    pub job_type: Option<String>,
    pub due_before: Option<Timestamp>,
    pub due_after: Option<Timestamp>,
    /// Return jobs with ids greater than this (ids are time-ordered).
    pub after: Option<JobId>,
    pub limit: usize,
    /// Only jobs whose target is this pull queue (of the namespace each job is in): with
    /// `state: Some(Active)`, that queue's messages, as [`Store::queue_stats`] counts them.
    pub queue: Option<String>,
    /// Only jobs whose labels satisfy every one of these selectors (none: no label filter). The
    /// SQL stores answer them from their label index (`job_labels`), the others by reading the
    /// jobs. The API bounds their number ([`hourglass_core::labels::MAX_SELECTORS`]).
    pub labels: Vec<hourglass_core::Selector>,
    /// Only jobs whose schedule refers to this anchor (of the namespace each job is in).
    pub anchor: Option<String>,
}

/// A change of a job's lifecycle state requested through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    Pause {
        now: Timestamp,
    },
    /// Back to active: a one-off keeps its due time (firing at once if it passed); a recurring job
    /// continues with its first occurrence at or after `now`.
    Resume {
        now: Timestamp,
    },
    Cancel {
        now: Timestamp,
    },
    /// An extra occurrence due `now`; the schedule continues after it. With a `key` equal to the
    /// job's [`JobRecord::last_trigger`] key nothing changes (a retried request); with another
    /// key, the job remembers this one as its last keyed trigger.
    Trigger {
        now: Timestamp,
        key: Option<String>,
    },
}

/// A replacement of a job's definition; the pending occurrence moves to `next_due`.
#[derive(Debug, Clone)]
pub struct JobUpdate {
    pub spec: JobSpec,
    pub payload: Option<String>,
    pub next_due: Option<Timestamp>,
    pub now: Timestamp,
    /// The job's token as the caller read it, when the update was computed from that reading
    /// (an edit that keeps the pending occurrence, a re-plan, a backfill): the update applies
    /// only while the job still carries it, else [`StoreError::Changed`]. Without it, a
    /// completion landing between the read and the write would be undone: the job would go
    /// back to an occurrence already delivered, fire it again and count it twice.
    pub read_token: Option<FencingToken>,
}

/// A run's place in its job's history, newest first: the start time, then the order in which
/// runs were recorded. A page of runs ends at its last run's cursor; the next page starts after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCursor {
    pub started_ms: i64,
    pub seq: i64,
}

impl RunCursor {
    /// Before every run: where the first page starts.
    pub const NEWEST: RunCursor = RunCursor {
        started_ms: i64::MAX,
        seq: i64::MAX,
    };

    /// The opaque text the API hands out (`<started_ms>.<seq>`).
    pub fn encode(&self) -> String {
        format!("{}.{}", self.started_ms, self.seq)
    }

    /// The inverse of [`RunCursor::encode`]; `None` for anything it could not have produced.
    pub fn parse(text: &str) -> Option<Self> {
        let (started, seq) = text.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(started) || !digits(seq) {
            return None;
        }
        Some(RunCursor {
            started_ms: started.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Where this run sits in the job's history; pass the last one back for the next page.
    pub cursor: RunCursor,
    pub job_id: JobId,
    pub due: Timestamp,
    pub attempt: u32,
    pub started_at: Timestamp,
    pub latency_ms: u32,
    pub status: Option<u16>,
    pub error: Option<String>,
    /// The start of what the target answered to a failed attempt (at most 1 KiB).
    pub response: Option<String>,
    pub outcome: RunOutcome,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub id: i64,
    pub namespace: String,
    pub job_id: JobId,
    pub due: Timestamp,
    pub attempts: u32,
    pub reason: String,
    pub spec: JobSpec,
    pub payload: Option<String>,
    pub created_at: Timestamp,
}

/// What a shared store announces to every node using it, so that a sleeping planner or a waiting
/// queue consumer looks at the store again at once instead of at its next planned wake-up, and a
/// node drops a claim that an edit made stale before it fires.
///
/// Events are hints, never data: a receiver re-reads the store (claim, next due) and must not
/// assume that an event names exactly one occurrence, nor that every change produced one. A
/// receiver that lags behind the channel (`RecvError::Lagged`) or gets [`StoreEvent::Resync`] has
/// missed events and re-checks everything it waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreEvent {
    /// Something became due, possibly earlier than anyone planned.
    Due(DueEvent),
    /// The job was paused, cancelled, edited or triggered: every claim on it with a token below
    /// `token` is stale. A node holding one drops it unfired (its completion would be refused
    /// anyway). Claims made after the change carry `token` or higher and stay valid.
    Fenced { job_id: JobId, token: FencingToken },
    /// Events may have been lost (the store's listener reconnected after an outage): every
    /// waiter re-checks the store.
    Resync,
}

/// Occurrences became due at `at` (or will be): created, retried, released, resumed, triggered,
/// or moved by an edit. One event carries the *earliest* fire time of a whole transaction per kind
/// of target, and per queue for queue targets, so a batch of a thousand creates is one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueEvent {
    /// The namespace of the earliest occurrence. For fired targets (`queue: None`) it is
    /// informational: the planner claims across namespaces.
    pub namespace: String,
    /// `Some(name)`: a message of that queue (in `namespace`) becomes available at `at`; queue
    /// long-polls wait on these. `None`: an occurrence the engine fires itself.
    pub queue: Option<String>,
    pub at: Timestamp,
}

/// The durable home of jobs. Methods taking a `namespace` of `None` act across namespaces.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The backend's name for metrics and the bench (`sqlite`, `postgres`).
    fn backend(&self) -> &'static str;

    /// Events from every node sharing this store, this one included: see [`StoreEvent`]. `None`
    /// when the store has no other writers to hear from (the embedded store: the API pokes its
    /// own engine directly). Each call returns a new receiver that sees events from then on.
    fn events(&self) -> Option<tokio::sync::broadcast::Receiver<StoreEvent>> {
        None
    }

    /// Creates jobs in one transaction: all or none. A job whose namespace and key already exist
    /// with the same fingerprint returns the existing job; with another fingerprint the whole batch
    /// fails with [`StoreError::KeyConflict`].
    /// `audit` (as in every method that makes an API change): the entry recording it, written in
    /// its transaction only when it is applied (`audit.rs`). Here the store fills in the jobs it
    /// created, and writes none when every job was an existing one (an idempotent repeat).
    async fn create_jobs(
        &self,
        jobs: Vec<NewJob>,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<Created>>;

    /// Claims up to `limit` active occurrences whose fire time is at or before `horizon`, earliest
    /// first, under `lease`. Each returned occurrence carries a fresh fencing token. A store whose
    /// leases cover several occurrences at once may hand out, with those due by the horizon,
    /// fired occurrences that share their lease and fall due up to [`Store::claim_reach`] later:
    /// the caller fires each at its own fire time, never before.
    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>>;

    /// How far past the horizon [`Store::claim_due`] may hand out fired occurrences (never queue
    /// messages). Zero for stores that lease row by row.
    fn claim_reach(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }

    /// How long a caller may gather completions before writing them in one [`Store::complete`]
    /// call: those of occurrences not due again (delivered one-offs, dead letters), and those due
    /// again (a retry, a recurring job's next occurrence) later than the linger and the claim
    /// that must follow it. A store that
    /// pays per write call, whatever it holds (DynamoDB), asks for longer; the others take the
    /// engine's short default. Lingering delays only the bookkeeping after a delivery: a crash
    /// meanwhile means a redelivery under the same delivery id, never a loss.
    fn completion_linger(&self) -> Option<std::time::Duration> {
        None
    }

    /// Moves the lease expiry of claims to `until`, each only if its token is still current and it
    /// is still claimed. The answer says which were applied, in order.
    async fn extend_claims(
        &self,
        claims: Vec<Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>>;

    /// Applies completions in one transaction. Each is applied only if its token is still the
    /// job's current one; the answer says which were applied, in order.
    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>>;

    /// Hands back claims that were never fired.
    async fn release(&self, claims: Vec<Release>) -> Result<()>;

    /// The earliest fire time among active occurrences in `scope`, claimed ones at their lease
    /// expiry. For a queue scope the type filter is ignored (a cheap upper bound on waiting).
    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>>;

    /// Queue counts of a namespace at `now`: every queue that has active jobs, by name, or just
    /// `queue` (zeros when it has none).
    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>>;

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>>;
    /// The job of `namespace` that holds `key`. At most one does: a key is unique per namespace
    /// among jobs not cancelled (a cancel frees it), so a cancelled job is not found by its key.
    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>>;
    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>>;
    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64>;

    /// Replaces an active or paused job's definition; any claim on it becomes stale. `audit` is
    /// written with the update (see [`Store::create_jobs`]); a refused update writes none.
    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord>;

    /// Moves a job through its state machine; any claim on it becomes stale. `audit` is written
    /// with the change (see [`Store::create_jobs`]), and not when nothing changes (cancelling a
    /// cancelled job, a keyed trigger repeated) or the transition is refused.
    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord>;

    /// Delivery attempts of a job, newest first: up to `limit` of those older than `before`
    /// (a cursor from the previous page), or the newest ones when `before` is `None`.
    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>>;

    /// Dead letters, oldest first, with ids greater than `after`.
    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>>;
    async fn get_dead_letter(&self, namespace: Option<&str>, id: i64)
    -> Result<Option<DeadLetter>>;
    /// True when it existed; `audit` is written with the delete, only then.
    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<AuditRecord>,
    ) -> Result<bool>;

    /// Retention: deletes up to `limit` finished jobs (completed, failed, cancelled) last changed
    /// before `before`, with their run history, and up to `limit` runs of any job that started
    /// before `before`. Dead letters are kept until deleted. Small batches keep each call short.
    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged>;

    /// Deletes dead letters recorded before `before`, oldest first, looking at no more than the
    /// `limit` oldest; answers how many it deleted.
    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64>;

    /// Appends an entry to its namespace's audit log on its own (see `audit.rs`): one durable
    /// write. For the rare entry no single change carries (a bulk action that stopped early);
    /// every other entry rides in its change's `audit`.
    async fn append_audit(&self, record: AuditRecord) -> Result<()>;

    /// A namespace's audit log, newest first: see [`AuditQuery`]. A `job` filter reads past
    /// entries that do not concern the job (the log is indexed by namespace and time only).
    async fn audit_entries(&self, query: AuditQuery) -> Result<Vec<AuditEntry>>;

    /// Retention: deletes up to `limit` audit entries appended before `before`, oldest first,
    /// and answers how many. A store whose entries expire by themselves (DynamoDB's TTL) answers 0.
    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64>;

    /// Counts for metrics, across namespaces, at `now`.
    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges>;

    /// Records a node's heartbeat, replacing its previous one: one small write. A store may drop
    /// heartbeats whose `live_until` is before this one's `beat_at` meanwhile (nodes long gone).
    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()>;

    /// The nodes whose latest heartbeat is live at `now` (`live_until` after it), by id.
    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>>;

    /// The namespace's webhook signing secrets, if one was ever set.
    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>>;
    /// Sets `secret` as the namespace's secret unless it already has one, atomically (two nodes
    /// may try at once), and answers the secret that is current afterwards.
    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String>;
    /// Makes `secret` the namespace's current secret. The one it replaces stays valid until
    /// `previous_until`, or stops at once when that is `None`. `audit` is written with it.
    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<AuditRecord>,
    ) -> Result<()>;
    /// The namespaces that have a signing secret, in name order.
    async fn signing_namespaces(&self) -> Result<Vec<String>>;
    /// Sets the namespace's secrets to `replacement` if they are still `expected`, atomically,
    /// and answers whether it did (a rotation in between wins; read them again). Re-sealing
    /// secrets under a new encryption key uses it: the stored text changes, not the secrets.
    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool>;

    /// Creates or replaces the namespace's calendar `name`, with `audit` as given. Re-planning
    /// the jobs that use it is the engine's (it computes their due times through core).
    async fn put_calendar(&self, record: &CalendarRecord, audit: Option<AuditRecord>)
    -> Result<()>;
    async fn get_calendar(&self, namespace: &str, name: &str) -> Result<Option<CalendarRecord>>;
    /// The namespace's calendars, in name order.
    async fn list_calendars(&self, namespace: &str) -> Result<Vec<CalendarRecord>>;
    /// Whether there was such a calendar; `audit` is written with the delete, only then.
    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<AuditRecord>,
    ) -> Result<bool>;

    /// Creates the namespace's anchor `record.name` at `record.at`, or moves it there, and in the
    /// same transaction re-times every active or paused job referring to it (`anchors.rs`):
    /// a reader sees all of them moved or none, and claims made before are stale. Answers the
    /// jobs as moved (so that the caller can drop the stale claims it holds at once). `audit`
    /// is written in the same transaction, naming the jobs moved (the store fills its `jobs`
    /// and `count`). (DynamoDB cannot hold a move in one transaction: see its `anchors.rs`.)
    async fn put_anchor(
        &self,
        record: &AnchorRecord,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<JobRecord>>;
    async fn get_anchor(&self, namespace: &str, name: &str) -> Result<Option<AnchorRecord>>;
    /// The namespace's anchors, in name order.
    async fn list_anchors(&self, namespace: &str) -> Result<Vec<AnchorRecord>>;
    /// Deletes the anchor and cancels its active or paused jobs in one transaction, or refuses
    /// while it has any ([`AnchorDelete::IfUnused`]). `audit` is written with a delete, its
    /// `count` the jobs cancelled (the store's to fill); a refusal or a missing anchor writes
    /// none.
    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: AnchorDelete,
        audit: Option<AuditRecord>,
    ) -> Result<AnchorDeleted>;
}

/// A namespace's named calendar ([`hourglass_core::calendar`]), stored as its JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct CalendarRecord {
    pub namespace: String,
    pub name: String,
    pub calendar: hourglass_core::Calendar,
    pub updated_at: Timestamp,
}

impl CalendarRecord {
    /// The stored encoding of the calendar.
    pub fn encode(&self) -> String {
        serde_json::to_string(&self.calendar).unwrap_or_default()
    }

    pub fn decode(namespace: String, name: String, json: &str, updated_ms: i64) -> Result<Self> {
        let calendar = serde_json::from_str(json)
            .map_err(|e| StoreError::Corrupt(format!("calendar {name:?}: {e}")))?;
        Ok(Self {
            namespace,
            name,
            calendar,
            updated_at: hourglass_core::from_ms(updated_ms),
        })
    }
}
