//! What a recurring job does with occurrences that fall due while its previous occurrence is
//! still in flight: being delivered, waiting for a retry, or leased to a worker and not yet
//! acknowledged. A job has one pending occurrence at a time, so its successors are not claimed
//! until the run in flight ends; when it ends (delivered or dead-lettered), the successors whose
//! fire time has already come are the ones that *waited*, and this policy decides which of them
//! still run. It is applied after the misfire policy has chosen where the job resumes
//! ([`crate::misfire::next_after_run`]); an occurrence this leaves waiting is then late, and the
//! misfire policy judges its lateness when it is picked up like any other's.
//!
//! `allow` runs occurrences concurrently. A job row holds one pending occurrence under one
//! fencing token, so an `allow` job never keeps an occurrence in flight on its own row: when one
//! falls due, its claim is completed at once by *handing it off* ([`crate::Action::HandedOff`])
//! to a one-off job of its own ([`crate::JobSpec::occurrence_of`]), created in the same
//! transaction, and the row moves on to its next occurrence. The child is delivered, retried,
//! leased and dead-lettered like any job, under the parent's delivery id, and its runs are
//! recorded as the parent's; the parent is never in flight, so nothing ever waits or is dropped.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{JobId, Schedule, ScheduleKind};

/// The label each job an `allow` job hands an occurrence to carries, valued with that job's id:
/// it lists them (`GET /v1/jobs?label=hourglass/occurrence-of=<id>`), and cancelling the job
/// cancels those still live. Keys under `hourglass/` are set by Hourglass only
/// ([`crate::labels::RESERVED_PREFIX`]).
pub const OCCURRENCE_OF_LABEL: &str = "hourglass/occurrence-of";

/// How many waiting occurrences of a cron schedule one completion walks to find the last that
/// waited (`every` schedules are counted by arithmetic). Past it the rest are handled at the next
/// completion: the walk runs on the completer's path.
const CRON_WALK_CAP: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlapPolicy {
    /// Drop every occurrence that fell due during the run (recorded as a skipped run with the
    /// reason `overlap`, counted in the job's `skipped`); resume with the first one not yet due.
    Skip,
    /// Keep one waiting, the most recent one that fell due; drop the older ones as `skip` does.
    BufferOne,
    /// Keep them all: each runs in turn, oldest first, as soon as the one before it ends. Their
    /// bound is the misfire policy's: once waiting makes them late past the misfire threshold,
    /// `once` runs one for the whole late run, `skip` none, `all` those within its window (at most
    /// 30 days). Hourglass's behaviour before overlap policies existed, hence the default.
    #[default]
    BufferAll,
    /// Run each occurrence at its time whatever is still in flight: each is handed off to a
    /// one-off job of its own when it falls due (see the module's comment).
    Allow,
}

impl OverlapPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether an occurrence of a job with this policy and `schedule` is handed off to a job of
    /// its own when it falls due: `allow` on a recurring schedule (a one-off has nothing to
    /// overlap with).
    pub fn hands_off(self, schedule: &Schedule) -> bool {
        self == OverlapPolicy::Allow && schedule.is_recurring()
    }

    /// The name the API and the stored spec use.
    pub fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::Skip => "skip",
            OverlapPolicy::BufferOne => "buffer_one",
            OverlapPolicy::BufferAll => "buffer_all",
            OverlapPolicy::Allow => "allow",
        }
    }
}

/// Occurrences an overlap policy dropped on the way to a job's next occurrence: `count` of them,
/// the first due at `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlapSkip {
    pub first: Timestamp,
    pub count: u64,
}

/// The reason a run dropped by an overlap policy is recorded with.
pub const REASON: &str = "overlap";

