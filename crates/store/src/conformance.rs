//! The behaviour every [`Store`] backend must show, written once. A backend's test file expands
//! [`conformance_tests!`](crate::conformance_tests) with a factory that makes a fresh, empty store.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::{
    Action, AttemptRecord, Completion, JobSpec, JobState, Occurrence, QueueTarget, Schedule,
    ScheduleKind, Target, WebhookTarget,
};
use jiff::{SignedDuration, Timestamp};

use crate::{
    Applied, ClaimScope, Created, DueEvent, JobQuery, JobUpdate, Lease, NewJob, Purged, QueueStats,
    Release, RunCursor, SigningSecrets, Store, StoreError, StoreEvent, Transition,
};

/// Expands one `#[tokio::test]` per conformance case. `$factory` is an async closure returning
/// `(Arc<dyn Store>, guard)`; the guard (e.g. a temporary directory) lives as long as the test.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@cases $factory;
            create_then_get, idempotent_create_by_key, batch_is_all_or_nothing,
            claim_respects_horizon_order_and_limit, claims_are_exclusive_until_lease_expiry,
            a_live_lease_is_not_claimed_within_the_horizon, events_announce_due_work,
            stale_token_cannot_complete, delivered_one_off_completes_with_run_history,
            recurring_advances_in_the_same_transaction, retry_moves_fire_time_and_counts_attempts,
            dead_letters_are_recorded_listed_and_deleted, release_restores_fire_time,
            next_due_tracks_earliest_active, namespaces_are_isolated, pause_resume_cancel_trigger,
            update_replaces_spec_and_fences_claims, list_filters_and_paginates,
            signing_secret_round_trips, queue_jobs_are_leased_not_fired,
            queue_lease_filters_by_type, lapsed_queue_lease_counts_an_attempt,
            extend_moves_the_lease_under_its_token, queue_retry_counts_once,
            queue_stats_count_by_visibility, update_can_move_a_job_between_target_kinds,
            gauges_count_states_backlog_and_queues, purge_removes_only_old_finished_work,
            a_lapsed_claim_taken_again_keeps_its_fire_time,
            a_large_completion_batch_records_every_run,
            a_shortened_lease_lapses_at_its_new_expiry_and_waits_for_its_type,
            runs_page_newest_first_and_resume_after_a_cursor,
            old_dead_letters_are_purged_oldest_first,
            a_leased_message_moved_to_a_webhook_stays_off_its_old_queue,
            edits_and_transitions_answer_the_token_that_fences_older_claims,
            a_repeated_keyed_trigger_changes_nothing,
            a_dead_lettered_job_counts_its_last_attempt);
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let (store, _guard) = ($factory)().await;
                $crate::conformance::$case(store).await;
            }
        )*
    };
}

fn t(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

const T0: &str = "2030-01-01T00:00:00Z";

fn ms(n: i64) -> SignedDuration {
    SignedDuration::from_millis(n)
}

fn webhook() -> Target {
    Target::Webhook(WebhookTarget {
        url: "https://example.com/hook".parse().expect("url"),
        headers: Default::default(),
    })
}

fn spec(schedule: Schedule) -> JobSpec {
    JobSpec {
        job_type: Some("test".into()),
        schedule,
        target: webhook(),
        retry: Default::default(),
        misfire: Default::default(),
    }
}

fn one_off(namespace: &str, due: Timestamp) -> NewJob {
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: namespace.into(),
        key: None,
        spec: spec(Schedule::at(due)),
        payload: Some(r#"{"n":1}"#.into()),
        fingerprint: 1,
        first_due: due,
        now: t(T0),
    }
}

fn every_second(namespace: &str, anchor: Timestamp) -> NewJob {
    let mut job = one_off(namespace, anchor);
    job.spec = spec(Schedule::unbounded(ScheduleKind::Every {
        interval: Duration::from_secs(1),
        anchor,
    }));
    job
}

fn lease(owner: &str, now: Timestamp) -> Lease {
    Lease {
        owner: owner.into(),
        ttl: Duration::from_secs(30),
        now,
    }
}

/// Claims up to `limit` occurrences of `scope` due by `at`, as `owner` with the clock at `at`.
async fn claim(
    store: &dyn Store,
    scope: ClaimScope<'_>,
    at: Timestamp,
    limit: usize,
    owner: &str,
) -> Vec<Occurrence> {
    store
        .claim_due(scope, at, limit, &lease(owner, at))
        .await
        .expect("claim")
}

fn attempt(n: u32, at: Timestamp) -> Option<AttemptRecord> {
    Some(AttemptRecord {
        attempt: n,
        started_at: at,
        latency_ms: 3,
        status: Some(200),
        error: None,
    })
}

/// The completion of a one-off's first delivery.
fn delivered(occ: &Occurrence) -> Completion {
    done(
        occ,
        Action::Delivered {
            next: None,
            skipped: 0,
        },
    )
}

fn done(occ: &Occurrence, action: Action) -> Completion {
    Completion {
        job_id: occ.job_id,
        token: occ.token,
        due: occ.due,
        attempt: attempt(occ.attempt, occ.fire_at),
        action,
    }
}

async fn create(store: &dyn Store, jobs: Vec<NewJob>) -> Vec<Created> {
    store.create_jobs(jobs).await.expect("create")
}

pub async fn create_then_get(store: Arc<dyn Store>) {
    let job = one_off("a", t(T0) + ms(5000));
    let id = job.id;
    let created = create(&*store, vec![job]).await;
    assert!(matches!(created[0], Created::New(_)));
    let got = store.get_job(Some("a"), id).await.unwrap().expect("job");
    assert_eq!(got.id, id);
    assert_eq!(got.state, JobState::Active);
    assert_eq!(got.next_due, Some(t(T0) + ms(5000)));
    assert_eq!(got.payload.as_deref(), Some(r#"{"n":1}"#));
    assert_eq!(got.spec.job_type.as_deref(), Some("test"));
    assert_eq!(store.count_jobs(None).await.unwrap(), 1);
}

pub async fn idempotent_create_by_key(store: Arc<dyn Store>) {
    let mut first = one_off("a", t(T0));
    first.key = Some("k".into());
    let first_id = first.id;
    create(&*store, vec![first]).await;

    let mut same = one_off("a", t(T0));
    same.key = Some("k".into());
    let again = create(&*store, vec![same]).await;
    match &again[0] {
        Created::Existing(r) => assert_eq!(r.id, first_id),
        other => panic!("expected the existing job, got {other:?}"),
    }

    let mut different = one_off("a", t(T0));
    different.key = Some("k".into());
    different.fingerprint = 2;
    match store.create_jobs(vec![different]).await {
        Err(StoreError::KeyConflict { existing, .. }) => assert_eq!(existing, first_id),
        other => panic!("expected a key conflict, got {other:?}"),
    }
    // The same key in another namespace is another job.
    let mut elsewhere = one_off("b", t(T0));
    elsewhere.key = Some("k".into());
    assert!(matches!(
        create(&*store, vec![elsewhere]).await[0],
        Created::New(_)
    ));
    assert_eq!(store.count_jobs(None).await.unwrap(), 2);
}

pub async fn batch_is_all_or_nothing(store: Arc<dyn Store>) {
    let mut taken = one_off("a", t(T0));
    taken.key = Some("taken".into());
    create(&*store, vec![taken]).await;

    let fresh = one_off("a", t(T0));
    let mut conflicting = one_off("a", t(T0));
    conflicting.key = Some("taken".into());
    conflicting.fingerprint = 99;
    let err = store
        .create_jobs(vec![fresh, conflicting])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::KeyConflict { index: 1, .. }));
    assert_eq!(store.count_jobs(Some("a")).await.unwrap(), 1);
}

pub async fn claim_respects_horizon_order_and_limit(store: Arc<dyn Store>) {
    let base = t(T0);
    let jobs: Vec<NewJob> = [300, 100, 200, 5000]
        .into_iter()
        .map(|d| one_off("a", base + ms(d)))
        .collect();
    create(&*store, jobs).await;
    let claimed = store
        .claim_due(ClaimScope::Fired, base + ms(250), 10, &lease("n1", base))
        .await
        .unwrap();
    let dues: Vec<_> = claimed.iter().map(|o| o.due).collect();
    assert_eq!(dues, vec![base + ms(100), base + ms(200)]);
    assert!(claimed.iter().all(|o| o.attempt == 1 && o.runs_done == 0));
    let limited = store
        .claim_due(ClaimScope::Fired, base + ms(10_000), 1, &lease("n1", base))
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
    assert_eq!(limited[0].due, base + ms(300));
}

pub async fn claims_are_exclusive_until_lease_expiry(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let first = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    assert_eq!(first.len(), 1);
    let during = base + ms(29_000);
    assert!(
        claim(&*store, ClaimScope::Fired, during, 10, "n2")
            .await
            .is_empty(),
        "a live claim must not be claimed again"
    );
    let after = base + ms(30_001);
    let second = claim(&*store, ClaimScope::Fired, after, 10, "n2").await;
    assert_eq!(second.len(), 1);
    assert_eq!(
        second[0].due, first[0].due,
        "same occurrence, same identity"
    );
    assert!(second[0].token > first[0].token);
}

/// A claimer looks ahead (its horizon) for work due soon, but a lease still running by its own
/// clock is not up for grabs, however soon it expires: short leases renewed by a live node must
/// not be taken over just because they fall inside another node's lookahead.
pub async fn a_live_lease_is_not_claimed_within_the_horizon(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let first = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    assert_eq!(first.len(), 1);
    let expiry = base + ms(30_000);
    let before = expiry - ms(1);
    assert!(
        store
            .claim_due(
                ClaimScope::Fired,
                expiry + ms(2_000),
                10,
                &lease("n2", before)
            )
            .await
            .unwrap()
            .is_empty(),
        "the lease expires within the horizon but is still live"
    );
    let taken = store
        .claim_due(
            ClaimScope::Fired,
            expiry + ms(2_000),
            10,
            &lease("n2", expiry),
        )
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "at its expiry the lease is over");
    assert!(taken[0].token > first[0].token);
}

