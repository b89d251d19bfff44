//! Backfill: running a recurring job's nominal occurrences in a past range `[from, to)` once
//! each, on request, paced, before the job goes on with its own.
//!
//! A job has one pending occurrence, so a backfill *is* its pending occurrence while it runs: the
//! request sets the job's due time to the range's first occurrence (an edit, fenced like one)
//! and keeps in the spec the range and `resume`, the job's own pending due time it interrupted.
//! Each backfilled occurrence's completion moves the job to the range's next one, firing
//! [`PACE`] after the previous one fired (or now, if later); after the last one the job resumes
//! at `resume`, where the overlap policy then treats the job's own occurrences that fell due
//! meanwhile as ones that waited for a run in flight ([`crate::overlap`]). A backfill ends
//! before the job's pending due time, so an occurrence due before `to` is always a backfilled
//! one; the misfire policy does not apply to it (it is late by design).
//!
//! Each request remembers its range and when it was asked for (at most [`MAX_RANGES`]), so a
//! backfill repeated over a range already backfilled runs nothing new: an occurrence's id is its
//! nominal time, and each one in a remembered range was run once. A run is marked backfilled
//! when its due time lies in a remembered range and it started after that range's request.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::Schedule;

/// The most occurrences one request may backfill.
pub const MAX_OCCURRENCES: u64 = 1_000;
/// Backfilled occurrences of one job fire at most one per this (10 a second), and each only
/// once the one before it ended; the namespace's delivery quota and the destination's caps
/// apply to them as to any.
pub const PACE: Duration = Duration::from_millis(100);
/// The most backfill ranges a job remembers; a request past it is refused.
pub const MAX_RANGES: usize = 64;

/// A backfill request's range of nominal times, `[from, to)`, and when it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    pub from: Timestamp,
    pub to: Timestamp,
    pub at: Timestamp,
}

impl Range {
    fn contains(&self, due: Timestamp) -> bool {
        self.from <= due && due < self.to
    }
}

/// A job's backfills: the latest (running, or done once the job's due time is past its end)
/// and the earlier ones' ranges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backfill {
    pub latest: Range,
    /// The job's own pending due time the latest backfill interrupted.
    pub resume: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Range>,
}

/// Why a backfill request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// More than [`MAX_OCCURRENCES`] occurrences not yet backfilled in the range.
    TooMany,
    /// The job remembers [`MAX_RANGES`] backfills already.
    TooManyRanges,
    /// The job's previous backfill is still running.
    Running,
}

/// An accepted request: the job's new backfill record, how many occurrences it runs, and the
/// first of them (`None` when the range holds nothing new: then nothing changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub backfill: Backfill,
    pub occurrences: u64,
    pub first: Option<Timestamp>,
}

impl Backfill {
    /// Whether the occurrence due at `due` is a backfilled one (a job's own are never due
    /// before the end of its latest backfill).
    pub fn covers(&self, due: Timestamp) -> bool {
        due < self.latest.to
    }

    fn ranges(&self) -> impl Iterator<Item = &Range> {
        self.earlier.iter().chain(std::iter::once(&self.latest))
    }

    /// Whether a run of the occurrence due at `due` that started at `started` was backfilled.
    pub fn marks(&self, due: Timestamp, started: Timestamp) -> bool {
        self.ranges().any(|r| r.contains(due) && started >= r.at)
    }

    /// The latest backfill's next occurrence after the one due at `after`, skipping those that
    /// earlier backfills ran.
    pub fn next_after(&self, schedule: &Schedule, after: Timestamp) -> Option<Timestamp> {
        next_new(schedule, &self.earlier, after, self.latest.to)
    }
}

/// The first occurrence after `after` and before `to` that no range in `done` holds.
fn next_new(
    schedule: &Schedule,
    done: &[Range],
    mut after: Timestamp,
    to: Timestamp,
) -> Option<Timestamp> {
    loop {
        let due = schedule.next_after(after).filter(|due| *due < to)?;
        match done.iter().find(|r| r.contains(due)) {
            // Jump past the whole range: its occurrences ran.
            Some(r) => after = crate::sub_saturating(r.to, Duration::from_millis(1)).max(due),
            None => return Some(due),
        }
    }
}

/// Plans a backfill of `[from, to)` (`from < to <= resume`, checked by the caller) for a job
/// whose pending due time is `resume`, given its `previous` backfills, asked for at `now`.
pub fn plan(
    schedule: &Schedule,
    previous: Option<&Backfill>,
    from: Timestamp,
    to: Timestamp,
    resume: Timestamp,
    now: Timestamp,
) -> Result<Planned, Refusal> {
    let mut earlier = Vec::new();
    if let Some(previous) = previous {
        if previous.covers(resume) {
            return Err(Refusal::Running);
        }
        earlier.extend(previous.ranges().copied());
    }
    let before_from = crate::sub_saturating(from, Duration::from_millis(1));
    let first = next_new(schedule, &earlier, before_from, to);
    let mut occurrences = 0;
    let mut cursor = first;
    while let Some(due) = cursor {
        occurrences += 1;
        if occurrences > MAX_OCCURRENCES {
            return Err(Refusal::TooMany);
        }
        cursor = next_new(schedule, &earlier, due, to);
    }
    if first.is_some() && earlier.len() >= MAX_RANGES {
        return Err(Refusal::TooManyRanges);
    }
    Ok(Planned {
        backfill: Backfill {
            latest: Range { from, to, at: now },
            resume,
            earlier,
        },
        occurrences,
        first,
    })
}

