//! Bulk actions: pausing, resuming, cancelling or triggering every job of a namespace that a
//! listing's filters (label selectors, in the API) select, in one request.
//!
//! Each job goes through the store's transition as a single request's would: fenced (claims
//! made before are dropped) and announced. A request reads at most [`BULK_MAX`] of the selected
//! jobs, in id order from its cursor, so it stays bounded whatever the selection holds; when it
//! read that many, its answer carries the cursor to go on from. The request leaves one audit
//! entry with the jobs it changed, as a batch create does.
//!
//! That entry and the changes are not one transaction: a request is up to [`BULK_MAX`] writes,
//! one a job. The rule: the request first reads the ids of the jobs it selects, then changes
//! them in order, and the entry (naming every job changed) rides in the write of the *last*
//! selected job, committing with it. If that last write is refused (the job changed state or
//! went away after it was read) or the request stops early on a store failure, the entry for
//! the jobs changed so far is appended on its own afterwards ([`Store::append_audit`]). A crash
//! part way leaves the jobs changed before it without an entry; repeating the request finds
//! them changed already (a pause or resume selects only the jobs it has yet to change) and
//! records only the ones it changes then.
//!
//! [`Store::append_audit`]: hourglass_store::Store::append_audit

use hourglass_core::{JobId, JobState};
use hourglass_store::{AuditAction, JobQuery, Result, StoreError, Transition};

use super::{Actor, Scheduler};

/// The most jobs one bulk request reads (and so changes).
pub const BULK_MAX: usize = 1000;

/// Jobs read per page: a page holds the jobs' payloads, so it is kept small.
const PAGE: usize = 100;

/// What a bulk request does to each job it selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    Pause,
    Resume,
    Cancel,
    Trigger,
}

impl BulkAction {
    pub const ALL: [BulkAction; 4] = [
        BulkAction::Pause,
        BulkAction::Resume,
        BulkAction::Cancel,
        BulkAction::Trigger,
    ];

    /// The action's name in the API's path (`/v1/jobs/bulk/{name}`).
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Pause => "pause",
            BulkAction::Resume => "resume",
            BulkAction::Cancel => "cancel",
            BulkAction::Trigger => "trigger",
        }
    }

    /// The one state a job must be in to be selected, when the action has one: the listing
    /// then reads only those (and repeating a request finds the jobs it has not changed yet).
    fn only_state(self) -> Option<JobState> {
        match self {
            BulkAction::Pause => Some(JobState::Active),
            BulkAction::Resume => Some(JobState::Paused),
            BulkAction::Cancel | BulkAction::Trigger => None,
        }
    }

    /// Whether a job in `state` is changed. A bulk action acts on live jobs only: it never
    /// cancels or re-triggers a finished job (a single request may).
    fn applies_to(self, state: JobState) -> bool {
        match self {
            BulkAction::Pause => state == JobState::Active,
            BulkAction::Resume => state == JobState::Paused,
            BulkAction::Cancel | BulkAction::Trigger => {
                matches!(state, JobState::Active | JobState::Paused)
            }
        }
    }

    fn transition(self, now: jiff::Timestamp) -> Transition {
        match self {
            BulkAction::Pause => Transition::Pause { now },
            BulkAction::Resume => Transition::Resume { now },
            BulkAction::Cancel => Transition::Cancel { now },
            BulkAction::Trigger => Transition::Trigger { now, key: None },
        }
    }

    fn audit(self) -> AuditAction {
        match self {
            BulkAction::Pause => AuditAction::Pause,
            BulkAction::Resume => AuditAction::Resume,
            BulkAction::Cancel => AuditAction::Cancel,
            BulkAction::Trigger => AuditAction::Trigger,
        }
    }
}

/// A bulk request's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bulked {
    /// The jobs it changed.
    pub changed: u64,
    /// Set when it read [`BULK_MAX`] jobs: more may be selected after this id (the cursor of
    /// the next request).
    pub next: Option<JobId>,
}

impl Scheduler {
    /// Applies `action` to the jobs of `namespace` that `query` selects (its namespace, state
    /// and limit are set here), from `query.after` on: see the module's documentation. A job
    /// that changed state or went away since it was read is skipped. A store failure part way
    /// answers the error; the jobs changed before it keep their change and their audit entry.
    pub async fn bulk(
        &self,
        namespace: &str,
        mut query: JobQuery,
        action: BulkAction,
        by: &Actor,
    ) -> Result<Bulked> {
        query.namespace = Some(namespace.to_owned());
        query.state = action.only_state();
        let now = self.clock.now();
        // The selection first (ids only: a page holds payloads), so that its last job is known.
        let mut selected: Vec<JobId> = Vec::new();
        let mut read = 0;
        let mut last = None;
        let more = loop {
            if read >= BULK_MAX {
                break true;
            }
            query.limit = PAGE.min(BULK_MAX - read);
            let page = self.store.list_jobs(query.clone()).await?;
            read += page.len();
            let full = page.len() == query.limit;
            for job in page {
                query.after = Some(job.id);
                last = Some(job.id);
                if action.applies_to(job.state) {
                    selected.push(job.id);
                }
            }
            if !full {
                break false;
            }
        };
        let mut changed: Vec<JobId> = Vec::with_capacity(selected.len());
        let mut recorded = false;
        let mut outcome = Ok(());
        for (i, id) in selected.iter().enumerate() {
            // The last job's write carries the request's entry, naming it and those before it.
            let entry = (i + 1 == selected.len()).then(|| {
                let jobs: Vec<JobId> = changed.iter().copied().chain([*id]).collect();
                by.entry(namespace, action.audit(), &jobs, now)
            });
            let carries = entry.is_some();
            let transition = action.transition(now);
            match self
                .store
                .transition(Some(namespace), *id, transition, entry)
                .await
            {
                // A cancel of a job cancelled meanwhile changes nothing (and records nothing): the
                // job comes back as that other cancel left it.
                Ok(job)
                    if action == BulkAction::Cancel
                        && job.updated_at.as_millisecond() != now.as_millisecond() => {}
                Ok(job) => {
                    self.changed(&job);
                    changed.push(job.id);
                    recorded = carries;
                }
                Err(StoreError::NotFound | StoreError::InvalidState { .. }) => {}
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        // Stopped early, or the last job's write was refused: the entry on its own.
        if !recorded && !changed.is_empty() {
            let entry = by.entry(namespace, action.audit(), &changed, now);
            self.store.append_audit(entry).await?;
        }
        outcome?;
        Ok(Bulked {
            changed: changed.len() as u64,
            next: if more { last } else { None },
        })
    }
}
