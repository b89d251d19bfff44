//! Property tests: no value, however extreme, panics a core time function.
//!
//! Issue "Hardening", defect 1: `now - window` in `misfire::decide` overflowed for a window of
//! 200,000,000 hours and killed the dispatcher. Durations and instants reach core from users
//! (bounded at validation today) and from stored rows (written by any older version), so every
//! function here must answer — possibly "never" — for any instant jiff can represent and any
//! duration a `std::time::Duration` of whole milliseconds can hold, with or without a calendar.

use std::time::Duration;

use hourglass_core::misfire::{self, FireDecision, MisfirePolicy};
use hourglass_core::schedule::CronSchedule;
use hourglass_core::{
    Calendar, DateRange, RetryPolicy, Roll, Schedule, ScheduleCalendar, ScheduleKind,
};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use proptest::prelude::*;

/// Any instant jiff represents, with the edges and the epoch drawn often.
fn instant() -> impl Strategy<Value = Timestamp> {
    let min = Timestamp::MIN.as_millisecond();
    let max = Timestamp::MAX.as_millisecond();
    prop_oneof![
        Just(min),
        Just(max),
        Just(0i64),
        Just(max - 1),
        Just(min + 1),
        // Around today, where real jobs live.
        1_700_000_000_000i64..1_900_000_000_000i64,
        min..=max,
    ]
    .prop_map(hourglass_core::from_ms)
}

/// Any duration of whole milliseconds, from zero to the largest, edges drawn often.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(u64::MAX),
        Just(i64::MAX as u64),
        Just(i64::MAX as u64 + 1),
        1u64..86_400_000,
        any::<u64>(),
    ]
    .prop_map(Duration::from_millis)
}

/// Cron expressions that fire often, rarely, on leap days, and in DST-prone zones.
fn cron() -> impl Strategy<Value = CronSchedule> {
    let exprs = prop::sample::select(vec![
        "* * * * * *",
        "0 0 0 29 2 *",
        "0 30 2 * * *",
        "0 0 12 L * *",
        "0 0 12 ? * 5#2",
        "0 */15 * * * *",
        "0 0 0 1 1 *",
    ]);
    let zones = prop::sample::select(vec![
        "UTC",
        "Europe/Berlin",
        "America/Nuuk",
        "Australia/Lord_Howe",
        "Pacific/Kiritimati",
    ]);
    (exprs, zones).prop_map(|(e, z)| CronSchedule::parse(e, z).expect("valid expression"))
}

/// A calendar as a stored row may hold it: any roll, dates and ranges anywhere in jiff's range
/// (reversed ranges too), and weekday numbers beyond 1..=7, up to a calendar that excludes every
/// day — none of which [`Calendar::new`] would accept from a client.
fn calendar() -> impl Strategy<Value = Option<Box<ScheduleCalendar>>> {
    let roll = prop::sample::select(vec![Roll::Skip, Roll::Previous, Roll::Next]);
    let zones = prop::sample::select(vec![
        "UTC",
        "Europe/Berlin",
        "Pacific/Kiritimati",
        "Not/A_Zone",
    ]);
    let date = || instant().prop_map(|t| t.to_zoned(TimeZone::UTC).date());
    let dates = prop::collection::vec(date(), 0..4);
    let ranges = prop::collection::vec(
        (date(), date()).prop_map(|(from, to)| DateRange { from, to }),
        0..3,
    );
    let weekdays = prop_oneof![
        prop::collection::vec(0u8..=9, 0..4),
        Just(vec![1, 2, 3, 4, 5, 6, 7]),
    ];
    prop::option::of((roll, zones, dates, ranges, weekdays).prop_map(
        |(roll, timezone, dates, ranges, weekdays)| {
            Box::new(ScheduleCalendar {
                name: "c".into(),
                roll,
                rules: Calendar {
                    timezone: timezone.into(),
                    dates,
                    ranges,
                    weekdays,
                },
            })
        },
    ))
}

