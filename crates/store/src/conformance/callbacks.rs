//! Callbacks: a completion's callback job is created with the completion, in its transaction,
//! only when the completion is applied, and a failed creation applies nothing.

use std::sync::Arc;

use hourglass_core::{
    Action, CallbackEvent, CallbackJob, CallbackOf, Completion, JobState, Occurrence, Schedule,
};
use jiff::Timestamp;

use super::{T0, claim, create, done, ms, one_off, spec, t, webhook};
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
        payload: format!(
            r#"{{"event":"occurrence.failed","job_id":"{}"}}"#,
            occ.job_id
        ),
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
    assert_eq!(created.payload.as_deref(), Some(callback.payload.as_str()));
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
    assert_eq!(fired[0].payload.as_deref(), Some(callback.payload.as_str()));
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
    let applied = store.complete(vec![first], now).await.expect("complete");
    assert_eq!(applied, vec![crate::Applied::Yes]);
    let refused = store.complete(vec![again], now).await.expect("complete");
    assert_eq!(refused, vec![crate::Applied::StaleLease]);
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
