//! Callbacks: a completion's callback job is created with the completion, in its transaction,
//! only when the completion is applied, and a failed creation applies nothing.

use std::sync::Arc;

use hourglass_core::{
    Action, CallbackEvent, CallbackJob, CallbackOf, Completion, JobState, Next, Occurrence,
    OccurrenceOf, OverlapPolicy, Schedule,
};
use jiff::Timestamp;

use super::{T0, claim, create, done, every_second, ms, one_off, spec, t, webhook};
use crate::{ClaimScope, Store};

fn callback_of(occ: &Occurrence, at: Timestamp) -> Box<CallbackJob> {
    let mut spec = spec(Schedule::at(at));
    spec.target = webhook();
    spec.job_type = Some("occurrence.failed".into());
    spec.callback_of = Some(CallbackOf {
        job_id: occ.job_id,
        event: CallbackEvent::Failed,
    });
    Box::new(CallbackJob {
        id: uuid::Uuid::now_v7(),
        namespace: occ.namespace.to_string(),
        spec,
        payload: Some(format!(
            r#"{{"event":"occurrence.failed","job_id":"{}"}}"#,
            occ.job_id
        )),
        due: at,
    })
}

fn dead_lettered(occ: &Occurrence, at: Timestamp) -> Completion {
    let mut c = done(
        occ,
        Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        },
    );
    c.callback = Some(callback_of(occ, at));
    c
}

pub async fn a_completion_creates_its_callback_job_with_it(store: Arc<dyn Store>) {
    let store = &*store;
    let job = one_off("ns-cb", t(T0));
    create(store, vec![job.clone()]).await;
    let occ = claim(store, ClaimScope::Fired, t(T0), 10, "node-a")
        .await
        .pop()
        .expect("the job is due");
    let now = t(T0) + ms(50);
    let completion = dead_lettered(&occ, now);
    let callback = completion.callback.clone().expect("a callback");
    let applied = store
        .complete(vec![completion], now)
        .await
        .expect("complete");
    assert_eq!(applied, vec![crate::Applied::Yes]);

    let failed = store.get_job(None, job.id).await.unwrap().expect("the job");
    assert_eq!(failed.state, JobState::Failed);
    let created = store
        .get_job(Some("ns-cb"), callback.id)
        .await
        .unwrap()
        .expect("the callback job, created with the completion");
    assert_eq!(created.state, JobState::Active);
    assert_eq!(created.namespace, "ns-cb");
    assert_eq!(created.key, None);
    assert_eq!(created.spec.callback_of, callback.spec.callback_of);
    assert_eq!(created.payload.as_deref(), callback.payload.as_deref());
    assert_eq!(created.next_due, Some(now));
    assert_eq!(
        store.get_job(Some("other"), callback.id).await.unwrap(),
        None,
        "in its job's namespace only"
    );

    // It fires like any job, due at once.
    let fired = claim(store, ClaimScope::Fired, now, 10, "node-a").await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].job_id, callback.id);
    assert_eq!(fired[0].payload.as_deref(), callback.payload.as_deref());
    assert!(fired[0].spec.callback_of.is_some());
}

pub async fn a_refused_completion_creates_no_callback(store: Arc<dyn Store>) {
    let store = &*store;
    let job = one_off("ns-cb", t(T0));
    create(store, vec![job.clone()]).await;
    let occ = claim(store, ClaimScope::Fired, t(T0), 10, "node-a")
        .await
        .pop()
        .expect("the job is due");
    let now = t(T0) + ms(50);
    // The first completion ends the claim; the same one again is stale and creates nothing.
    let first = dead_lettered(&occ, now);
    let again = dead_lettered(&occ, now);
    let (first_id, again_id) = (
        first.callback.as_ref().unwrap().id,
        again.callback.as_ref().unwrap().id,
    );
    let applied = store
        .complete(vec![first.clone()], now)
        .await
        .expect("complete");
    assert_eq!(applied, vec![crate::Applied::Yes]);
    let refused = store.complete(vec![again], now).await.expect("complete");
    assert_eq!(refused, vec![crate::Applied::StaleLease]);
    // The same batch written again (its answer was lost): stale, not failed because its
    // callback job exists, or the completer would retry it forever.
    let repeated = store.complete(vec![first], now).await.expect("complete");
    assert_eq!(repeated, vec![crate::Applied::StaleLease]);
    assert!(store.get_job(None, first_id).await.unwrap().is_some());
    assert_eq!(store.get_job(None, again_id).await.unwrap(), None);
    assert_eq!(store.count_jobs(Some("ns-cb")).await.unwrap(), 2);
}

