//! The contract's encoding: instants with milliseconds, payloads as their text, answers that read
//! back as they were written, and the error code table.

use std::collections::HashSet;

use serde_json::json;

use super::*;

#[test]
fn instants_are_written_with_milliseconds_and_read_in_any_rfc3339_form() {
    #[derive(Serialize, Deserialize)]
    struct At {
        #[serde(with = "instant")]
        at: jiff::Timestamp,
        #[serde(with = "instant::option")]
        until: Option<jiff::Timestamp>,
    }
    let at: jiff::Timestamp = "2027-03-01T08:00:00Z".parse().unwrap();
    let text = serde_json::to_string(&At { at, until: None }).unwrap();
    assert_eq!(text, r#"{"at":"2027-03-01T08:00:00.000Z","until":null}"#);
    let read: At = serde_json::from_str(
        r#"{"at":"2027-03-01T09:00:00.25+01:00","until":"2027-03-01T08:00:00Z"}"#,
    )
    .unwrap();
    assert_eq!(read.at, at + jiff::SignedDuration::from_millis(250));
    assert_eq!(read.until, Some(at));
    assert!(serde_json::from_str::<At>(r#"{"at":"tomorrow","until":null}"#).is_err());
}

#[test]
fn a_job_reads_back_as_the_server_wrote_it() {
    let written = json!({
        "id": "01a1fed9-5e42-7700-a219-abc57afebe01", "namespace": "acme", "key": "k",
        "type": "email", "state": "active", "schedule": {"every": "1h", "start": "2027-03-01T08:00:00.000Z"},
        "target": {"webhook": {"url": "https://example.com/h", "headers": {"x-token": "<redacted>"}}},
        "payload": {"b": [1, 2], "a": null},
        "retry": {"max_attempts": 10, "initial_backoff": "1s", "max_backoff": "15m"},
        "misfire": {"policy": "all", "window": "6h"}, "overlap": "buffer_all",
        "next_due_at": "2027-03-01T09:00:00.000Z", "next_attempt_at": null, "attempt": 0,
        "last_error": null, "runs": 0, "skipped": 0,
        "created_at": "2027-03-01T07:00:00.000Z", "updated_at": "2027-03-01T07:00:00.000Z",
    });
    let job: Job<'static> = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(job.state, JobState::Active);
    assert_eq!(job.payload_value(), json!({"a": null, "b": [1, 2]}));
    assert_eq!(serde_json::to_value(&job).unwrap(), written);
    // A node older than overlap policies sends none: its jobs read as `buffer_all`.
    let mut older = written.clone();
    older.as_object_mut().unwrap().remove("overlap");
    let read: Job<'static> = serde_json::from_value(older).unwrap();
    assert_eq!(read.overlap, "buffer_all");
    // A listing without payloads leaves the field out, and so does the job it reads into.
    let mut listed = written.clone();
    listed.as_object_mut().unwrap().remove("payload");
    let job: Job<'static> = serde_json::from_value(listed.clone()).unwrap();
    assert_eq!(job.payload, None);
    assert_eq!(serde_json::to_value(&job).unwrap(), listed);
}

#[test]
fn runs_and_states_name_what_the_server_stores_and_take_unknown_names() {
    for outcome in ["delivered", "retry", "dead_letter", "skipped"] {
        assert_eq!(RunOutcome::parse(outcome).as_str(), outcome);
        let read: RunOutcome = serde_json::from_value(json!(outcome)).unwrap();
        assert_eq!(read, RunOutcome::parse(outcome));
    }
    assert_eq!(RunOutcome::parse("exploded"), RunOutcome::Unknown);
    let newer: JobState = serde_json::from_value(json!("archived")).unwrap();
    assert_eq!(newer, JobState::Unknown);
    assert_eq!(JobState::parse("unknown"), None);
}

#[test]
fn codes_round_trip_are_unique_and_the_body_leaves_out_an_absent_field() {
    let mut seen = HashSet::new();
    for code in ErrorCode::ALL {
        assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
        assert!(seen.insert(code.as_str()), "{code} twice");
        assert!((400..600).contains(&code.status()), "{code}");
    }
    let body = ErrorBody {
        error: ErrorDetail {
            code: ErrorCode::NotFound.as_str().into(),
            field: None,
            message: "job not found".into(),
        },
    };
    assert_eq!(
        serde_json::to_string(&body).unwrap(),
        r#"{"error":{"code":"not_found","message":"job not found"}}"#
    );
}

#[test]
fn a_patch_tells_an_absent_payload_from_a_null_one() {
    let absent: PatchJob = serde_json::from_value(json!({"type": "t"})).unwrap();
    assert!(absent.payload.is_none());
    let cleared: PatchJob = serde_json::from_value(json!({"payload": null})).unwrap();
    assert_eq!(cleared.payload, Some(None));
    assert!(serde_json::from_value::<PatchJob>(json!({"colour": 1})).is_err());
}