/// After a run of `job` ended at `now`, where the job resumes under `policy`, given `next`, the
/// occurrence the misfire policy resumes with (counted by `runs_done`, this run included), and
/// what the policy dropped on the way.
pub fn after_run(
    schedule: &Schedule,
    policy: OverlapPolicy,
    job: JobId,
    next: Option<Timestamp>,
    now: Timestamp,
    runs_done: u64,
) -> (Option<Timestamp>, Option<OverlapSkip>) {
    let Some(first) = next else {
        return (None, None);
    };
    let waited = |due: Timestamp| schedule.fire_time(job, due) <= now;
    // `allow` never has a run in flight on its row (its occurrences are handed off), so nothing
    // waited behind one.
    let keeps_all = matches!(policy, OverlapPolicy::BufferAll | OverlapPolicy::Allow);
    if keeps_all || !schedule.is_recurring() || !waited(first) {
        return (next, None);
    }
    let (last, after_first) = last_waiting(schedule, first, now, runs_done, &waited);
    match policy {
        OverlapPolicy::Skip => (
            schedule.next_for_run(last, runs_done),
            Some(OverlapSkip {
                first,
                count: after_first + 1,
            }),
        ),
        OverlapPolicy::BufferOne if after_first > 0 => (
            Some(last),
            Some(OverlapSkip {
                first,
                count: after_first,
            }),
        ),
        OverlapPolicy::BufferOne | OverlapPolicy::BufferAll | OverlapPolicy::Allow => (next, None),
    }
}

