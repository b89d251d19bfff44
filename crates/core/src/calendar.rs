//! Calendars: the days a schedule's occurrences may not fall on (holidays, maintenance windows,
//! weekends), in one time zone, and the roll rule that moves an excluded occurrence.
//!
//! A calendar excludes dates, inclusive date ranges and days of the week, each read on the
//! calendar's own wall clock. A schedule names a calendar and a [`Roll`]; the job keeps a copy of
//! the calendar in its stored schedule ([`ScheduleCalendar`]), so every due and fire time is a
//! function of the job alone, as jitter is, and a store never looks a calendar up to fire.
//!
//! The rules (README, "Calendars and business days"), for a nominal occurrence `n` of the
//! schedule (its identity and delivery id, whatever its calendar does):
//! - `n` on an included day fires at `n`.
//! - `skip`: `n` on an excluded day does not occur.
//! - `previous` / `next`: `n` moves to the nearest included day before / after its own, at the
//!   same wall-clock time on the calendar's clock (a time in a gap fires at the first instant after
//!   it, a time in an overlap at its earlier instant, as a fixed-time cron does). It is **dropped**
//!   (as with `skip`) when that would reach another nominal occurrence: `previous` keeps it only if
//!   no nominal occurrence lies in `[moved, n)`, `next` only if the schedule's next nominal
//!   occurrence is after the moved time. So rolls never make two occurrences fire together, and
//!   occurrences fire in their nominal order: "the 25th, or the previous business day" of a daily
//!   job whose 24th also fires is the 24th's occurrence alone.
//!
//! Bounds: [`MAX_DATES`] dates, [`MAX_RANGES`] ranges, names of at most [`MAX_NAME`] characters,
//! and at least one included day in the [`HORIZON_YEARS`] years after the calendar is written.

use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::ValidationError;

/// The most excluded dates a calendar holds.
pub const MAX_DATES: usize = 1000;
/// The most excluded date ranges a calendar holds.
pub const MAX_RANGES: usize = 100;
/// The longest calendar name, in characters (ASCII letters, digits, `-`, `_`, `.`).
pub const MAX_NAME: usize = 64;
/// A calendar must include at least one day within this many years of when it is written.
pub const HORIZON_YEARS: i16 = 100;

/// What happens to an occurrence that falls on an excluded day.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Roll {
    /// It does not occur.
    #[default]
    Skip,
    /// It fires on the nearest included day before, at the same wall-clock time.
    Previous,
    /// It fires on the nearest included day after, at the same wall-clock time.
    Next,
}

impl Roll {
    pub fn as_str(self) -> &'static str {
        match self {
            Roll::Skip => "skip",
            Roll::Previous => "previous",
            Roll::Next => "next",
        }
    }
}

/// An inclusive range of dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DateRange {
    pub from: Date,
    pub to: Date,
}

/// The days a calendar excludes, on its own wall clock. Built by [`Calendar::new`], which
/// validates and normalizes (dates sorted and without repeats, weekdays in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calendar {
    pub timezone: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dates: Vec<Date>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<DateRange>,
    /// ISO day numbers, Monday 1 to Sunday 7.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weekdays: Vec<u8>,
}

/// A schedule's calendar: its name (for views and for re-planning when the calendar changes),
/// the roll rule, and the copy of the calendar the job's times are computed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleCalendar {
    pub name: String,
    #[serde(default)]
    pub roll: Roll,
    pub rules: Calendar,
}

/// Checks a calendar's name: 1 to [`MAX_NAME`] ASCII letters, digits, `-`, `_` or `.`.
pub fn check_name(name: &str, field: &str) -> Result<(), ValidationError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::new(
            "invalid_calendar",
            field,
            format!("a calendar name is 1 to {MAX_NAME} ASCII letters, digits, '-', '_' or '.'"),
        ))
    }
}

