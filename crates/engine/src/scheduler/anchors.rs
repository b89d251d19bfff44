//! The scheduler's anchors: reads, moves and deletes, each one store call (a move re-times the
//! anchor's jobs in the store's transaction), followed by what an edit is followed by for every
//! job it changed: claims made before are dropped unfired, and the new due times announced.

use hourglass_core::JobState;
use hourglass_store::{AnchorDelete, AnchorDeleted, AnchorRecord, JobQuery, Result};
use jiff::Timestamp;

use super::Scheduler;

impl Scheduler {
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
    ) -> Result<(AnchorRecord, u64)> {
        let record = AnchorRecord {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            at,
            updated_at: self.clock.now(),
        };
        let moved = self.store.put_anchor(&record).await?;
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
    ) -> Result<AnchorDeleted> {
        let how = if if_unused {
            AnchorDelete::IfUnused
        } else {
            AnchorDelete::Cancel {
                now: self.clock.now(),
            }
        };
        let deleted = self.store.delete_anchor(namespace, name, how).await?;
        if let AnchorDeleted::Deleted { cancelled } = deleted
            && cancelled > 0
        {
            // The claims this node holds on the cancelled jobs are dropped unfired. A cancelled
            // job is never claimed again, so its token as read now is final.
            let mut after = None;
            loop {
                let page = self
                    .store
                    .list_jobs(JobQuery {
                        namespace: Some(namespace.to_owned()),
                        state: Some(JobState::Cancelled),
                        anchor: Some(name.to_owned()),
                        after,
                        limit: 1000,
                        ..JobQuery::default()
                    })
                    .await?;
                for job in &page {
                    self.changed(job);
                }
                if page.len() < 1000 {
                    break;
                }
                after = page.last().map(|j| j.id);
            }
        }
        Ok(deleted)
    }
}