/// A store that announces events (shared stores do) announces a create with its earliest due
/// time per kind of target, and an edit as a fence. The embedded store announces nothing.
pub async fn events_announce_due_work(store: Arc<dyn Store>) {
    let Some(mut events) = store.events() else {
        return;
    };
    let mut next = async || loop {
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("an event within 5 s")
            .expect("event channel open");
        if event != StoreEvent::Resync {
            return event;
        }
    };
    let base = t(T0);
    let sooner = one_off("a", base + ms(100));
    let id = sooner.id;
    create(&*store, vec![one_off("a", base + ms(900)), sooner]).await;
    assert_eq!(
        next().await,
        StoreEvent::Due(DueEvent {
            namespace: "a".into(),
            queue: None,
            at: base + ms(100),
        })
    );
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base + ms(5)),
            queue_job("a", "q", "x", base + ms(3)),
        ],
    )
    .await;
    assert_eq!(
        next().await,
        StoreEvent::Due(DueEvent {
            namespace: "a".into(),
            queue: Some("q".into()),
            at: base + ms(3),
        })
    );
    store
        .transition(
            Some("a"),
            id,
            Transition::Trigger {
                now: base,
                key: None,
            },
        )
        .await
        .unwrap();
    let mut got = [next().await, next().await];
    got.sort_by_key(|e| matches!(e, StoreEvent::Fenced { .. }));
    assert_eq!(
        got[0],
        StoreEvent::Due(DueEvent {
            namespace: "a".into(),
            queue: None,
            at: base,
        })
    );
    let StoreEvent::Fenced { job_id, token } = got[1] else {
        panic!("expected a fence, got {:?}", got[1]);
    };
    assert_eq!(job_id, id);
    // A claim made after the trigger carries the fence's token or a higher one.
    let claimed = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    let after = claimed.iter().find(|o| o.job_id == id).expect("claimed");
    assert!(after.token >= token);
}

pub async fn stale_token_cannot_complete(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let first = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    let later = base + ms(31_000);
    let second = claim(&*store, ClaimScope::Fired, later, 10, "n2").await;
    let stale = delivered(&first[0]);
    assert_eq!(
        store.complete(vec![stale], later).await.unwrap(),
        vec![Applied::StaleLease]
    );
    let job = store.get_job(None, first[0].job_id).await.unwrap().unwrap();
    assert_eq!(
        job.state,
        JobState::Active,
        "stale write must change nothing"
    );
    assert!(store.runs(None, job.id, None, 10).await.unwrap().is_empty());
    let fresh = delivered(&second[0]);
    assert_eq!(
        store.complete(vec![fresh], later).await.unwrap(),
        vec![Applied::Yes]
    );
}

pub async fn delivered_one_off_completes_with_run_history(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let applied = store
        .complete(vec![delivered(&occ)], base + ms(5))
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Yes]);
    let job = store.get_job(Some("a"), occ.job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.runs, 1);
    let runs = store.runs(Some("a"), occ.job_id, None, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status, runs[0].outcome.as_str()),
        (Some(200), "delivered")
    );
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), None);
}