fn schedule() -> impl Strategy<Value = Schedule> {
    let kind = prop_oneof![
        instant().prop_map(ScheduleKind::At),
        (duration(), instant())
            .prop_map(|(interval, anchor)| ScheduleKind::Every { interval, anchor }),
        cron().prop_map(|c| ScheduleKind::Cron(Box::new(c))),
    ];
    (
        kind,
        prop::option::of(instant()),
        prop::option::of(instant()),
        prop::option::of(any::<u64>()),
        prop::option::of(duration()),
        calendar(),
    )
        .prop_map(|(kind, start, end, max_runs, jitter, calendar)| Schedule {
            kind,
            start,
            end,
            max_runs,
            jitter,
            calendar,
            anchor: None,
        })
}

fn policy() -> impl Strategy<Value = MisfirePolicy> {
    prop_oneof![
        Just(MisfirePolicy::Skip),
        Just(MisfirePolicy::Once),
        duration().prop_map(|window| MisfirePolicy::All { window }),
    ]
}

proptest! {
    // Cron walks can take up to SKIP_COUNT_CAP steps; keep the case count modest so the suite
    // stays a few seconds long in CI.
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn schedule_functions_answer_for_any_input(
        s in schedule(),
        a in instant(),
        b in instant(),
        runs in any::<u64>(),
    ) {
        let _ = s.first_due(a);
        let _ = s.next_after(a);
        let _ = s.next_for_run(a, runs);
        // Bounded: a cron walk from the far past to the far future is capped.
        let _ = s.count_between(a.min(b), a.max(b), 1_000);
        let fire = s.fire_time(uuid::Uuid::from_u128(runs.into()), a);
        // Only a roll to the previous included day fires before the due time.
        if s.calendar.as_ref().is_none_or(|c| c.roll != Roll::Previous) {
            prop_assert!(fire >= a, "fires at {fire}, before its due time {a}");
        }
        let _ = s.resolve(a);
    }

    #[test]
    fn next_is_strictly_later_when_there_is_one(s in schedule(), a in instant()) {
        if let Some(next) = s.next_after(a) {
            prop_assert!(next > a, "next {next} is not after {a}");
        }
    }

    #[test]
    fn misfire_decisions_answer_for_any_input(
        s in schedule(),
        p in policy(),
        due in instant(),
        now in instant(),
        threshold in duration(),
        runs in any::<u64>(),
    ) {
        let fire = s.fire_time(uuid::Uuid::nil(), due);
        match misfire::decide(&s, p, due, fire, now, threshold, runs) {
            FireDecision::Fire => {}
            FireDecision::Skip { skipped, .. } => prop_assert!(skipped >= 1),
        }
        let _ = misfire::next_after_run(&s, p, due, fire, now, threshold, runs);
    }

    #[test]
    fn backoff_answers_for_any_policy(
        attempt in any::<u32>(),
        initial in duration(),
        max in duration(),
        jitter in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-1.0), any::<f64>()],
    ) {
        let p = RetryPolicy { max_attempts: 10, initial_backoff: initial, max_backoff: max };
        let wait = p.backoff(attempt, jitter);
        prop_assert!(wait <= max.max(initial));
    }

    #[test]
    fn saturating_arithmetic_stays_in_range(t in instant(), d in duration()) {
        let later = hourglass_core::add_saturating(t, d);
        let earlier = hourglass_core::sub_saturating(t, d);
        prop_assert!(later >= t);
        prop_assert!(earlier <= t);
    }
}

/// The exact value from the issue, through every misfire function.
#[test]
fn the_issue_s_poison_window_is_decided_without_panicking() {
    let anchor: Timestamp = "2026-11-20T00:00:00Z".parse().unwrap();
    let s = Schedule::unbounded(ScheduleKind::Every {
        interval: Duration::from_secs(1),
        anchor,
    });
    let policy = MisfirePolicy::All {
        window: Duration::from_secs(200_000_000 * 3600),
    };
    let now: Timestamp = "2026-11-20T00:01:06Z".parse().unwrap();
    // The window reaches past the representable past: everything missed is inside it.
    assert_eq!(
        misfire::decide(&s, policy, anchor, anchor, now, Duration::from_secs(60), 0),
        FireDecision::Fire
    );
}
