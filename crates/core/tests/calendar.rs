//! Property tests of calendars and rolls (issue 37): a kept occurrence never fires on an excluded
//! day; `skip` keeps its time, `previous` moves it back and `next` forward, never past a
//! neighbouring nominal occurrence, so fire times stay in nominal order without collisions;
//! every nominal occurrence on an included day is kept; across DST gaps and overlaps in
//! Europe/Berlin and America/New_York, and month ends.

use std::time::Duration;

use hourglass_core::calendar::{Calendar, DateRange, Roll, ScheduleCalendar};
use hourglass_core::schedule::CronSchedule;
use hourglass_core::{Schedule, ScheduleKind};
use jiff::Timestamp;
use jiff::civil::{Date, Weekday};
use proptest::prelude::*;
use uuid::Uuid;

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn date(text: &str) -> Date {
    text.parse().unwrap()
}

const NOW: &str = "2026-01-01T00:00:00Z";

fn calendar(zone: &str, dates: &[&str], ranges: &[(&str, &str)], weekdays: &[Weekday]) -> Calendar {
    Calendar::new(
        zone,
        dates.iter().map(|d| date(d)).collect(),
        ranges
            .iter()
            .map(|(from, to)| DateRange {
                from: date(from),
                to: date(to),
            })
            .collect(),
        weekdays,
        ts(NOW),
    )
    .unwrap()
}

fn with_calendar(expr: &str, zone: &str, cal: Calendar, roll: Roll) -> Schedule {
    Schedule {
        calendar: Some(Box::new(ScheduleCalendar {
            name: "c".into(),
            roll,
            rules: cal,
        })),
        ..Schedule::unbounded(ScheduleKind::Cron(Box::new(
            CronSchedule::parse(expr, zone).unwrap(),
        )))
    }
}

#[test]
fn the_25th_or_the_previous_business_day() {
    let cal = calendar(
        "Europe/Berlin",
        &[],
        &[("2026-12-24", "2026-12-31")],
        &[Weekday::Saturday, Weekday::Sunday],
    );
    let s = with_calendar("0 0 9 25 * *", "Europe/Berlin", cal, Roll::Previous);
    let due = s.first_due(ts("2026-12-01T00:00:00Z")).unwrap();
    // The nominal time stays the 25th (the occurrence's identity); it fires on Wednesday 23rd.
    assert_eq!(due, ts("2026-12-25T08:00:00Z"));
    assert_eq!(s.fire_time(Uuid::nil(), due), ts("2026-12-23T08:00:00Z"));
    // 2027-04-25 is a Sunday: Friday the 23rd, in summer time.
    let april = s.first_due(ts("2027-04-01T00:00:00Z")).unwrap();
    assert_eq!(s.fire_time(Uuid::nil(), april), ts("2027-04-23T07:00:00Z"));
}

#[test]
fn a_daily_job_rolled_onto_a_day_that_fires_is_dropped_not_doubled() {
    let cal = calendar(
        "Europe/Berlin",
        &[],
        &[],
        &[Weekday::Saturday, Weekday::Sunday],
    );
    for roll in [Roll::Previous, Roll::Next] {
        let s = with_calendar("0 0 9 * * *", "Europe/Berlin", cal.clone(), roll);
        // Friday 2026-11-27 09:00 CET, then Monday: the weekend's occurrences are dropped.
        let friday = ts("2026-11-27T08:00:00Z");
        assert_eq!(s.next_after(friday), Some(ts("2026-11-30T08:00:00Z")));
        assert_eq!(s.fire_time(Uuid::nil(), friday), friday);
    }
}

#[test]
fn a_roll_into_a_dst_gap_fires_at_the_first_instant_after_it() {
    // Saturday 2026-03-28 is excluded; Sunday 02:30 does not exist in Berlin (02:00 → 03:00).
    let cal = calendar("Europe/Berlin", &["2026-03-28"], &[], &[]);
    let s = with_calendar("0 30 2 * * SAT", "Europe/Berlin", cal, Roll::Next);
    let due = s.first_due(ts("2026-03-27T00:00:00Z")).unwrap();
    assert_eq!(due, ts("2026-03-28T01:30:00Z"));
    assert_eq!(s.fire_time(Uuid::nil(), due), ts("2026-03-29T01:00:00Z"));
}