/// The last occurrence from `first` on (which waited) that waited, and how many after `first`.
fn last_waiting(
    schedule: &Schedule,
    first: Timestamp,
    now: Timestamp,
    runs_done: u64,
    waited: &dyn Fn(Timestamp) -> bool,
) -> (Timestamp, u64) {
    if let ScheduleKind::Every { interval, .. } = &schedule.kind {
        // Due times `first + k * interval`; every one due by `now` waited but perhaps the last,
        // whose jitter may put its fire time past `now`.
        let step = crate::duration_ms(*interval);
        let mut k = schedule.count_between(first, now, u64::MAX);
        if step > 0 && schedule.max_runs.is_none_or(|max| runs_done < max) {
            let at = |k: u64| {
                crate::from_ms(
                    first
                        .as_millisecond()
                        .saturating_add(step.saturating_mul(k as i64)),
                )
            };
            if k > 0 && !waited(at(k)) {
                k -= 1;
            }
            return (at(k), k);
        }
    }
    let (mut last, mut count) = (first, 0);
    while count < CRON_WALK_CAP {
        match schedule.next_for_run(last, runs_done) {
            Some(due) if waited(due) => {
                last = due;
                count += 1;
            }
            _ => break,
        }
    }
    (last, count)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn every_10s() -> Schedule {
        Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(10),
            anchor: ts("2026-01-01T00:00:00Z"),
        })
    }

    fn cron_10s() -> Schedule {
        Schedule::unbounded(ScheduleKind::Cron(Box::new(
            crate::cron::CronSchedule::parse("*/10 * * * * *", "UTC").unwrap(),
        )))
    }

    const JITTER: Duration = Duration::from_secs(5);

    const JOB: JobId = uuid::Uuid::from_u128(0x0190_f3c2_7b1e_7a3b_9c4d_5e6f_7081_92a3);

    /// A run due at 00:00:10 that ended at 00:00:45: 00:00:20, :30 and :40 waited.
    const NEXT: &str = "2026-01-01T00:00:20Z";
    const ENDED: &str = "2026-01-01T00:00:45Z";

    #[test]
    fn buffer_all_keeps_the_successor_as_before() {
        for s in [every_10s(), cron_10s()] {
            assert_eq!(
                after_run(
                    &s,
                    OverlapPolicy::BufferAll,
                    JOB,
                    Some(ts(NEXT)),
                    ts(ENDED),
                    1
                ),
                (Some(ts(NEXT)), None)
            );
        }
    }

    #[test]
    fn skip_drops_every_occurrence_that_waited() {
        for s in [every_10s(), cron_10s()] {
            assert_eq!(
                after_run(&s, OverlapPolicy::Skip, JOB, Some(ts(NEXT)), ts(ENDED), 1),
                (
                    Some(ts("2026-01-01T00:00:50Z")),
                    Some(OverlapSkip {
                        first: ts(NEXT),
                        count: 3
                    })
                )
            );
        }
    }

    #[test]
    fn buffer_one_keeps_the_latest_that_waited() {
        for s in [every_10s(), cron_10s()] {
            assert_eq!(
                after_run(
                    &s,
                    OverlapPolicy::BufferOne,
                    JOB,
                    Some(ts(NEXT)),
                    ts(ENDED),
                    1
                ),
                (
                    Some(ts("2026-01-01T00:00:40Z")),
                    Some(OverlapSkip {
                        first: ts(NEXT),
                        count: 2
                    })
                )
            );
            // One waited: it is kept, nothing is dropped.
            let ended = ts("2026-01-01T00:00:25Z");
            assert_eq!(
                after_run(&s, OverlapPolicy::BufferOne, JOB, Some(ts(NEXT)), ended, 1),
                (Some(ts(NEXT)), None)
            );
        }
    }

    #[test]
    fn a_successor_not_yet_due_is_no_overlap() {
        let ended = ts("2026-01-01T00:00:19.999Z");
        for policy in [OverlapPolicy::Skip, OverlapPolicy::BufferOne] {
            assert_eq!(
                after_run(&every_10s(), policy, JOB, Some(ts(NEXT)), ended, 1),
                (Some(ts(NEXT)), None)
            );
        }
        // A successor due but firing later by its jitter has not fallen due yet.
        let mut jittered = every_10s();
        jittered.jitter = Some(JITTER);
        let fire = jittered.fire_time(JOB, ts(NEXT));
        if fire > ts(NEXT) {
            let before_fire = crate::sub_saturating(fire, Duration::from_millis(1));
            assert_eq!(
                after_run(
                    &jittered,
                    OverlapPolicy::Skip,
                    JOB,
                    Some(ts(NEXT)),
                    before_fire,
                    1
                ),
                (Some(ts(NEXT)), None)
            );
        }
    }

    #[test]
    fn the_last_waiting_occurrence_is_judged_by_its_fire_time() {
        let mut s = every_10s();
        s.jitter = Some(JITTER);
        // Ended just before 00:00:40 fires: it did not wait, 00:00:30 is the last that did.
        let fire_40 = s.fire_time(JOB, ts("2026-01-01T00:00:40Z"));
        let ended = crate::sub_saturating(fire_40, Duration::from_millis(1));
        let (next, skip) = after_run(&s, OverlapPolicy::BufferOne, JOB, Some(ts(NEXT)), ended, 1);
        if ended >= s.fire_time(JOB, ts("2026-01-01T00:00:30Z")) {
            assert_eq!(next, Some(ts("2026-01-01T00:00:30Z")));
            assert_eq!(skip.map(|s| s.count), Some(1));
        }
        let (next, skip) = after_run(&s, OverlapPolicy::Skip, JOB, Some(ts(NEXT)), ended, 1);
        assert_eq!(next, Some(ts("2026-01-01T00:00:40Z")));
        assert!(skip.is_some());
    }

    #[test]
    fn no_next_occurrence_stays_none_and_one_offs_are_untouched() {
        assert_eq!(
            after_run(&every_10s(), OverlapPolicy::Skip, JOB, None, ts(ENDED), 1),
            (None, None)
        );
        let at = Schedule::at(ts(NEXT));
        assert_eq!(
            after_run(&at, OverlapPolicy::Skip, JOB, Some(ts(NEXT)), ts(ENDED), 1),
            (Some(ts(NEXT)), None)
        );
    }

    #[test]
    fn skip_respects_the_schedule_end() {
        let mut s = every_10s();
        s.end = Some(ts("2026-01-01T00:00:40Z"));
        assert_eq!(
            after_run(&s, OverlapPolicy::Skip, JOB, Some(ts(NEXT)), ts(ENDED), 1),
            (
                None,
                Some(OverlapSkip {
                    first: ts(NEXT),
                    count: 3
                })
            )
        );
    }
}
