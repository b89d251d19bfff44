//! Conformance: job labels are kept with the spec, and listings select by them (equality and
//! existence selectors, ANDed, with the other filters and the cursor), only ever within the
//! namespace asked for; an update's labels replace the old ones in what selectors find, and a
//! purged job is found by none.

use std::sync::Arc;

use hourglass_core::{JobId, JobState, Labels, Schedule, Selector};

use super::*;
use crate::{JobQuery, JobUpdate, Store, Transition};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn labeled(namespace: &str, pairs: &[(&str, &str)]) -> NewJob {
    let mut job = one_off(namespace, t(T0) + ms(5000));
    job.spec.labels = labels(pairs);
    job
}

fn selectors(texts: &[&str]) -> Vec<Selector> {
    texts
        .iter()
        .map(|s| Selector::parse(s).expect("selector"))
        .collect()
}

/// The ids of `namespace`'s jobs (every namespace's for `None`) that `texts` select, read in
/// pages of `page` to exercise the cursor.
async fn selected(
    store: &dyn Store,
    namespace: Option<&str>,
    texts: &[&str],
    state: Option<JobState>,
    page: usize,
) -> Vec<JobId> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let jobs = store
            .list_jobs(JobQuery {
                namespace: namespace.map(str::to_owned),
                state,
                labels: selectors(texts),
                after,
                limit: page,
                ..Default::default()
            })
            .await
            .expect("list");
        let done = jobs.len() < page;
        after = jobs.last().map(|j| j.id);
        out.extend(jobs.into_iter().map(|j| j.id));
        if done {
            return out;
        }
    }
}

fn sorted(mut ids: Vec<JobId>) -> Vec<JobId> {
    ids.sort();
    ids
}

pub async fn labels_round_trip_and_selectors_and_together(store: Arc<dyn Store>) {
    let jobs = vec![
        labeled("a", &[("tenant", "acme"), ("kind", "reminder")]),
        labeled("a", &[("tenant", "acme"), ("kind", "invoice")]),
        labeled("a", &[("tenant", "acme")]),
        labeled("a", &[("tenant", "globex"), ("kind", "reminder")]),
        labeled("a", &[]),
        // Another namespace with the very same labels: never selected from "a".
        labeled("b", &[("tenant", "acme"), ("kind", "reminder")]),
    ];
    let ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    create(&*store, jobs).await;

    let got = store.get_job(Some("a"), ids[0]).await.unwrap().unwrap();
    assert_eq!(
        got.spec.labels,
        labels(&[("tenant", "acme"), ("kind", "reminder")])
    );
    let plain = store.get_job(Some("a"), ids[4]).await.unwrap().unwrap();
    assert!(plain.spec.labels.is_empty());

    let s = &*store;
    // Equality; existence; both, ANDed; every page size reads the same ids in id order.
    for page in [1, 2, 100] {
        let acme = selected(s, Some("a"), &["tenant=acme"], None, page).await;
        assert_eq!(acme, sorted(ids[0..3].to_vec()), "page {page}");
        let kinds = selected(s, Some("a"), &["kind"], None, page).await;
        assert_eq!(kinds, sorted(vec![ids[0], ids[1], ids[3]]), "page {page}");
        let both = selected(s, Some("a"), &["kind", "tenant=acme"], None, page).await;
        assert_eq!(both, sorted(vec![ids[0], ids[1]]), "page {page}");
    }
    let one = selected(s, Some("a"), &["tenant=acme", "kind=reminder"], None, 10).await;
    assert_eq!(one, vec![ids[0]]);
    assert!(
        selected(s, Some("a"), &["tenant=acme", "kind=nope"], None, 10)
            .await
            .is_empty()
    );
    assert!(
        selected(s, Some("a"), &["missing"], None, 10)
            .await
            .is_empty()
    );
    // A value is matched whole, not as a prefix.
    assert!(
        selected(s, Some("a"), &["tenant=acm"], None, 10)
            .await
            .is_empty()
    );

    // With the other filters: the state.
    store
        .transition(Some("a"), ids[1], Transition::Pause { now: t(T0) }, None)
        .await
        .unwrap();
    let paused = selected(s, Some("a"), &["tenant=acme"], Some(JobState::Paused), 10).await;
    assert_eq!(paused, vec![ids[1]]);
    let active = selected(s, Some("a"), &["tenant=acme"], Some(JobState::Active), 10).await;
    assert_eq!(active, sorted(vec![ids[0], ids[2]]));

    // Namespaces: "b" sees only its own job; a listing of every namespace sees both.
    let b = selected(s, Some("b"), &["tenant=acme", "kind=reminder"], None, 10).await;
    assert_eq!(b, vec![ids[5]]);
    assert!(
        selected(s, Some("c"), &["tenant"], None, 10)
            .await
            .is_empty()
    );
    let every = selected(s, None, &["tenant=acme", "kind=reminder"], None, 1).await;
    assert_eq!(every, sorted(vec![ids[0], ids[5]]));
}

pub async fn an_update_replaces_labels_and_the_index_follows(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = labeled("a", &[("tenant", "acme"), ("kind", "reminder")]);
    let id = job.id;
    create(&*store, vec![job]).await;
    let update = |pairs: &[(&str, &str)]| {
        let mut new_spec = spec(Schedule::at(base + ms(9000)));
        new_spec.labels = labels(pairs);
        JobUpdate {
            read_token: None,
            spec: new_spec,
            payload: None,
            next_due: Some(base + ms(9000)),
            now: base,
        }
    };
    let s = &*store;
    let updated = store
        .update_job(
            Some("a"),
            id,
            update(&[("tenant", "globex"), ("team", "x")]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        updated.spec.labels,
        labels(&[("tenant", "globex"), ("team", "x")])
    );
    assert!(
        selected(s, Some("a"), &["tenant=acme"], None, 10)
            .await
            .is_empty()
    );
    assert!(selected(s, Some("a"), &["kind"], None, 10).await.is_empty());
    assert_eq!(
        selected(s, Some("a"), &["tenant=globex", "team"], None, 10).await,
        vec![id]
    );
    // An update keeping the labels keeps what selects the job.
    store
        .update_job(
            Some("a"),
            id,
            update(&[("tenant", "globex"), ("team", "x")]),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        selected(s, Some("a"), &["team=x"], None, 10).await,
        vec![id]
    );
    // No labels: nothing selects it, and it still lists without a selector.
    store
        .update_job(Some("a"), id, update(&[]), None)
        .await
        .unwrap();
    assert!(
        selected(s, Some("a"), &["tenant"], None, 10)
            .await
            .is_empty()
    );
    assert_eq!(selected(s, Some("a"), &[], None, 10).await, vec![id]);
    // Labels again, then the job cancelled and purged: no selector finds it.
    store
        .update_job(Some("a"), id, update(&[("tenant", "acme")]), None)
        .await
        .unwrap();
    store
        .transition(Some("a"), id, Transition::Cancel { now: base }, None)
        .await
        .unwrap();
    assert_eq!(
        selected(s, Some("a"), &["tenant=acme"], None, 10).await,
        vec![id]
    );
    let purged = store.purge(base + ms(1), 100).await.unwrap();
    assert_eq!(purged.jobs, 1);
    assert!(
        selected(s, Some("a"), &["tenant"], None, 10)
            .await
            .is_empty()
    );
    // A new job with the same labels is found alone.
    let again = labeled("a", &[("tenant", "acme")]);
    let again_id = again.id;
    create(&*store, vec![again]).await;
    assert_eq!(
        selected(s, Some("a"), &["tenant=acme"], None, 10).await,
        vec![again_id]
    );
}
