//! Anchors: a namespace's named instants (`flight-LH400` departs at ...) that schedules may be
//! relative to. A one-off due "8 hours before the flight" keeps the anchor's name and its offset in
//! its schedule; the schedule's instant is the anchor's instant plus the offset, recomputed
//! whenever the anchor moves ([`Schedule::anchored_at`]). An `every` schedule may start at an
//! anchor the same way: its cadence is aligned to the anchor's instant plus the offset.
//!
//! Moving an anchor re-times every active or paused job that refers to it; which due time each
//! gets is decided here ([`moved_due`]), so every store applies the same rule.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{Schedule, ScheduleKind, ValidationError};

const ONE_MS: std::time::Duration = std::time::Duration::from_millis(1);

/// The longest anchor name.
pub const MAX_NAME: usize = 64;

/// The most active or paused jobs one anchor may have. A move re-times them all in one
/// transaction; this bounds its size (and a move's time to answer).
pub const MAX_JOBS_PER_ANCHOR: u64 = 10_000;

/// What a schedule keeps of the anchor it is relative to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleAnchor {
    /// The anchor's name in the job's namespace.
    pub name: String,
    /// Signed milliseconds from the anchor's instant (`-8h` is -28,800,000).
    pub offset_ms: i64,
}

impl ScheduleAnchor {
    /// The instant this schedule is at (or starts at) while its anchor is at `at`.
    pub fn instant(&self, at: Timestamp) -> Timestamp {
        crate::from_ms(at.as_millisecond().saturating_add(self.offset_ms))
    }
}

/// Checks an anchor's name: 1 to [`MAX_NAME`] ASCII letters, digits, `-`, `_` or `.`, not `.` or
/// `..` (dot segments in a URL path).
pub fn check_name(name: &str, field: &str) -> Result<(), ValidationError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "invalid_anchor",
            field,
            format!(
                "an anchor name is 1 to {MAX_NAME} ASCII letters, digits, '-', '_' or '.' \
                 (not \".\" or \"..\")"
            ),
        ))
    }
}

impl Schedule {
    /// This schedule with its anchor at `at`: a one-off at `at + offset`, an interval aligned to
    /// it. Unchanged without an anchor, and for a cron schedule (which cannot have one).
    pub fn anchored_at(&self, at: Timestamp) -> Schedule {
        let Some(anchor) = &self.anchor else {
            return self.clone();
        };
        let instant = anchor.instant(at);
        let kind = match &self.kind {
            ScheduleKind::At(_) => ScheduleKind::At(instant),
            ScheduleKind::Every { interval, .. } => ScheduleKind::Every {
                interval: *interval,
                anchor: instant,
            },
            ScheduleKind::Cron(cron) => ScheduleKind::Cron(cron.clone()),
        };
        Schedule {
            kind,
            ..self.clone()
        }
    }
}

/// The due time of the pending occurrence of a job whose schedule is now `moved` (its anchor
/// moved), the job having run `runs` occurrences, at `now`; `None` when it has none left.
///
/// A one-off is due at its new instant even if that has passed: it fires at once, as one-offs
/// do however late. An interval that has not run yet starts at its new first occurrence, past or
/// not, and its misfire policy decides what a past one does when it is picked up (as after an
/// outage). One that has run continues with its first occurrence at or after `now` on the new
/// cadence (as a resumed job does): the occurrences it already ran are not run again.
pub fn moved_due(moved: &Schedule, runs: u64, now: Timestamp) -> Option<Timestamp> {
    match &moved.kind {
        ScheduleKind::At(at) => Some(*at).filter(|_| runs == 0),
        ScheduleKind::Every { anchor, .. } if runs == 0 => {
            moved.next_after(crate::sub_saturating(*anchor, ONE_MS))
        }
        _ => moved.next_for_run(crate::sub_saturating(now, ONE_MS), runs),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn anchored(kind: ScheduleKind, offset_ms: i64) -> Schedule {
        Schedule {
            anchor: Some(Box::new(ScheduleAnchor {
                name: "flight".into(),
                offset_ms,
            })),
            ..Schedule::unbounded(kind)
        }
    }

    #[test]
    fn a_one_off_moves_with_its_anchor() {
        let s = anchored(ScheduleKind::At(ts("2027-01-01T02:00:00Z")), -8 * 3_600_000);
        let moved = s.anchored_at(ts("2027-01-02T10:00:00Z"));
        assert_eq!(moved.kind, ScheduleKind::At(ts("2027-01-02T02:00:00Z")));
        assert_eq!(moved.anchor, s.anchor);
        let now = ts("2027-01-01T00:00:00Z");
        assert_eq!(moved_due(&moved, 0, now), Some(ts("2027-01-02T02:00:00Z")));
        // Into the past: still due, so it fires at once.
        let past = s.anchored_at(ts("2026-12-31T00:00:00Z"));
        assert_eq!(moved_due(&past, 0, now), Some(ts("2026-12-30T16:00:00Z")));
    }

    #[test]
    fn an_interval_realigns_to_its_anchor() {
        let every = |anchor| ScheduleKind::Every {
            interval: Duration::from_secs(3600),
            anchor,
        };
        let s = anchored(every(ts("2027-01-01T00:00:00Z")), 0);
        let moved = s.anchored_at(ts("2027-01-01T00:30:00Z"));
        assert_eq!(moved.kind, every(ts("2027-01-01T00:30:00Z")));
        let now = ts("2027-01-01T05:10:00Z");
        // Not run yet: its first occurrence, for the misfire policy to judge.
        assert_eq!(moved_due(&moved, 0, now), Some(ts("2027-01-01T00:30:00Z")));
        // Run already: the next one at or after now.
        assert_eq!(moved_due(&moved, 3, now), Some(ts("2027-01-01T05:30:00Z")));
    }

    #[test]
    fn names_are_path_safe() {
        assert!(check_name("flight-LH400", "name").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(65)] {
            let err = check_name(bad, "schedule.anchor").unwrap_err();
            assert_eq!(
                (err.code, err.field.as_str()),
                ("invalid_anchor", "schedule.anchor")
            );
        }
    }
}