impl Calendar {
    /// A validated calendar. `now` is when it is written: it must include a day within
    /// [`HORIZON_YEARS`] years of `now`'s date on its clock. Errors name the field under
    /// `exclude` (`exclude.dates[3]`, `exclude.ranges[0].to`, `exclude`).
    pub fn new(
        timezone: &str,
        mut dates: Vec<Date>,
        ranges: Vec<DateRange>,
        weekdays: &[Weekday],
        now: Timestamp,
    ) -> Result<Self, ValidationError> {
        let tz = crate::cron::time_zone(timezone)?;
        if dates.len() > MAX_DATES {
            return Err(ValidationError::new(
                "invalid_calendar",
                "exclude.dates",
                format!("a calendar excludes at most {MAX_DATES} dates"),
            ));
        }
        if ranges.len() > MAX_RANGES {
            return Err(ValidationError::new(
                "invalid_calendar",
                "exclude.ranges",
                format!("a calendar excludes at most {MAX_RANGES} date ranges"),
            ));
        }
        for (i, r) in ranges.iter().enumerate() {
            if r.to < r.from {
                return Err(ValidationError::new(
                    "invalid_calendar",
                    format!("exclude.ranges[{i}].to"),
                    "a range's to is on or after its from (both are included)",
                ));
            }
        }
        dates.sort_unstable();
        dates.dedup();
        let mut days: Vec<u8> = weekdays
            .iter()
            .map(|w| w.to_monday_one_offset() as u8)
            .collect();
        days.sort_unstable();
        days.dedup();
        let calendar = Calendar {
            timezone: timezone.to_string(),
            dates,
            ranges,
            weekdays: days,
        };
        let today = tz.to_datetime(now).date();
        let horizon = today.saturating_add(jiff::Span::new().years(HORIZON_YEARS));
        match calendar.next_included(today) {
            Some(day) if day <= horizon => Ok(calendar),
            _ => Err(ValidationError::new(
                "calendar_excludes_every_day",
                "exclude",
                format!("the calendar excludes every day of the next {HORIZON_YEARS} years"),
            )),
        }
    }

    /// The calendar's zone, or `None` for a stored name this build does not know (then the
    /// calendar excludes nothing rather than failing the job).
    pub fn zone(&self) -> Option<TimeZone> {
        crate::cron::tz_db().get(&self.timezone).ok()
    }

    /// Whether `date` is excluded.
    pub fn excludes(&self, date: Date) -> bool {
        self.in_range(date).is_some()
            || self.dates.binary_search(&date).is_ok()
            || self
                .weekdays
                .contains(&(date.weekday().to_monday_one_offset() as u8))
    }

    fn in_range(&self, date: Date) -> Option<&DateRange> {
        self.ranges.iter().find(|r| r.from <= date && date <= r.to)
    }

    /// A bound on the steps of a search for an included day: each step passes a range, a date
    /// or one of at most six excluded weekdays in a row.
    fn step_cap(&self) -> usize {
        8 * (self.ranges.len() + self.dates.len() + 2)
    }

    /// The first included day on or after `date`; `None` past jiff's last date or when every
    /// weekday is excluded.
    pub fn next_included(&self, mut date: Date) -> Option<Date> {
        for _ in 0..self.step_cap() {
            if let Some(r) = self.in_range(date) {
                date = r.to.tomorrow().ok()?;
            } else if self.excludes(date) {
                date = date.tomorrow().ok()?;
            } else {
                return Some(date);
            }
        }
        None
    }

    /// The last included day on or before `date`.
    pub fn previous_included(&self, mut date: Date) -> Option<Date> {
        for _ in 0..self.step_cap() {
            if let Some(r) = self.in_range(date) {
                date = r.from.yesterday().ok()?;
            } else if self.excludes(date) {
                date = date.yesterday().ok()?;
            } else {
                return Some(date);
            }
        }
        None
    }
}

/// The first instant at which `tz`'s clock reads `dt`: `dt` itself, the earlier instant of an
/// overlap, or the first instant after a gap (the rules of a fixed-time cron expression).
pub fn first_instant(tz: &TimeZone, dt: DateTime) -> Option<Timestamp> {
    let ambiguous = tz.to_ambiguous_timestamp(dt);
    match ambiguous.offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt).ok(),
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(dt).ok(),
        AmbiguousOffset::Gap { before, .. } => {
            // Read with the offset before the gap, `dt` is at or past the transition; the
            // transition is the last one at or before that instant.
            let past = before.to_timestamp(dt).ok()?;
            let upto = past.checked_add(SignedDuration::from_nanos(1)).ok()?;
            tz.preceding(upto).next().map(|t| t.timestamp())
        }
    }
}