#[test]
fn a_roll_into_a_dst_overlap_fires_at_its_earlier_instant() {
    // New York falls back on Sunday 2026-11-01 (01:30 happens twice).
    let cal = calendar("America/New_York", &["2026-10-31"], &[], &[]);
    let s = with_calendar("0 30 1 * * SAT", "America/New_York", cal, Roll::Next);
    let due = s.first_due(ts("2026-10-30T00:00:00Z")).unwrap();
    assert_eq!(s.fire_time(Uuid::nil(), due), ts("2026-11-01T05:30:00Z"));
}

#[test]
fn skip_drops_excluded_occurrences_and_a_one_off_on_one() {
    let cal = calendar("UTC", &["2026-06-02"], &[], &[]);
    let s = with_calendar("0 0 12 * * *", "UTC", cal.clone(), Roll::Skip);
    assert_eq!(
        s.next_after(ts("2026-06-01T12:00:00Z")),
        Some(ts("2026-06-03T12:00:00Z"))
    );
    let mut one_off = Schedule::at(ts("2026-06-02T10:00:00Z"));
    one_off.calendar = s.calendar.clone();
    assert_eq!(one_off.first_due(ts(NOW)), None);
    one_off.calendar.as_mut().unwrap().roll = Roll::Next;
    let due = one_off.first_due(ts(NOW)).unwrap();
    assert_eq!(
        one_off.fire_time(Uuid::nil(), due),
        ts("2026-06-03T10:00:00Z")
    );
}

#[test]
fn a_long_excluded_range_is_jumped_not_walked() {
    // Every second, ten years excluded: the search jumps the range.
    let cal = calendar("UTC", &[], &[("2026-01-02", "2035-12-31")], &[]);
    for roll in [Roll::Skip, Roll::Previous, Roll::Next] {
        let s = Schedule {
            calendar: Some(Box::new(ScheduleCalendar {
                name: "c".into(),
                roll,
                rules: cal.clone(),
            })),
            ..Schedule::unbounded(ScheduleKind::Every {
                interval: Duration::from_secs(1),
                anchor: ts("2026-01-01T00:00:00Z"),
            })
        };
        // Moved back or forward, each second of the range would land on or past another
        // second's occurrence: all are dropped, and the search jumps to the day after.
        let next = s.next_after(ts("2026-01-01T23:59:59Z")).unwrap();
        assert_eq!(next, ts("2036-01-01T00:00:00Z"), "{roll:?}");
    }
}

#[test]
fn a_calendar_excluding_every_day_is_refused_naming_the_field() {
    let all = [
        Weekday::Monday,
        Weekday::Tuesday,
        Weekday::Wednesday,
        Weekday::Thursday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ];
    let err = Calendar::new("UTC", vec![], vec![], &all, ts(NOW)).unwrap_err();
    assert_eq!(
        (err.code, err.field.as_str()),
        ("calendar_excludes_every_day", "exclude")
    );
    let century = DateRange {
        from: date("2025-01-01"),
        to: date("2126-01-01"),
    };
    let err = Calendar::new("UTC", vec![], vec![century], &[], ts(NOW)).unwrap_err();
    assert_eq!(err.code, "calendar_excludes_every_day");
    let backwards = DateRange {
        from: date("2026-02-01"),
        to: date("2026-01-01"),
    };
    let err = Calendar::new("UTC", vec![], vec![backwards], &[], ts(NOW)).unwrap_err();
    assert_eq!(err.field, "exclude.ranges[0].to");
    let err = Calendar::new("Mars/Base", vec![], vec![], &[], ts(NOW)).unwrap_err();
    assert_eq!(err.field, "timezone");
    let many = vec![date("2026-01-01"); hourglass_core::calendar::MAX_DATES + 1];
    let err = Calendar::new("UTC", many, vec![], &[], ts(NOW)).unwrap_err();
    assert_eq!(err.field, "exclude.dates");
}

fn zones() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["Europe/Berlin", "America/New_York"])
}

/// Expressions at DST-prone local times, month ends, the 25th, several a day, and weekly.
fn exprs() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "0 30 2 * * *",
        "0 30 1 * * *",
        "0 0 9 25 * *",
        "0 0 12 L * *",
        "0 0 9 * * *",
        "0 0 */6 * * *",
        "0 */30 * * * *",
        "0 30 2 * * SAT",
    ])
}