/// A callback job that cannot be created (its id is taken) fails the completion with it: the
/// occurrence stays claimed, to be completed again (with a new callback), never completed
/// without one.
pub async fn a_callback_that_cannot_be_created_fails_its_completion(store: Arc<dyn Store>) {
    let store = &*store;
    let job = one_off("ns-cb", t(T0));
    let other = one_off("ns-cb", t(T0) + ms(10_000));
    create(store, vec![job.clone(), other.clone()]).await;
    let occ = claim(store, ClaimScope::Fired, t(T0), 10, "node-a")
        .await
        .pop()
        .expect("the job is due");
    let now = t(T0) + ms(50);
    let mut completion = dead_lettered(&occ, now);
    if let Some(callback) = completion.callback.as_mut() {
        callback.id = other.id;
    }
    assert!(
        store.complete(vec![completion], now).await.is_err(),
        "the callback's id is taken"
    );
    let unchanged = store.get_job(None, job.id).await.unwrap().expect("the job");
    assert_eq!(
        unchanged.state,
        JobState::Active,
        "the completion was not applied"
    );
    assert_eq!(unchanged.runs, 0);
    assert!(store.dead_letters(None, None, 10).await.unwrap().is_empty());
    let kept = store
        .get_job(None, other.id)
        .await
        .unwrap()
        .expect("the other job");
    assert_eq!(kept.spec.callback_of, None, "the other job is untouched");

    // The same claim completes with a callback that can be created.
    let retried = dead_lettered(&occ, now);
    let applied = store.complete(vec![retried], now).await.expect("complete");
    assert_eq!(applied, vec![crate::Applied::Yes]);
}