/// A batch larger than a backend's internal chunks (the embedded store inserts runs 64 a
/// statement), with retries, deliveries and a stale completion mixed: each applied completion
/// records exactly its own run, with its own fields.
pub async fn a_large_completion_batch_records_every_run(store: Arc<dyn Store>) {
    let base = t(T0);
    let n = 131;
    create(
        &*store,
        (0..n).map(|i| one_off("a", base + ms(i))).collect(),
    )
    .await;
    let claimed = store
        .claim_due(ClaimScope::Fired, base + ms(n), 500, &lease("n1", base))
        .await
        .unwrap();
    assert_eq!(claimed.len(), n as usize);
    let mut batch = Vec::new();
    for (i, occ) in claimed.iter().enumerate() {
        let action = if i % 3 == 0 {
            Action::Retry {
                at: base + ms(60_000),
            }
        } else {
            Action::Delivered {
                next: None,
                skipped: 0,
            }
        };
        let mut c = done(occ, action);
        let a = c.attempt.as_mut().expect("attempt");
        a.latency_ms = i as u32;
        if i % 3 == 0 {
            a.status = Some(500);
            a.error = Some(format!("boom {i}"));
        }
        batch.push(c);
        if i == 70 {
            // An earlier lease's completion of the same occurrence, refused by its token.
            let mut stale = done(
                occ,
                Action::Delivered {
                    next: None,
                    skipped: 0,
                },
            );
            stale.token -= 1;
            batch.push(stale);
        }
    }
    let applied = store.complete(batch, base + ms(5)).await.unwrap();
    assert_eq!(applied.len(), n as usize + 1);
    assert_eq!(applied[71], Applied::StaleLease);
    assert_eq!(
        applied.iter().filter(|a| **a == Applied::Yes).count(),
        n as usize
    );
    for (i, occ) in claimed.iter().enumerate() {
        let runs = store.runs(Some("a"), occ.job_id, None, 10).await.unwrap();
        assert_eq!(runs.len(), 1, "job {i}: {runs:?}");
        let run = &runs[0];
        let retried = i % 3 == 0;
        assert_eq!(
            (
                run.job_id,
                run.due,
                run.attempt,
                run.latency_ms,
                run.status,
                run.error.clone(),
                run.outcome.as_str()
            ),
            (
                occ.job_id,
                occ.due,
                occ.attempt,
                i as u32,
                Some(if retried { 500 } else { 200 }),
                retried.then(|| format!("boom {i}")),
                if retried { "retry" } else { "delivered" }
            ),
            "job {i}"
        );
    }
}

pub async fn recurring_advances_in_the_same_transaction(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![every_second("a", base)]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let next = base + ms(1000);
    store
        .complete(
            vec![done(
                &occ,
                Action::Delivered {
                    next: Some(next),
                    skipped: 2,
                },
            )],
            base,
        )
        .await
        .unwrap();
    let job = store.get_job(None, occ.job_id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.next_due, job.runs, job.skipped, job.attempt),
        (JobState::Active, Some(next), 1, 2, 0)
    );
    let again = claim(&*store, ClaimScope::Fired, next, 10, "n1").await;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].due, again[0].runs_done), (next, 1));
}

pub async fn retry_moves_fire_time_and_counts_attempts(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let retry_at = base + ms(2000);
    store
        .complete(vec![done(&occ, Action::Retry { at: retry_at })], base)
        .await
        .unwrap();
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(retry_at)
    );
    assert!(
        store
            .claim_due(ClaimScope::Fired, retry_at - ms(1), 10, &lease("n1", base))
            .await
            .unwrap()
            .is_empty()
    );
    let second = claim(&*store, ClaimScope::Fired, retry_at, 10, "n1")
        .await
        .remove(0);
    assert_eq!(
        (second.attempt, second.due, second.fire_at),
        (2, base, retry_at)
    );
    let runs = store.runs(None, occ.job_id, None, 10).await.unwrap();
    assert_eq!(runs[0].outcome, "retry");
}

pub async fn dead_letters_are_recorded_listed_and_deleted(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base), one_off("b", base)]).await;
    let claimed = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    let batch = claimed
        .iter()
        .map(|occ| {
            done(
                occ,
                Action::DeadLetter {
                    next: None,
                    skipped: 0,
                    reason: "http 500".into(),
                },
            )
        })
        .collect();
    store.complete(batch, base).await.unwrap();
    let letters = store.dead_letters(Some("a"), None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (letter.reason.as_str(), letter.due, letter.attempts),
        ("http 500", base, 1)
    );
    assert_eq!(letter.payload.as_deref(), Some(r#"{"n":1}"#));
    let job = store.get_job(None, letter.job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(store.dead_letters(None, None, 10).await.unwrap().len(), 2);
    assert!(
        store
            .get_dead_letter(Some("b"), letter.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .delete_dead_letter(Some("b"), letter.id)
            .await
            .unwrap()
    );
    assert!(
        store
            .delete_dead_letter(Some("a"), letter.id)
            .await
            .unwrap()
    );
    assert!(
        store
            .get_dead_letter(None, letter.id)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn release_restores_fire_time(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base + ms(500))]).await;
    let occ = store
        .claim_due(ClaimScope::Fired, base + ms(1000), 10, &lease("n1", base))
        .await
        .unwrap()
        .remove(0);
    store
        .release(vec![Release {
            job_id: occ.job_id,
            token: occ.token,
            fire_at: occ.fire_at,
        }])
        .await
        .unwrap();
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(500))
    );
    let again = store
        .claim_due(ClaimScope::Fired, base + ms(500), 10, &lease("n2", base))
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
}

pub async fn next_due_tracks_earliest_active(store: Arc<dyn Store>) {
    let base = t(T0);
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), None);
    let later = one_off("a", base + ms(9000));
    let sooner = one_off("a", base + ms(3000));
    let sooner_id = sooner.id;
    create(&*store, vec![later, sooner]).await;
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(3000))
    );
    store
        .transition(Some("a"), sooner_id, Transition::Pause { now: base })
        .await
        .unwrap();
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(9000))
    );
}

