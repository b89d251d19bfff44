//! When a job's occurrences are due: a single instant, a cron expression in an IANA time zone, or a
//! fixed interval, optionally bounded by a start, an end and a maximum number of runs.
//!
//! DST behaviour (documented in README): cron expressions are evaluated on the local wall clock of
//! their time zone. A fixed local time that a spring-forward gap skips fires at the first instant
//! after the gap; a fixed local time that a fall-back overlap repeats fires once, on its first
//! (earlier) instant. Expressions with wildcards in the time fields (e.g. every 15 minutes) follow
//! real elapsed wall-clock time and fire in both halves of an overlap.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use crate::cron::CronSchedule;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub kind: ScheduleKind,
    /// No occurrence is due before this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Timestamp>,
    /// No occurrence is due after this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<Timestamp>,
    /// The job completes after this many occurrences have run (delivered or dead-lettered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u64>,
    /// Each occurrence fires up to this long after its due (nominal) time, by an offset that is a
    /// function of the job and the due time alone ([`Schedule::fire_time`]).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::jitter::optional_ms"
    )]
    pub jitter: Option<Duration>,
    /// The days occurrences may not fall on, and what happens to one that does
    /// ([`crate::calendar`]): an occurrence keeps its nominal time as its identity, and
    /// [`Schedule::fire_time`] moves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<Box<crate::ScheduleCalendar>>,
    /// The named instant a one-off is at, or an interval starts at, plus an offset
    /// ([`crate::anchor`]): `kind` holds the instant as of the anchor's latest move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<Box<crate::anchor::ScheduleAnchor>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// One occurrence at an instant. `after` delays are resolved to this at create time.
    At(Timestamp),
    Cron(Box<CronSchedule>),
    /// Occurrences at `anchor + k * interval` for k = 0, 1, 2, ... Anchoring (instead of "interval
    /// after the last run") keeps the cadence free of drift however late a delivery completes.
    Every {
        #[serde(with = "duration_ms")]
        interval: Duration,
        anchor: Timestamp,
    },
}

impl Schedule {
    pub fn at(instant: Timestamp) -> Self {
        Self::unbounded(ScheduleKind::At(instant))
    }

    pub fn unbounded(kind: ScheduleKind) -> Self {
        Self {
            kind,
            start: None,
            end: None,
            max_runs: None,
            jitter: None,
            calendar: None,
            anchor: None,
        }
    }

    pub fn is_recurring(&self) -> bool {
        !matches!(self.kind, ScheduleKind::At(_))
    }

    /// The first occurrence due at or after `now` (for `at`: the instant itself, even if it has
    /// passed, so a slightly late create still fires).
    pub fn first_due(&self, now: Timestamp) -> Option<Timestamp> {
        let due = match &self.kind {
            ScheduleKind::At(at) => Some(*at).filter(|at| self.resolve(*at).is_some()),
            _ => {
                let from = self.start.map_or(now, |start| start.max(now));
                self.kept_at_or_after(from)
            }
        }?;
        self.within_end(due)
    }

