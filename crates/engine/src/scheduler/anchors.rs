//! The scheduler's anchors: reads, moves and deletes, each one store call (a move re-times the
//! anchor's jobs in the store's transaction, with the audit entry naming them), followed by what
//! an edit is followed by for every job it changed: claims made before are dropped unfired, and
//! the new due times announced.

use std::ops::ControlFlow;

use hourglass_core::anchor::MAX_JOBS_PER_ANCHOR;
use hourglass_core::{JobState, Schedule};
use hourglass_store::{
    AnchorDelete, AnchorDeleted, AnchorRecord, JobQuery, JobRecord, Result, StoreError,
};
use jiff::Timestamp;

use super::{Actor, AuditAction, Scheduler};

impl Scheduler {
    /// Before an edit puts `job` on an anchor it was not on: refused with
    /// [`StoreError::AnchorFull`] when the anchor already has its most active or paused jobs, as
    /// a create is. (Read before the write, so two such edits at once may pass it together; the
    /// bound keeps a move's transaction small, and that stays true.)
    pub(super) async fn room_on_anchor(
        &self,
        namespace: &str,
        job: &JobRecord,
        schedule: &Schedule,
    ) -> Result<()> {
        let Some(name) = schedule.anchor.as_ref().map(|a| a.name.as_str()) else {
            return Ok(());
        };
        let already = job.spec.schedule.anchor.as_ref().map(|a| a.name.as_str());
        if already == Some(name) {
            return Ok(());
        }
        let mut live = 0;
        for state in [JobState::Active, JobState::Paused] {
            let query = on_anchor(namespace, name, state);
            self.in_pages(query, |page| {
                live += page.len() as u64;
                if live >= MAX_JOBS_PER_ANCHOR {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .await?;
        }
        if live >= MAX_JOBS_PER_ANCHOR {
            return Err(StoreError::AnchorFull {
                name: name.to_owned(),
            });
        }
        Ok(())
    }

    /// After an edit that put `job` on an anchor (its times computed from the anchor as the API
    /// read it): the anchor read again. A move that committed between that read and the edit's
    /// write did not see the job on the anchor and left it at the old instant, so the job is
    /// re-based on the instant stored now, as a move would have re-based it. A move committing
    /// after the write moved the job itself, and the re-base then changes nothing.
    pub(super) async fn onto_anchor_as_stored(
        &self,
        namespace: &str,
        job: JobRecord,
    ) -> Result<JobRecord> {
        let Some(name) = job.spec.schedule.anchor.as_ref().map(|a| a.name.clone()) else {
            return Ok(job);
        };
        let Some(anchor) = self.store.get_anchor(namespace, &name).await? else {
            return Ok(job);
        };
        if job.spec.schedule.anchored_at(anchor.at) == job.spec.schedule {
            return Ok(job);
        }
        let rebased = self
            .rewrite(namespace, job, None, |job, now| {
                let mut spec = job.spec.clone();
                spec.schedule = spec.schedule.anchored_at(anchor.at);
                if spec == job.spec {
                    // Moved meanwhile by the move itself.
                    return Err(Box::new(job.clone()));
                }
                let next_due = hourglass_core::anchor::moved_due(&spec.schedule, job.runs, now);
                Ok((spec, next_due, job.payload.clone()))
            })
            .await?;
        Ok(match rebased {
            Ok((job, _)) => job,
            Err(unchanged) => *unchanged,
        })
    }

    /// The namespace's anchor `name`.
    pub async fn anchor(&self, namespace: &str, name: &str) -> Result<Option<AnchorRecord>> {
        self.store.get_anchor(namespace, name).await
    }

    /// The namespace's anchors, in name order.
    pub async fn anchors(&self, namespace: &str) -> Result<Vec<AnchorRecord>> {
        self.store.list_anchors(namespace).await
    }

    /// Creates the anchor at `at`, or moves it there with every active or paused job referring
    /// to it. Answers the record and how many jobs moved.
    pub async fn put_anchor(
        &self,
        namespace: &str,
        name: &str,
        at: Timestamp,
        by: &Actor,
    ) -> Result<(AnchorRecord, u64)> {
        let record = AnchorRecord {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            at,
            updated_at: self.clock.now(),
        };
        // The store names the jobs the move moved.
        let mut entry = by.entry(namespace, AuditAction::PutAnchor, &[], record.updated_at);
        entry.name = Some(name.to_owned());
        let moved = self.store.put_anchor(&record, Some(entry)).await?;
        for job in &moved {
            self.changed(job);
        }
        Ok((record, moved.len() as u64))
    }

    /// Deletes the anchor: cancels its active or paused jobs, or with `if_unused` refuses while
    /// it has any.
    pub async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        if_unused: bool,
        by: &Actor,
    ) -> Result<AnchorDeleted> {
        let how = if if_unused {
            AnchorDelete::IfUnused
        } else {
            AnchorDelete::Cancel {
                now: self.clock.now(),
            }
        };
        // The store counts the jobs the delete cancelled.
        let mut entry = by.entry(namespace, AuditAction::DeleteAnchor, &[], self.clock.now());
        entry.name = Some(name.to_owned());
        let deleted = self
            .store
            .delete_anchor(namespace, name, how, Some(entry))
            .await?;
        if let AnchorDeleted::Deleted { cancelled } = deleted
            && cancelled > 0
        {
            // The claims this node holds on the cancelled jobs are dropped unfired. A cancelled
            // job is never claimed again, so its token as read now is final.
            let query = on_anchor(namespace, name, JobState::Cancelled);
            self.in_pages(query, |page| {
                page.iter().for_each(|job| self.changed(job));
                ControlFlow::Continue(())
            })
            .await?;
        }
        Ok(deleted)
    }
}

/// The jobs of `namespace` in `state` whose schedule refers to anchor `name`, a page of 1,000.
fn on_anchor(namespace: &str, name: &str, state: JobState) -> JobQuery {
    JobQuery {
        namespace: Some(namespace.to_owned()),
        state: Some(state),
        anchor: Some(name.to_owned()),
        limit: 1000,
        ..JobQuery::default()
    }
}