pub async fn namespaces_are_isolated(store: Arc<dyn Store>) {
    let job = one_off("a", t(T0));
    let id = job.id;
    create(&*store, vec![job, one_off("b", t(T0))]).await;
    assert!(store.get_job(Some("b"), id).await.unwrap().is_none());
    assert!(matches!(
        store
            .transition(Some("b"), id, Transition::Cancel { now: t(T0) })
            .await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.runs(Some("b"), id, None, 10).await,
        Err(StoreError::NotFound)
    ));
    let listed = store
        .list_jobs(JobQuery {
            namespace: Some("b".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(listed.iter().all(|j| j.namespace == "b") && listed.len() == 1);
    assert_eq!(store.count_jobs(Some("a")).await.unwrap(), 1);
}

pub async fn pause_resume_cancel_trigger(store: Arc<dyn Store>) {
    let base = t(T0);
    let mut recurring = every_second("a", base);
    recurring.key = Some("tick".into());
    let id = recurring.id;
    create(&*store, vec![recurring]).await;
    // A claim made before the pause becomes stale.
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let paused = store
        .transition(Some("a"), id, Transition::Pause { now: base })
        .await
        .unwrap();
    assert_eq!(paused.state, JobState::Paused);
    assert!(
        store
            .claim_due(ClaimScope::Fired, base + ms(60_000), 10, &lease("n1", base))
            .await
            .unwrap()
            .is_empty()
    );
    let stale = done(
        &occ,
        Action::Delivered {
            next: Some(base + ms(1000)),
            skipped: 0,
        },
    );
    assert_eq!(
        store.complete(vec![stale], base).await.unwrap(),
        vec![Applied::StaleLease]
    );

    let resume_at = base + ms(10_500);
    let resumed = store
        .transition(Some("a"), id, Transition::Resume { now: resume_at })
        .await
        .unwrap();
    assert_eq!(resumed.state, JobState::Active);
    assert_eq!(resumed.next_due, Some(base + ms(11_000)));

    let trigger_at = base + ms(10_600);
    let triggered = store
        .transition(
            Some("a"),
            id,
            Transition::Trigger {
                now: trigger_at,
                key: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(triggered.next_due, Some(trigger_at));

    let cancelled = store
        .transition(Some("a"), id, Transition::Cancel { now: trigger_at })
        .await
        .unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert_eq!(cancelled.key, None, "a cancelled job frees its key");
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), None);
    assert!(matches!(
        store
            .transition(Some("a"), id, Transition::Resume { now: trigger_at })
            .await,
        Err(StoreError::InvalidState {
            state: JobState::Cancelled,
            ..
        })
    ));
    // Cancelling twice is harmless.
    store
        .transition(Some("a"), id, Transition::Cancel { now: trigger_at })
        .await
        .unwrap();
}

pub async fn update_replaces_spec_and_fences_claims(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let new_due = base + ms(60_000);
    let mut new_spec = spec(Schedule::at(new_due));
    new_spec.job_type = Some("renamed".into());
    let updated = store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                spec: new_spec,
                payload: Some("[1,2]".into()),
                next_due: Some(new_due),
                now: base,
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.next_due, Some(new_due));
    assert_eq!(updated.payload.as_deref(), Some("[1,2]"));
    assert_eq!(updated.spec.job_type.as_deref(), Some("renamed"));
    let stale = delivered(&occ);
    assert_eq!(
        store.complete(vec![stale], base).await.unwrap(),
        vec![Applied::StaleLease]
    );
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(new_due)
    );
}

pub async fn list_filters_and_paginates(store: Arc<dyn Store>) {
    let base = t(T0);
    let jobs: Vec<NewJob> = (0..25).map(|i| one_off("a", base + ms(i * 1000))).collect();
    let ids: Vec<_> = jobs.iter().map(|j| j.id).collect();
    create(&*store, jobs).await;
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_jobs(JobQuery {
                namespace: Some("a".into()),
                after,
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|j| j.id);
        seen.extend(page.into_iter().map(|j| j.id));
    }
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(seen, expected);

    let due_window = store
        .list_jobs(JobQuery {
            namespace: Some("a".into()),
            due_after: Some(base + ms(5000)),
            due_before: Some(base + ms(8000)),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(due_window.len(), 3);
    store
        .transition(Some("a"), ids[0], Transition::Pause { now: base })
        .await
        .unwrap();
    let paused = store
        .list_jobs(JobQuery {
            namespace: Some("a".into()),
            state: Some(JobState::Paused),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].id, ids[0]);
    let typed = store
        .list_jobs(JobQuery {
            namespace: Some("a".into()),
            job_type: Some("nope".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(typed.is_empty());
}

pub async fn signing_secret_round_trips(store: Arc<dyn Store>) {
    let base = t(T0);
    assert_eq!(store.signing_secrets("a").await.unwrap(), None);
    // The first one set wins; a second init answers it.
    assert_eq!(
        store.init_signing_secret("a", "whsec_one").await.unwrap(),
        "whsec_one"
    );
    assert_eq!(
        store.init_signing_secret("a", "whsec_other").await.unwrap(),
        "whsec_one"
    );
    let current = |s: &str| SigningSecrets {
        current: s.into(),
        previous: None,
    };
    assert_eq!(
        store.signing_secrets("a").await.unwrap(),
        Some(current("whsec_one"))
    );
    // A rotation with an overlap keeps the replaced secret until then.
    store
        .rotate_signing_secret("a", "whsec_two", Some(base + ms(60_000)))
        .await
        .unwrap();
    assert_eq!(
        store.signing_secrets("a").await.unwrap(),
        Some(SigningSecrets {
            current: "whsec_two".into(),
            previous: Some(("whsec_one".into(), base + ms(60_000))),
        })
    );
    // One without drops it at once.
    store
        .rotate_signing_secret("a", "whsec_three", None)
        .await
        .unwrap();
    assert_eq!(
        store.signing_secrets("a").await.unwrap(),
        Some(current("whsec_three"))
    );
    // Rotating a namespace that never had a secret has nothing to keep.
    store
        .rotate_signing_secret("c", "whsec_first", Some(base))
        .await
        .unwrap();
    assert_eq!(
        store.signing_secrets("c").await.unwrap(),
        Some(current("whsec_first"))
    );
    assert_eq!(store.signing_secrets("b").await.unwrap(), None);
}

fn queue_job(namespace: &str, queue: &str, job_type: &str, due: Timestamp) -> NewJob {
    let mut job = one_off(namespace, due);
    job.spec.target = Target::Queue(QueueTarget { name: queue.into() });
    job.spec.job_type = Some(job_type.into());
    job
}

fn queue<'a>(namespace: &'a str, name: &'a str) -> ClaimScope<'a> {
    ClaimScope::Queue {
        namespace,
        queue: name,
        types: None,
    }
}

pub async fn queue_jobs_are_leased_not_fired(store: Arc<dyn Store>) {
    let base = t(T0);
    let hook = one_off("a", base + ms(100));
    let q = queue_job("a", "emails", "send", base);
    let (hook_id, q_id) = (hook.id, q.id);
    create(
        &*store,
        vec![
            hook,
            q,
            queue_job("a", "other", "send", base),
            queue_job("b", "emails", "send", base),
        ],
    )
    .await;

    let fired = store
        .claim_due(ClaimScope::Fired, base + ms(1000), 10, &lease("n1", base))
        .await
        .unwrap();
    assert_eq!(
        fired.iter().map(|o| o.job_id).collect::<Vec<_>>(),
        vec![hook_id],
        "the engine never claims queue messages"
    );
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(base + ms(30_000)),
        "only the webhook job's lease expiry"
    );
    assert_eq!(
        store.next_due(queue("a", "emails")).await.unwrap(),
        Some(base)
    );
    assert!(
        store
            .claim_due(queue("a", "emails"), base - ms(1), 10, &lease("w", base))
            .await
            .unwrap()
            .is_empty(),
        "not available before its due time"
    );
    let leased = claim(&*store, queue("a", "emails"), base, 10, "w").await;
    assert_eq!(leased.len(), 1, "one queue of one namespace");
    assert_eq!(leased[0].job_id, q_id);
    assert_eq!(leased[0].attempt, 1);
    assert_eq!(leased[0].spec.target.queue(), Some("emails"));
    assert_eq!(
        store.next_due(queue("a", "emails")).await.unwrap(),
        Some(base + ms(30_000))
    );
    assert_eq!(store.next_due(queue("a", "none")).await.unwrap(), None);
}

pub async fn queue_lease_filters_by_type(store: Arc<dyn Store>) {
    let base = t(T0);
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base),
            queue_job("a", "q", "y", base),
            queue_job("a", "q", "z", base),
        ],
    )
    .await;
    let types = vec!["x".to_string(), "z".to_string()];
    let scope = ClaimScope::Queue {
        namespace: "a",
        queue: "q",
        types: Some(&types),
    };
    let mut got: Vec<_> = claim(&*store, scope, base, 10, "w")
        .await
        .into_iter()
        .map(|o| o.spec.job_type.clone().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, vec!["x", "z"]);
    let rest = claim(&*store, queue("a", "q"), base, 10, "w").await;
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].spec.job_type.as_deref(), Some("y"));
}

