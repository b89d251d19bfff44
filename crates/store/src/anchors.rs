//! Anchors in the store: a namespace's named instants, and what moving or deleting one does to
//! the jobs that refer to it, decided here once for every backend.
//!
//! A job refers to an anchor when its schedule names one (`Schedule::anchor`); backends index jobs
//! by (namespace, anchor name) so that a move reads only those. A move ([`crate::Store::put_anchor`])
//! writes the anchor and re-times every active or paused job referring to it in one transaction
//! (DynamoDB: see its `anchors.rs`): each job's schedule is re-based on the new instant, its
//! pending occurrence is due when [`hourglass_core::anchor::moved_due`] says, any claim on it is
//! dropped and its fencing token raised, exactly as an edit does (`rules::plan_update`). A claim
//! made before the move can therefore neither complete nor fire the old time. Finished jobs are
//! not touched. A job created while a move runs re-reads the anchor inside its own create
//! transaction ([`rebase_new`]), so it cannot keep the instant from before the move.

use hourglass_core::anchor::{MAX_JOBS_PER_ANCHOR, moved_due};
use hourglass_core::{JobId, JobState};
use jiff::Timestamp;

use crate::{JobRecord, JobUpdate, NewJob, Result, StoreError};

/// A namespace's named instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorRecord {
    pub namespace: String,
    pub name: String,
    pub at: Timestamp,
    pub updated_at: Timestamp,
}

/// What deleting an anchor does with the jobs that refer to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorDelete {
    /// Cancel them (active and paused ones), each with [`cancel_reason`] as its last error.
    Cancel { now: Timestamp },
    /// Refuse while any active or paused job refers to it.
    IfUnused,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorDeleted {
    /// There was no such anchor.
    NotFound,
    /// Refused ([`AnchorDelete::IfUnused`]): this job refers to it. Nothing changed.
    InUse(JobId),
    /// Deleted, with this many jobs cancelled.
    Deleted { cancelled: u64 },
}

/// The reason a job cancelled by its anchor's deletion shows as its `last_error`.
pub fn cancel_reason(name: &str) -> String {
    format!("anchor_deleted: the job's anchor {name:?} was deleted, which cancelled the job")
}

/// Whether a job in this state is re-timed by a move (and cancelled by a delete).
pub(crate) fn is_live(state: JobState) -> bool {
    matches!(state, JobState::Active | JobState::Paused)
}

/// The name of the anchor a job's spec refers to.
pub(crate) fn anchor_of(spec: &hourglass_core::JobSpec) -> Option<&str> {
    spec.schedule.anchor.as_deref().map(|a| a.name.as_str())
}

/// The edit that moves `job` to its anchor's new instant `at`, applied as any edit is (the
/// caller holds the job's row, so the read token always matches); `None` for a job a move does
/// not touch (finished, or not on this anchor).
pub(crate) fn move_update(
    job: &JobRecord,
    name: &str,
    at: Timestamp,
    now: Timestamp,
) -> Option<JobUpdate> {
    if !is_live(job.state) || anchor_of(&job.spec) != Some(name) {
        return None;
    }
    let mut spec = job.spec.clone();
    spec.schedule = spec.schedule.anchored_at(at);
    let next_due = moved_due(&spec.schedule, job.runs, now);
    Some(JobUpdate {
        spec,
        payload: job.payload.clone(),
        next_due,
        now,
        read_token: Some(job.token),
    })
}

/// Re-bases a job being created on its anchor as the create's transaction reads it (`at`), in
/// case the anchor moved after the API computed the job's times.
pub(crate) fn rebase_new(job: &mut NewJob, at: Timestamp) {
    let schedule = job.spec.schedule.anchored_at(at);
    if schedule == job.spec.schedule {
        return;
    }
    job.first_due = match &schedule.kind {
        hourglass_core::ScheduleKind::At(at) => *at,
        _ => schedule
            .first_due(job.now)
            .or_else(|| moved_due(&schedule, 0, job.now))
            .unwrap_or(job.first_due),
    };
    job.spec.schedule = schedule;
}

/// The creates' check of an anchor's bound: `existing` live jobs refer to it and the batch adds
/// `adding`.
pub(crate) fn check_room(name: &str, existing: u64, adding: u64) -> Result<()> {
    if existing.saturating_add(adding) > MAX_JOBS_PER_ANCHOR {
        return Err(StoreError::AnchorFull {
            name: name.to_owned(),
        });
    }
    Ok(())
}
