//! Property tests of jitter (issue 37): an occurrence fires at its due time plus an offset that
//! never puts it before that due time nor at or after the next one, that is the same whenever it
//! is computed, and that spreads a job population evenly over the window.

use std::time::Duration;

use hourglass_core::schedule::CronSchedule;
use hourglass_core::{Schedule, ScheduleKind};
use jiff::Timestamp;
use proptest::prelude::*;
use uuid::Uuid;

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// Cron expressions with regular and irregular gaps (weekdays only, month ends, DST-prone local
/// times, several times a minute), in zones with DST.
fn cron() -> impl Strategy<Value = CronSchedule> {
    let exprs = prop::sample::select(vec![
        "* * * * * *",
        "*/7 * * * * *",
        "0 30 2 * * *",
        "0 30 9 * * MON-FRI",
        "0 0 12 L * *",
        "0 0,1,59 * * * *",
        "0 */15 * * * *",
    ]);
    let zones = prop::sample::select(vec![
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
    ]);
    (exprs, zones).prop_map(|(e, z)| CronSchedule::parse(e, z).expect("valid expression"))
}

/// Recurring schedules with a jitter from a millisecond to a day (the API's bound).
fn jittered() -> impl Strategy<Value = Schedule> {
    let kind = prop_oneof![
        cron().prop_map(|c| ScheduleKind::Cron(Box::new(c))),
        (1u64..200_000_000, 1_700_000_000_000i64..1_900_000_000_000).prop_map(
            |(interval, anchor)| ScheduleKind::Every {
                interval: Duration::from_millis(interval),
                anchor: hourglass_core::from_ms(anchor),
            }
        ),
    ];
    (kind, 1u64..=86_400_000).prop_map(|(kind, jitter)| Schedule {
        jitter: Some(Duration::from_millis(jitter)),
        calendar: None,
        anchor: None,
        ..Schedule::unbounded(kind)
    })
}

fn around_now() -> impl Strategy<Value = Timestamp> {
    (1_700_000_000_000i64..1_900_000_000_000).prop_map(hourglass_core::from_ms)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_jittered_occurrence_fires_in_its_window_before_the_next_one(
        s in jittered(),
        from in around_now(),
        job in any::<u128>(),
    ) {
        let job = Uuid::from_u128(job);
        let jitter = s.jitter.unwrap();
        let Some(due) = s.first_due(from) else { return Ok(()) };
        let fire = s.fire_time(job, due);
        prop_assert!(fire >= due, "{fire} fires before its due time {due}");
        prop_assert!(
            fire.as_millisecond() - due.as_millisecond() < jitter.as_millis() as i64,
            "{fire} is a whole jitter or more past {due}"
        );
        if let Some(next) = s.next_after(due) {
            prop_assert!(fire < next, "{fire} fires at or after the next due time {next}");
            // And the next one, jittered too, still fires after this one.
            prop_assert!(s.fire_time(job, next) > fire);
        }
        // The same job and due time give the same fire time, however often asked.
        prop_assert_eq!(s.fire_time(job, due), fire);
        let copy: Schedule = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        prop_assert_eq!(copy.fire_time(job, due), fire);
    }

    #[test]
    fn a_one_off_takes_its_whole_window(
        at in around_now(),
        jitter in 1u64..=86_400_000,
        job in any::<u128>(),
    ) {
        let s = Schedule { jitter: Some(Duration::from_millis(jitter)), ..Schedule::at(at) };
        let fire = s.fire_time(Uuid::from_u128(job), at);
        prop_assert!(fire >= at);
        prop_assert!((fire.as_millisecond() - at.as_millisecond()) < jitter as i64);
    }

    #[test]
    fn without_jitter_an_occurrence_fires_at_its_due_time(
        at in around_now(),
        job in any::<u128>(),
    ) {
        let s = Schedule::at(at);
        prop_assert_eq!(s.fire_time(Uuid::from_u128(job), at), at);
    }
}

/// A thousand jobs due at the same minute spread over a 10 s window: every tenth of it holds
/// its share (100 expected; between 50 and 150 is far outside chance for a fair hash), and no
/// two windows of different due times repeat the same offsets.
#[test]
fn a_thousand_jobs_spread_over_the_window() {
    let s = Schedule {
        jitter: Some(Duration::from_secs(10)),
        ..Schedule::unbounded(ScheduleKind::Cron(Box::new(
            CronSchedule::parse("0 * * * *", "UTC").unwrap(),
        )))
    };
    let due = ts("2026-11-28T10:00:00Z");
    let mut buckets = [0u32; 10];
    let mut offsets = Vec::new();
    for n in 0..1000u128 {
        // Ids as uuid v7 makes them: the same millisecond prefix, sequential counters.
        let job = Uuid::from_u128((0x0190_f3c2_7b1e_7000_u128 << 64) | n);
        let offset = s.fire_time(job, due).as_millisecond() - due.as_millisecond();
        assert!((0..10_000).contains(&offset));
        buckets[(offset / 1000) as usize] += 1;
        offsets.push(offset);
    }
    for (tenth, count) in buckets.iter().enumerate() {
        assert!(
            (50..=150).contains(count),
            "tenth {tenth} of the window holds {count} of 1000: {buckets:?}"
        );
    }
    // The next hour's occurrence of the same jobs draws new offsets.
    let next = ts("2026-11-28T11:00:00Z");
    let same = (0..1000u128)
        .filter(|&n| {
            let job = Uuid::from_u128((0x0190_f3c2_7b1e_7000_u128 << 64) | n);
            s.fire_time(job, next).as_millisecond() - next.as_millisecond() == offsets[n as usize]
        })
        .count();
    assert!(same < 10, "{same} of 1000 jobs kept their offset");
}

/// The offset is a fixed function: pending occurrences keep their fire times across versions.
#[test]
fn the_offset_function_never_changes() {
    let job: Uuid = "0190f3c2-7b1e-7a3b-9c4d-5e6f708192a3".parse().unwrap();
    let due = ts("2026-01-01T00:00:00Z").as_millisecond();
    let a = hourglass_core::jitter::offset_ms(job, due, 600_000);
    let b = hourglass_core::jitter::offset_ms(job, due + 1, 600_000);
    assert_eq!((a, b), (PINNED.0, PINNED.1));
    assert_eq!(hourglass_core::jitter::offset_ms(job, due, 1), 0);
}

const PINNED: (i64, i64) = (221_129, 28_296);

/// An irregular cron expression clamps each occurrence to its own gap: Friday's 09:30 may take
/// the whole jitter of a day, but the weekday gaps of a day cut a longer one.
#[test]
fn weekday_cron_clamps_to_the_real_gap() {
    let s = Schedule {
        jitter: Some(Duration::from_secs(3 * 86_400)),
        ..Schedule::unbounded(ScheduleKind::Cron(Box::new(
            CronSchedule::parse("0 30 9 * * MON-FRI", "Europe/Berlin").unwrap(),
        )))
    };
    for n in 0..200u128 {
        let job = Uuid::from_u128(n * 7919);
        // Thursday 09:30 CET: the next is Friday 09:30, a day later.
        let thursday = ts("2026-11-26T08:30:00Z");
        let fire = s.fire_time(job, thursday);
        assert!(fire < ts("2026-11-27T08:30:00Z"));
        // Friday: the next is Monday, three days later.
        let friday = ts("2026-11-27T08:30:00Z");
        assert!(s.fire_time(job, friday) < ts("2026-11-30T08:30:00Z"));
    }
}