pub async fn lapsed_queue_lease_counts_an_attempt(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![queue_job("a", "q", "x", base)]).await;
    let first = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    assert_eq!(first[0].attempt, 1);
    let during = base + ms(29_999);
    assert!(
        claim(&*store, queue("a", "q"), during, 10, "w2")
            .await
            .is_empty(),
        "invisible while leased"
    );
    let after = base + ms(30_000);
    let second = claim(&*store, queue("a", "q"), after, 10, "w2").await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].attempt, 2, "the lapsed lease was an attempt");
    assert_eq!(second[0].due, first[0].due, "same occurrence");
    assert!(second[0].token > first[0].token);
    // The first worker's receipt is stale now: it can neither extend nor complete.
    assert_eq!(
        store
            .extend_claims(
                vec![(first[0].job_id, first[0].token)],
                after + ms(60_000),
                after
            )
            .await
            .unwrap(),
        vec![Applied::StaleLease]
    );
    let ack = delivered(&first[0]);
    assert_eq!(
        store.complete(vec![ack], after).await.unwrap(),
        vec![Applied::StaleLease]
    );
    let job = store.get_job(None, first[0].job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Active);
    assert_eq!(job.attempt, 1, "one failed attempt recorded");
    // The current holder acks.
    let ack = delivered(&second[0]);
    assert_eq!(
        store.complete(vec![ack], after).await.unwrap(),
        vec![Applied::Yes]
    );
    let job = store.get_job(None, first[0].job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Completed);
    let much_later = after + ms(3_600_000);
    assert!(
        claim(&*store, queue("a", "q"), much_later, 10, "w3")
            .await
            .is_empty(),
        "an acked message never comes back"
    );
}

pub async fn extend_moves_the_lease_under_its_token(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![queue_job("a", "q", "x", base)]).await;
    let held = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    let at = base + ms(20_000);
    assert_eq!(
        store
            .extend_claims(vec![(held[0].job_id, held[0].token)], at + ms(60_000), at)
            .await
            .unwrap(),
        vec![Applied::Yes]
    );
    let past_first = base + ms(40_000);
    assert!(
        claim(&*store, queue("a", "q"), past_first, 10, "w2")
            .await
            .is_empty(),
        "the extension keeps it invisible past the first expiry"
    );
    let past_second = at + ms(60_000);
    let again = claim(&*store, queue("a", "q"), past_second, 10, "w2").await;
    assert_eq!(again.len(), 1);
    // A released (unclaimed) message cannot be extended even with its latest token.
    store
        .release(vec![Release {
            job_id: again[0].job_id,
            token: again[0].token,
            fire_at: again[0].fire_at,
        }])
        .await
        .unwrap();
    assert_eq!(
        store
            .extend_claims(
                vec![(again[0].job_id, again[0].token)],
                past_second + ms(1),
                past_second
            )
            .await
            .unwrap(),
        vec![Applied::StaleLease]
    );
}

pub async fn queue_retry_counts_once(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![queue_job("a", "q", "x", base)]).await;
    let held = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    // A nack: retry in 5 s.
    let nack = done(
        &held[0],
        Action::Retry {
            at: base + ms(5_000),
        },
    );
    assert_eq!(
        store.complete(vec![nack], base).await.unwrap(),
        vec![Applied::Yes]
    );
    assert!(
        store
            .claim_due(queue("a", "q"), base + ms(4_999), 10, &lease("w1", base))
            .await
            .unwrap()
            .is_empty(),
        "the retry delay holds"
    );
    let at = base + ms(5_000);
    let again = claim(&*store, queue("a", "q"), at, 10, "w1").await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempt, 2, "a nack is one failed attempt, not two");
}

pub async fn queue_stats_count_by_visibility(store: Arc<dyn Store>) {
    let base = t(T0);
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base),
            queue_job("a", "q", "x", base + ms(10)),
            queue_job("a", "q", "x", base + ms(60_000)),
            queue_job("a", "r", "x", base),
            queue_job("b", "q", "x", base),
        ],
    )
    .await;
    claim(&*store, queue("a", "q"), base, 1, "w").await;
    let now = base + ms(1_000);
    let stats = store.queue_stats("a", None, now).await.unwrap();
    assert_eq!(
        stats,
        vec![
            QueueStats {
                name: "q".into(),
                available: 1,
                in_flight: 1,
                scheduled: 1,
                oldest_available: Some(base + ms(10)),
            },
            QueueStats {
                name: "r".into(),
                available: 1,
                in_flight: 0,
                scheduled: 0,
                oldest_available: Some(base),
            },
        ]
    );
    // When the lease lapses, the message is available again, since its lease expiry.
    let later = base + ms(45_000);
    let q = store.queue_stats("a", Some("q"), later).await.unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].available, q[0].in_flight, q[0].scheduled), (2, 0, 1));
    assert_eq!(q[0].oldest_available, Some(base + ms(10)));
    let empty = store.queue_stats("a", Some("none"), later).await.unwrap();
    assert_eq!(
        empty,
        vec![QueueStats {
            name: "none".into(),
            available: 0,
            in_flight: 0,
            scheduled: 0,
            oldest_available: None,
        }]
    );
    assert_eq!(store.queue_stats("c", None, later).await.unwrap(), vec![]);
}