/// A delivery (or a failed attempt that is retried) creates its callback too, here to a pull
/// queue, whose workers lease it in the job's namespace.
pub async fn a_delivery_or_a_retry_creates_its_callback_for_a_queue(store: Arc<dyn Store>) {
    let store = &*store;
    let (first, second) = (one_off("ns-cb", t(T0)), one_off("ns-cb", t(T0)));
    create(store, vec![first.clone(), second.clone()]).await;
    let mut claimed = claim(store, ClaimScope::Fired, t(T0), 10, "node-a").await;
    claimed.sort_by_key(|o| o.job_id);
    assert_eq!(claimed.len(), 2);
    let now = t(T0) + ms(50);
    let to_queue = |occ: &Occurrence, event| {
        let mut callback = callback_of(occ, now);
        callback.spec.target = hourglass_core::Target::Queue(hourglass_core::QueueTarget {
            name: "callbacks".into(),
        });
        callback.spec.job_type = Some(CallbackEvent::as_str(event).into());
        callback
    };
    let mut delivered = super::delivered(&claimed[0]);
    delivered.callback = Some(to_queue(&claimed[0], CallbackEvent::Succeeded));
    let mut retried = done(
        &claimed[1],
        Action::Retry {
            at: now + ms(1_000),
        },
    );
    retried.callback = Some(to_queue(&claimed[1], CallbackEvent::Failed));
    let applied = store
        .complete(vec![delivered, retried], now)
        .await
        .expect("complete");
    assert_eq!(applied, vec![crate::Applied::Yes; 2]);
    let done_job = store
        .get_job(None, claimed[0].job_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done_job.state, JobState::Completed);
    let retrying = store
        .get_job(None, claimed[1].job_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((retrying.state, retrying.attempt), (JobState::Active, 1));

    let mut leased = claim(store, super::queue("ns-cb", "callbacks"), now, 10, "worker").await;
    leased.sort_by_key(|o| o.spec.job_type.clone());
    let types: Vec<_> = leased.iter().map(|o| o.spec.job_type.clone()).collect();
    assert_eq!(
        types,
        vec![
            Some("occurrence.failed".to_string()),
            Some("occurrence.succeeded".to_string())
        ]
    );
    assert!(
        claim(store, super::queue("other", "callbacks"), now, 10, "worker")
            .await
            .is_empty()
    );
}

/// `allow` ([`hourglass_core::overlap`]): a completion that hands an occurrence off creates the
/// job that delivers it in its transaction and moves its job on (a run counted, none recorded).
/// That job fires under the occurrence's delivery id, and its runs and dead letter are recorded
/// under the job and occurrence it delivers, not its own.
pub async fn a_handed_off_occurrence_is_delivered_and_recorded_as_its_jobs(store: Arc<dyn Store>) {
    let store = &*store;
    let mut job = every_second("ns-allow", t(T0));
    job.spec.overlap = OverlapPolicy::Allow;
    create(store, vec![job.clone()]).await;
    let occ = claim(store, ClaimScope::Fired, t(T0), 10, "node-a")
        .await
        .pop()
        .expect("the job is due");
    let now = t(T0) + ms(5);
    let child_id = uuid::Uuid::now_v7();
    let mut child_spec = spec(Schedule::at(now));
    child_spec.occurrence_of = Some(OccurrenceOf {
        job_id: job.id,
        due: occ.due,
    });
    child_spec.labels.insert(
        hourglass_core::overlap::OCCURRENCE_OF_LABEL.into(),
        job.id.to_string(),
    );
    let next = Next::at(t(T0) + ms(1_000));
    let child = CallbackJob {
        id: child_id,
        namespace: "ns-allow".into(),
        spec: child_spec,
        payload: occ.payload.as_deref().map(str::to_owned),
        due: now,
    };
    let handoff = Completion::of(
        &occ,
        None,
        Action::HandedOff {
            next: Some(next),
            skipped: 0,
        },
        Some(Box::new(child)),
    );
    let applied = store.complete(vec![handoff], now).await.expect("complete");
    assert_eq!(applied, vec![crate::Applied::Yes]);
    let parent = store.get_job(None, job.id).await.unwrap().expect("the job");
    assert_eq!(
        (parent.state, parent.runs, parent.next_due, parent.attempt),
        (JobState::Active, 1, Some(next.due), 0),
        "moved on at once, the hand-off counted as a run"
    );
    let runs = store
        .runs(Some("ns-allow"), job.id, None, 10)
        .await
        .unwrap();
    assert!(runs.is_empty(), "the hand-off records no run: {runs:?}");
    // Listed by its mark, as a cancel of the job finds it.
    let marked = store
        .list_jobs(crate::JobQuery {
            namespace: Some("ns-allow".into()),
            labels: vec![hourglass_core::Selector {
                key: hourglass_core::overlap::OCCURRENCE_OF_LABEL.into(),
                value: Some(job.id.to_string()),
            }],
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(marked.iter().map(|j| j.id).collect::<Vec<_>>(), [child_id]);

    // Only the child is due now (the job's next occurrence is a second away).
    let fired = claim(store, ClaimScope::Fired, now, 10, "node-a").await;
    assert_eq!(fired.len(), 1);
    let delivering = &fired[0];
    assert_eq!(delivering.job_id, child_id);
    assert_eq!(delivering.origin(), (job.id, occ.due));
    assert_eq!(delivering.delivery_id(), occ.delivery_id());
    // It fails once, then for good: both runs and the letter are the job's occurrence's.
    let retry_at = now + ms(100);
    let retry = done(delivering, Action::Retry { at: retry_at });
    assert_eq!(
        store.complete(vec![retry], now).await.expect("complete"),
        vec![crate::Applied::Yes]
    );
    let again = claim(store, ClaimScope::Fired, retry_at, 10, "node-a")
        .await
        .pop()
        .expect("the retry is due");
    assert_eq!(again.job_id, child_id);
    let dead = done(
        &again,
        Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        },
    );
    assert_eq!(
        store
            .complete(vec![dead], retry_at)
            .await
            .expect("complete"),
        vec![crate::Applied::Yes]
    );
    let runs = store
        .runs(Some("ns-allow"), job.id, None, 10)
        .await
        .unwrap();
    let recorded: Vec<_> = runs.iter().map(|r| (r.due, r.attempt, r.outcome)).collect();
    assert_eq!(
        recorded,
        vec![
            (occ.due, 2, crate::RunOutcome::DeadLetter),
            (occ.due, 1, crate::RunOutcome::Retry),
        ],
        "newest first, under the job"
    );
    let own = store
        .runs(Some("ns-allow"), child_id, None, 10)
        .await
        .unwrap();
    assert!(own.is_empty(), "{own:?}");
    let letters = store
        .dead_letters(Some("ns-allow"), None, 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].job_id, letters[0].due), (job.id, occ.due));
    let child = store.get_job(None, child_id).await.unwrap().expect("child");
    assert_eq!(child.state, JobState::Failed);
    let parent = store.get_job(None, job.id).await.unwrap().expect("the job");
    assert_eq!((parent.state, parent.runs), (JobState::Active, 1));
}
