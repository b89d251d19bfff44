//! Unit tests of the shared store that need no database.

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
