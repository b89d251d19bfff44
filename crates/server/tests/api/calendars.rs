//! Calendars through a real node: `PUT`/`GET`/`DELETE /v1/calendars/{name}` and the list, every
//! validation error with its code and field path, a job naming a calendar (unknown, a roll
//! without one, a schedule the calendar leaves no occurrence), the preview's nominal and fire
//! times, the re-plan of a job when its calendar changes, and the 409 for deleting one in use.

use serde_json::{Value, json};

use crate::support::{Api, start_node};

fn berlin_holidays() -> Value {
    json!({
        "timezone": "Europe/Berlin",
        "exclude": {
            "dates": ["2030-12-25"],
            "ranges": [{"from": "2030-12-24", "to": "2030-12-31"}],
            "weekdays": ["SAT", "SUN"]
        }
    })
}

async fn put(api: &Api, name: &str, body: Value) -> (u16, Value) {
    api.call("PUT", &format!("/v1/calendars/{name}"), Some(body))
        .await
}

fn error(answer: &Value) -> (&str, &str) {
    let e = &answer["error"];
    (
        e["code"].as_str().unwrap_or_default(),
        e["field"].as_str().unwrap_or_default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendars_are_written_read_listed_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let (status, created) = put(&api, "de-holidays", berlin_holidays()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "de-holidays");
    assert_eq!(created["exclude"]["weekdays"], json!(["SAT", "SUN"]));
    assert_eq!(created["replanned"], 0);
    let (status, _) = put(&api, "de-holidays", berlin_holidays()).await;
    assert_eq!(status, 200, "a second put replaces");
    put(&api, "a-first", json!({"timezone": "UTC"})).await;
    let (status, got) = api.call("GET", "/v1/calendars/de-holidays", None).await;
    assert_eq!(status, 200);
    assert_eq!(got["exclude"]["dates"], json!(["2030-12-25"]));
    assert_eq!(
        got["exclude"]["ranges"],
        json!([{"from": "2030-12-24", "to": "2030-12-31"}])
    );
    let (_, list) = api.call("GET", "/v1/calendars", None).await;
    let names: Vec<&str> = (list["calendars"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a-first", "de-holidays"]);
    let (status, _) = api.call("DELETE", "/v1/calendars/a-first", None).await;
    assert_eq!(status, 204);
    let (status, answer) = api.call("DELETE", "/v1/calendars/a-first", None).await;
    assert_eq!((status, error(&answer).0), (404, "not_found"));
    let (status, _) = api.call("GET", "/v1/calendars/a-first", None).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_calendar_is_refused_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let all_days = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let many_dates: Vec<String> = (0..1001)
        .map(|i| format!("{}-01-01", 2100 + i % 800))
        .collect();
    let many_ranges: Vec<Value> = (0..101)
        .map(|_| json!({"from": "2030-01-01", "to": "2030-01-02"}))
        .collect();
    let cases = [
        (
            json!({"timezone": "UTC", "exclude": {"dates": ["2030-13-01"]}}),
            422,
            "invalid_calendar",
            "exclude.dates[0]",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"dates": ["2030-01-01T00:00"]}}),
            422,
            "invalid_calendar",
            "exclude.dates[0]",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"ranges": [{"from": "2030-02-01", "to": "2030-01-01"}]}}),
            422,
            "invalid_calendar",
            "exclude.ranges[0].to",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"ranges": [{"from": "x", "to": "2030-01-01"}]}}),
            422,
            "invalid_calendar",
            "exclude.ranges[0].from",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"weekdays": ["SAT", "Caturday"]}}),
            422,
            "invalid_calendar",
            "exclude.weekdays[1]",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"weekdays": all_days}}),
            422,
            "calendar_excludes_every_day",
            "exclude",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"ranges": [{"from": "2000-01-01", "to": "2200-01-01"}]}}),
            422,
            "calendar_excludes_every_day",
            "exclude",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"dates": many_dates}}),
            422,
            "invalid_calendar",
            "exclude.dates",
        ),
        (
            json!({"timezone": "UTC", "exclude": {"ranges": many_ranges}}),
            422,
            "invalid_calendar",
            "exclude.ranges",
        ),
        (
            json!({"timezone": "Mars/Olympus"}),
            422,
            "unknown_timezone",
            "timezone",
        ),
        (json!({"exclude": {}}), 422, "missing_field", "timezone"),
        (
            json!({"timezone": "UTC", "exclude": {"months": [1]}}),
            422,
            "unknown_field",
            "exclude.months",
        ),
    ];
    for (body, want_status, want_code, want_field) in cases {
        let (status, answer) = put(&api, "c", body.clone()).await;
        assert_eq!(
            (status, error(&answer)),
            (want_status, (want_code, want_field)),
            "{body} → {answer}"
        );
    }
    let long = "x".repeat(65);
    for name in [long.as_str(), "bad!name"] {
        let (status, answer) = put(&api, name, json!({"timezone": "UTC"})).await;
        assert_eq!(
            (status, error(&answer)),
            (400, ("invalid_calendar", "name"))
        );
    }
    let (_, list) = api.call("GET", "/v1/calendars", None).await;
    assert_eq!(list["calendars"], json!([]), "a refused put stores nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_name_calendars_preview_shows_rolls_and_edits_replan() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    put(&api, "de-holidays", berlin_holidays()).await;
    let monthly = |calendar: Value, roll: Value| {
        json!({
            "schedule": {"cron": "0 0 9 25 * *", "timezone": "Europe/Berlin",
                         "start": "2030-12-01T00:00:00Z", "calendar": calendar, "roll": roll},
            "target": {"webhook": {"url": "https://example.com/hook"}}
        })
    };
    // Refusals, each naming its field.
    let cases = [
        (
            monthly(json!("nope"), json!("previous")),
            "unknown_calendar",
            "schedule.calendar",
        ),
        (
            monthly(json!("bad name"), Value::Null),
            "invalid_calendar",
            "schedule.calendar",
        ),
        (
            monthly(json!("de-holidays"), json!("sideways")),
            "invalid_calendar",
            "schedule.roll",
        ),
        (
            monthly(Value::Null, json!("next")),
            "invalid_calendar",
            "schedule.roll",
        ),
    ];
    for (body, code, field) in cases {
        let (status, answer) = api.call("POST", "/v1/jobs", Some(body.clone())).await;
        assert_eq!((status, error(&answer)), (422, (code, field)), "{body}");
    }
    // A one-off on an excluded day with skip never occurs.
    let (status, answer) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(json!({
                "schedule": {"at": "2030-12-25T08:00:00Z", "calendar": "de-holidays"},
                "target": {"webhook": {"url": "https://example.com/hook"}}
            })),
        )
        .await;
    assert_eq!(
        (status, error(&answer)),
        (422, ("schedule_never_fires", "schedule.calendar"))
    );
    // The preview: the 25th, or the previous business day (the 23rd: 24-31 and weekends are
    // excluded), named by the 25th.
    let (status, preview) = api
        .call(
            "POST",
            "/v1/schedules/preview",
            Some(json!({"schedule": monthly(json!("de-holidays"), json!("previous"))["schedule"], "count": 2})),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["nominal_times"],
        json!(["2030-12-25T08:00:00.000Z", "2031-01-25T08:00:00.000Z"])
    );
    // 2031-01-25 is a Saturday: Friday the 24th.
    assert_eq!(
        preview["fire_times"],
        json!(["2030-12-23T08:00:00.000Z", "2031-01-24T08:00:00.000Z"])
    );
    let job = api
        .create(monthly(json!("de-holidays"), json!("previous")))
        .await;
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(job["schedule"]["calendar"], "de-holidays");
    assert_eq!(job["schedule"]["roll"], "previous");
    assert_eq!(job["next_due_at"], "2030-12-25T08:00:00.000Z");
    assert_eq!(job["next_fire_at"], "2030-12-23T08:00:00.000Z");
    // In use: a delete is refused, naming the job.
    let (status, answer) = api.call("DELETE", "/v1/calendars/de-holidays", None).await;
    assert_eq!((status, error(&answer).0), (409, "calendar_in_use"));
    assert!(
        answer["error"]["message"].as_str().unwrap().contains(&id),
        "{answer}"
    );
    // Edited: the job is re-planned (the 23rd is now excluded too: the 22nd is a Sunday, so
    // Friday the 20th).
    let mut edited = berlin_holidays();
    edited["exclude"]["dates"] = json!(["2030-12-23"]);
    let (status, answer) = put(&api, "de-holidays", edited).await;
    assert_eq!((status, &answer["replanned"]), (200, &json!(1)), "{answer}");
    let (_, job) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(job["next_due_at"], "2030-12-25T08:00:00.000Z");
    assert_eq!(job["next_fire_at"], "2030-12-20T08:00:00.000Z");
    // Cancelled, the job no longer holds the calendar.
    let (status, _) = api.call("DELETE", &format!("/v1/jobs/{id}"), None).await;
    assert!(status < 300);
    let (status, _) = api.call("DELETE", "/v1/calendars/de-holidays", None).await;
    assert_eq!(status, 204);
}
