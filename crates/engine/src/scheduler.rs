//! The one door to jobs and queues for the API: every read and every change a client asks for goes
//! through [`Scheduler`], which writes to the store and then makes the engine act on the change —
//! wake the planner or a queue's long polls for what became due, and fence claims an edit made
//! stale. A handler therefore cannot forget a wake-up or a fence (the race that once delayed an
//! edited job by two minutes lived exactly in such a forgotten or misordered call).
//!
//! The scheduler decides nothing about *what* a change does to a job: validation belongs to the
//! API's wire types, and how an edit or transition changes a row to the store's shared rules.
//!
//! Every change it makes on a client's behalf takes the [`Actor`] asking for it and hands the
//! store one entry for the namespace's audit log (`audit.rs`) with the change itself: one per
//! request, so a batch create is one entry. The store writes the entry in the change's own
//! transaction, and only if the change is applied (see `hourglass_store`'s `audit.rs`), so no
//! change is left without its entry, nor an entry without its change. A bulk action, many
//! writes, attaches its one entry to its last (`bulk.rs`).

use std::sync::Arc;

mod anchors;
mod calendars;
mod handed_off;

use hourglass_core::{
    Clock, JobId, JobSpec, JobState, MisfirePolicy, OverlapPolicy, RetryPolicy, Schedule, Target,
};
use hourglass_store::{
    AuditAction, AuditCursor, AuditEntry, AuditRecord, Created, DeadLetter, JobQuery, JobRecord,
    JobUpdate, NewJob, Result, RunCursor, RunRecord, Store, StoreError, StoreGauges, Transition,
};
use jiff::Timestamp;
use sha2::{Digest, Sha256};

use crate::Shared;
pub use crate::audit::Actor;
use crate::queue::Queues;
use crate::quotas::{Admission, NamespaceQuota, QuotaRefusal};

mod bulk;
pub use bulk::{BULK_MAX, BulkAction, Bulked};

/// What a client changes in a job's definition; `None` keeps the current value. Each part is
/// already validated.
#[derive(Debug, Default, Clone)]
pub struct JobEdit {
    pub job_type: Option<String>,
    /// The new schedule and its first due time, computed when it was validated.
    pub schedule: Option<(Schedule, Timestamp)>,
    pub target: Option<Target>,
    pub retry: Option<RetryPolicy>,
    pub misfire: Option<MisfirePolicy>,
    pub overlap: Option<OverlapPolicy>,
    /// `Some(None)` removes the payload.
    pub payload: Option<Option<String>>,
    /// The new labels, replacing all the old ones (empty removes them).
    pub labels: Option<hourglass_core::Labels>,
    /// `Some(None)` removes the callback.
    pub on_failure: Option<Option<hourglass_core::Callback>>,
    pub on_success: Option<Option<hourglass_core::Callback>>,
}

/// How many times an edit is made again on a job that changed under it before its answer is
/// the store's `Changed` (a 503: nothing was changed).
const EDIT_RACES: u32 = 8;

impl JobEdit {
    /// The job's spec, pending due time and payload after this edit of `job` as read: a new
    /// schedule moves the pending occurrence to its first due time; anything else keeps it.
    fn apply(&self, job: &JobRecord) -> Rewrite {
        let mut spec = job.spec.clone();
        let mut next_due = job.next_due;
        if let Some(job_type) = &self.job_type {
            spec.job_type = Some(job_type.clone());
        }
        if let Some((schedule, first_due)) = &self.schedule {
            spec.schedule = schedule.clone();
            next_due = Some(*first_due);
        }
        if let Some(target) = &self.target {
            spec.target = target.clone();
        }
        if let Some(retry) = self.retry {
            spec.retry = retry;
        }
        if let Some(misfire) = self.misfire {
            spec.misfire = misfire;
        }
        if let Some(overlap) = self.overlap {
            spec.overlap = overlap;
        }
        if let Some(labels) = &self.labels {
            spec.labels = labels.clone();
        }
        if let Some(on_failure) = &self.on_failure {
            spec.on_failure = on_failure.clone();
        }
        if let Some(on_success) = &self.on_success {
            spec.on_success = on_success.clone();
        }
        // The key the callbacks' events name (see `JobSpec::callback_key`).
        spec.callback_key = job
            .key
            .clone()
            .filter(|_| spec.on_failure.is_some() || spec.on_success.is_some());
        let payload = self.payload.clone().unwrap_or_else(|| job.payload.clone());
        (spec, next_due, payload)
    }

