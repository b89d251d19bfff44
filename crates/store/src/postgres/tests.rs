//! Unit tests of the shared store: most need no database; the failpoint test (which only a unit
//! test can arm) needs `HOURGLASS_TEST_DATABASE_URL`, as the conformance tests do.

use hourglass_core::{FencingToken, from_ms};

use super::notify::{Due, parse_events};
use super::valid_schema;
use crate::{DueEvent, StoreEvent};

#[test]
fn notify_payloads_round_trip_and_stay_under_the_limit() {
    let mut due = Due::default();
    due.add("a", None, 20);
    due.add("b", None, 10);
    due.add("a", Some("q"), 5);
    due.add("a", Some("q"), 7);
    let id = uuid::Uuid::now_v7();
    due.fenced.push((id, FencingToken::from_i64(4)));
    let payloads = due.payloads();
    assert_eq!(payloads.len(), 1);
    // Nodes of other versions read this: a fence's token stays a bare integer.
    assert!(payloads[0].contains(&format!(r#"{{"fence":"{id}","token":4}}"#)));
    let mut events = parse_events(&payloads[0]);
    events.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        events,
        vec![
            StoreEvent::Due(DueEvent {
                namespace: "a".into(),
                queue: Some("q".into()),
                at: from_ms(5)
            }),
            StoreEvent::Due(DueEvent {
                namespace: "b".into(),
                queue: None,
                at: from_ms(10)
            }),
            StoreEvent::Fenced {
                job_id: id,
                token: FencingToken::from_i64(4)
            },
        ]
    );

    let mut many = Due::default();
    for i in 0..2000 {
        many.add("namespace", Some(&format!("queue-{i}")), i);
    }
    let payloads = many.payloads();
    assert!(payloads.len() > 1);
    assert!(payloads.iter().all(|p| p.len() < 8000));
    let total: usize = payloads.iter().map(|p| parse_events(p).len()).sum();
    assert_eq!(total, 2000);
    assert_eq!(parse_events("not json"), vec![StoreEvent::Resync]);
}

#[test]
fn schema_names_are_plain_identifiers() {
    assert!(valid_schema("hourglass"));
    assert!(valid_schema("hg_test_01"));
    assert!(!valid_schema(""));
    assert!(!valid_schema("1abc"));
    assert!(!valid_schema("a; DROP TABLE jobs"));
    assert!(!valid_schema(&"x".repeat(41)));
}

/// A node dying around a create's commit (its connection closing): before the commit, the create
/// is neither acknowledged nor stored; after it, it is stored but not acknowledged (its client
/// retries with its key). Either way the create acknowledged before it is there for a store
/// opened afresh, as another node would open it; and each create's audit entry is there exactly
/// when its job is (written in the same transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_around_the_commit_loses_no_acknowledged_job() {
    use crate::conformance::fixtures::{audited_jobs, create_entry, job};
    use crate::failpoint::{POSTGRES_CREATE_AFTER_COMMIT, POSTGRES_CREATE_BEFORE_COMMIT};
    use crate::{PostgresOptions, PostgresStore, Store};

    let t0 = from_ms(1_000_000);
    for (point, stored) in [
        (POSTGRES_CREATE_BEFORE_COMMIT, false),
        (POSTGRES_CREATE_AFTER_COMMIT, true),
    ] {
        let schema = hourglass_testkit::postgres::Schema::new("test");
        let options = PostgresOptions {
            schema: Some(schema.name().to_string()),
            pool_size: 2,
            ..PostgresOptions::new(schema.url())
        };
        let store = PostgresStore::open(options.clone()).await.unwrap();
        let acknowledged = job("a", t0, None);
        store
            .create_jobs(vec![acknowledged.clone()], Some(create_entry("a")))
            .await
            .unwrap();
        store.failpoints.arm(point);
        let crashed = job("a", t0, None);
        let answer = store
            .create_jobs(vec![crashed.clone()], Some(create_entry("a")))
            .await;
        assert!(
            answer.is_err(),
            "{point}: a dead call acknowledged a create"
        );
        drop(store);

        let store = PostgresStore::open(options).await.unwrap();
        let found = |id| {
            let store = &store;
            async move { store.get_job(None, id).await.unwrap().is_some() }
        };
        assert!(
            found(acknowledged.id).await,
            "{point}: an acknowledged job was lost"
        );
        assert_eq!(found(crashed.id).await, stored, "{point}");
        let expected = match stored {
            true => vec![crashed.id, acknowledged.id],
            false => vec![acknowledged.id],
        };
        assert_eq!(
            audited_jobs(&store, "a").await,
            expected,
            "{point}: the entries follow their jobs"
        );
    }
}
