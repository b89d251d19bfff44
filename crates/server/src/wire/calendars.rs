//! Calendars on the wire: a `PUT /v1/calendars/{name}` body into a core [`Calendar`] (errors
//! name the field: `exclude.dates[2]`, `exclude.ranges[0].to`, `exclude.weekdays[1]`), a job's
//! `schedule.calendar` and `schedule.roll` into the copy its schedule keeps, and records into
//! answers.

use std::collections::HashMap;

use hourglass_api::{Calendar as CalendarOut, CalendarIn, DateRangeIn, ExcludeIn, ScheduleIn};
use hourglass_core::ValidationError;
use hourglass_core::calendar::{self, Calendar, DateRange, Roll, ScheduleCalendar};
use hourglass_store::CalendarRecord;
use jiff::Timestamp;
use jiff::civil::{Date, Weekday};

use super::rfc3339;

/// The calendars and anchors a request's schedules name, fetched by the handler before
/// validation (wire does no I/O): name to calendar (through `Deref`), and name to instant.
#[derive(Debug, Default)]
pub struct Calendars {
    calendars: HashMap<String, Calendar>,
    pub anchors: HashMap<String, Timestamp>,
}

impl Calendars {
    pub fn new() -> Self {
        Self::default()
    }
}

impl std::ops::Deref for Calendars {
    type Target = HashMap<String, Calendar>;
    fn deref(&self) -> &Self::Target {
        &self.calendars
    }
}

impl std::ops::DerefMut for Calendars {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.calendars
    }
}

/// The calendar name a schedule gives, if any (for the handler to fetch it).
pub fn named(input: &ScheduleIn) -> Option<&str> {
    input.calendar.as_deref()
}

/// A calendar's name, in a path or a schedule.
pub fn calendar_name(name: &str, field: &str) -> Result<(), ValidationError> {
    calendar::check_name(name, field)
}

const WEEKDAYS: [(&str, Weekday); 7] = [
    ("MON", Weekday::Monday),
    ("TUE", Weekday::Tuesday),
    ("WED", Weekday::Wednesday),
    ("THU", Weekday::Thursday),
    ("FRI", Weekday::Friday),
    ("SAT", Weekday::Saturday),
    ("SUN", Weekday::Sunday),
];

fn date(text: &str, field: String) -> Result<Date, ValidationError> {
    // jiff reads more than `YYYY-MM-DD` (e.g. a time); the contract is the date alone.
    let shaped = text.len() == 10 && text.as_bytes()[4] == b'-' && text.as_bytes()[7] == b'-';
    text.parse::<Date>().ok().filter(|_| shaped).ok_or_else(|| {
        ValidationError::new(
            "invalid_calendar",
            field,
            format!("{text:?} is not a date such as \"2026-12-25\""),
        )
    })
}

/// A calendar body, validated as of `now` (it must include a day within 100 years of it).
pub fn calendar(input: &CalendarIn, now: Timestamp) -> Result<Calendar, ValidationError> {
    let ex = &input.exclude;
    if ex.dates.len() > calendar::MAX_DATES {
        return Err(ValidationError::new(
            "invalid_calendar",
            "exclude.dates",
            format!("a calendar excludes at most {} dates", calendar::MAX_DATES),
        ));
    }
    if ex.ranges.len() > calendar::MAX_RANGES {
        return Err(ValidationError::new(
            "invalid_calendar",
            "exclude.ranges",
            format!(
                "a calendar excludes at most {} ranges",
                calendar::MAX_RANGES
            ),
        ));
    }
    let dates = (ex.dates.iter().enumerate())
        .map(|(i, d)| date(d, format!("exclude.dates[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let ranges = (ex.ranges.iter().enumerate())
        .map(|(i, r)| {
            Ok(DateRange {
                from: date(&r.from, format!("exclude.ranges[{i}].from"))?,
                to: date(&r.to, format!("exclude.ranges[{i}].to"))?,
            })
        })
        .collect::<Result<Vec<_>, ValidationError>>()?;
    let weekdays = (ex.weekdays.iter().enumerate())
        .map(|(i, w)| {
            WEEKDAYS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(w))
                .map(|(_, day)| *day)
                .ok_or_else(|| {
                    ValidationError::new(
                        "invalid_calendar",
                        format!("exclude.weekdays[{i}]"),
                        format!("{w:?} is not one of MON, TUE, WED, THU, FRI, SAT, SUN"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Calendar::new(&input.timezone, dates, ranges, &weekdays, now)
}

/// A schedule's calendar and roll, resolved against the fetched `calendars` into the copy the
/// job keeps; `None` without `schedule.calendar`.
pub fn schedule_calendar(
    input: &ScheduleIn,
    calendars: &Calendars,
) -> Result<Option<Box<ScheduleCalendar>>, ValidationError> {
    let roll = match input.roll.as_deref() {
        None | Some("skip") => Roll::Skip,
        Some("previous") => Roll::Previous,
        Some("next") => Roll::Next,
        Some(other) => {
            return Err(ValidationError::new(
                "invalid_calendar",
                "schedule.roll",
                format!("{other:?} is not one of \"skip\", \"previous\" or \"next\""),
            ));
        }
    };
    let Some(name) = input.calendar.as_deref() else {
        if input.roll.is_some() {
            return Err(ValidationError::new(
                "invalid_calendar",
                "schedule.roll",
                "roll applies to a schedule with a calendar only",
            ));
        }
        return Ok(None);
    };
    calendar_name(name, "schedule.calendar")?;
    let rules = calendars.get(name).cloned().ok_or_else(|| {
        ValidationError::new(
            "unknown_calendar",
            "schedule.calendar",
            format!("the namespace has no calendar {name:?} (PUT /v1/calendars/{name})"),
        )
    })?;
    Ok(Some(Box::new(ScheduleCalendar {
        name: name.to_owned(),
        roll,
        rules,
    })))
}

/// A stored calendar as the API shows it.
pub fn calendar_out(record: &CalendarRecord, replanned: Option<u64>) -> CalendarOut {
    let c = &record.calendar;
    let weekday = |n: &u8| {
        WEEKDAYS
            .get(usize::from(n.saturating_sub(1)))
            .map_or("?", |(name, _)| name)
            .to_owned()
    };
    CalendarOut {
        name: record.name.clone(),
        timezone: c.timezone.clone(),
        exclude: ExcludeIn {
            dates: c.dates.iter().map(|d| d.to_string()).collect(),
            ranges: (c.ranges.iter())
                .map(|r| DateRangeIn {
                    from: r.from.to_string(),
                    to: r.to.to_string(),
                })
                .collect(),
            weekdays: c.weekdays.iter().map(weekday).collect(),
        },
        updated_at: rfc3339(record.updated_at),
        replanned,
    }
}