pub async fn update_can_move_a_job_between_target_kinds(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let mut spec = spec(Schedule::at(base));
    spec.target = Target::Queue(QueueTarget { name: "q".into() });
    store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                spec,
                payload: None,
                next_due: Some(base),
                now: base,
            },
        )
        .await
        .unwrap();
    assert!(
        claim(&*store, ClaimScope::Fired, base, 10, "n")
            .await
            .is_empty()
    );
    let leased = claim(&*store, queue("a", "q"), base, 10, "w").await;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].job_id, id);
}

pub async fn gauges_count_states_backlog_and_queues(store: Arc<dyn Store>) {
    let base = t(T0);
    let empty = store.gauges(base).await.unwrap();
    assert_eq!(
        empty.jobs_by_state,
        JobState::ALL.iter().map(|s| (*s, 0)).collect::<Vec<_>>(),
        "every state, at zero"
    );
    let late = one_off("a", base - ms(5_000));
    let claimed = one_off("b", base - ms(9_000));
    let future = one_off("a", base + ms(60_000));
    let cancelled = one_off("a", base + ms(60_000));
    let cancelled_id = cancelled.id;
    create(
        &*store,
        vec![
            late,
            claimed,
            future,
            cancelled,
            queue_job("a", "q", "x", base - ms(2_000)),
            queue_job("b", "r", "x", base - ms(1_000)),
            queue_job("a", "q", "x", base + ms(1_000)),
        ],
    )
    .await;
    store
        .transition(Some("a"), cancelled_id, Transition::Cancel { now: base })
        .await
        .unwrap();
    // Claim the oldest fired occurrence and one queue message.
    let held = store
        .claim_due(ClaimScope::Fired, base - ms(9_000), 1, &lease("n", base))
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    claim(&*store, queue("b", "r"), base, 1, "w").await;

    let g = store.gauges(base).await.unwrap();
    let count = |state| g.jobs_by_state.iter().find(|(s, _)| *s == state).unwrap().1;
    assert_eq!(count(JobState::Active), 6);
    assert_eq!(count(JobState::Cancelled), 1);
    assert_eq!(count(JobState::Completed), 0);
    assert_eq!(
        (g.due_backlog, g.oldest_backlog),
        (1, Some(base - ms(5_000))),
        "only the unclaimed late occurrence"
    );
    assert_eq!(
        (g.queue_available, g.queue_in_flight, g.queue_scheduled),
        (1, 1, 1)
    );
    assert_eq!(g.oldest_queue_available, Some(base - ms(2_000)));
}

pub async fn purge_removes_only_old_finished_work(store: Arc<dyn Store>) {
    let base = t(T0);
    // Finished an hour ago: a delivered one-off and a cancelled one.
    let done_early = one_off("a", base);
    let cancelled = one_off("a", base + ms(3_600_000));
    // Still to come, and a recurring job with an old run and a recent one.
    let waiting = one_off("a", base + ms(86_400_000));
    let recurring = every_second("a", base);
    let (done_id, cancelled_id, waiting_id, recurring_id) =
        (done_early.id, cancelled.id, waiting.id, recurring.id);
    create(&*store, vec![done_early, cancelled, waiting, recurring]).await;
    let claimed = claim(&*store, ClaimScope::Fired, base, 10, "n").await;
    assert_eq!(claimed.len(), 2);
    let finish = claimed
        .iter()
        .map(|occ| {
            let next = (occ.job_id == recurring_id).then(|| base + ms(1000));
            done(occ, Action::Delivered { next, skipped: 0 })
        })
        .collect();
    store.complete(finish, base).await.unwrap();
    store
        .transition(Some("a"), cancelled_id, Transition::Cancel { now: base })
        .await
        .unwrap();
    // A recent run of the recurring job, two hours later.
    let later = base + ms(7_200_000);
    let again = claim(&*store, ClaimScope::Fired, later, 10, "n").await;
    assert_eq!(again.len(), 1);
    let mut recent = done(
        &again[0],
        Action::Delivered {
            next: Some(later + ms(1000)),
            skipped: 0,
        },
    );
    recent.attempt = attempt(1, later);
    store.complete(vec![recent], later).await.unwrap();

    // Keep one hour: everything finished or run before `later - 1h` goes.
    let cutoff = later - ms(3_600_000);
    let purged = store.purge(cutoff, 100).await.unwrap();
    assert_eq!(
        purged,
        Purged { jobs: 2, runs: 2 },
        "two old jobs, the done job's run and the recurring job's old run"
    );
    assert!(store.get_job(None, done_id).await.unwrap().is_none());
    assert!(store.get_job(None, cancelled_id).await.unwrap().is_none());
    assert!(
        store.get_job(None, waiting_id).await.unwrap().is_some(),
        "live jobs stay"
    );
    let kept = store.runs(None, recurring_id, None, 10).await.unwrap();
    assert_eq!(kept.len(), 1, "the recent run stays");
    assert_eq!(kept[0].started_at, later);
    assert_eq!(
        store.purge(cutoff, 100).await.unwrap(),
        Purged::default(),
        "nothing twice"
    );
    assert_eq!(store.count_jobs(None).await.unwrap(), 2);
}

/// A claim that lapses before its occurrence's fire time (a lease shorter than the claimer's
/// lookahead, or a renewal that came late) is claimed again with the occurrence's own fire time,
/// not the lapsed lease's expiry: otherwise the new holder would fire it early.
pub async fn a_lapsed_claim_taken_again_keeps_its_fire_time(store: Arc<dyn Store>) {
    let base = t(T0);
    let due = base + ms(2_000);
    create(&*store, vec![one_off("a", due)]).await;
    let short = |owner: &str, now: Timestamp| Lease {
        owner: owner.into(),
        ttl: Duration::from_secs(1),
        now,
    };
    let first = store
        .claim_due(ClaimScope::Fired, base + ms(2_000), 10, &short("n1", base))
        .await
        .unwrap();
    assert_eq!(first[0].fire_at, due);
    let later = base + ms(1_100);
    let second = store
        .claim_due(
            ClaimScope::Fired,
            later + ms(2_000),
            10,
            &short("n2", later),
        )
        .await
        .unwrap();
    assert_eq!(second.len(), 1, "the first lease lapsed at base + 1 s");
    assert_eq!(
        second[0].fire_at, due,
        "fires at its own time, not the lapsed lease's expiry"
    );
    // And handed back unfired, it is due at that time again.
    store
        .release(vec![Release {
            job_id: second[0].job_id,
            token: second[0].token,
            fire_at: second[0].fire_at,
        }])
        .await
        .unwrap();
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), Some(due));
}

