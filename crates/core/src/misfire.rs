//! What a recurring job does about occurrences it missed while no node was running (or while the
//! dispatcher was far behind). An occurrence counts as missed when it is picked up more than the
//! node's misfire threshold after its fire time: its due time, or later by the schedule's jitter
//! ([`Schedule::fire_time`]), so that jitter itself never makes an occurrence late. Which
//! occurrences `all` catches up is still decided by their due times. One-off jobs always fire,
//! however late.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::Schedule;
use crate::schedule::serde_duration_ms;

/// Caps how many skipped occurrences are counted. `every` schedules are counted by arithmetic, so
/// their cap is high; cron schedules must be walked one occurrence at a time, on the dispatcher's
/// path, so theirs is low: a per-second cron job after a week's outage would otherwise hold up
/// every other delivery on the node for seconds. The count only feeds the `skipped` figure, which
/// then reads "at least this many".
const SKIP_COUNT_CAP: u64 = 1_000_000;
const CRON_SKIP_COUNT_CAP: u64 = 10_000;

fn skip_count_cap(schedule: &Schedule) -> u64 {
    match schedule.kind {
        crate::ScheduleKind::Cron(_) => CRON_SKIP_COUNT_CAP,
        _ => SKIP_COUNT_CAP,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MisfirePolicy {
    /// Drop missed occurrences; resume with the first one due after now.
    Skip,
    /// Fire one occurrence for the whole missed run, then resume after now.
    #[default]
    Once,
    /// Fire every missed occurrence that is no older than `window`, one after another.
    All {
        #[serde(with = "serde_duration_ms")]
        window: Duration,
    },
}

impl MisfirePolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What to do with a pending occurrence when it is picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireDecision {
    Fire,
    /// Do not deliver; move the job to `next` (or complete it) and count `skipped` occurrences.
    Skip {
        next: Option<Timestamp>,
        skipped: u64,
    },
}

/// Decides whether the occurrence due at `due` and scheduled to fire at `fire` (its due time
/// plus its jitter) fires now.
pub fn decide(
    schedule: &Schedule,
    policy: MisfirePolicy,
    due: Timestamp,
    fire: Timestamp,
    now: Timestamp,
    threshold: Duration,
    runs_done: u64,
) -> FireDecision {
    if !schedule.is_recurring() || !is_missed(fire, now, threshold) {
        return FireDecision::Fire;
    }
    match policy {
        MisfirePolicy::Once => FireDecision::Fire,
        MisfirePolicy::Skip => {
            // The pending one and every one up to now are dropped.
            let skipped = 1 + schedule.count_between(due, now, skip_count_cap(schedule));
            FireDecision::Skip {
                next: schedule.next_for_run(now, runs_done),
                skipped,
            }
        }
        MisfirePolicy::All { window } => {
            // Saturating: a window longer than the representable past reaches back to its start.
            let oldest_wanted = crate::sub_saturating(now, window);
            if due >= oldest_wanted {
                return FireDecision::Fire;
            }
            // Drop everything older than the window; the first occurrence inside it is next.
            let before_window = crate::sub_saturating(oldest_wanted, Duration::from_millis(1));
            let first_inside = schedule.next_for_run(before_window, runs_done);
            let skipped = 1 + schedule.count_between(due, before_window, skip_count_cap(schedule));
            FireDecision::Skip {
                next: first_inside,
                skipped,
            }
        }
    }
}

/// After the occurrence due at `due` (and scheduled to fire at `fire`) has run (delivered or
/// dead-lettered) at `now`, the next pending occurrence's due time and how many were skipped to
/// reach it. `runs_done` includes this run.
pub fn next_after_run(
    schedule: &Schedule,
    policy: MisfirePolicy,
    due: Timestamp,
    fire: Timestamp,
    now: Timestamp,
    threshold: Duration,
    runs_done: u64,
) -> (Option<Timestamp>, u64) {
    if !schedule.is_recurring() {
        return (None, 0);
    }
    let catch_up_from = match policy {
        MisfirePolicy::All { .. } => due,
        // `once` and `skip` resume after now when this run was itself a misfire; an on-time run
        // continues with its successor even if that is already slightly due.
        MisfirePolicy::Once | MisfirePolicy::Skip if is_missed(fire, now, threshold) => {
            let skipped = schedule.count_between(due, now, skip_count_cap(schedule));
            return (schedule.next_for_run(now, runs_done), skipped);
        }
        MisfirePolicy::Once | MisfirePolicy::Skip => due,
    };
    (schedule.next_for_run(catch_up_from, runs_done), 0)
}

fn is_missed(fire: Timestamp, now: Timestamp, threshold: Duration) -> bool {
    // Both instants lie within jiff's range (about ±10,000 years), so the difference fits.
    let late = now.as_millisecond() - fire.as_millisecond();
    late > crate::duration_ms(threshold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScheduleKind;

    const MIN: Duration = Duration::from_secs(60);

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn every_10s() -> Schedule {
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(10),
            anchor: ts("2026-01-01T00:00:00Z"),
        })
    }

    #[test]
    fn on_time_occurrences_fire_and_continue_with_their_successor() {
        let s = every_10s();
        let due = ts("2026-01-01T00:00:10Z");
        let now = ts("2026-01-01T00:00:10.003Z");
        assert_eq!(
            decide(&s, MisfirePolicy::Skip, due, due, now, MIN, 0),
            FireDecision::Fire
        );
        assert_eq!(
            next_after_run(&s, MisfirePolicy::Once, due, due, now, MIN, 1),
            (Some(ts("2026-01-01T00:00:20Z")), 0)
        );
    }

    #[test]
    fn skip_drops_missed_and_counts_them() {
        let s = every_10s();
        let due = ts("2026-01-01T00:00:10Z");
        let now = ts("2026-01-01T00:10:05Z");
        // Missed: 00:00:10 .. 00:10:00 = 60 occurrences.
        assert_eq!(
            decide(&s, MisfirePolicy::Skip, due, due, now, MIN, 0),
            FireDecision::Skip {
                next: Some(ts("2026-01-01T00:10:10Z")),
                skipped: 60
            }
        );
    }

    #[test]
    fn once_fires_one_then_resumes_after_now() {
        let s = every_10s();
        let due = ts("2026-01-01T00:00:10Z");
        let now = ts("2026-01-01T00:10:05Z");
        assert_eq!(
            decide(&s, MisfirePolicy::Once, due, due, now, MIN, 0),
            FireDecision::Fire
        );
        assert_eq!(
            next_after_run(&s, MisfirePolicy::Once, due, due, now, MIN, 1),
            (Some(ts("2026-01-01T00:10:10Z")), 59)
        );
    }

    #[test]
    fn all_fires_within_window_and_skips_older() {
        let s = every_10s();
        let policy = MisfirePolicy::All {
            window: Duration::from_secs(30),
        };
        let now = ts("2026-01-01T00:10:05Z");
        // Inside the window (00:09:35 .. now): fires, then its direct successor is next.
        let due = ts("2026-01-01T00:09:40Z");
        assert_eq!(
            decide(&s, policy, due, due, now, MIN, 0),
            FireDecision::Fire
        );
        assert_eq!(
            next_after_run(&s, policy, due, due, now, MIN, 1),
            (Some(ts("2026-01-01T00:09:50Z")), 0)
        );
        // Older than the window: skipped up to the first one inside it.
        let old = ts("2026-01-01T00:00:10Z");
        assert_eq!(
            decide(&s, policy, old, old, now, MIN, 0),
            FireDecision::Skip {
                next: Some(ts("2026-01-01T00:09:40Z")),
                skipped: 57
            }
        );
    }

    #[test]
    fn one_off_jobs_always_fire() {
        let s = Schedule::at(ts("2026-01-01T00:00:00Z"));
        let now = ts("2026-03-01T00:00:00Z");
        assert_eq!(
            decide(
                &s,
                MisfirePolicy::Skip,
                ts("2026-01-01T00:00:00Z"),
                ts("2026-01-01T00:00:00Z"),
                now,
                MIN,
                0
            ),
            FireDecision::Fire
        );
    }

    #[test]
    fn lateness_counts_from_the_fire_time_not_the_due_time() {
        let s = every_10s();
        let due = ts("2026-01-01T00:00:10Z");
        // Fired 5 s after its due time by its jitter, picked up 61 s after that.
        let fire = ts("2026-01-01T00:00:15Z");
        let on_time = ts("2026-01-01T00:01:15Z");
        assert_eq!(
            decide(&s, MisfirePolicy::Skip, due, fire, on_time, MIN, 0),
            FireDecision::Fire
        );
        assert_eq!(
            next_after_run(&s, MisfirePolicy::Skip, due, fire, on_time, MIN, 1),
            (Some(ts("2026-01-01T00:00:20Z")), 0)
        );
        let late = ts("2026-01-01T00:01:15.001Z");
        assert!(matches!(
            decide(&s, MisfirePolicy::Skip, due, fire, late, MIN, 0),
            FireDecision::Skip { .. }
        ));
    }
}