/// The first instant of `date` on `tz`'s clock.
pub fn start_of_day(tz: &TimeZone, date: Date) -> Option<Timestamp> {
    first_instant(tz, date.to_datetime(jiff::civil::Time::midnight()))
}

/// Where a nominal occurrence `n` of a schedule fires before jitter under `cal`, or `None` when
/// it does not occur ([module docs](self)). `raw_at_or_after` and `raw_after` are the schedule's
/// nominal occurrences without the calendar.
pub(crate) fn resolve(
    cal: &ScheduleCalendar,
    n: Timestamp,
    raw_at_or_after: impl Fn(Timestamp) -> Option<Timestamp>,
    raw_after: impl Fn(Timestamp) -> Option<Timestamp>,
) -> Option<Timestamp> {
    let Some(tz) = cal.rules.zone() else {
        return Some(n);
    };
    let wall = tz.to_datetime(n);
    let day = wall.date();
    if !cal.rules.excludes(day) {
        return Some(n);
    }
    match cal.roll {
        Roll::Skip => None,
        Roll::Previous => {
            let to = cal.rules.previous_included(day.yesterday().ok()?)?;
            let moved = first_instant(&tz, to.to_datetime(wall.time()))?;
            // Kept only if it passes no other nominal occurrence: none in [moved, n).
            let clear = raw_at_or_after(moved).is_none_or(|other| other >= n);
            (moved < n && clear).then_some(moved)
        }
        Roll::Next => {
            let to = cal.rules.next_included(day.tomorrow().ok()?)?;
            let moved = first_instant(&tz, to.to_datetime(wall.time()))?;
            let clear = raw_after(n).is_none_or(|next| moved < next);
            (moved > n && clear).then_some(moved)
        }
    }
}

/// The most nominal occurrences one search for the next occurring one looks at before it gives
/// up (then the schedule has no further occurrence). Only a schedule whose occurrences keep
/// falling on excluded days reaches it: a run of excluded days costs one or two steps.
pub(crate) const SEARCH_CAP: usize = 10_000;

/// Where the search for the next occurring nominal occurrence continues after `n`, which falls
/// on an excluded day and does not occur: the first instant of the next included day for
/// `skip` and `previous` (every later occurrence of the excluded run would pass `n` when moved
/// back); for `next`, the last nominal occurrence before that day, the only one of the run that
/// can move forward without passing another. Returns the instant to search at or after.
pub(crate) fn resume_after(
    cal: &ScheduleCalendar,
    n: Timestamp,
    raw_at_or_after: impl Fn(Timestamp) -> Option<Timestamp>,
    raw_after: impl Fn(Timestamp) -> Option<Timestamp>,
) -> Option<Timestamp> {
    let step = || n.checked_add(SignedDuration::from_millis(1)).ok();
    let Some(tz) = cal.rules.zone() else {
        return step();
    };
    let day = tz.to_datetime(n).date();
    if !cal.rules.excludes(day) {
        return step();
    }
    let resume = cal
        .rules
        .next_included(day.tomorrow().ok()?)
        .and_then(|d| start_of_day(&tz, d))?;
    if resume <= n {
        return step();
    }
    if cal.roll != Roll::Next {
        return Some(resume);
    }
    // The last nominal occurrence in [n, resume): gallop back from `resume` until a window
    // holds one, then walk forward through that window.
    let mut reach = SignedDuration::from_secs(1);
    let mut found = n;
    loop {
        let from = resume.checked_sub(reach).ok().filter(|f| *f > n);
        let Some(from) = from else { break };
        match raw_at_or_after(from) {
            Some(o) if o < resume => {
                found = o;
                break;
            }
            _ => {}
        }
        reach = reach.checked_mul(2)?;
    }
    let mut last = found;
    for _ in 0..SEARCH_CAP {
        match raw_after(last) {
            Some(o) if o < resume => last = o,
            _ => break,
        }
    }
    if last == n {
        return Some(resume);
    }
    Some(last)
}