/// The ways a lease ends besides lapsing where it was set: an ack (never back), an extension to an
/// earlier expiry (back from then on, and the queue's next due time says so), and a lapsed message
/// that a type-filtered claimer may not take (it stays for one that may).
pub async fn a_shortened_lease_lapses_at_its_new_expiry_and_waits_for_its_type(
    store: Arc<dyn Store>,
) {
    let base = t(T0);
    create(
        &*store,
        vec![
            queue_job("a", "q", "x", base),
            queue_job("a", "q", "y", base),
        ],
    )
    .await;
    let held = claim(&*store, queue("a", "q"), base, 10, "w1").await;
    assert_eq!(held.len(), 2);
    let of_type = |t: &str| {
        held.iter()
            .find(|o| o.spec.job_type.as_deref() == Some(t))
            .unwrap()
            .clone()
    };
    let (x, y) = (of_type("x"), of_type("y"));
    let ack = delivered(&y);
    assert_eq!(
        store.complete(vec![ack], base).await.unwrap(),
        vec![Applied::Yes]
    );
    let now = base + ms(1_000);
    let short = base + ms(5_000);
    assert_eq!(
        store
            .extend_claims(vec![(x.job_id, x.token)], short, now)
            .await
            .unwrap(),
        vec![Applied::Yes]
    );
    assert_eq!(
        store.next_due(queue("a", "q")).await.unwrap(),
        Some(short),
        "the shortened lease is the queue's next due time"
    );
    let before = short - ms(1);
    assert!(
        claim(&*store, queue("a", "q"), before, 10, "w2")
            .await
            .is_empty(),
        "still leased until its new expiry"
    );
    let only_y = vec!["y".to_string()];
    let y_scope = ClaimScope::Queue {
        namespace: "a",
        queue: "q",
        types: Some(&only_y),
    };
    assert!(
        claim(&*store, y_scope, short, 10, "w2").await.is_empty(),
        "the lapsed x is not a y, and the acked y never comes back"
    );
    let stats = store.queue_stats("a", Some("q"), short).await.unwrap();
    assert_eq!(
        (stats[0].available, stats[0].in_flight, stats[0].scheduled),
        (1, 0, 0)
    );
    assert_eq!(stats[0].oldest_available, Some(short));
    let again = claim(&*store, queue("a", "q"), short, 10, "w3").await;
    assert_eq!(
        again.len(),
        1,
        "x is back at its new expiry, for a claimer of its type"
    );
    assert_eq!(again[0].job_id, x.job_id);
    assert_eq!(again[0].attempt, 2, "the lapsed lease was an attempt");
    let stats = store.queue_stats("a", Some("q"), short).await.unwrap();
    assert_eq!(
        (stats[0].available, stats[0].in_flight, stats[0].scheduled),
        (0, 1, 0)
    );
    // The lease taken again runs its full time, and lapses in turn.
    let soon = short + ms(1);
    assert!(
        claim(&*store, queue("a", "q"), soon, 10, "w4")
            .await
            .is_empty()
    );
    let expiry = short + ms(30_000);
    assert_eq!(store.next_due(queue("a", "q")).await.unwrap(), Some(expiry));
    let third = claim(&*store, queue("a", "q"), expiry, 10, "w4").await;
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].attempt, 3);
}

/// A job's runs come newest first, a page at a time: each page resumes after the last run of the
/// one before, and runs that started in the same millisecond keep the order they were recorded in
/// (newest first) across a page boundary.
pub async fn runs_page_newest_first_and_resume_after_a_cursor(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    // Five attempts; the third and fourth start in the same millisecond.
    let starts = [0, 1000, 2000, 2000, 3000].map(|n| base + ms(n));
    for (i, started) in starts.iter().enumerate() {
        let occ = claim(&*store, ClaimScope::Fired, *started, 10, "n1")
            .await
            .remove(0);
        assert_eq!(occ.attempt, i as u32 + 1);
        let action = match starts.get(i + 1) {
            Some(next) => Action::Retry { at: *next },
            None => Action::Delivered {
                next: None,
                skipped: 0,
            },
        };
        let completion = Completion {
            attempt: attempt(occ.attempt, *started),
            ..done(&occ, action)
        };
        assert_eq!(
            store.complete(vec![completion], *started).await.unwrap(),
            vec![Applied::Yes]
        );
    }

    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = store.runs(Some("a"), id, before, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        before = page.last().map(|r| r.cursor);
        pages.push(page.iter().map(|r| r.attempt).collect::<Vec<_>>());
        assert!(pages.len() <= 3, "paging does not end: {pages:?}");
    }
    assert_eq!(pages, vec![vec![5, 4], vec![3, 2], vec![1]]);

    let all = store.runs(Some("a"), id, None, 10).await.unwrap();
    let attempts: Vec<u32> = all.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, vec![5, 4, 3, 2, 1]);
    assert_eq!(all[0].outcome, "delivered");
    assert!(
        all.windows(2).all(|w| w[0].cursor != w[1].cursor),
        "every run has a cursor of its own"
    );
    // A cursor survives its text form, and the first page is the one before the newest cursor.
    let text = all[1].cursor.encode();
    assert_eq!(RunCursor::parse(&text), Some(all[1].cursor));
    let after_second = store
        .runs(Some("a"), id, RunCursor::parse(&text), 10)
        .await
        .unwrap();
    assert_eq!(after_second, all[2..].to_vec());
    assert_eq!(
        store
            .runs(Some("a"), id, Some(RunCursor::NEWEST), 10)
            .await
            .unwrap(),
        all
    );
    // Another namespace sees no such job, whatever the cursor.
    assert!(matches!(
        store.runs(Some("b"), id, before, 10).await,
        Err(StoreError::NotFound)
    ));
}

/// The dead-letter sweep deletes letters recorded before the cutoff, oldest first, no more than it
/// is asked to look at, in every namespace; younger letters stay.
pub async fn old_dead_letters_are_purged_oldest_first(store: Arc<dyn Store>) {
    let base = t(T0);
    // Five letters, recorded a minute apart, across two namespaces.
    let mut ids = Vec::new();
    for i in 0..5 {
        let at = base + ms(60_000 * i);
        let job = one_off(if i % 2 == 0 { "a" } else { "b" }, at);
        ids.push(job.id);
        create(&*store, vec![job]).await;
        let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
            .await
            .remove(0);
        let letter = Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        };
        store.complete(vec![done(&occ, letter)], at).await.unwrap();
    }
    let left = |store: Arc<dyn Store>| async move {
        let letters = store.dead_letters(None, None, 10).await.unwrap();
        letters.iter().map(|l| l.job_id).collect::<Vec<_>>()
    };
    assert_eq!(left(store.clone()).await, ids);

    // Nothing is older than the first letter.
    assert_eq!(store.purge_dead_letters(base, 10).await.unwrap(), 0);
    // Three are older than 2.5 minutes, but the sweep looks at two at a time.
    let cutoff = base + ms(150_000);
    assert_eq!(store.purge_dead_letters(cutoff, 2).await.unwrap(), 2);
    assert_eq!(left(store.clone()).await, ids[2..].to_vec());
    assert_eq!(store.purge_dead_letters(cutoff, 2).await.unwrap(), 1);
    assert_eq!(store.purge_dead_letters(cutoff, 2).await.unwrap(), 0);
    assert_eq!(left(store.clone()).await, ids[3..].to_vec());
    // The jobs themselves are the job sweep's business.
    assert!(store.get_job(None, ids[0]).await.unwrap().is_some());
}