    /// The wire names of the fields this edit changes, for the audit log.
    pub fn fields(&self) -> Vec<String> {
        [
            ("type", self.job_type.is_some()),
            ("schedule", self.schedule.is_some()),
            ("target", self.target.is_some()),
            ("retry", self.retry.is_some()),
            ("misfire", self.misfire.is_some()),
            ("overlap", self.overlap.is_some()),
            ("payload", self.payload.is_some()),
            ("labels", self.labels.is_some()),
            ("on_failure", self.on_failure.is_some()),
            ("on_success", self.on_success.is_some()),
        ]
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| name.to_owned())
        .collect()
    }
}

/// What became of a backfill request for a job that exists.
#[derive(Debug)]
pub enum Backfilled {
    /// The job (changed, unless the range held nothing new) and how many occurrences it runs.
    Accepted {
        job: Box<JobRecord>,
        occurrences: u64,
    },
    Refused(BackfillRefusal),
}

/// Why a backfill request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackfillRefusal {
    /// A one-off job, or one with no pending occurrence.
    NotRecurring,
    /// The range ends after the job's pending due time (this one).
    PastPending(Timestamp),
    Plan(hourglass_core::backfill::Refusal),
}

/// How a client names one of its namespace's jobs: by id, or by the key it chose at create. A key
/// names the job holding it now: a cancelled job gives its key up, so it is found by id only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRef {
    Id(JobId),
    Key(String),
}

impl From<JobId> for JobRef {
    fn from(id: JobId) -> Self {
        JobRef::Id(id)
    }
}

/// A destination whose circuit breaker is open: its deliveries wait until a probe succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenBreaker {
    /// Scheme, host and port (`https://api.example.com:443`).
    pub destination: String,
    /// When it opened (the first time, if probes failed since).
    pub since: Timestamp,
}

/// Reads and changes jobs, dead letters and queues on behalf of the API. Cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
    queues: Queues,
    /// The operator's create quotas and what they have counted.
    admission: Arc<Admission>,
}