/// When the backfilled occurrence after one whose attempt started at `fired` fires, that one
/// having ended at `now`.
pub fn paced(fired: Timestamp, now: Timestamp) -> Timestamp {
    crate::add_saturating(fired, PACE).max(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScheduleKind;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn hourly() -> Schedule {
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(3600),
            anchor: ts("2026-01-01T00:00:00Z"),
        })
    }

    const NOW: &str = "2026-01-03T00:00:00Z";

    #[test]
    fn a_range_counts_its_nominal_occurrences_half_open() {
        let s = hourly();
        let p = plan(
            &s,
            None,
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T05:00:00Z"),
            ts(NOW),
            ts(NOW),
        )
        .unwrap();
        assert_eq!(p.occurrences, 5);
        assert_eq!(p.first, Some(ts("2026-01-01T00:00:00Z")));
        let b = &p.backfill;
        assert!(b.covers(ts("2026-01-01T04:00:00Z")));
        assert!(!b.covers(ts("2026-01-01T05:00:00Z")));
        assert_eq!(
            b.next_after(&s, ts("2026-01-01T03:00:00Z")),
            Some(ts("2026-01-01T04:00:00Z"))
        );
        assert_eq!(b.next_after(&s, ts("2026-01-01T04:00:00Z")), None);
    }

    #[test]
    fn repeating_a_backfill_runs_nothing_new_and_overlaps_run_only_the_rest() {
        let s = hourly();
        let (from, to) = (ts("2026-01-01T00:00:00Z"), ts("2026-01-01T05:00:00Z"));
        let first = plan(&s, None, from, to, ts(NOW), ts(NOW)).unwrap().backfill;
        let again = plan(&s, Some(&first), from, to, ts(NOW), ts(NOW)).unwrap();
        assert_eq!((again.occurrences, again.first), (0, None));
        let wider = plan(
            &s,
            Some(&first),
            ts("2026-01-01T03:00:00Z"),
            ts("2026-01-01T08:00:00Z"),
            ts(NOW),
            ts(NOW),
        )
        .unwrap();
        assert_eq!(wider.occurrences, 3);
        assert_eq!(wider.first, Some(ts("2026-01-01T05:00:00Z")));
        let earlier = plan(
            &s,
            Some(&wider.backfill),
            ts("2025-12-31T22:00:00Z"),
            ts("2026-01-01T10:00:00Z"),
            ts(NOW),
            ts(NOW),
        )
        .unwrap();
        // Only 08:00 and 09:00 are new (the anchor is the first occurrence).
        assert_eq!(earlier.occurrences, 2);
        assert_eq!(
            earlier.backfill.next_after(&s, ts("2026-01-01T08:00:00Z")),
            Some(ts("2026-01-01T09:00:00Z"))
        );
    }

    #[test]
    fn a_running_backfill_refuses_another_and_ranges_are_bounded() {
        let s = hourly();
        let (from, to) = (ts("2026-01-01T00:00:00Z"), ts("2026-01-01T05:00:00Z"));
        let running = plan(&s, None, from, to, ts(NOW), ts(NOW)).unwrap().backfill;
        // The job's pending due time is still inside the running backfill.
        assert_eq!(
            plan(
                &s,
                Some(&running),
                from,
                to,
                ts("2026-01-01T02:00:00Z"),
                ts(NOW)
            ),
            Err(Refusal::Running)
        );
        let mut full = running.clone();
        full.earlier = vec![running.latest; MAX_RANGES - 1];
        assert_eq!(
            plan(
                &s,
                Some(&full),
                ts("2026-01-02T00:00:00Z"),
                ts("2026-01-02T01:00:00Z"),
                ts(NOW),
                ts(NOW)
            ),
            Err(Refusal::TooManyRanges)
        );
    }

    #[test]
    fn more_than_the_bound_is_refused() {
        let s = Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(1),
            anchor: ts("2026-01-01T00:00:00Z"),
        });
        let from = ts("2026-01-01T00:00:00Z");
        let fits = crate::add_saturating(from, Duration::from_secs(MAX_OCCURRENCES));
        assert_eq!(
            plan(&s, None, from, fits, ts(NOW), ts(NOW)).map(|p| p.occurrences),
            Ok(MAX_OCCURRENCES)
        );
        let past = crate::add_saturating(fits, Duration::from_millis(1));
        assert_eq!(
            plan(&s, None, from, past, ts(NOW), ts(NOW)),
            Err(Refusal::TooMany)
        );
    }

    #[test]
    fn runs_are_marked_by_range_and_request_time() {
        let s = hourly();
        let at = ts(NOW);
        let b = plan(
            &s,
            None,
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T05:00:00Z"),
            ts(NOW),
            at,
        )
        .unwrap()
        .backfill;
        let due = ts("2026-01-01T01:00:00Z");
        assert!(b.marks(due, at));
        // The job's own run of that time, before the request: not backfilled.
        assert!(!b.marks(due, ts("2026-01-01T01:00:00Z")));
        assert!(!b.marks(ts("2026-01-01T05:00:00Z"), at));
    }

    #[test]
    fn pacing_waits_for_the_pace_or_the_end_of_the_previous_run() {
        let fired = ts("2026-01-01T00:00:00Z");
        assert_eq!(paced(fired, fired), ts("2026-01-01T00:00:00.1Z"));
        let late = ts("2026-01-01T00:00:05Z");
        assert_eq!(paced(fired, late), late);
    }
}