/// A leased queue message edited into a webhook job belongs to the engine from then on: once the
/// engine's claim on it lapses too, the old queue neither hands it out nor counts it.
pub async fn a_leased_message_moved_to_a_webhook_stays_off_its_old_queue(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = queue_job("a", "q", "send", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    assert_eq!(
        claim(&*store, queue("a", "q"), base, 10, "w").await.len(),
        1
    );
    store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                spec: spec(Schedule::at(base)),
                payload: None,
                next_due: Some(base),
                now: base,
            },
        )
        .await
        .unwrap();
    let fired = claim(&*store, ClaimScope::Fired, base, 10, "n").await;
    assert_eq!(fired.iter().map(|o| o.job_id).collect::<Vec<_>>(), [id]);

    // Both leases (30 s) have run out.
    let later = base + ms(31_000);
    assert!(
        claim(&*store, queue("a", "q"), later, 10, "w")
            .await
            .is_empty(),
        "the old queue handed out a webhook job"
    );
    let stats = store.queue_stats("a", Some("q"), later).await.unwrap();
    assert!(
        stats.iter().all(|q| q.available == 0 && q.in_flight == 0),
        "the old queue still counts it: {stats:?}"
    );
    let again = claim(&*store, ClaimScope::Fired, later, 10, "n").await;
    assert_eq!(again.iter().map(|o| o.job_id).collect::<Vec<_>>(), [id]);
}

/// An edit or transition answers the job's new fencing token, so a node can drop exactly the
/// claims made before it: claims before have a lower token, a claim made after a higher one.
/// (A node that dropped every claim of an edited job also dropped the one its planner took right
/// after the edit, and the job waited out that lease.)
pub async fn edits_and_transitions_answer_the_token_that_fences_older_claims(
    store: Arc<dyn Store>,
) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let before = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let edited = store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                spec: spec(Schedule::at(base)),
                payload: Some(r#"{"n":2}"#.into()),
                next_due: Some(base),
                now: base,
            },
        )
        .await
        .unwrap();
    assert!(
        before.token < edited.token,
        "the older claim is below the edit"
    );
    let after = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    assert!(
        after.token > edited.token,
        "a claim after the edit is above it"
    );
    let read = store.get_job(None, id).await.unwrap().unwrap();
    assert_eq!(read.token, after.token, "a read shows the current token");

    let mut last = after.token;
    for make in [
        (|now| Transition::Pause { now }) as fn(Timestamp) -> Transition,
        |now| Transition::Resume { now },
        |now| Transition::Trigger { now, key: None },
    ] {
        let changed = store.transition(Some("a"), id, make(base)).await.unwrap();
        assert!(changed.token > last, "{:?} raises the token", make(base));
        last = changed.token;
    }
    let after = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    assert!(after.token > last);
    assert_eq!(
        store.complete(vec![delivered(&after)], base).await.unwrap(),
        vec![Applied::Yes]
    );
}

/// A trigger carrying a key the job's last keyed trigger had is a retry: it changes nothing and
/// answers the job with that trigger's due time, even after the occurrence ran or the job was
/// cancelled. A new key triggers again; a keyless trigger leaves the remembered one alone.
pub async fn a_repeated_keyed_trigger_changes_nothing(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base + ms(3_600_000));
    let id = job.id;
    create(&*store, vec![job]).await;
    let trigger = |now: Timestamp, key: Option<&str>| {
        let store = store.clone();
        let key = key.map(str::to_owned);
        async move {
            store
                .transition(Some("a"), id, Transition::Trigger { now, key })
                .await
        }
    };
    let first = trigger(base, Some("k1")).await.unwrap();
    let remembered = Some(crate::KeyedTrigger {
        key: "k1".into(),
        due: base,
    });
    assert_eq!(first.last_trigger, remembered);
    assert_eq!(first.next_due, Some(base));

    let retried = trigger(base + ms(500), Some("k1")).await.unwrap();
    assert_eq!(retried, first, "a retry changes nothing");

    // The triggered occurrence runs; the job completes. A retry still answers it.
    let occ = claim(&*store, ClaimScope::Fired, base + ms(600), 10, "n1")
        .await
        .remove(0);
    assert_eq!(occ.due, base);
    store.complete(vec![delivered(&occ)], base).await.unwrap();
    let retried = trigger(base + ms(700), Some("k1")).await.unwrap();
    assert_eq!(
        (retried.state, retried.last_trigger.clone()),
        (JobState::Completed, remembered.clone())
    );
    assert!(
        claim(&*store, ClaimScope::Fired, base + ms(800), 10, "n1")
            .await
            .is_empty(),
        "the retry fired again"
    );

    let second = trigger(base + ms(1000), Some("k2")).await.unwrap();
    assert_eq!(
        (second.state, second.next_due),
        (JobState::Active, Some(base + ms(1000)))
    );
    let keyless = trigger(base + ms(1100), None).await.unwrap();
    assert_eq!(keyless.next_due, Some(base + ms(1100)));
    assert_eq!(
        keyless.last_trigger,
        Some(crate::KeyedTrigger {
            key: "k2".into(),
            due: base + ms(1000),
        })
    );

    store
        .transition(Some("a"), id, Transition::Cancel { now: base })
        .await
        .unwrap();
    let retried = trigger(base + ms(1200), Some("k2")).await.unwrap();
    assert_eq!(retried.state, JobState::Cancelled);
    assert!(matches!(
        trigger(base + ms(1200), Some("k3")).await,
        Err(StoreError::InvalidState { .. })
    ));
}

/// A one-off dead-lettered on its third failed attempt shows three attempts, on the job as on
/// its dead letter (the job showed two: the last failure was never counted).
pub async fn a_dead_lettered_job_counts_its_last_attempt(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let mut at = base;
    for _ in 0..2 {
        let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
            .await
            .remove(0);
        at += ms(1000);
        store
            .complete(vec![done(&occ, Action::Retry { at })], at)
            .await
            .unwrap();
    }
    let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
        .await
        .remove(0);
    assert_eq!(occ.attempt, 3);
    let letter = done(
        &occ,
        Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        },
    );
    assert_eq!(
        store.complete(vec![letter], at).await.unwrap(),
        vec![Applied::Yes]
    );
    let job = store.get_job(None, id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Failed, 3));
    let letters = store.dead_letters(Some("a"), None, 10).await.unwrap();
    assert_eq!(letters[0].attempts, 3);
}