impl Scheduler {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        shared: Arc<Shared>,
        queues: Queues,
        admission: Arc<Admission>,
    ) -> Self {
        Self {
            store,
            clock,
            shared,
            queues,
            admission,
        }
    }

    /// The operator's quotas for `namespace` ([`crate::Quotas::of`]).
    pub fn quotas(&self, namespace: &str) -> NamespaceQuota {
        self.admission.quotas.of(namespace)
    }

    /// Admits `jobs` creates in `namespace` under its `creates_per_second` on this node, or
    /// refuses them all, taking nothing. Checked before [`Scheduler::admit_stored`].
    pub fn admit_creates(&self, namespace: &str, jobs: usize) -> Result<(), QuotaRefusal> {
        self.admission.creates(namespace, jobs)
    }

    /// Admits `jobs` new jobs in `namespace` if it stays within its `max_jobs`, or refuses them
    /// all (`Ok(Err(..))`). The count is read from the store at most every 5 s, with this node's
    /// creates added meanwhile.
    pub async fn admit_stored(
        &self,
        namespace: &str,
        jobs: usize,
    ) -> Result<std::result::Result<(), QuotaRefusal>> {
        if self.admission.needs_count(namespace) {
            let stored = self.store.count_jobs(Some(namespace)).await?;
            self.admission.counted(namespace, stored);
        }
        Ok(self.admission.stored(namespace, jobs))
    }

    /// The engine's clock: the API's "now" for validation and answers.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Whether a pipeline stage has died (see [`crate::Engine::failed`]).
    pub fn has_failed(&self) -> bool {
        self.shared.failed.is_cancelled()
    }

    pub(crate) fn failed_token(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.shared.failed.clone().cancelled_owned()
    }

    /// The namespace's destinations whose breaker is open on this node, oldest first.
    pub fn open_breakers(&self, namespace: &str) -> Vec<OpenBreaker> {
        self.shared
            .breakers
            .open_since(namespace)
            .into_iter()
            .map(|(destination, since)| OpenBreaker {
                destination,
                since: hourglass_core::from_ms(since),
            })
            .collect()
    }

    /// Leasing, acking and waiting on pull queues.
    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// Stores jobs in one transaction (see [`Store::create_jobs`]) and wakes whoever waits for
    /// the new ones: the planner once for the earliest fired job, each queue's polls once.
    /// One entry in the audit log, written in the same transaction, records the request: the
    /// jobs it created (not those an idempotent repeat found), or none when it created nothing.
    pub async fn create(&self, jobs: Vec<NewJob>, by: &Actor) -> Result<Vec<Created>> {
        // The request's time, as its validation read it; the store names the jobs it creates.
        let entry = jobs
            .first()
            .map(|job| by.entry(&job.namespace, AuditAction::Create, &[], job.now));
        self.create_audited(jobs, entry).await
    }

    async fn create_audited(
        &self,
        jobs: Vec<NewJob>,
        entry: Option<AuditRecord>,
    ) -> Result<Vec<Created>> {
        let created = self.store.create_jobs(jobs, entry).await?;
        let mut earliest: Option<Timestamp> = None;
        let mut queues = std::collections::HashSet::new();
        for record in created.iter().filter_map(|c| match c {
            Created::New(record) => Some(record),
            Created::Existing(_) => None,
        }) {
            let (JobState::Active, Some(due)) = (record.state, record.next_due) else {
                continue;
            };
            // When it fires: later than its due time by the schedule's jitter.
            let due = record.next_attempt.unwrap_or(due);
            match record.spec.target.queue() {
                Some(queue) => {
                    queues.insert((record.namespace.as_str(), queue));
                }
                None => earliest = Some(earliest.map_or(due, |e| e.min(due))),
            }
        }
        if let Some(due) = earliest {
            self.shared.wake_for(due);
        }
        for (namespace, queue) in queues {
            self.queues.poke(namespace, queue);
        }
        Ok(created)
    }

    pub async fn get(&self, namespace: &str, job: &JobRef) -> Result<Option<JobRecord>> {
        match job {
            JobRef::Id(id) => self.store.get_job(Some(namespace), *id).await,
            JobRef::Key(key) => self.store.get_job_by_key(namespace, key).await,
        }
    }

    /// The id of the job `job` names, for a call that changes or reads it by id:
    /// [`StoreError::NotFound`] when no job of the namespace holds the key. A key is looked up
    /// once; if its job is cancelled and the key taken by a new job between this lookup and the
    /// call, the call acts on the job that held the key when it was looked up, as a request by
    /// id sent a moment earlier would have.
    async fn resolve(&self, namespace: &str, job: &JobRef) -> Result<JobId> {
        match job {
            JobRef::Id(id) => Ok(*id),
            JobRef::Key(key) => self
                .store
                .get_job_by_key(namespace, key)
                .await?
                .map(|record| record.id)
                .ok_or(StoreError::NotFound),
        }
    }

    /// Jobs the store holds for `namespace`, in every state (finished ones until retention).
    pub async fn count(&self, namespace: &str) -> Result<u64> {
        self.store.count_jobs(Some(namespace)).await
    }

    pub async fn list(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        self.store.list_jobs(query).await
    }

    pub async fn runs(
        &self,
        namespace: &str,
        job: &JobRef,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        let id = self.resolve(namespace, job).await?;
        self.store.runs(Some(namespace), id, before, limit).await
    }

    /// Like [`Scheduler::runs`], with the job's backfills, by which the runs a backfill ran
    /// are told apart (`None` when the job is gone or never backfilled).
    pub async fn runs_marked(
        &self,
        namespace: &str,
        job: &JobRef,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<(Vec<RunRecord>, Option<hourglass_core::backfill::Backfill>)> {
        let (id, backfill) = match self.get(namespace, job).await? {
            Some(record) => (record.id, record.spec.backfill),
            None => (self.resolve(namespace, job).await?, None),
        };
        let runs = self.store.runs(Some(namespace), id, before, limit).await?;
        Ok((runs, backfill))
    }

    /// Applies `edit` to an active or paused job: claims made before the edit are dropped unfired,
    /// and the edited job's next occurrence is announced. An edit that changes nothing answers
    /// the job as it is, unwritten and unaudited. `Ok(None)` when there is no such job.
    pub async fn edit(
        &self,
        namespace: &str,
        job: &JobRef,
        edit: JobEdit,
        by: &Actor,
    ) -> Result<Option<JobRecord>> {
        let fields = edit.fields();
        let Some(record) = self.get(namespace, job).await? else {
            return Ok(None);
        };
        if let Some((schedule, _)) = &edit.schedule {
            self.room_on_anchor(namespace, &record, schedule).await?;
        }
        // Written with the edit that lands (not with a try the store refused), at its time.
        let entry = |id, now| {
            let mut entry = by.entry(namespace, AuditAction::Change, &[id], now);
            entry.fields = fields.clone();
            entry
        };
        let rewritten = self
            .rewrite(namespace, record, Some(&entry), |job, _| {
                let (spec, next_due, payload) = edit.apply(job);
                // An edit that would change nothing writes nothing: no fence, no attempts
                // started over. So a PATCH a client sends again, because the answer to one that
                // landed was lost, is the no-op it looks like. (A finished job is still refused
                // by the store.)
                let same = spec == job.spec && next_due == job.next_due && payload == job.payload;
                if same && !job.state.is_terminal() {
                    return Err(Box::new(job.clone()));
                }
                Ok((spec, next_due, payload))
            })
            .await?;
        let (updated, _) = match rewritten {
            Ok(rewritten) => rewritten,
            Err(unchanged) => return Ok(Some(*unchanged)),
        };
        let updated = self.onto_anchor_as_stored(namespace, updated).await?;
        Ok(Some(updated))
    }

    /// Backfills the nominal occurrences of `job` in `[from, to)` (`from < to <= now`, checked
    /// by the caller): the job runs them, paced, before its own pending occurrence
    /// ([`hourglass_core::backfill`]). Fenced like an edit: a claim of the job made before is
    /// dropped, and its occurrence runs again after the backfill. `Ok(None)` when there is no
    /// such job.
    pub async fn backfill(
        &self,
        namespace: &str,
        job: &JobRef,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Option<Backfilled>> {
        let Some(job) = self.get(namespace, job).await? else {
            return Ok(None);
        };
        let mut occurrences = 0;
        // Planned on the job as read, and planned again if a completion moved its pending
        // occurrence (the one the backfill resumes at) before the write.
        let planned = self
            .rewrite(namespace, job, None, |job, now| {
                let (first, planned) = plan_backfill(job, from, to, now)?;
                occurrences = planned.occurrences;
                let mut spec = job.spec.clone();
                spec.backfill = Some(planned.backfill);
                Ok((spec, Some(first), job.payload.clone()))
            })
            .await?;
        match planned {
            Ok((updated, _)) => Ok(Some(Backfilled::Accepted {
                job: Box::new(updated),
                occurrences,
            })),
            Err(stop) => {
                let stop: Result<Backfilled> = stop;
                stop.map(Some)
            }
        }
    }

    /// Writes `change`'s rewrite of `job` under the token `job` was read with, fencing older
    /// claims and announcing the job's next occurrence. A completion or claim landing between
    /// the read and the write makes the store refuse it ([`StoreError::Changed`]): the job is
    /// read again and `change` asked again on what it became, up to [`EDIT_RACES`] times, after
    /// which the refusal is the answer (a 503: nothing changed). `Ok(Err(stop))` when `change`
    /// stopped with nothing written. Answers the job as written and the time `change` was given.
    /// `entry` makes the audit entry (of the job's id and that time) that the write carries.
    async fn rewrite<S>(
        &self,
        namespace: &str,
        mut job: JobRecord,
        entry: Option<&(dyn Fn(JobId, Timestamp) -> AuditRecord + Sync)>,
        mut change: impl FnMut(&JobRecord, Timestamp) -> std::result::Result<Rewrite, S>,
    ) -> Result<std::result::Result<(JobRecord, Timestamp), S>> {
        let mut races = 0;
        loop {
            let now = self.clock.now();
            let (spec, next_due, payload) = match change(&job, now) {
                Ok(rewrite) => rewrite,
                Err(stop) => return Ok(Err(stop)),
            };
            let update = JobUpdate {
                spec,
                payload,
                next_due,
                now,
                read_token: Some(job.token),
            };
            let audit = entry.map(|entry| entry(job.id, now));
            match self
                .store
                .update_job(Some(namespace), job.id, update, audit)
                .await
            {
                Err(StoreError::Changed) if races < EDIT_RACES => {
                    races += 1;
                    job = self
                        .store
                        .get_job(Some(namespace), job.id)
                        .await?
                        .ok_or(StoreError::NotFound)?;
                }
                done => {
                    let updated = done?;
                    self.changed(&updated);
                    return Ok(Ok((updated, now)));
                }
            }
        }
    }

    /// Pauses, resumes, cancels or triggers a job (`make` gets the current time), then fences
    /// older claims and announces its next occurrence.
    pub async fn transition(
        &self,
        namespace: &str,
        job: &JobRef,
        make: impl FnOnce(Timestamp) -> Transition,
        by: &Actor,
    ) -> Result<JobRecord> {
        let id = self.resolve(namespace, job).await?;
        let now = self.clock.now();
        let transition = make(now);
        let action = match &transition {
            Transition::Pause { .. } => AuditAction::Pause,
            Transition::Resume { .. } => AuditAction::Resume,
            Transition::Cancel { .. } => AuditAction::Cancel,
            Transition::Trigger { .. } => AuditAction::Trigger,
        };
        // Written with the change; a transition that changes nothing (a keyed trigger whose key
        // the job already holds, a cancel of a cancelled job) leaves none.
        let entry = by.entry(namespace, action, &[id], now);
        let job = self
            .store
            .transition(Some(namespace), id, transition, Some(entry))
            .await?;
        self.changed(&job);
        self.cancel_handed_off(&job, now).await?;
        Ok(job)
    }

    pub async fn dead_letters(
        &self,
        namespace: &str,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        self.store.dead_letters(Some(namespace), after, limit).await
    }

    pub async fn dead_letter(&self, namespace: &str, id: i64) -> Result<Option<DeadLetter>> {
        self.store.get_dead_letter(Some(namespace), id).await
    }

    /// True when it existed (and then the audit log records it, in the delete's transaction).
    pub async fn delete_dead_letter(&self, namespace: &str, id: i64, by: &Actor) -> Result<bool> {
        let mut entry = by.entry(namespace, AuditAction::Purge, &[], self.now());
        entry.dead_letter = Some(id);
        self.store
            .delete_dead_letter(Some(namespace), id, Some(entry))
            .await
    }

    /// The namespace's audit log, newest first: up to `limit` entries older than `before`, only
    /// those concerning `job` when given.
    pub async fn audit(
        &self,
        namespace: &str,
        before: Option<AuditCursor>,
        job: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>> {
        self.store
            .audit_entries(hourglass_store::AuditQuery {
                namespace: namespace.to_owned(),
                before,
                job,
                limit,
            })
            .await
    }

    /// Replays a dead letter as a new one-off job due now (so its delivery id is new), then
    /// removes the dead letter. The job's key `replay-<id>` makes a repeated or concurrent replay
    /// of one letter create one job. `Ok(None)` when there is no such dead letter. The audit
    /// entry is written with the job's creation, so only by the replay that created it: one
    /// repeated after a crash between the create and the delete finds the job and leaves none.
    pub async fn replay(&self, namespace: &str, id: i64, by: &Actor) -> Result<Option<Created>> {
        let Some(letter) = self.store.get_dead_letter(Some(namespace), id).await? else {
            return Ok(None);
        };
        let now = self.clock.now();
        let mut spec = letter.spec;
        spec.schedule = Schedule::at(now);
        // A replay is an occurrence of its own: a letter of an `allow` job's handed-off
        // occurrence is no longer sent under that occurrence's delivery id.
        spec.occurrence_of = None;
        let key = format!("replay-{id}");
        let job = NewJob {
            id: uuid::Uuid::now_v7(),
            namespace: namespace.to_owned(),
            fingerprint: replay_fingerprint(&key),
            key: Some(key),
            spec,
            payload: letter.payload,
            first_due: now,
            now,
        };
        let mut entry = by.entry(namespace, AuditAction::Replay, &[], now);
        entry.dead_letter = Some(id);
        let created = self
            .create_audited(vec![job], Some(entry))
            .await?
            .into_iter()
            .next();
        self.store
            .delete_dead_letter(Some(namespace), id, None)
            .await?;
        Ok(created)
    }

    /// The cluster's live nodes (their latest heartbeats), by id.
    pub async fn nodes(&self) -> Result<Vec<hourglass_store::NodeBeat>> {
        self.store.nodes(self.clock.now()).await
    }

    /// Whole-store figures for /metrics (jobs by state, backlog, queue totals).
    pub async fn gauges(&self) -> Result<StoreGauges> {
        self.store.gauges(self.clock.now()).await
    }

    /// Walks the jobs `query` selects in id order, `query.limit` a page, handing each page to
    /// `each` until it breaks or the jobs run out.
    async fn in_pages(
        &self,
        mut query: JobQuery,
        mut each: impl FnMut(Vec<JobRecord>) -> std::ops::ControlFlow<()>,
    ) -> Result<()> {
        loop {
            let page = self.store.list_jobs(query.clone()).await?;
            let full = page.len() == query.limit;
            query.after = page.last().map(|j| j.id);
            if each(page).is_break() || !full {
                return Ok(());
            }
        }
    }

    /// After a job's definition or state changed: claims made before the change (a token below
    /// the job's new one) are dropped unfired, and its next occurrence, if any, is announced.
    fn changed(&self, job: &JobRecord) {
        // Only claims made before this change are stale; the planner may already have claimed
        // the changed job again (with a higher token), and that claim must fire.
        self.shared.fence(job.id, job.token);
        let (JobState::Active, Some(due)) = (job.state, job.next_due) else {
            return;
        };
        let due = job.next_attempt.unwrap_or(due);
        match job.spec.target.queue() {
            Some(queue) => self.queues.poke(&job.namespace, queue),
            None => self.shared.wake_for(due),
        }
    }
}

/// A job's spec, pending due time and payload as a change rewrites them
/// ([`Scheduler::rewrite`]).
type Rewrite = (JobSpec, Option<Timestamp>, Option<String>);

/// A backfill of `[from, to)` planned on `job` as read: the due time it starts at and the plan,
/// or why it stops (a refusal, an answer of nothing new, or a job that is not active).
fn plan_backfill(
    job: &JobRecord,
    from: Timestamp,
    to: Timestamp,
    now: Timestamp,
) -> std::result::Result<(Timestamp, hourglass_core::backfill::Planned), Result<Backfilled>> {
    if job.state != JobState::Active {
        return Err(Err(StoreError::InvalidState {
            state: job.state,
            action: "backfill",
        }));
    }
    let refused = |why| Err(Ok(Backfilled::Refused(why)));
    let (Some(resume), true) = (job.next_due, job.spec.schedule.is_recurring()) else {
        return refused(BackfillRefusal::NotRecurring);
    };
    // While a backfill runs, the job's due time is one of its occurrences.
    if job.spec.backfill.as_ref().is_some_and(|b| b.covers(resume)) {
        return refused(BackfillRefusal::Plan(
            hourglass_core::backfill::Refusal::Running,
        ));
    }
    if to > resume {
        return refused(BackfillRefusal::PastPending(resume));
    }
    let planned = match hourglass_core::backfill::plan(
        &job.spec.schedule,
        job.spec.backfill.as_ref(),
        from,
        to,
        resume,
        now,
    ) {
        Ok(planned) => planned,
        Err(why) => return refused(BackfillRefusal::Plan(why)),
    };
    match planned.first {
        Some(first) => Ok((first, planned)),
        // Nothing new in the range: nothing changes.
        None => Err(Ok(Backfilled::Accepted {
            job: Box::new(job.clone()),
            occurrences: 0,
        })),
    }
}

/// The fingerprint of a replay job: a hash of its key, as JSON text (what earlier versions
/// stored, so a replay repeated across an upgrade is still recognised as the same request).
fn replay_fingerprint(key: &str) -> i64 {
    let text = serde_json::Value::String(key.to_owned()).to_string();
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}
