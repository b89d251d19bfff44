//! Anchors (issue 38): a move re-times every live job on the anchor in one step and fences the
//! claims made before it; finished jobs stay; a delete cancels with a reason or is refused while
//! jobs refer to the anchor; creates re-read the anchor and respect its bound.

use std::sync::Arc;

use hourglass_core::{JobState, Schedule, ScheduleAnchor};
use jiff::Timestamp;

use super::{T0, claim, create, delivered, ms, one_off, t};
use crate::{
    AnchorDelete, AnchorDeleted, AnchorRecord, Applied, ClaimScope, JobQuery, NewJob, Store,
    StoreError,
};

pub(super) fn anchor(namespace: &str, name: &str, at: Timestamp, now: Timestamp) -> AnchorRecord {
    AnchorRecord {
        namespace: namespace.into(),
        name: name.into(),
        at,
        updated_at: now,
    }
}

/// A one-off of `namespace` due `offset_ms` from anchor `name`, which is at `at`.
pub(super) fn on_anchor(namespace: &str, name: &str, at: Timestamp, offset_ms: i64) -> NewJob {
    let due = at + ms(offset_ms);
    let mut job = one_off(namespace, due);
    job.spec.schedule = Schedule {
        anchor: Some(Box::new(ScheduleAnchor {
            name: name.into(),
            offset_ms,
        })),
        ..Schedule::at(due)
    };
    job
}

async fn on(store: &dyn Store, namespace: &str, name: &str) -> Vec<crate::JobRecord> {
    store
        .list_jobs(JobQuery {
            namespace: Some(namespace.into()),
            anchor: Some(name.into()),
            limit: 100,
            ..JobQuery::default()
        })
        .await
        .unwrap()
}

pub async fn moving_an_anchor_retimes_its_live_jobs_and_fences_their_claims(store: Arc<dyn Store>) {
    let base = t(T0);
    let flight = base + ms(3_600_000);
    store
        .put_anchor(&anchor("a", "flight", flight, base), None)
        .await
        .unwrap();
    // Three reminders on the anchor (one due now, claimed below), one on another namespace's
    // anchor of the same name, one without an anchor.
    let early = on_anchor("a", "flight", flight, -3_600_000);
    let late = on_anchor("a", "flight", flight, -60_000);
    let paused = on_anchor("a", "flight", flight, -120_000);
    let (early_id, late_id, paused_id) = (early.id, late.id, paused.id);
    store
        .put_anchor(&anchor("b", "flight", flight, base), None)
        .await
        .unwrap();
    let other = on_anchor("b", "flight", flight, -60_000);
    let plain = one_off("a", base + ms(1_000));
    create(&*store, vec![early, late, paused, other.clone(), plain]).await;
    store
        .transition(
            Some("a"),
            paused_id,
            crate::Transition::Pause { now: base },
            None,
        )
        .await
        .unwrap();
    assert_eq!(on(&*store, "a", "flight").await.len(), 3);
    let claimed = claim(&*store, ClaimScope::Fired, base, 1, "n1").await;
    assert_eq!(
        claimed[0].job_id, early_id,
        "due at the anchor minus 1h: now"
    );

    // The flight is two hours late.
    let moved_at = flight + ms(7_200_000);
    let moved = store
        .put_anchor(&anchor("a", "flight", moved_at, base + ms(10)), None)
        .await
        .unwrap();
    assert_eq!(moved.len(), 3);
    let get = |id| {
        let store = store.clone();
        async move { store.get_job(Some("a"), id).await.unwrap().unwrap() }
    };
    let (e, l, p) = (
        get(early_id).await,
        get(late_id).await,
        get(paused_id).await,
    );
    assert_eq!(e.next_due, Some(moved_at - ms(3_600_000)));
    assert_eq!(
        e.spec.schedule.kind,
        Schedule::at(moved_at - ms(3_600_000)).kind
    );
    assert_eq!(l.next_due, Some(moved_at - ms(60_000)));
    assert_eq!(
        (p.state, p.next_due),
        (JobState::Paused, Some(moved_at - ms(120_000)))
    );
    assert_eq!(
        store.get_anchor("a", "flight").await.unwrap().map(|a| a.at),
        Some(moved_at)
    );
    // The claim made before the move is stale: completing it changes nothing.
    assert!(e.token > claimed[0].token);
    assert_eq!(
        store
            .complete(vec![delivered(&claimed[0])], base)
            .await
            .unwrap(),
        vec![Applied::StaleLease]
    );
    let e = get(early_id).await;
    assert_eq!((e.state, e.runs), (JobState::Active, 0));
    // Nothing of the move is due before its new times; the other namespace's job did not move.
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(1_000))
    );
    let b = store.get_job(Some("b"), other.id).await.unwrap().unwrap();
    assert_eq!(b.next_due, Some(flight - ms(60_000)));
    assert!(
        claim(&*store, ClaimScope::Fired, flight, 10, "n1")
            .await
            .iter()
            .all(|o| o.job_id != early_id && o.job_id != late_id),
        "the old times fire nothing of the moved jobs"
    );
}

