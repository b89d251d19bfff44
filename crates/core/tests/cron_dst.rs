//! Property tests: cron next-fire times across DST transitions, against a brute-force reference.
//!
//! Semantics pinned down here (see `schedule.rs`): cron is evaluated on the zone's local wall clock.
//! A fixed local time (single values in the second, minute and hour fields) that a spring-forward
//! gap skips fires once, at the first instant after the gap; one that a fall-back overlap repeats
//! fires once, at its earlier instant. Any other time fields (wildcards, steps, lists) follow real
//! elapsed time: every instant whose local wall-clock reading matches fires, so a gap skips them
//! and an overlap runs them twice.

use std::sync::OnceLock;

use hourglass_core::cron::{time_zone, tz_db};
use hourglass_core::schedule::CronSchedule;
use hourglass_core::{Schedule, ScheduleKind};
use jiff::civil::{Date, DateTime, Weekday};
use jiff::tz::{AmbiguousOffset, Offset, TimeZone};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use proptest::sample::{Index, select, subsequence};

/// Zones under test: 30-minute DST (Lord Howe), odd offsets (+5:45, +12:45, -3:30), southern
/// hemisphere, transitions at midnight (Havana, Santiago, Cairo), negative DST (Dublin) and zones
/// without DST (Kathmandu, Tehran).
const ZONES: &[&str] = &[
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "America/New_York",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Dublin",
    "Australia/Sydney",
    "America/Santiago",
    "Pacific/Chatham",
    "America/St_Johns",
    "Asia/Tehran",
    "Africa/Cairo",
    "Pacific/Auckland",
    "America/Havana",
];

const WEEKDAYS: [Weekday; 7] = [
    Weekday::Sunday,
    Weekday::Monday,
    Weekday::Tuesday,
    Weekday::Wednesday,
    Weekday::Thursday,
    Weekday::Friday,
    Weekday::Saturday,
];

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

// ---------------------------------------------------------------------------------------------
// Zones and their transitions
// ---------------------------------------------------------------------------------------------

struct Zone {
    name: &'static str,
    tz: TimeZone,
    /// Offset-changing transitions in 2025–2027.
    transitions: Vec<Timestamp>,
    /// Instants that starts are drawn near: the transitions, or a few arbitrary dates for zones
    /// that have none.
    anchors: Vec<Timestamp>,
}

