//! Lifecycle changes through the API: pause, resume, cancel, trigger (with keys), edits, the
//! fencing token they answer, and the events a shared store announces for them.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::{Action, JobState, Next, Schedule};
use jiff::Timestamp;

use super::{
    T0, claim, create, delivered, done, every_second, lease, ms, one_off, queue_job, spec, t,
};
use crate::{Applied, ClaimScope, DueEvent, JobUpdate, Store, StoreError, StoreEvent, Transition};

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
            None,
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
        .transition(Some("a"), id, Transition::Pause { now: base }, None)
        .await
        .unwrap();
    assert_eq!(paused.state, JobState::Paused);
    assert_eq!(
        paused.next_attempt, None,
        "a paused job has no next attempt"
    );
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
            next: Some(Next::at(base + ms(1000))),
            skipped: 0,
        },
    );
    assert_eq!(
        store.complete(vec![stale], base).await.unwrap(),
        vec![Applied::StaleLease]
    );

    let resume_at = base + ms(10_500);
    let resumed = store
        .transition(Some("a"), id, Transition::Resume { now: resume_at }, None)
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
            None,
        )
        .await
        .unwrap();
    assert_eq!(triggered.next_due, Some(trigger_at));

    let cancelled = store
        .transition(Some("a"), id, Transition::Cancel { now: trigger_at }, None)
        .await
        .unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert_eq!(cancelled.key, None, "a cancelled job frees its key");
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), None);
    assert!(matches!(
        store
            .transition(Some("a"), id, Transition::Resume { now: trigger_at }, None)
            .await,
        Err(StoreError::InvalidState {
            state: JobState::Cancelled,
            ..
        })
    ));
    // Cancelling twice is harmless.
    store
        .transition(Some("a"), id, Transition::Cancel { now: trigger_at }, None)
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
                read_token: None,
                spec: new_spec,
                payload: Some("[1,2]".into()),
                next_due: Some(new_due),
                now: base,
            },
            None,
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
                read_token: None,
                spec: spec(Schedule::at(base)),
                payload: Some(r#"{"n":2}"#.into()),
                next_due: Some(base),
                now: base,
            },
            None,
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
        let changed = store
            .transition(Some("a"), id, make(base), None)
            .await
            .unwrap();
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
                .transition(Some("a"), id, Transition::Trigger { now, key }, None)
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
        .transition(Some("a"), id, Transition::Cancel { now: base }, None)
        .await
        .unwrap();
    let retried = trigger(base + ms(1200), Some("k2")).await.unwrap();
    assert_eq!(retried.state, JobState::Cancelled);
    assert!(matches!(
        trigger(base + ms(1200), Some("k3")).await,
        Err(StoreError::InvalidState { .. })
    ));
}

/// Payloads of every size come back byte for byte wherever a job is read: got, listed, claimed,
/// edited from large to small and back, and kept by a dead letter. (A store may keep large ones
/// apart from the job; none may lose or mix them up.)
pub async fn payloads_of_every_size_come_back_whole(store: Arc<dyn Store>) {
    let base = t(T0);
    let sized = |tag: &str, pad: usize| format!(r#"{{"tag":"{tag}","pad":"{}"}}"#, "x".repeat(pad));
    // Over a page, just over a few hundred bytes, and a dozen bytes.
    let payloads = [sized("a", 20_000), sized("b", 300), sized("c", 0)];
    let jobs: Vec<_> = payloads
        .iter()
        .map(|p| {
            let mut job = one_off("a", base);
            job.payload = Some(p.clone());
            job
        })
        .collect();
    let ids: Vec<_> = jobs.iter().map(|j| j.id).collect();
    create(&*store, jobs).await;
    let payload_of = |id| {
        let i = ids.iter().position(|x| *x == id).expect("one of ours");
        payloads[i].as_str()
    };
    for id in &ids {
        let got = store.get_job(Some("a"), *id).await.unwrap().unwrap();
        assert_eq!(got.payload.as_deref(), Some(payload_of(*id)), "get");
    }
    let listed = store
        .list_jobs(crate::JobQuery {
            namespace: Some("a".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 3);
    for job in &listed {
        assert_eq!(job.payload.as_deref(), Some(payload_of(job.id)), "list");
    }
    let claimed = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    assert_eq!(claimed.len(), 3);
    for o in &claimed {
        assert_eq!(o.payload.as_deref(), Some(payload_of(o.job_id)), "claim");
    }

    // The large one edited to a small payload, then to another large one, then fired again.
    let edit = |payload: &str| JobUpdate {
        read_token: None,
        spec: spec(Schedule::at(base)),
        payload: Some(payload.to_owned()),
        next_due: Some(base),
        now: base,
    };
    let small = store
        .update_job(Some("a"), ids[0], edit("[1]"), None)
        .await
        .unwrap();
    assert_eq!(small.payload.as_deref(), Some("[1]"));
    let other = sized("d", 30_000);
    store
        .update_job(Some("a"), ids[0], edit(&other), None)
        .await
        .unwrap();
    let got = store.get_job(Some("a"), ids[0]).await.unwrap().unwrap();
    assert_eq!(
        got.payload.as_deref(),
        Some(other.as_str()),
        "edited back to large"
    );
    let again = claim(&*store, ClaimScope::Fired, base, 10, "n2").await;
    assert_eq!(again.len(), 1, "the edit made it due again");
    assert_eq!(again[0].payload.as_deref(), Some(other.as_str()));

    // A dead letter keeps the payload its job had.
    let b = claimed.iter().find(|o| o.job_id == ids[1]).unwrap();
    let dead = done(
        b,
        Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        },
    );
    assert_eq!(
        store
            .complete(vec![dead, delivered(&again[0])], base)
            .await
            .unwrap(),
        vec![Applied::Yes, Applied::Yes]
    );
    let letters = store.dead_letters(Some("a"), None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].payload.as_deref(), Some(payloads[1].as_str()));
    let finished = store.get_job(Some("a"), ids[0]).await.unwrap().unwrap();
    assert_eq!(finished.state, JobState::Completed);
    assert_eq!(
        finished.payload.as_deref(),
        Some(other.as_str()),
        "kept once done"
    );
}