pub async fn a_move_leaves_finished_jobs_and_a_past_time_fires_at_once(store: Arc<dyn Store>) {
    let base = t(T0);
    let at = base + ms(60_000);
    store
        .put_anchor(&anchor("a", "x", at, base), None)
        .await
        .unwrap();
    let done_job = on_anchor("a", "x", at, -60_000);
    let cancelled = on_anchor("a", "x", at, 0);
    let pending = on_anchor("a", "x", at, 0);
    let (done_id, cancelled_id, pending_id) = (done_job.id, cancelled.id, pending.id);
    create(&*store, vec![done_job, cancelled, pending]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    assert_eq!(occ.len(), 1);
    store
        .complete(vec![delivered(&occ[0])], base)
        .await
        .unwrap();
    store
        .transition(
            Some("a"),
            cancelled_id,
            crate::Transition::Cancel { now: base },
            None,
        )
        .await
        .unwrap();
    let finished = |id| {
        let store = store.clone();
        async move { store.get_job(Some("a"), id).await.unwrap().unwrap() }
    };
    let (d0, c0) = (finished(done_id).await, finished(cancelled_id).await);
    // Moved an hour into the past: the pending one-off fires at once.
    let moved = store
        .put_anchor(&anchor("a", "x", base - ms(3_600_000), base + ms(5)), None)
        .await
        .unwrap();
    assert_eq!(moved.iter().map(|j| j.id).collect::<Vec<_>>(), [pending_id]);
    assert_eq!(finished(done_id).await, d0, "a completed job is not moved");
    assert_eq!(
        finished(cancelled_id).await,
        c0,
        "a cancelled job is not moved"
    );
    let fired = claim(&*store, ClaimScope::Fired, base + ms(5), 10, "n1").await;
    assert_eq!(fired.len(), 1);
    assert_eq!(
        (fired[0].job_id, fired[0].due),
        (pending_id, base - ms(3_600_000))
    );
}

pub async fn deleting_an_anchor_cancels_its_jobs_or_is_refused_while_used(store: Arc<dyn Store>) {
    let base = t(T0);
    let at = base + ms(60_000);
    assert_eq!(
        store
            .delete_anchor("a", "x", AnchorDelete::IfUnused, None)
            .await
            .unwrap(),
        AnchorDeleted::NotFound
    );
    store
        .put_anchor(&anchor("a", "x", at, base), None)
        .await
        .unwrap();
    store
        .put_anchor(&anchor("a", "y", at, base), None)
        .await
        .unwrap();
    let first = on_anchor("a", "x", at, 0);
    let second = on_anchor("a", "x", at, -1_000);
    let (first_id, second_id) = (first.id, second.id);
    create(&*store, vec![first, second]).await;
    assert_eq!(
        store
            .delete_anchor("a", "x", AnchorDelete::IfUnused, None)
            .await
            .unwrap(),
        AnchorDeleted::InUse(first_id)
    );
    assert!(
        store.get_anchor("a", "x").await.unwrap().is_some(),
        "refused: kept"
    );
    assert_eq!(
        store
            .delete_anchor("a", "y", AnchorDelete::IfUnused, None)
            .await
            .unwrap(),
        AnchorDeleted::Deleted { cancelled: 0 }
    );
    let names: Vec<String> = (store.list_anchors("a").await.unwrap())
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["x"]);
    let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1").await;
    assert_eq!(occ.len(), 2);
    assert_eq!(
        store
            .delete_anchor("a", "x", AnchorDelete::Cancel { now: base }, None)
            .await
            .unwrap(),
        AnchorDeleted::Deleted { cancelled: 2 }
    );
    assert_eq!(store.get_anchor("a", "x").await.unwrap(), None);
    for id in [first_id, second_id] {
        let job = store.get_job(Some("a"), id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Cancelled);
        assert_eq!(job.last_error, Some(crate::cancel_reason("x")));
    }
    for o in &occ {
        assert_eq!(
            store.complete(vec![delivered(o)], at).await.unwrap(),
            vec![Applied::StaleLease],
            "the cancel fenced the claims"
        );
    }
    // A job can no longer be created on it.
    let refused = store
        .create_jobs(vec![on_anchor("a", "x", at, 0)], None)
        .await;
    assert!(matches!(refused, Err(StoreError::UnknownAnchor { name }) if name == "x"));
}

