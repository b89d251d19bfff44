//! The scheduler's calendars: reads, and writes that re-plan the jobs naming the calendar (each
//! job's copy of the rules replaced through the read-token rewrite, as an edit is), and deletes
//! refused while a job names it. Each write leaves an audit entry naming the calendar, written
//! in the calendar's own write: a put's entry lists the jobs it is about to re-plan (those that
//! used the calendar with other rules when it was written; the re-plan's edits carry no entry
//! of their own).

use hourglass_core::{Calendar, JobId, Schedule};
use hourglass_store::{AuditAction, CalendarRecord, JobQuery, JobRecord, Result, StoreError};
use std::ops::ControlFlow;

use jiff::Timestamp;

use super::{Actor, Scheduler};

impl Scheduler {
    /// The namespace's calendar `name`.
    pub async fn calendar(&self, namespace: &str, name: &str) -> Result<Option<CalendarRecord>> {
        self.store.get_calendar(namespace, name).await
    }

    /// The namespace's calendars, in name order.
    pub async fn calendars(&self, namespace: &str) -> Result<Vec<CalendarRecord>> {
        self.store.list_calendars(namespace).await
    }

    /// Creates or replaces a calendar, then re-plans every job of the namespace that uses it,
    /// each as an edit is (the job's copy of the calendar replaced, its pending occurrence
    /// recomputed through core, older claims fenced). Answers the record and how many jobs
    /// were re-planned. A job created with the old calendar while this runs may keep the old
    /// copy: putting the calendar again re-plans it.
    ///
    /// The jobs to re-plan are found before the calendar is written, so that its audit entry,
    /// written with it, names them (their count and first ids); one that finishes before its
    /// turn is named but not re-planned (the answer counts only those re-planned).
    pub async fn put_calendar(
        &self,
        namespace: &str,
        name: &str,
        calendar: Calendar,
        by: &Actor,
    ) -> Result<(CalendarRecord, usize)> {
        let record = CalendarRecord {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            calendar,
            updated_at: self.clock.now(),
        };
        let stale: Vec<JobRecord> = self
            .jobs_using(namespace, name, usize::MAX)
            .await?
            .into_iter()
            .filter(|job| {
                let copy = job.spec.schedule.calendar.as_ref();
                copy.is_some_and(|copy| copy.rules != record.calendar)
            })
            .collect();
        let ids: Vec<JobId> = stale.iter().map(|job| job.id).collect();
        let mut entry = by.entry(namespace, AuditAction::PutCalendar, &ids, record.updated_at);
        entry.name = Some(name.to_owned());
        self.store.put_calendar(&record, Some(entry)).await?;
        let mut replanned = Vec::new();
        for job in stale {
            let replan = |job: &JobRecord, now| {
                let mut spec = job.spec.clone();
                // Gone off the calendar, or re-planned by a newer put already: nothing to do.
                let copy = spec.schedule.calendar.as_mut().ok_or(())?;
                if copy.rules == record.calendar {
                    return Err(());
                }
                copy.rules = record.calendar.clone();
                let next_due = replanned_due(&spec.schedule, job, now);
                Ok((spec, next_due, job.payload.clone()))
            };
            match self.rewrite(namespace, job, None, replan).await {
                Ok(Ok((job, _))) => replanned.push(job.id),
                // Finished or deleted meanwhile: nothing left to re-plan.
                Ok(Err(())) | Err(StoreError::InvalidState { .. } | StoreError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((record, replanned.len()))
    }

    /// Deletes a calendar no active or paused job uses: `Ok(Err(job))` names one that does.
    /// `Ok(Ok(false))` when there was no such calendar.
    pub async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        by: &Actor,
    ) -> Result<std::result::Result<bool, JobId>> {
        if let Some(job) = self.jobs_using(namespace, name, 1).await?.first() {
            return Ok(Err(job.id));
        }
        let mut entry = by.entry(
            namespace,
            AuditAction::DeleteCalendar,
            &[],
            self.clock.now(),
        );
        entry.name = Some(name.to_owned());
        let deleted = self
            .store
            .delete_calendar(namespace, name, Some(entry))
            .await?;
        Ok(Ok(deleted))
    }

    /// Up to `limit` active or paused jobs of the namespace whose schedule names calendar
    /// `name`. Walks the namespace's jobs in pages (a calendar is not indexed by its jobs).
    async fn jobs_using(
        &self,
        namespace: &str,
        name: &str,
        limit: usize,
    ) -> Result<Vec<JobRecord>> {
        let mut found = Vec::new();
        let query = JobQuery {
            namespace: Some(namespace.to_owned()),
            limit: CALENDAR_SCAN_PAGE,
            ..JobQuery::default()
        };
        self.in_pages(query, |page| {
            for job in page {
                let uses = job
                    .spec
                    .schedule
                    .calendar
                    .as_ref()
                    .is_some_and(|c| c.name == name);
                if uses && !job.state.is_terminal() {
                    found.push(job);
                    if found.len() >= limit {
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        })
        .await?;
        Ok(found)
    }
}

/// Jobs read per page when looking for the jobs that use a calendar.
const CALENDAR_SCAN_PAGE: usize = 500;

/// A job's pending occurrence after its calendar changed, computed through core: a one-off
/// keeps its due time if the calendar still lets it occur; a recurring job continues with its
/// first occurrence at or after the earlier of its pending due time and `now` (so an overdue
/// occurrence the calendar still keeps is not lost to the fence).
fn replanned_due(schedule: &Schedule, job: &JobRecord, now: Timestamp) -> Option<Timestamp> {
    if !schedule.is_recurring() {
        return job.next_due.filter(|due| schedule.resolve(*due).is_some());
    }
    let from = job.next_due.map_or(now, |due| due.min(now));
    let before = hourglass_core::sub_saturating(from, std::time::Duration::from_millis(1));
    schedule.next_for_run(before, job.runs)
}
