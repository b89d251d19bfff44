//! Creating jobs (batches, idempotent keys), reading and listing them, namespaces, and
//! signing secrets.

use std::sync::Arc;

use hourglass_core::JobState;

use super::{T0, create, ms, one_off, t};
use crate::{Created, JobQuery, NewJob, SigningSecrets, Store, StoreError, Transition};

pub async fn create_then_get(store: Arc<dyn Store>) {
    let job = one_off("a", t(T0) + ms(5000));
    let id = job.id;
    let created = create(&*store, vec![job]).await;
    assert!(matches!(created[0], Created::New(_)));
    let got = store.get_job(Some("a"), id).await.unwrap().expect("job");
    assert_eq!(got.id, id);
    assert_eq!(got.state, JobState::Active);
    assert_eq!(got.next_due, Some(t(T0) + ms(5000)));
    assert_eq!(got.next_attempt, got.next_due);
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
    match store.create_jobs(vec![different], None).await {
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

/// A key finds its job in its own namespace only, whatever characters it holds; a cancelled job
/// gives its key up, so the key then finds nothing, or the job that took it next.
pub async fn a_job_is_found_by_its_key_in_its_namespace(store: Arc<dyn Store>) {
    let key = "nightly export/a%2Fb ü";
    let mut keyed = one_off("a", t(T0));
    keyed.key = Some(key.into());
    let id = keyed.id;
    create(&*store, vec![keyed, one_off("a", t(T0))]).await;

    let found = store.get_job_by_key("a", key).await.unwrap().expect("job");
    assert_eq!(found, store.get_job(Some("a"), id).await.unwrap().unwrap());
    assert!(store.get_job_by_key("b", key).await.unwrap().is_none());
    assert!(
        store
            .get_job_by_key("a", "nightly")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .get_job_by_key("a", &key.to_uppercase())
            .await
            .unwrap()
            .is_none(),
        "keys are compared exactly"
    );

    store
        .transition(Some("a"), id, Transition::Cancel { now: t(T0) }, None)
        .await
        .unwrap();
    assert!(store.get_job_by_key("a", key).await.unwrap().is_none());
    let mut next = one_off("a", t(T0));
    next.key = Some(key.into());
    let next_id = next.id;
    create(&*store, vec![next]).await;
    let found = store.get_job_by_key("a", key).await.unwrap().expect("job");
    assert_eq!(found.id, next_id);
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
        .create_jobs(vec![fresh, conflicting], None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::KeyConflict { index: 1, .. }));
    assert_eq!(store.count_jobs(Some("a")).await.unwrap(), 1);
}

pub async fn namespaces_are_isolated(store: Arc<dyn Store>) {
    let job = one_off("a", t(T0));
    let id = job.id;
    create(&*store, vec![job, one_off("b", t(T0))]).await;
    assert!(store.get_job(Some("b"), id).await.unwrap().is_none());
    assert!(matches!(
        store
            .transition(Some("b"), id, Transition::Cancel { now: t(T0) }, None)
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
        .transition(Some("a"), ids[0], Transition::Pause { now: base }, None)
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
        .rotate_signing_secret("a", "whsec_two", Some(base + ms(60_000)), None)
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
        .rotate_signing_secret("a", "whsec_three", None, None)
        .await
        .unwrap();
    assert_eq!(
        store.signing_secrets("a").await.unwrap(),
        Some(current("whsec_three"))
    );
    // Rotating a namespace that never had a secret has nothing to keep.
    store
        .rotate_signing_secret("c", "whsec_first", Some(base), None)
        .await
        .unwrap();
    assert_eq!(
        store.signing_secrets("c").await.unwrap(),
        Some(current("whsec_first"))
    );
    assert_eq!(store.signing_secrets("b").await.unwrap(), None);
}

/// Secrets are replaced only over what the caller read (re-sealing under a new key races a
/// rotation), and every namespace with one is listed.
pub async fn signing_secrets_are_replaced_only_over_what_was_read(store: Arc<dyn Store>) {
    let until = t(T0) + ms(60_000);
    assert_eq!(
        store.signing_namespaces().await.unwrap(),
        Vec::<String>::new()
    );
    store.init_signing_secret("b", "whsec_b").await.unwrap();
    store.init_signing_secret("a", "whsec_a").await.unwrap();
    store
        .rotate_signing_secret("a", "whsec_a2", Some(until), None)
        .await
        .unwrap();
    assert_eq!(store.signing_namespaces().await.unwrap(), ["a", "b"]);

    let read = store.signing_secrets("a").await.unwrap().unwrap();
    let sealed = SigningSecrets {
        current: "sealed-a2".into(),
        previous: Some(("sealed-a".into(), until)),
    };
    // Over a stale read (a different previous secret, or none): refused, nothing changed.
    for stale in [
        SigningSecrets {
            current: "whsec_a2".into(),
            previous: None,
        },
        SigningSecrets {
            current: "whsec_a2".into(),
            previous: Some(("whsec_a".into(), until + ms(1))),
        },
        SigningSecrets {
            current: "whsec_a".into(),
            previous: Some(("whsec_a".into(), until)),
        },
    ] {
        assert!(
            !store
                .replace_signing_secrets("a", &stale, &sealed)
                .await
                .unwrap(),
            "{stale:?}"
        );
        assert_eq!(
            store.signing_secrets("a").await.unwrap().as_ref(),
            Some(&read)
        );
    }
    assert!(
        store
            .replace_signing_secrets("a", &read, &sealed)
            .await
            .unwrap()
    );
    assert_eq!(
        store.signing_secrets("a").await.unwrap(),
        Some(sealed.clone())
    );
    // A secret without a previous one, and a replacement that drops one.
    let b = store.signing_secrets("b").await.unwrap().unwrap();
    let b_sealed = SigningSecrets {
        current: "sealed-b".into(),
        previous: None,
    };
    assert!(
        store
            .replace_signing_secrets("b", &b, &b_sealed)
            .await
            .unwrap()
    );
    assert!(
        !store
            .replace_signing_secrets("b", &b, &b_sealed)
            .await
            .unwrap(),
        "the second replacement read a secret that is no longer there"
    );
    assert!(
        store
            .replace_signing_secrets("a", &sealed, &b_sealed)
            .await
            .unwrap()
    );
    assert_eq!(store.signing_secrets("a").await.unwrap(), Some(b_sealed));
    // A namespace without secrets has nothing to replace.
    assert!(
        !store
            .replace_signing_secrets("c", &b, &sealed)
            .await
            .unwrap()
    );
    assert_eq!(store.signing_secrets("c").await.unwrap(), None);
}