fn calendars() -> impl Strategy<Value = Calendar> {
    let day =
        (0i32..800).prop_map(|d| date("2026-01-01").saturating_add(jiff::Span::new().days(d)));
    let weekday = prop::sample::select(vec![
        Weekday::Monday,
        Weekday::Wednesday,
        Weekday::Friday,
        Weekday::Saturday,
        Weekday::Sunday,
    ]);
    (
        zones(),
        prop::collection::vec(day.clone(), 0..40),
        prop::collection::vec((day, 0i32..20), 0..6),
        prop::collection::vec(weekday, 0..3),
    )
        .prop_map(|(zone, dates, ranges, weekdays)| {
            let ranges = ranges
                .into_iter()
                .map(|(from, len)| DateRange {
                    from,
                    to: from.saturating_add(jiff::Span::new().days(len)),
                })
                .collect();
            Calendar::new(zone, dates, ranges, &weekdays, ts(NOW)).expect("includes some day")
        })
}

fn rolls() -> impl Strategy<Value = Roll> {
    prop::sample::select(vec![Roll::Skip, Roll::Previous, Roll::Next])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn rolls_keep_order_bounds_and_included_days(
        expr in exprs(),
        zone in zones(),
        cal in calendars(),
        roll in rolls(),
        jitter in prop::option::of(1u64..7_200_000),
        job in any::<u128>(),
        start in 0i64..60_000_000_000,
    ) {
        let mut s = with_calendar(expr, zone, cal.clone(), roll);
        s.jitter = jitter.map(Duration::from_millis);
        let raw = Schedule { calendar: None, ..s.clone() };
        let tz = cal.zone().unwrap();
        let job = Uuid::from_u128(job);
        let from = hourglass_core::from_ms(1_767_225_600_000 + start);
        let mut kept = vec![];
        let mut due = s.first_due(from);
        while let Some(n) = due {
            if kept.len() == 60 {
                break;
            }
            kept.push(n);
            due = s.next_after(n);
        }
        prop_assume!(kept.len() > 1);
        let last = *kept.last().unwrap();
        // Every nominal occurrence on an included day is kept; the others are on excluded days.
        let mut r = raw.first_due(from);
        while let Some(n) = r.filter(|n| *n <= last) {
            let excluded = cal.excludes(tz.to_datetime(n).date());
            if !excluded {
                prop_assert!(kept.contains(&n), "included {} not kept", n);
            }
            if roll == Roll::Skip {
                prop_assert_eq!(kept.contains(&n), !excluded);
            }
            r = raw.next_after(n);
        }
        let mut previous_fire: Option<Timestamp> = None;
        for (i, n) in kept.iter().enumerate() {
            let moved = s.resolve(*n).unwrap();
            prop_assert!(!cal.excludes(tz.to_datetime(moved).date()), "{} moved to {} excluded", n, moved);
            match roll {
                Roll::Skip => prop_assert_eq!(moved, *n),
                Roll::Previous => prop_assert!(moved <= *n),
                Roll::Next => prop_assert!(moved >= *n),
            }
            if moved != *n {
                prop_assert!(cal.excludes(tz.to_datetime(*n).date()));
                // The same wall-clock time, unless that time fell in a gap.
                let same = tz.to_datetime(moved).time() == tz.to_datetime(*n).time();
                let after_gap = tz.preceding(moved.checked_add(jiff::SignedDuration::from_nanos(1)).unwrap())
                    .next()
                    .is_some_and(|t| t.timestamp() == moved);
                prop_assert!(same || after_gap, "{} moved to {}", n, moved);
            }
            // Never past a neighbouring nominal occurrence.
            if i > 0 {
                prop_assert!(moved > kept[i - 1]);
            }
            if let Some(next) = kept.get(i + 1) {
                prop_assert!(moved < *next);
            }
            let fire = s.fire_time(job, *n);
            prop_assert!(fire >= moved);
            if let Some(before) = previous_fire {
                prop_assert!(fire > before, "fires out of order: {} after {}", fire, before);
            }
            previous_fire = Some(fire);
        }
    }
}
