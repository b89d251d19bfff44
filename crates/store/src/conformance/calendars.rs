//! Calendars (issue 37): a store keeps each namespace's named calendars apart, and keeps a job's
//! copy of its calendar in its spec, firing a rolled occurrence at its moved time (before its
//! due time for `previous`), still named by its due time.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::calendar::{Calendar, Roll, ScheduleCalendar};
use hourglass_core::{Action, Schedule, ScheduleKind};

use super::{T0, claim, create, done, ms, one_off, spec, t};
use crate::{CalendarRecord, ClaimScope, Store};

fn record(namespace: &str, name: &str, dates: &[&str]) -> CalendarRecord {
    let dates = dates.iter().map(|d| d.parse().expect("date")).collect();
    CalendarRecord {
        namespace: namespace.into(),
        name: name.into(),
        calendar: Calendar::new("Europe/Berlin", dates, vec![], &[], t(T0)).expect("calendar"),
        updated_at: t(T0),
    }
}

pub async fn calendars_are_kept_per_namespace(store: Arc<dyn Store>) {
    let holidays = record("a", "holidays", &["2030-12-25"]);
    store
        .put_calendar(&record("a", "zeta", &[]), None)
        .await
        .unwrap();
    store.put_calendar(&holidays, None).await.unwrap();
    store
        .put_calendar(&record("b", "holidays", &[]), None)
        .await
        .unwrap();
    assert_eq!(
        store.get_calendar("a", "holidays").await.unwrap(),
        Some(holidays.clone())
    );
    assert_eq!(store.get_calendar("c", "holidays").await.unwrap(), None);
    let names: Vec<String> = (store.list_calendars("a").await.unwrap())
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(
        names,
        ["holidays", "zeta"],
        "in name order, namespace a's alone"
    );
    // A put replaces.
    let replaced = CalendarRecord {
        updated_at: t(T0) + ms(1_000),
        ..record("a", "holidays", &["2030-12-24", "2030-12-25"])
    };
    store.put_calendar(&replaced, None).await.unwrap();
    assert_eq!(
        store.get_calendar("a", "holidays").await.unwrap(),
        Some(replaced)
    );
    assert!(store.delete_calendar("a", "holidays", None).await.unwrap());
    assert!(!store.delete_calendar("a", "holidays", None).await.unwrap());
    assert_eq!(store.get_calendar("a", "holidays").await.unwrap(), None);
    assert_eq!(store.list_calendars("b").await.unwrap().len(), 1);
}

pub async fn a_rolled_occurrence_fires_at_its_moved_time_named_by_its_due_time(
    store: Arc<dyn Store>,
) {
    // T0 (2030-01-01) is excluded: the weekly occurrence due then fires on 2029-12-31 at the
    // same wall-clock time (no occurrence of its own that day to collide with).
    let due = t(T0);
    let calendar = Calendar::new("UTC", vec!["2030-01-01".parse().unwrap()], vec![], &[], due)
        .expect("calendar");
    let schedule = Schedule {
        calendar: Some(Box::new(ScheduleCalendar {
            name: "holidays".into(),
            roll: Roll::Previous,
            rules: calendar,
        })),
        ..Schedule::unbounded(ScheduleKind::Every {
            interval: Duration::from_secs(7 * 86_400),
            anchor: due,
        })
    };
    let mut job = one_off("a", due);
    job.spec = spec(schedule.clone());
    let id = job.id;
    let moved = t("2029-12-31T00:00:00Z");
    assert_eq!(job.first_fire(), moved);
    create(&*store, vec![job]).await;
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(read.spec.schedule, schedule, "the calendar's copy is kept");
    assert_eq!((read.next_due, read.next_attempt), (Some(due), Some(moved)));
    assert!(
        claim(&*store, ClaimScope::Fired, moved - ms(1_001), 10, "n1")
            .await
            .is_empty()
    );
    let claimed = claim(&*store, ClaimScope::Fired, moved, 10, "n1").await;
    assert_eq!(claimed.len(), 1);
    assert_eq!((claimed[0].due, claimed[0].fire_at), (due, moved));
    let next = hourglass_core::Next::of(&schedule, id, due + ms(7 * 86_400_000));
    assert_eq!(next.fire, next.due, "the next week is not excluded");
    let delivered = Action::Delivered {
        next: Some(next),
        skipped: 0,
    };
    store
        .complete(vec![done(&claimed[0], delivered)], moved)
        .await
        .unwrap();
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(read.next_due, Some(next.due));
}