    /// The first occurrence strictly after `after`, respecting start and end. Max runs is the
    /// caller's concern because only it knows how many have run.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let due = match &self.kind {
            ScheduleKind::At(_) => None,
            _ => match self.start {
                Some(start) if start > after => self.kept_at_or_after(start),
                _ if self.calendar.is_none() => self.raw_after(after),
                _ => self.kept_at_or_after(
                    after
                        .checked_add(jiff::SignedDuration::from_millis(1))
                        .ok()?,
                ),
            },
        }?;
        self.within_end(due)
    }

    /// Like [`Schedule::next_after`], but `None` once `runs_done` occurrences have run and the
    /// schedule allows no more.
    pub fn next_for_run(&self, after: Timestamp, runs_done: u64) -> Option<Timestamp> {
        if self.max_runs.is_some_and(|max| runs_done >= max) {
            return None;
        }
        self.next_after(after)
    }

    /// Counts occurrences in the half-open range `(after, up_to]`, stopping at `cap`.
    pub fn count_between(&self, after: Timestamp, up_to: Timestamp, cap: u64) -> u64 {
        if let (ScheduleKind::Every { interval, .. }, None) = (&self.kind, &self.calendar) {
            // Arithmetic instead of iteration: a week of downtime at 1 s is 604,800 occurrences.
            let Some(first) = self.next_after(after) else {
                return 0;
            };
            let last = self.end.map_or(up_to, |end| end.min(up_to));
            if first > last {
                return 0;
            }
            let step = crate::duration_ms(*interval);
            if step <= 0 {
                return 0;
            }
            let n = (last.as_millisecond() - first.as_millisecond()) / step + 1;
            return (n as u64).min(cap);
        }
        let mut count = 0;
        let mut cursor = after;
        while count < cap {
            match self.next_after(cursor) {
                Some(next) if next <= up_to => {
                    count += 1;
                    cursor = next;
                }
                _ => break,
            }
        }
        count
    }

    /// When the occurrence of `job` due at `due` fires: `due` without jitter; with it, `due` plus
    /// an offset in `[0, jitter)` that depends on `job` and `due` alone ([`crate::jitter`]).
    /// The window is cut to the time until the schedule's next due time after `due`, whatever
    /// its start, end and run count, so the occurrence fires before its successor is due: for an
    /// irregular cron expression (weekdays only, a DST day of 23 or 25 hours, the last of the
    /// month) that is the real time elapsed until its next instant, whatever the gap is on the
    /// wall clock. A one-off has no successor and takes the whole window.
    ///
    /// With a calendar, `due` first moves by its roll ([`crate::calendar`]), and the jitter
    /// window is cut to the time until the next occurrence's moved time, so occurrences still
    /// fire in their nominal order; the offset stays keyed by the nominal `due`.
    pub fn fire_time(&self, job: crate::JobId, due: Timestamp) -> Timestamp {
        if self.calendar.is_some() {
            return self.fire_time_with_calendar(job, due);
        }
        let Some(jitter) = self.jitter else {
            return due;
        };
        let due_ms = due.as_millisecond();
        let mut window = crate::jitter::window_ms(jitter);
        if let Some(next) = self.raw_after(due) {
            window = window.min(next.as_millisecond().saturating_sub(due_ms));
        }
        crate::from_ms(due_ms.saturating_add(crate::jitter::offset_ms(job, due_ms, window)))
    }

    /// `due` moved by the calendar's roll; `None` when it does not occur (or `due` itself
    /// without a calendar).
    pub fn resolve(&self, due: Timestamp) -> Option<Timestamp> {
        match &self.calendar {
            None => Some(due),
            Some(cal) => crate::calendar::resolve(
                cal,
                due,
                |t| self.raw_at_or_after(t),
                |t| self.raw_after(t),
            ),
        }
    }

    fn fire_time_with_calendar(&self, job: crate::JobId, due: Timestamp) -> Timestamp {
        // A due time the calendar does not keep (stored before the calendar changed) fires
        // where it is.
        let base = self.resolve(due).unwrap_or(due);
        let Some(jitter) = self.jitter else {
            return base;
        };
        let base_ms = base.as_millisecond();
        let mut window = crate::jitter::window_ms(jitter);
        let next = due
            .checked_add(jiff::SignedDuration::from_millis(1))
            .ok()
            .and_then(|from| self.kept_at_or_after(from))
            .and_then(|next| self.resolve(next));
        if let Some(next) = next {
            window = window.min(next.as_millisecond().saturating_sub(base_ms).max(0));
        }
        crate::from_ms(base_ms.saturating_add(crate::jitter::offset_ms(
            job,
            due.as_millisecond(),
            window,
        )))
    }

    /// The first nominal occurrence at or after `from` that occurs under the calendar (start,
    /// end and run count aside).
    fn kept_at_or_after(&self, from: Timestamp) -> Option<Timestamp> {
        let Some(cal) = &self.calendar else {
            return self.raw_at_or_after(from);
        };
        let mut from = from;
        for _ in 0..crate::calendar::SEARCH_CAP {
            let n = self.raw_at_or_after(from)?;
            self.within_end(n)?;
            if self.resolve(n).is_some() {
                return Some(n);
            }
            from = crate::calendar::resume_after(
                cal,
                n,
                |t| self.raw_at_or_after(t),
                |t| self.raw_after(t),
            )?;
        }
        None
    }

    fn within_end(&self, due: Timestamp) -> Option<Timestamp> {
        match self.end {
            Some(end) if due > end => None,
            _ => Some(due),
        }
    }

    fn raw_at_or_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.raw_after(t.checked_sub(jiff::SignedDuration::from_millis(1)).ok()?)
    }

    fn raw_after(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            ScheduleKind::At(at) => (*at > t).then_some(*at),
            ScheduleKind::Cron(cron) => cron.next_after(t),
            ScheduleKind::Every { interval, anchor } => {
                // A zero interval (possible only in a row written without validation) has no
                // next occurrence rather than a division by zero.
                let step = crate::duration_ms(*interval);
                if step <= 0 {
                    return None;
                }
                let anchor_ms = anchor.as_millisecond();
                let t_ms = t.as_millisecond();
                let k = if t_ms < anchor_ms {
                    0
                } else {
                    (t_ms - anchor_ms) / step + 1
                };
                Timestamp::from_millisecond(anchor_ms.checked_add(k.checked_mul(step)?)?).ok()
            }
        }
    }
}

