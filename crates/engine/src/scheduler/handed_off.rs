//! The jobs an `overlap: allow` job handed its occurrences to ([`hourglass_core::overlap`]):
//! each is labelled with the job's id ([`OCCURRENCE_OF_LABEL`]), and cancelling the job cancels
//! those still live, so that nothing of a cancelled job is sent after its cancel is answered.

use std::ops::ControlFlow;

use hourglass_core::overlap::OCCURRENCE_OF_LABEL;
use hourglass_core::{JobId, JobState, Selector};
use hourglass_store::{JobQuery, JobRecord, Result, StoreError, Transition};
use jiff::Timestamp;

use super::Scheduler;

/// Jobs read a page while looking for a cancelled job's live hand-offs.
const PAGE: usize = 500;

impl Scheduler {
    /// Cancels the live jobs that `job`, just cancelled at `now`, handed occurrences to, if it
    /// ever could (it is an `allow` job). Answers how many it cancelled.
    pub(super) async fn cancel_handed_off(&self, job: &JobRecord, now: Timestamp) -> Result<u64> {
        if job.state != JobState::Cancelled
            || job.spec.overlap != hourglass_core::OverlapPolicy::Allow
        {
            return Ok(0);
        }
        let live = self.handed_off(&job.namespace, job.id).await?;
        let mut cancelled = 0;
        for id in live {
            match self
                .store
                // Part of the job's cancel, which its own audit entry records.
                .transition(Some(&job.namespace), id, Transition::Cancel { now }, None)
                .await
            {
                Ok(child) => {
                    self.changed(&child);
                    cancelled += 1;
                }
                // Finished or gone meanwhile: nothing left to stop.
                Err(StoreError::NotFound | StoreError::InvalidState { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(cancelled)
    }

    /// The live jobs `job` of `namespace` handed occurrences to.
    async fn handed_off(&self, namespace: &str, job: JobId) -> Result<Vec<JobId>> {
        let query = JobQuery {
            namespace: Some(namespace.to_owned()),
            labels: vec![Selector {
                key: OCCURRENCE_OF_LABEL.to_owned(),
                value: Some(job.to_string()),
            }],
            limit: PAGE,
            ..Default::default()
        };
        let mut live = Vec::new();
        self.in_pages(query, |page| {
            live.extend(
                page.into_iter()
                    .filter(|j| !j.state.is_terminal())
                    .map(|j| j.id),
            );
            ControlFlow::Continue(())
        })
        .await?;
        Ok(live)
    }
}
