//! Overlap policies and backfills over HTTP (issue 37): what a create, an edit and a backfill
//! request accept and refuse (each refusal naming its field, changing nothing), and a backfill
//! delivered once, marked in the job's runs.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::support::{Api, Receiver, start_node};

/// `t` without its fraction of a second, as a schedule's `start` keeps it.
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap()
}

fn hourly_from(start: Timestamp, url: &str) -> Value {
    json!({
        "schedule": {"every": "1h", "start": start.to_string()},
        "target": {"webhook": {"url": url}},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_is_validated_shown_and_edited() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let body = |overlap: Value| {
        json!({
            "schedule": {"every": "1m"},
            "target": {"webhook": {"url": "http://127.0.0.1:9/h"}},
            "overlap": overlap,
        })
    };
    for (overlap, says) in [
        (json!("sometimes"), "allow"),
        (json!("Allow"), "buffer_one"),
        (json!(""), "buffer_one"),
    ] {
        let (status, answer) = api.call("POST", "/v1/jobs", Some(body(overlap))).await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["code"], "invalid_field", "{answer}");
        assert_eq!(answer["error"]["field"], "overlap", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    let (status, answer) = api.call("POST", "/v1/jobs", Some(body(json!(7)))).await;
    assert!(status == 422 || status == 400, "{status} {answer}");
    let (_, list) = api.call("GET", "/v1/jobs", None).await;
    assert_eq!(list["jobs"], json!([]), "nothing refused was stored");

    let default = api
        .create(json!({
            "schedule": {"every": "1m"},
            "target": {"webhook": {"url": "http://127.0.0.1:9/h"}},
        }))
        .await;
    assert_eq!(default["overlap"], "buffer_all", "{default}");
    let skip = api.create(body(json!("skip"))).await;
    assert_eq!(skip["overlap"], "skip");
    let path = format!("/v1/jobs/{}", skip["id"].as_str().unwrap());
    let (status, edited) = api
        .call("PATCH", &path, Some(json!({"overlap": "buffer_one"})))
        .await;
    assert_eq!((status, &edited["overlap"]), (200, &json!("buffer_one")));
    let (status, refused) = api
        .call("PATCH", &path, Some(json!({"overlap": "at once"})))
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["field"], "overlap");
    let (_, kept) = api.call("GET", &path, None).await;
    assert_eq!(
        kept["overlap"], "buffer_one",
        "a refused edit changes nothing"
    );
    let (status, edited) = api
        .call("PATCH", &path, Some(json!({"overlap": "allow"})))
        .await;
    assert_eq!((status, &edited["overlap"]), (200, &json!("allow")));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_request_is_refused_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let now = whole_seconds(Timestamp::now());
    let start = now - SignedDuration::from_hours(2000);
    let job = api.create(hourly_from(start, "http://127.0.0.1:9/h")).await;
    let id = job["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/jobs/{id}/backfill");
    let at = |hours: i64| (start + SignedDuration::from_hours(hours)).to_string();
    let future = (now + SignedDuration::from_hours(1)).to_string();
    for (body, status, code, field) in [
        (
            json!({"from": "yesterday", "to": at(3)}),
            422,
            "invalid_instant",
            "from",
        ),
        (
            json!({"from": at(0), "to": "2026-13-01T00:00:00Z"}),
            422,
            "invalid_instant",
            "to",
        ),
        (
            json!({"from": at(3), "to": at(3)}),
            422,
            "invalid_field",
            "to",
        ),
        (
            json!({"from": at(3), "to": at(1)}),
            422,
            "invalid_field",
            "to",
        ),
        (
            json!({"from": at(0), "to": future}),
            422,
            "invalid_field",
            "to",
        ),
        // 1001 hourly occurrences.
        (
            json!({"from": at(0), "to": at(1001)}),
            422,
            "invalid_field",
            "to",
        ),
    ] {
        let (got, answer) = api.call("POST", &path, Some(body.clone())).await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{body}: {answer}");
    }
    let (got, answer) = api
        .call(
            "POST",
            &path,
            Some(json!({"from": at(0), "to": at(1), "x": 1})),
        )
        .await;
    assert!(got == 400 || got == 422, "{answer}");
    // Exactly the bound is accepted.
    let (got, answer) = api
        .call("POST", &path, Some(json!({"from": at(0), "to": at(1000)})))
        .await;
    assert_eq!((got, answer), (202, json!({"occurrences": 1000})));
    // While it runs, another is refused.
    let (got, answer) = api
        .call(
            "POST",
            &path,
            Some(json!({"from": at(1000), "to": at(1001)})),
        )
        .await;
    assert_eq!(got, 409, "{answer}");
    // A one-off has nothing to backfill; a job that is not there is 404.
    let one_off = api
        .create(json!({"schedule": {"after": "1h"}, "target": {"webhook": {"url": "http://127.0.0.1:9/h"}}}))
        .await;
    let one_off_path = format!("/v1/jobs/{}/backfill", one_off["id"].as_str().unwrap());
    let (got, answer) = api
        .call(
            "POST",
            &one_off_path,
            Some(json!({"from": at(0), "to": at(1)})),
        )
        .await;
    assert_eq!(
        (got, &answer["error"]["field"]),
        (422, &json!("id")),
        "{answer}"
    );
    let (got, _) = api
        .call(
            "POST",
            "/v1/jobs/01a20c9b-fb01-7736-a59e-0a3ac367d4f9/backfill",
            Some(json!({"from": at(0), "to": at(1)})),
        )
        .await;
    assert_eq!(got, 404);
    node.shutdown().await;
}

/// A backfill of three hours delivers three occurrences, each under its nominal time's delivery
/// id, marked in the runs; the same request again delivers nothing, and the job then goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_is_delivered_once_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let url = format!("http://{}/ok", receiver.addr());
    let start = whole_seconds(Timestamp::now()) - SignedDuration::from_hours(10);
    let job = api.create(hourly_from(start, &url)).await;
    let id = job["id"].as_str().unwrap().to_owned();
    let next_due = job["next_due_at"].clone();
    let path = format!("/v1/jobs/{id}/backfill");
    let range = json!({
        "from": (start + SignedDuration::from_hours(1)).to_string(),
        "to": (start + SignedDuration::from_hours(4)).to_string(),
    });
    let (status, answer) = api.call("POST", &path, Some(range.clone())).await;
    assert_eq!((status, answer), (202, json!({"occurrences": 3})));
    let delivered = receiver
        .wait_for(Duration::from_secs(20), "three backfilled", |d| {
            d.len() >= 3
        })
        .await;
    let ids: Vec<String> = delivered
        .iter()
        .map(|d| d.webhook_id().to_owned())
        .collect();
    let simple = id.replace('-', "");
    let expected: Vec<String> = (1..4)
        .map(|h| {
            let due = start + SignedDuration::from_hours(h);
            format!("{simple}_{}", due.as_millisecond())
        })
        .collect();
    assert_eq!(ids, expected);
    // The job is back on its own occurrence once the backfill's last run is written.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, job) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
        if job["next_due_at"] == next_due && job["runs"] == 3 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, answer) = api.call("POST", &path, Some(range)).await;
    assert_eq!((status, answer), (202, json!({"occurrences": 0})));
    let (_, runs) = api.call("GET", &format!("/v1/jobs/{id}/runs"), None).await;
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.iter().all(|r| r["backfill"] == true), "{runs:?}");
    assert_eq!(receiver.deliveries().len(), 3, "nothing delivered twice");
    node.shutdown().await;
}
