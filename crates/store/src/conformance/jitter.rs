//! Jittered schedules (issue 37): a store keeps a job's jitter with its spec, and fires each
//! occurrence at its jittered time — the due time still names the occurrence.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::{Action, JobState, Next, Schedule, ScheduleKind};

use super::{T0, claim, create, done, ms, one_off, spec, t};
use crate::{ClaimScope, NewJob, Store, Transition};

const JITTER: Duration = Duration::from_secs(60);

/// A job with `schedule` and a minute of jitter whose first occurrence fires at least 5 s late
/// (ids are drawn until one does), so that a claim just past its due time cannot reach it.
fn jittered(namespace: &str, schedule: Schedule) -> NewJob {
    let due = t(T0);
    let schedule = Schedule {
        jitter: Some(JITTER),
        calendar: None,
        anchor: None,
        ..schedule
    };
    loop {
        let mut job = one_off(namespace, due);
        job.spec = spec(schedule.clone());
        if job.first_fire() >= due + ms(5_000) {
            return job;
        }
    }
}

pub async fn a_jittered_job_keeps_its_jitter_and_fires_late(store: Arc<dyn Store>) {
    let due = t(T0);
    let every = Schedule::unbounded(ScheduleKind::Every {
        interval: Duration::from_secs(600),
        anchor: due,
    });
    let recurring = jittered("a", every);
    let one_off = jittered("a", Schedule::at(due));
    let (id, schedule, fire) = (
        recurring.id,
        recurring.spec.schedule.clone(),
        recurring.first_fire(),
    );
    let one_off_fire = one_off.first_fire();
    create(&*store, vec![recurring, one_off]).await;
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(
        read.spec.schedule.jitter,
        Some(JITTER),
        "the jitter is kept"
    );
    assert_eq!((read.next_due, read.next_attempt), (Some(due), Some(fire)));
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(fire.min(one_off_fire)),
        "the earliest fire time, not the due time"
    );
    // Just past the due time nothing is claimed: both fire at least 5 s later.
    let early = due + ms(1);
    assert!(
        claim(&*store, ClaimScope::Fired, early, 10, "n1")
            .await
            .is_empty()
    );
    // At its fire time the occurrence is claimed, still named by its due time.
    let mut claimed = claim(&*store, ClaimScope::Fired, fire, 10, "n1").await;
    claimed.retain(|o| o.job_id == id);
    let occ = claimed.remove(0);
    assert_eq!((occ.due, occ.fire_at), (due, fire));
    assert_eq!(occ.spec.schedule.jitter, Some(JITTER));
    // The next occurrence fires at its own jittered time.
    let next = Next::of(&schedule, id, due + ms(600_000));
    let delivered = Action::Delivered {
        next: Some(next),
        skipped: 0,
    };
    store
        .complete(vec![done(&occ, delivered)], fire)
        .await
        .unwrap();
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(
        (read.next_due, read.next_attempt),
        (Some(next.due), Some(next.fire))
    );
    // Paused and resumed, a job fires at its next occurrence's jittered time again.
    let now = fire + ms(1);
    store
        .transition(Some("a"), id, Transition::Pause { now }, None)
        .await
        .unwrap();
    let resumed = store
        .transition(Some("a"), id, Transition::Resume { now }, None)
        .await
        .unwrap();
    assert_eq!(resumed.state, JobState::Active);
    assert_eq!(
        (resumed.next_due, resumed.next_attempt),
        (Some(next.due), Some(next.fire))
    );
}