/// A create computed against an anchor's old instant lands on its current one.
pub async fn a_create_rebases_on_the_anchor_as_stored(store: Arc<dyn Store>) {
    let base = t(T0);
    let old = base + ms(60_000);
    let new = base + ms(600_000);
    store
        .put_anchor(&anchor("a", "x", new, base), None)
        .await
        .unwrap();
    let job = on_anchor("a", "x", old, -1_000);
    let id = job.id;
    create(&*store, vec![job]).await;
    let stored = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(stored.next_due, Some(new - ms(1_000)));
    assert_eq!(
        stored.spec.schedule.kind,
        Schedule::at(new - ms(1_000)).kind
    );
}

/// A reader listing the anchor's jobs while it moves sees them all at the old times or all at
/// the new ones, never a mix. Only for stores whose move is one transaction (DynamoDB's is not).
pub async fn a_reader_never_sees_half_a_move(store: Arc<dyn Store>) {
    const JOBS: usize = 200;
    let base = t(T0);
    let (old, new) = (base + ms(3_600_000), base + ms(7_200_000));
    store
        .put_anchor(&anchor("a", "x", old, base), None)
        .await
        .unwrap();
    let jobs = (0..JOBS)
        .map(|i| on_anchor("a", "x", old, -(i as i64) * 1_000))
        .collect();
    create(&*store, jobs).await;
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..50 {
                let page = store
                    .list_jobs(JobQuery {
                        namespace: Some("a".into()),
                        anchor: Some("x".into()),
                        limit: JOBS,
                        ..JobQuery::default()
                    })
                    .await
                    .unwrap();
                assert_eq!(page.len(), JOBS);
                let moved = page
                    .iter()
                    .filter(|j| j.next_due.is_some_and(|d| d > old))
                    .count();
                assert!(
                    moved == 0 || moved == JOBS,
                    "a mix: {moved} of {JOBS} moved"
                );
                seen.insert(moved);
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    let moved = store
        .put_anchor(&anchor("a", "x", new, base + ms(1)), None)
        .await
        .unwrap();
    assert_eq!(moved.len(), JOBS);
    reader.await.expect("the reader saw no mix");
}

/// An anchor takes at most [`MAX_JOBS_PER_ANCHOR`] live jobs: the create past it is refused
/// whole, and a move re-times them all. (Not run on DynamoDB, where 10,000 creates are slow and
/// the bound counts creates.)
pub async fn an_anchor_is_bounded_and_moves_all_its_jobs(store: Arc<dyn Store>) {
    use hourglass_core::anchor::MAX_JOBS_PER_ANCHOR;
    let base = t(T0);
    let at = base + ms(3_600_000);
    store
        .put_anchor(&anchor("a", "x", at, base), None)
        .await
        .unwrap();
    let batch = |n: usize| {
        (0..n)
            .map(|i| on_anchor("a", "x", at, -(i as i64)))
            .collect::<Vec<_>>()
    };
    for _ in 0..MAX_JOBS_PER_ANCHOR / 1000 {
        create(&*store, batch(1000)).await;
    }
    let over = store.create_jobs(batch(2), None).await;
    assert!(matches!(over, Err(StoreError::AnchorFull { name }) if name == "x"));
    assert_eq!(
        store.count_jobs(Some("a")).await.unwrap(),
        MAX_JOBS_PER_ANCHOR,
        "the refused batch created nothing"
    );
    let moved = store
        .put_anchor(&anchor("a", "x", at + ms(60_000), base + ms(1)), None)
        .await
        .unwrap();
    assert_eq!(moved.len() as u64, MAX_JOBS_PER_ANCHOR);
    // Another anchor, or a finished job's place, is free.
    store
        .put_anchor(&anchor("a", "y", at, base), None)
        .await
        .unwrap();
    create(&*store, vec![on_anchor("a", "y", at, 0)]).await;
}