pub(crate) mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
pub(crate) use duration_ms as serde_duration_ms;

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cron(expr: &str, tz: &str) -> Schedule {
        Schedule::unbounded(ScheduleKind::Cron(Box::new(
            CronSchedule::parse(expr, tz).unwrap(),
        )))
    }

    #[test]
    fn cron_with_seconds_and_zone() {
        let s = cron("0 30 9 * * MON-FRI", "Europe/Berlin");
        // Saturday 2026-11-21 → next is Monday 09:30 CET (08:30 UTC).
        let next = s.first_due(ts("2026-11-21T12:00:00Z")).unwrap();
        assert_eq!(next, ts("2026-11-23T08:30:00Z"));
        assert_eq!(s.next_after(next).unwrap(), ts("2026-11-24T08:30:00Z"));
    }

    #[test]
    fn five_field_cron_has_minute_precision() {
        let s = cron("*/15 * * * *", "UTC");
        assert_eq!(
            s.first_due(ts("2026-01-01T00:00:00.001Z")).unwrap(),
            ts("2026-01-01T00:15:00Z")
        );
        assert_eq!(
            s.next_after(ts("2026-01-01T00:15:00Z")).unwrap(),
            ts("2026-01-01T00:30:00Z")
        );
    }

    #[test]
    fn never_firing_cron_is_rejected() {
        let c = CronSchedule::parse("0 0 30 2 *", "UTC").unwrap();
        let err = c
            .check_fires_between(ts("2026-01-01T00:00:00Z"), ts("2126-01-01T00:00:00Z"))
            .unwrap_err();
        assert_eq!(err.code, "cron_never_fires");
    }

    #[test]
    fn bad_cron_and_zone_name_the_field() {
        assert_eq!(
            CronSchedule::parse("61 * * * *", "UTC").unwrap_err().field,
            "cron"
        );
        assert_eq!(
            CronSchedule::parse("* * *", "UTC").unwrap_err().code,
            "invalid_cron"
        );
        let err = CronSchedule::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert_eq!(
            (err.code, err.field.as_str()),
            ("unknown_timezone", "timezone")
        );
    }

    #[test]
    fn every_is_anchored_and_drift_free() {
        let anchor = ts("2026-01-01T00:00:00Z");
        let s = Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(10),
            anchor,
        });
        assert_eq!(s.first_due(ts("2025-12-31T00:00:00Z")).unwrap(), anchor);
        assert_eq!(
            s.next_after(ts("2026-01-01T00:00:07.5Z")).unwrap(),
            ts("2026-01-01T00:00:10Z")
        );
        assert_eq!(
            s.next_after(ts("2026-01-01T00:00:10Z")).unwrap(),
            ts("2026-01-01T00:00:20Z")
        );
        assert_eq!(
            s.count_between(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T00:01:00Z"), 1000),
            6
        );
    }

    #[test]
    fn start_end_and_max_runs_bound_the_schedule() {
        let mut s = cron("0 * * * * *", "UTC");
        s.start = Some(ts("2026-01-01T10:00:00Z"));
        s.end = Some(ts("2026-01-01T10:02:00Z"));
        s.max_runs = Some(2);
        assert_eq!(
            s.first_due(ts("2026-01-01T00:00:00Z")).unwrap(),
            ts("2026-01-01T10:00:00Z")
        );
        assert_eq!(
            s.next_for_run(ts("2026-01-01T10:00:00Z"), 1),
            Some(ts("2026-01-01T10:01:00Z"))
        );
        assert_eq!(s.next_for_run(ts("2026-01-01T10:01:00Z"), 2), None);
        assert_eq!(s.next_after(ts("2026-01-01T10:02:00Z")), None);
    }

    #[test]
    fn describe_is_croner_wording_without_the_full_stop() {
        let c = CronSchedule::parse("0 30 9 * * MON-FRI", "Europe/Berlin").unwrap();
        assert_eq!(
            c.describe(),
            "At 09:30, on Monday, Tuesday, Wednesday, Thursday, and Friday"
        );
        let c = CronSchedule::parse("0 0 12 ? * 5#2", "UTC").unwrap();
        assert_eq!(c.describe(), "At 12:00, on the 2nd Friday of the month");
    }

    #[test]
    fn storage_encoding_round_trips() {
        let s = cron("0 30 9 * * MON-FRI", "Europe/Berlin");
        let json = serde_json::to_string(&s).unwrap();
        let back: Schedule = serde_json::from_str(&json).unwrap();
        assert_eq!(s, back);
    }
}