fn zones() -> &'static [Zone] {
    static ZONES_CELL: OnceLock<Vec<Zone>> = OnceLock::new();
    ZONES_CELL.get_or_init(|| {
        let from = ts("2025-01-01T00:00:00Z");
        let until = ts("2028-01-01T00:00:00Z");
        ZONES
            .iter()
            .map(|&name| {
                let tz = time_zone(name).unwrap_or_else(|e| panic!("{name}: {e}"));
                let transitions: Vec<Timestamp> = tz
                    .following(from)
                    .map(|t| t.timestamp())
                    .take_while(|&t| t < until)
                    .filter(|&t| tz.to_offset(t - secs(1)) != tz.to_offset(t))
                    .collect();
                let anchors = if transitions.is_empty() {
                    vec![
                        ts("2025-03-21T00:00:00Z"),
                        ts("2025-10-26T00:00:00Z"),
                        ts("2026-03-29T00:00:00Z"),
                        ts("2027-12-31T12:00:00Z"),
                    ]
                } else {
                    transitions.clone()
                };
                Zone {
                    name,
                    tz,
                    transitions,
                    anchors,
                }
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// A small cron grammar and its brute-force reference evaluation
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Field {
    Any,
    /// `*/n`: multiples of n.
    Step(u8),
    Value(u8),
    /// At least two distinct values, ascending.
    List(Vec<u8>),
}

impl Field {
    fn matches(&self, v: u8) -> bool {
        match self {
            Field::Any => true,
            Field::Step(n) => v.is_multiple_of(*n),
            Field::Value(x) => v == *x,
            Field::List(xs) => xs.contains(&v),
        }
    }

    /// The smallest matching value in `from..=max`.
    fn next_at_or_after(&self, from: u8, max: u8) -> Option<u8> {
        (from..=max).find(|&v| self.matches(v))
    }

    fn render(&self) -> String {
        match self {
            Field::Any => "*".to_string(),
            Field::Step(n) => format!("*/{n}"),
            Field::Value(v) => v.to_string(),
            Field::List(xs) => xs.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        }
    }
}

#[derive(Clone, Debug)]
struct Expr {
    sec: Field,
    min: Field,
    hour: Field,
    /// `None` is `*`.
    dow: Option<Vec<Weekday>>,
    /// Render without the seconds field when the seconds are a plain 0.
    five_fields: bool,
}

impl Expr {
    fn fixed(h: u8, m: u8, s: u8) -> Self {
        Expr {
            sec: Field::Value(s),
            min: Field::Value(m),
            hour: Field::Value(h),
            dow: None,
            five_fields: false,
        }
    }

    /// Single values in the second, minute and hour fields: the "fixed local time" DST rules.
    fn is_fixed(&self) -> bool {
        matches!(
            (&self.sec, &self.min, &self.hour),
            (Field::Value(_), Field::Value(_), Field::Value(_))
        )
    }

    fn fixed_hms(&self) -> Option<(i8, i8, i8)> {
        match (&self.hour, &self.min, &self.sec) {
            (Field::Value(h), Field::Value(m), Field::Value(s)) => {
                Some((*h as i8, *m as i8, *s as i8))
            }
            _ => None,
        }
    }

    fn render(&self) -> String {
        let dow = match &self.dow {
            None => "*".to_string(),
            Some(days) => days
                .iter()
                .map(|d| match d {
                    Weekday::Sunday => "SUN",
                    Weekday::Monday => "MON",
                    Weekday::Tuesday => "TUE",
                    Weekday::Wednesday => "WED",
                    Weekday::Thursday => "THU",
                    Weekday::Friday => "FRI",
                    Weekday::Saturday => "SAT",
                })
                .collect::<Vec<_>>()
                .join(","),
        };
        let tail = format!("{} {} * * {dow}", self.min.render(), self.hour.render());
        if self.five_fields && matches!(self.sec, Field::Value(0)) {
            tail
        } else {
            format!("{} {tail}", self.sec.render())
        }
    }

    fn day_matches(&self, d: Date) -> bool {
        self.dow
            .as_ref()
            .is_none_or(|days| days.contains(&d.weekday()))
    }

    /// The first matching local date strictly after `d`.
    fn next_matching_date(&self, d: Date) -> Date {
        let mut d = d.tomorrow().unwrap();
        while !self.day_matches(d) {
            d = d.tomorrow().unwrap();
        }
        d
    }

    /// The smallest civil (wall-clock) second at or after `c` that the pattern matches, ignoring
    /// whether the zone ever shows it.
    fn next_civil_at_or_after(&self, c: DateTime) -> DateTime {
        let mut c = c.with().subsec_nanosecond(0).build().unwrap();
        let next_day = |c: DateTime| c.date().tomorrow().unwrap().at(0, 0, 0, 0);
        loop {
            if !self.day_matches(c.date()) {
                c = next_day(c);
                continue;
            }
            let Some(h) = self.hour.next_at_or_after(c.hour() as u8, 23) else {
                c = next_day(c);
                continue;
            };
            if h as i8 != c.hour() {
                c = c.date().at(h as i8, 0, 0, 0);
                continue;
            }
            let Some(m) = self.min.next_at_or_after(c.minute() as u8, 59) else {
                c = c.date().at(c.hour(), 0, 0, 0) + SignedDuration::from_hours(1);
                continue;
            };
            if m as i8 != c.minute() {
                c = c.date().at(c.hour(), m as i8, 0, 0);
                continue;
            }
            let Some(s) = self.sec.next_at_or_after(c.second() as u8, 59) else {
                c = c.date().at(c.hour(), c.minute(), 0, 0) + SignedDuration::from_mins(1);
                continue;
            };
            return c.date().at(c.hour(), c.minute(), s as i8, 0);
        }
    }
}

/// The first instant at which the zone's wall clock shows something past `gap_time`, a wall-clock
/// time inside a spring-forward gap: the transition that opens the gap. Found from the zone's
/// transition list, independently of any cron code.
fn gap_end(tz: &TimeZone, gap_time: DateTime) -> Timestamp {
    let AmbiguousOffset::Gap { before, after } = tz.to_ambiguous_timestamp(gap_time).offset()
    else {
        panic!("{gap_time} is not in a gap");
    };
    // Read with the post-gap offset, a gap time names an instant before the transition.
    let probe = after.to_timestamp(gap_time).unwrap();
    let transition = tz.following(probe).next().unwrap().timestamp();
    assert_eq!(tz.to_offset(transition - secs(1)), before);
    assert_eq!(tz.to_offset(transition), after);
    transition
}

/// The instants at which the schedule fires for one matching wall-clock time, per the documented
/// semantics.
fn instants_for(expr: &Expr, tz: &TimeZone, civil: DateTime) -> Vec<Timestamp> {
    let amb = tz.to_ambiguous_timestamp(civil);
    match amb.offset() {
        AmbiguousOffset::Unambiguous { offset } => vec![offset.to_timestamp(civil).unwrap()],
        AmbiguousOffset::Fold { .. } => {
            let earlier = amb.earlier().unwrap();
            if expr.is_fixed() {
                vec![earlier]
            } else {
                vec![earlier, amb.later().unwrap()]
            }
        }
        AmbiguousOffset::Gap { .. } => {
            if expr.is_fixed() {
                // The first instant after the gap, which is on a later local date when the gap
                // crosses midnight.
                vec![gap_end(tz, civil)]
            } else {
                vec![]
            }
        }
    }
}

/// The smallest and largest UTC offsets the zone uses at any instant in `[from, to]`.
fn offset_range(tz: &TimeZone, from: Timestamp, to: Timestamp) -> (Offset, Offset) {
    let first = tz.to_offset(from);
    tz.following(from)
        .take_while(|tr| tr.timestamp() <= to)
        .fold((first, first), |(lo, hi), tr| {
            (lo.min(tr.offset()), hi.max(tr.offset()))
        })
}

/// Brute force: walk the matching wall-clock times in order, map each to its instants, and keep
/// the smallest instant strictly after `after`.
///
/// Wall-clock order and instant order disagree only around offset changes, so the walk starts at
/// `after` read with the smallest offset in effect from then on, and stops once a wall-clock time
/// read with the largest offset in effect up to the best instant so far cannot beat it. Every
/// expression under test matches at least weekly; a weekly, interval-like match that falls in a
/// spring-forward gap is skipped, so the next one can be two weeks out. That bounds how far ahead
/// offsets are looked up.
fn reference_next(expr: &Expr, tz: &TimeZone, after: Timestamp) -> Timestamp {
    let horizon = after + SignedDuration::from_hours(24 * 16);
    let (lowest, _) = offset_range(tz, after, horizon);
    let mut civil = expr.next_civil_at_or_after(lowest.to_datetime(after));
    let mut best: Option<(Timestamp, Offset)> = None;
    loop {
        if let Some((b, highest)) = best
            && highest.to_timestamp(civil).unwrap() >= b
        {
            assert!(b <= horizon, "reference horizon too short");
            return b;
        }
        for inst in instants_for(expr, tz, civil) {
            if inst > after && best.is_none_or(|(b, _)| inst < b) {
                best = Some((inst, offset_range(tz, after, inst).1));
            }
        }
        civil = expr.next_civil_at_or_after(civil + secs(1));
    }
}

fn show(tz: &TimeZone, t: Timestamp) -> String {
    format!("{t} ({})", t.to_zoned(tz.clone()))
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

fn fixed_second() -> impl Strategy<Value = u8> {
    prop_oneof![4 => Just(0u8), 1 => Just(59u8), 2 => 0u8..60]
}

fn fixed_minute() -> impl Strategy<Value = u8> {
    prop_oneof![select(vec![0u8, 15, 30, 45, 59]), 0u8..60]
}

/// Biased towards the hours where transitions happen (around midnight and 1–3 a.m.).
fn fixed_hour() -> impl Strategy<Value = u8> {
    prop_oneof![4 => 0u8..4, 1 => 22u8..24, 2 => 0u8..24]
}

fn dow() -> impl Strategy<Value = Option<Vec<Weekday>>> {
    prop_oneof![3 => Just(None), 1 => subsequence(WEEKDAYS.to_vec(), 1..=3).prop_map(Some)]
}

fn fixed_expr() -> impl Strategy<Value = Expr> {
    (
        fixed_second(),
        fixed_minute(),
        fixed_hour(),
        dow(),
        any::<bool>(),
    )
        .prop_map(|(s, m, h, dow, five_fields)| Expr {
            dow,
            five_fields,
            ..Expr::fixed(h, m, s)
        })
}

fn interval_expr() -> impl Strategy<Value = Expr> {
    let sec = prop_oneof![
        6 => fixed_second().prop_map(Field::Value),
        1 => select(vec![15u8, 20, 30]).prop_map(Field::Step),
    ];
    let min = prop_oneof![
        fixed_minute().prop_map(Field::Value),
        Just(Field::Any),
        select(vec![2u8, 5, 10, 15, 20, 30]).prop_map(Field::Step),
        subsequence(vec![0u8, 15, 30, 45, 59], 2..=3).prop_map(Field::List),
    ];
    let hour = prop_oneof![
        fixed_hour().prop_map(Field::Value),
        Just(Field::Any),
        select(vec![2u8, 3, 4, 6]).prop_map(Field::Step),
        subsequence(vec![0u8, 1, 2, 3, 22, 23], 2..=3).prop_map(Field::List),
    ];
    (sec, min, hour, dow(), any::<bool>())
        .prop_map(|(sec, min, hour, dow, five_fields)| Expr {
            sec,
            min,
            hour,
            dow,
            five_fields,
        })
        .prop_filter("not a fixed-time expression", |e| !e.is_fixed())
}

fn any_expr() -> impl Strategy<Value = Expr> {
    prop_oneof![3 => fixed_expr(), 2 => interval_expr()]
}

/// A zone index, an anchor instant (a transition of the zone, or an arbitrary instant) and a
/// millisecond-precision start instant, mostly close to the anchor (right on it, within two hours,
/// or up to three days before it), sometimes anywhere in 2025–2027.
fn zone_anchor_start() -> impl Strategy<Value = (usize, Timestamp, Timestamp)> {
    let offset_s = prop_oneof![
        1 => -1i64..=1,
        3 => -7_200i64..7_200,
        3 => -259_200i64..3_600,
    ];
    let ms = prop_oneof![Just(0i64), 0i64..1000];
    let near =
        (0..ZONES.len(), any::<Index>(), offset_s, ms.clone()).prop_map(|(z, idx, off, ms)| {
            let anchors = &zones()[z].anchors;
            let anchor = anchors[idx.index(anchors.len())];
            let t = anchor + SignedDuration::from_secs(off) + SignedDuration::from_millis(ms);
            (z, anchor, t)
        });
    let lo = ts("2025-01-01T00:00:00Z").as_second();
    let hi = ts("2028-01-01T00:00:00Z").as_second();
    let anywhere = (0..ZONES.len(), lo..hi, ms).prop_map(|(z, s, ms)| {
        let t = Timestamp::from_second(s).unwrap() + SignedDuration::from_millis(ms);
        (z, t, t)
    });
    prop_oneof![4 => near, 1 => anywhere]
}

/// Where to move a fixed-time expression's time of day, relative to the wall-clock times at which
/// the zone's clocks change at the anchor.
#[derive(Clone, Debug)]
enum Aim {
    /// Keep the generated time.
    No,
    /// Inside the gap or overlap, at this many thousandths of its length (0 is its first second).
    Inside(i64),
    /// This many seconds from the wall-clock time just before the change.
    Around(i64),
}

fn aim() -> impl Strategy<Value = Aim> {
    prop_oneof![
        2 => Just(Aim::No),
        2 => (0i64..1000).prop_map(Aim::Inside),
        1 => prop_oneof![Just(0i64), Just(-1i64), -5_400i64..5_400].prop_map(Aim::Around),
    ]
}

fn aimed(expr: Expr, zone: &Zone, anchor: Timestamp, aim: &Aim) -> Expr {
    if !expr.is_fixed() {
        return expr;
    }
    let before = zone.tz.to_offset(anchor - secs(1)).to_datetime(anchor);
    let after = zone.tz.to_offset(anchor).to_datetime(anchor);
    let (lo, hi) = (before.min(after), before.max(after));
    let wall = match aim {
        Aim::No => return expr,
        Aim::Inside(k) => lo + lo.duration_until(hi) * (*k as i32) / 1000,
        Aim::Around(delta) => before + secs(*delta),
    };
    Expr {
        sec: Field::Value(wall.second() as u8),
        min: Field::Value(wall.minute() as u8),
        hour: Field::Value(wall.hour() as u8),
        ..expr
    }
}

// ---------------------------------------------------------------------------------------------
// Checks shared by the property and sweep tests
// ---------------------------------------------------------------------------------------------

/// Iterates `next_after` `steps` times from `start`, comparing every step with the reference.
fn check_against_reference(
    zone: &Zone,
    expr: &Expr,
    start: Timestamp,
    steps: usize,
) -> Result<(), TestCaseError> {
    let text = expr.render();
    let cron = CronSchedule::parse(&text, zone.name).unwrap();
    let tz = &zone.tz;
    let ctx = |after: Timestamp| format!("{text:?} in {} after {}", zone.name, show(tz, after));

    // The Schedule wrapper agrees on the first step, including first_due (at or after).
    let schedule = Schedule::unbounded(ScheduleKind::Cron(Box::new(cron.clone())));
    let want_first = reference_next(expr, tz, start);
    prop_assert_eq!(
        schedule.next_after(start),
        Some(want_first),
        "Schedule::next_after: {}",
        ctx(start)
    );
    prop_assert_eq!(
        schedule.first_due(start),
        Some(reference_next(
            expr,
            tz,
            start - SignedDuration::from_millis(1)
        )),
        "Schedule::first_due: {}",
        ctx(start)
    );

    let mut after = start;
    for _ in 0..steps {
        let got = cron.next_after(after);
        let want = reference_next(expr, tz, after);
        prop_assert_eq!(
            got,
            Some(want),
            "{}: croner {} but reference {}",
            ctx(after),
            got.map_or("None".to_string(), |g| show(tz, g)),
            show(tz, want)
        );
        prop_assert!(want > after, "never early: {}", ctx(after));
        after = want;
    }
    Ok(())
}

/// Independent of the reference: a fixed-time expression fires exactly once on every matching
/// local day (none skipped, none doubled, transition days included), at the scheduled wall-clock
/// time, or at the first instant after a gap that swallows it, or at the earlier of the two
/// instants an overlap gives it.
fn check_fixed_daily(
    zone: &Zone,
    expr: &Expr,
    start: Timestamp,
    fires: usize,
) -> Result<(), TestCaseError> {
    let (h, m, s) = expr.fixed_hms().expect("fixed-time expression");
    let text = expr.render();
    let cron = CronSchedule::parse(&text, zone.name).unwrap();
    let tz = &zone.tz;
    let mut after = start;
    let mut prev_date: Option<Date> = None;
    for _ in 0..fires {
        let next = cron.next_after(after).unwrap();
        let ctx = format!(
            "{text:?} in {}: after {} fired {}",
            zone.name,
            show(tz, after),
            show(tz, next)
        );
        prop_assert!(next > after, "strictly increasing / never early: {ctx}");
        let local = tz.to_datetime(next);
        // The local date the run belongs to: its own, or an earlier one whose time fell in a gap
        // that crossed midnight and ended at this instant.
        let date = scheduled_date(tz, next, (h, m, s));
        prop_assert!(date.is_some(), "fired at no scheduled time: {ctx}");
        let date = date.unwrap();
        prop_assert!(expr.day_matches(date), "fired on a non-matching day: {ctx}");
        if let Some(prev) = prev_date {
            prop_assert_eq!(
                date,
                expr.next_matching_date(prev),
                "once per matching local day: {}",
                ctx
            );
        }
        let scheduled = date.at(h, m, s, 0);
        let amb = tz.to_ambiguous_timestamp(scheduled);
        match amb.offset() {
            AmbiguousOffset::Unambiguous { .. } => {
                prop_assert_eq!(local, scheduled, "wall-clock time: {}", ctx);
            }
            AmbiguousOffset::Fold { .. } => {
                prop_assert_eq!(
                    next,
                    amb.earlier().unwrap(),
                    "overlap: once, at the earlier instant: {}",
                    ctx
                );
            }
            AmbiguousOffset::Gap { .. } => {
                // The first instant after the gap: the wall clock has passed the scheduled time
                // now, and one second earlier it had not reached it.
                prop_assert!(local > scheduled, "gap: {ctx}");
                prop_assert!(tz.to_datetime(next - secs(1)) < scheduled, "gap: {ctx}");
            }
        }
        prev_date = Some(date);
        after = next;
    }
    Ok(())
}

/// The local date whose wall-clock time `hms` fires at `instant` under the fixed-time rules: the
/// time itself, the earlier instant of an overlap, or the end of a gap that swallowed it (looking
/// back up to two days, for gaps that cross midnight or skip a whole day).
fn scheduled_date(tz: &TimeZone, instant: Timestamp, (h, m, s): (i8, i8, i8)) -> Option<Date> {
    let today = tz.to_datetime(instant).date();
    [0, 1, 2].into_iter().find_map(|back| {
        let date = today.checked_sub(jiff::Span::new().days(back)).ok()?;
        let scheduled = date.at(h, m, s, 0);
        let amb = tz.to_ambiguous_timestamp(scheduled);
        let fires_at = match amb.offset() {
            AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(scheduled).ok()?,
            AmbiguousOffset::Fold { .. } => amb.earlier().ok()?,
            AmbiguousOffset::Gap { .. } => gap_end(tz, scheduled),
        };
        (fires_at == instant).then_some(date)
    })
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn next_after_matches_brute_force_reference(
        (z, anchor, start) in zone_anchor_start(),
        expr in any_expr(),
        aim in aim(),
    ) {
        let zone = &zones()[z];
        check_against_reference(zone, &aimed(expr, zone, anchor, &aim), start, 60)?;
    }

    #[test]
    fn fixed_time_fires_once_per_local_day_across_transitions(
        (z, anchor, near) in zone_anchor_start(),
        back_days in 0i64..5,
        expr in fixed_expr(),
        aim in aim(),
    ) {
        let zone = &zones()[z];
        let expr = aimed(expr, zone, anchor, &aim);
        // Start a few days before the anchor so the run crosses the transition day.
        let start = near - SignedDuration::from_hours(24 * back_days);
        check_fixed_daily(zone, &expr, start, 12)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Exhaustive sweep over every transition in 2025–2027
// ---------------------------------------------------------------------------------------------

#[test]
fn sweep_every_transition_in_2025_to_2027() {
    let all = zones();
    let with_dst = all.iter().filter(|z| !z.transitions.is_empty()).count();
    assert!(with_dst >= 10, "only {with_dst} zones have transitions");
    assert!(all.len() >= 10);

    let interval: Vec<Expr> = [
        (Field::Value(0), Field::Step(15), Field::Any),
        (Field::Value(0), Field::Value(0), Field::Any),
        (Field::Value(0), Field::Value(30), Field::Any),
        (Field::Value(0), Field::Value(45), Field::Step(2)),
        (
            Field::Value(0),
            Field::Any,
            Field::List(vec![0, 1, 2, 3, 23]),
        ),
    ]
    .into_iter()
    .map(|(sec, min, hour)| Expr {
        sec,
        min,
        hour,
        dow: None,
        five_fields: false,
    })
    .collect();

    let mut checked = 0;
    for zone in all {
        for &t in &zone.transitions {
            let before = zone.tz.to_offset(t - secs(1)).to_datetime(t);
            let after = zone.tz.to_offset(t).to_datetime(t);
            let (lo, hi) = (before.min(after), before.max(after));
            // Wall-clock times just before, at, inside, at the end of and just after the gap or
            // overlap.
            let mid = lo + lo.duration_until(hi) / 2;
            let times = [
                lo - secs(60),
                lo - secs(1),
                lo,
                lo + secs(1),
                mid,
                hi - secs(1),
                hi,
                hi + secs(60),
            ];
            for c in times {
                let expr = Expr::fixed(c.hour() as u8, c.minute() as u8, c.second() as u8);
                let start = t - SignedDuration::from_hours(48);
                check_against_reference(zone, &expr, start, 4).unwrap();
                check_fixed_daily(zone, &expr, start, 4).unwrap();
                checked += 1;
            }
            for expr in &interval {
                let mut after = t - SignedDuration::from_mins(90);
                let cron = CronSchedule::parse(&expr.render(), zone.name).unwrap();
                while after < t + SignedDuration::from_mins(90) {
                    let want = reference_next(expr, &zone.tz, after);
                    assert_eq!(
                        cron.next_after(after),
                        Some(want),
                        "{:?} in {} after {}",
                        expr.render(),
                        zone.name,
                        show(&zone.tz, after)
                    );
                    after = want;
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
}

// ---------------------------------------------------------------------------------------------
// Explicit examples
// ---------------------------------------------------------------------------------------------

fn fires(expr: &str, zone: &str, after: &str, n: usize) -> Vec<String> {
    let cron = CronSchedule::parse(expr, zone).unwrap();
    let tz = time_zone(zone).unwrap();
    let mut t = ts(after);
    (0..n)
        .map(|_| {
            t = cron.next_after(t).unwrap();
            t.to_zoned(tz.clone())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .collect()
}

#[test]
fn new_york_spring_forward_fixed_time_fires_at_end_of_gap() {
    // 2025-03-09 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
    assert_eq!(
        fires(
            "0 30 2 * * *",
            "America/New_York",
            "2025-03-08T12:00:00-05:00",
            3
        ),
        [
            "2025-03-09T03:00:00-04:00",
            "2025-03-10T02:30:00-04:00",
            "2025-03-11T02:30:00-04:00",
        ]
    );
    // The 5-field form behaves the same.
    assert_eq!(
        fires(
            "30 2 * * *",
            "America/New_York",
            "2025-03-09T01:59:59-05:00",
            1
        ),
        ["2025-03-09T03:00:00-04:00"]
    );
    // From the first instant after the gap, the next is the following day.
    assert_eq!(
        fires(
            "0 30 2 * * *",
            "America/New_York",
            "2025-03-09T03:00:00-04:00",
            1
        ),
        ["2025-03-10T02:30:00-04:00"]
    );
}

#[test]
fn new_york_fall_back_fixed_time_fires_once_at_earlier_instant() {
    // 2025-11-02 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    assert_eq!(
        fires(
            "0 30 1 * * *",
            "America/New_York",
            "2025-11-01T12:00:00-04:00",
            3
        ),
        [
            "2025-11-02T01:30:00-04:00",
            "2025-11-03T01:30:00-05:00",
            "2025-11-04T01:30:00-05:00",
        ]
    );
    // Starting inside the repeated hour (second pass) or at the fire itself: not again that day.
    for after in ["2025-11-02T01:10:00-05:00", "2025-11-02T01:30:00-04:00"] {
        assert_eq!(
            fires("0 30 1 * * *", "America/New_York", after, 1),
            ["2025-11-03T01:30:00-05:00"],
            "after {after}"
        );
    }
}

#[test]
fn new_york_interval_job_follows_elapsed_time() {
    assert_eq!(
        fires(
            "0 */30 * * * *",
            "America/New_York",
            "2025-03-09T01:15:00-05:00",
            3
        ),
        [
            "2025-03-09T01:30:00-05:00",
            "2025-03-09T03:00:00-04:00",
            "2025-03-09T03:30:00-04:00",
        ]
    );
    assert_eq!(
        fires(
            "0 */30 * * * *",
            "America/New_York",
            "2025-11-02T00:45:00-04:00",
            5
        ),
        [
            "2025-11-02T01:00:00-04:00",
            "2025-11-02T01:30:00-04:00",
            "2025-11-02T01:00:00-05:00",
            "2025-11-02T01:30:00-05:00",
            "2025-11-02T02:00:00-05:00",
        ]
    );
}

#[test]
fn lord_howe_thirty_minute_shift() {
    let zone = "Australia/Lord_Howe";
    // 2025-10-05 02:00 +10:30 jumps to 02:30 +11:00.
    assert_eq!(
        fires("0 15 2 * * *", zone, "2025-10-04T12:00:00+10:30", 2),
        ["2025-10-05T02:30:00+11:00", "2025-10-06T02:15:00+11:00"]
    );
    assert_eq!(
        fires("0 */15 * * * *", zone, "2025-10-05T01:40:00+10:30", 3),
        [
            "2025-10-05T01:45:00+10:30",
            "2025-10-05T02:30:00+11:00",
            "2025-10-05T02:45:00+11:00",
        ]
    );
    // 2025-04-06 02:00 +11:00 falls back to 01:30 +10:30; 01:30–01:59 happens twice.
    assert_eq!(
        fires("0 45 1 * * *", zone, "2025-04-05T12:00:00+11:00", 2),
        ["2025-04-06T01:45:00+11:00", "2025-04-07T01:45:00+10:30"]
    );
    assert_eq!(
        fires("0 */15 * * * *", zone, "2025-04-06T01:20:00+11:00", 5),
        [
            "2025-04-06T01:30:00+11:00",
            "2025-04-06T01:45:00+11:00",
            "2025-04-06T01:30:00+10:30",
            "2025-04-06T01:45:00+10:30",
            "2025-04-06T02:00:00+10:30",
        ]
    );
}

#[test]
fn havana_midnight_transitions() {
    let zone = "America/Havana";
    // 2025-03-09 00:00 CST jumps to 01:00 CDT: midnight does not exist that day.
    assert_eq!(
        fires("0 0 * * *", zone, "2025-03-08T12:00:00-05:00", 3),
        [
            "2025-03-09T01:00:00-04:00",
            "2025-03-10T00:00:00-04:00",
            "2025-03-11T00:00:00-04:00",
        ]
    );
    // 2025-11-02 01:00 CDT falls back to 00:00 CST: 00:30 happens twice and fires once.
    assert_eq!(
        fires("0 30 0 * * *", zone, "2025-11-01T12:00:00-04:00", 2),
        ["2025-11-02T00:30:00-04:00", "2025-11-03T00:30:00-05:00"]
    );
}

#[test]
fn chatham_and_kathmandu_odd_offsets() {
    // Chatham: 2025-09-28 02:45 +12:45 jumps to 03:45 +13:45.
    assert_eq!(
        fires(
            "0 0 3 * * *",
            "Pacific/Chatham",
            "2025-09-27T12:00:00+12:45",
            2
        ),
        ["2025-09-28T03:45:00+13:45", "2025-09-29T03:00:00+13:45"]
    );
    // Kathmandu has no DST; 05:45 local is midnight UTC every day.
    assert_eq!(
        fires("45 5 * * *", "Asia/Kathmandu", "2025-03-08T00:00:00Z", 2),
        ["2025-03-09T05:45:00+05:45", "2025-03-10T05:45:00+05:45"]
    );
}

#[test]
fn hour_lists_are_not_fixed_times() {
    // Two hours in the hour field make it an interval expression: the gap swallows 02:30 on
    // spring-forward day, and the overlap runs 01:30 twice on fall-back day.
    assert_eq!(
        fires(
            "0 30 2,14 * * *",
            "America/New_York",
            "2025-03-08T12:00:00-05:00",
            3
        ),
        [
            "2025-03-08T14:30:00-05:00",
            "2025-03-09T14:30:00-04:00",
            "2025-03-10T02:30:00-04:00",
        ]
    );
    assert_eq!(
        fires(
            "0 30 1,13 * * *",
            "America/New_York",
            "2025-11-01T12:00:00-04:00",
            4
        ),
        [
            "2025-11-01T13:30:00-04:00",
            "2025-11-02T01:30:00-04:00",
            "2025-11-02T01:30:00-05:00",
            "2025-11-02T13:30:00-05:00",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Every gap that crosses midnight, in every zone of the bundled database
// ---------------------------------------------------------------------------------------------

/// A spring-forward gap (or any forward jump of the clock) whose skipped wall-clock readings run
/// past midnight, so the first instant after it is on a later local date than the readings it
/// swallows.
struct MidnightGap {
    zone: Zone,
    at: Timestamp,
    /// The first reading the gap skips and the first one after it.
    from: DateTime,
    to: DateTime,
}

fn midnight_gaps(from: Timestamp, until: Timestamp) -> Vec<MidnightGap> {
    let mut names: Vec<String> = tz_db().available().map(|n| n.to_string()).collect();
    names.sort();
    let mut gaps = Vec::new();
    for name in names {
        let Ok(tz) = time_zone(&name) else {
            continue; // Factory and the like: not a place, refused as a zone name.
        };
        for tr in tz.following(from).take_while(|tr| tr.timestamp() < until) {
            let at = tr.timestamp();
            let before = tz.to_offset(at - secs(1));
            if tr.offset() <= before {
                continue;
            }
            let (gap_from, gap_to) = (before.to_datetime(at), tr.offset().to_datetime(at));
            if gap_from.date() != gap_to.date() {
                gaps.push(MidnightGap {
                    zone: Zone {
                        name: Box::leak(name.clone().into_boxed_str()),
                        tz: tz.clone(),
                        transitions: vec![at],
                        anchors: vec![at],
                    },
                    at,
                    from: gap_from,
                    to: gap_to,
                });
            }
        }
    }
    gaps
}

/// Pins the America/Nuuk bug (a Saturday 23:30 job skipped on 2027-03-27, whose 23:00–00:00 gap
/// crosses midnight) for every zone and every such gap in 1970–2040: daily jobs and jobs
/// restricted by day of week or day of month, at times inside the gap and just around it, fire
/// once per matching day and agree with the brute-force reference.
#[test]
fn every_gap_crossing_midnight_fires_the_swallowed_day_once() {
    let gaps = midnight_gaps(ts("1970-01-01T00:00:00Z"), ts("2040-01-01T00:00:00Z"));
    let zones: std::collections::BTreeSet<&str> = gaps.iter().map(|g| g.zone.name).collect();
    assert!(
        zones.contains("America/Nuuk") && zones.contains("Pacific/Apia"),
        "{zones:?}"
    );
    let mut checked = 0;
    for gap in &gaps {
        let length = gap.from.duration_until(gap.to);
        let inside = [
            gap.from,
            gap.from + length / 2,
            gap.to - secs(1),
            // The last reading of the day the gap starts on, and midnight if the gap swallows it.
            gap.from.date().at(23, 59, 59, 0),
            gap.to.date().at(0, 0, 0, 0),
        ];
        for wall in inside {
            let fixed = Expr::fixed(wall.hour() as u8, wall.minute() as u8, wall.second() as u8);
            let weekday = wall.date().weekday().to_sunday_zero_offset() as usize;
            let daily = fixed.clone();
            let on_weekday = Expr {
                dow: Some(vec![WEEKDAYS[weekday]]),
                ..fixed.clone()
            };
            let start = gap.at - SignedDuration::from_hours(50);
            for expr in [&daily, &on_weekday] {
                check_against_reference(&gap.zone, expr, start, 3)
                    .unwrap_or_else(|e| panic!("{}: {e}", gap.zone.name));
                if length < SignedDuration::from_hours(24) {
                    // A longer gap can swallow a daily time twice; both run once, together.
                    check_fixed_daily(&gap.zone, expr, start, 3)
                        .unwrap_or_else(|e| panic!("{}: {e}", gap.zone.name));
                }
            }
            // Restricted by day of month: the run belongs to the swallowed date.
            let text = format!(
                "{} {} {} {} * *",
                wall.second(),
                wall.minute(),
                wall.hour(),
                wall.day()
            );
            let cron = CronSchedule::parse(&text, gap.zone.name).unwrap();
            if matches!(
                gap.zone.tz.to_ambiguous_timestamp(wall).offset(),
                AmbiguousOffset::Gap { .. }
            ) {
                assert_eq!(
                    cron.next_after(start),
                    Some(gap.at),
                    "{text:?} in {}: {wall} is in the gap, so it runs when the gap ends",
                    gap.zone.name,
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
    println!(
        "checked {checked} times in {} midnight gaps of {} zones",
        gaps.len(),
        zones.len()
    );
}

/// Every zone of the bundled database (links included), every offset change in 2025–2027: fixed
/// times at the edges and middle of each gap or overlap, and two interval expressions across it,
/// against the brute-force reference.
#[test]
fn sweep_every_bundled_zone_2025_to_2027() {
    let from = ts("2025-01-01T00:00:00Z");
    let until = ts("2028-01-01T00:00:00Z");
    let mut names: Vec<String> = tz_db().available().map(|n| n.to_string()).collect();
    names.sort();
    let interval: Vec<Expr> = [Field::Step(15), Field::Value(30)]
        .into_iter()
        .map(|min| Expr {
            sec: Field::Value(0),
            min,
            hour: Field::Any,
            dow: None,
            five_fields: false,
        })
        .collect();
    let mut checked = 0;
    for name in names {
        let Ok(tz) = time_zone(&name) else {
            continue;
        };
        let transitions: Vec<Timestamp> = tz
            .following(from)
            .map(|t| t.timestamp())
            .take_while(|&t| t < until)
            .filter(|&t| tz.to_offset(t - secs(1)) != tz.to_offset(t))
            .collect();
        let zone = Zone {
            name: Box::leak(name.clone().into_boxed_str()),
            tz: tz.clone(),
            transitions: transitions.clone(),
            anchors: transitions.clone(),
        };
        for &t in &transitions {
            let before = tz.to_offset(t - secs(1)).to_datetime(t);
            let after = tz.to_offset(t).to_datetime(t);
            let (lo, hi) = (before.min(after), before.max(after));
            let mid = lo + lo.duration_until(hi) / 2;
            let start = t - SignedDuration::from_hours(30);
            for c in [lo - secs(1), lo, mid, hi - secs(1), hi] {
                let weekday = WEEKDAYS[c.date().weekday().to_sunday_zero_offset() as usize];
                let expr = Expr {
                    dow: Some(vec![weekday]),
                    ..Expr::fixed(c.hour() as u8, c.minute() as u8, c.second() as u8)
                };
                check_against_reference(&zone, &expr, start, 2).unwrap();
                checked += 1;
            }
            for expr in &interval {
                let cron = CronSchedule::parse(&expr.render(), zone.name).unwrap();
                let mut at = t - SignedDuration::from_mins(70);
                while at < t + SignedDuration::from_mins(70) {
                    let want = reference_next(expr, &tz, at);
                    assert_eq!(
                        cron.next_after(at),
                        Some(want),
                        "{:?} in {name} after {}",
                        expr.render(),
                        show(&tz, at)
                    );
                    at = want;
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}
