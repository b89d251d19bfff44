//! Anchors through a real node: `PUT`/`GET`/`DELETE /v1/anchors/{name}` and the list, a move
//! answering how many jobs it re-timed, jobs on an anchor (created, listed by anchor, shown with
//! their anchor and offset), every validation error with its code and field, and deletes that
//! cancel the anchor's jobs with a reason or are refused while they refer to it.

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::support::{Api, start_node};

fn error(answer: &Value) -> (&str, &str) {
    let e = &answer["error"];
    (
        e["code"].as_str().unwrap_or_default(),
        e["field"].as_str().unwrap_or_default(),
    )
}

/// An instant as the API shows it (whole seconds here).
fn shown(t: Timestamp) -> String {
    t.to_string().replace('Z', ".000Z")
}

/// Whole seconds from now, as RFC 3339.
fn in_secs(secs: i64) -> String {
    let t = Timestamp::now() + SignedDuration::from_secs(secs);
    Timestamp::from_second(t.as_second()).unwrap().to_string()
}

fn reminder(schedule: Value) -> Value {
    json!({
        "type": "reminder",
        "schedule": schedule,
        "target": {"webhook": {"url": "https://example.com/hook"}}
    })
}

async fn put(api: &Api, name: &str, at: &str) -> (u16, Value) {
    api.call(
        "PUT",
        &format!("/v1/anchors/{name}"),
        Some(json!({"at": at})),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anchors_are_written_moved_listed_and_their_jobs_follow() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let departs = in_secs(86_400);
    let (status, created) = put(&api, "flight-LH400", &departs).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "flight-LH400");
    assert_eq!(created["jobs_moved"], 0);
    put(&api, "a-first", &departs).await;
    let job = api
        .create(reminder(json!({"anchor": "flight-LH400", "offset": "-8h"})))
        .await;
    let at: Timestamp = departs.parse().unwrap();
    let expect = shown;
    assert_eq!(job["schedule"]["anchor"], "flight-LH400");
    assert_eq!(job["schedule"]["offset"], "-8h");
    assert_eq!(
        job["schedule"]["at"],
        expect(at - SignedDuration::from_hours(8))
    );
    let every = api
        .create(reminder(json!({"every": "1h", "anchor": "flight-LH400"})))
        .await;
    assert_eq!(every["schedule"]["start"], expect(at));
    api.create(reminder(json!({"after": "1h"}))).await;

    // The flight moves two hours later: both jobs follow.
    let later = at + SignedDuration::from_hours(2);
    let (status, moved) = put(&api, "flight-LH400", &later.to_string()).await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(moved["jobs_moved"], 2);
    assert_eq!(moved["at"], expect(later));
    let id = job["id"].as_str().unwrap();
    let (_, got) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(
        got["schedule"]["at"],
        expect(later - SignedDuration::from_hours(8))
    );
    assert_eq!(
        got["next_due_at"].as_str().map(str::to_owned),
        Some(expect(later - SignedDuration::from_hours(8)))
    );
    let (_, listed) = api.call("GET", "/v1/jobs?anchor=flight-LH400", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 2);
    let (_, got) = api.call("GET", "/v1/anchors/flight-LH400", None).await;
    assert_eq!(
        (got["at"].clone(), got.get("jobs_moved")),
        (json!(expect(later)), None)
    );
    let (_, list) = api.call("GET", "/v1/anchors", None).await;
    let names: Vec<&str> = (list["anchors"].as_array().unwrap().iter())
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a-first", "flight-LH400"]);

    // A delete with if_unused is refused while jobs refer to it, naming one.
    let (status, answer) = api
        .call("DELETE", "/v1/anchors/flight-LH400?if_unused=true", None)
        .await;
    assert_eq!((status, error(&answer).0), (409, "anchor_in_use"));
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("job ")
    );
    let (status, answer) = api
        .call("DELETE", "/v1/anchors/a-first?if_unused=true", None)
        .await;
    assert_eq!((status, answer["jobs_cancelled"].clone()), (200, json!(0)));
    // A plain delete cancels them, with the reason kept on each.
    let (status, answer) = api.call("DELETE", "/v1/anchors/flight-LH400", None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["jobs_cancelled"], 2);
    let (_, got) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(got["state"], "cancelled");
    assert!(
        got["last_error"]
            .as_str()
            .unwrap()
            .starts_with("anchor_deleted"),
        "{got}"
    );
    let (status, answer) = api.call("DELETE", "/v1/anchors/flight-LH400", None).await;
    assert_eq!((status, error(&answer).0), (404, "not_found"));
    let (status, _) = api.call("GET", "/v1/anchors/flight-LH400", None).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_anchor_or_anchored_schedule_is_refused_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let soon = in_secs(3_600);
    assert_eq!(put(&api, "x", &soon).await.0, 201);
    // The anchor's own body and name.
    let far = (Timestamp::now() + SignedDuration::from_hours(101 * 366 * 24)).to_string();
    let bodies = [
        (json!({"at": "tomorrow"}), 422, "invalid_instant", "at"),
        (json!({"at": far}), 422, "instant_too_far", "at"),
        (json!({}), 422, "missing_field", "at"),
        (
            json!({"at": soon, "zone": "UTC"}),
            422,
            "unknown_field",
            "zone",
        ),
    ];
    for (body, status, code, field) in bodies {
        let (got, answer) = api.call("PUT", "/v1/anchors/y", Some(body.clone())).await;
        assert_eq!(
            (got, error(&answer)),
            (status, (code, field)),
            "{body}: {answer}"
        );
    }
    for (method, path) in [
        ("PUT", "/v1/anchors/a%20b"),
        ("GET", "/v1/anchors/a%2Fb"),
        ("DELETE", "/v1/anchors/a%3Fb"),
        ("GET", &format!("/v1/anchors/{}", "x".repeat(65))),
    ] {
        let body = (method == "PUT").then(|| json!({"at": soon}));
        let (got, answer) = api.call(method, path, body).await;
        assert_eq!(
            (got, error(&answer)),
            (400, ("invalid_anchor", "name")),
            "{method} {path}: {answer}"
        );
    }
    let (got, answer) = api.call("GET", "/v1/jobs?anchor=a%20b", None).await;
    assert_eq!((got, error(&answer)), (400, ("invalid_query", "anchor")));
    let (got, answer) = api
        .call("DELETE", "/v1/anchors/x?if_unused=maybe", None)
        .await;
    assert_eq!((got, error(&answer).0), (400, "invalid_query"), "{answer}");
    // Jobs naming anchors.
    let schedules = [
        (
            json!({"anchor": "nope"}),
            "unknown_anchor",
            "schedule.anchor",
        ),
        (
            json!({"anchor": "a b"}),
            "invalid_anchor",
            "schedule.anchor",
        ),
        (
            json!({"anchor": "x", "offset": "soon"}),
            "invalid_anchor",
            "schedule.offset",
        ),
        (
            json!({"anchor": "x", "offset": "--1h"}),
            "invalid_anchor",
            "schedule.offset",
        ),
        (
            json!({"anchor": "x", "offset": "1.0001s"}),
            "invalid_anchor",
            "schedule.offset",
        ),
        (
            json!({"anchor": "x", "offset": "900000h"}),
            "invalid_anchor",
            "schedule.offset",
        ),
        (
            json!({"offset": "-1h", "after": "1h"}),
            "invalid_anchor",
            "schedule.offset",
        ),
        (
            // Not the instant the anchor resolves to (that one may be sent back with it).
            json!({"anchor": "x", "offset": "-1h", "at": soon}),
            "invalid_anchor",
            "schedule.at",
        ),
        (
            json!({"anchor": "x", "after": "1h"}),
            "invalid_anchor",
            "schedule.after",
        ),
        (
            json!({"anchor": "x", "cron": "* * * * *"}),
            "invalid_anchor",
            "schedule.cron",
        ),
        (
            json!({"anchor": "x", "offset": "-1h", "every": "1h", "start": soon}),
            "invalid_anchor",
            "schedule.start",
        ),
        (
            json!({"anchor": "x", "offset": "-2h"}),
            "instant_in_past",
            "schedule.anchor",
        ),
    ];
    for (schedule, code, field) in schedules {
        let (got, answer) = api
            .call("POST", "/v1/jobs", Some(reminder(schedule.clone())))
            .await;
        assert_eq!(
            (got, error(&answer)),
            (422, (code, field)),
            "{schedule}: {answer}"
        );
        // An edit and a preview validate the schedule alike.
        let (got, answer) = api
            .call(
                "POST",
                "/v1/schedules/preview",
                Some(json!({"schedule": schedule})),
            )
            .await;
        assert_eq!(
            (got, error(&answer)),
            (422, (code, field)),
            "preview {schedule}"
        );
    }
    // A batch names the job.
    let (got, answer) = api
        .call(
            "POST",
            "/v1/jobs/batch",
            Some(json!({"jobs": [reminder(json!({"after": "1h"})), reminder(json!({"anchor": "nope"}))]})),
        )
        .await;
    assert_eq!(
        (got, error(&answer)),
        (422, ("unknown_anchor", "jobs[1].schedule.anchor"))
    );
    // Nothing was created by any of them.
    let (_, listed) = api.call("GET", "/v1/jobs", None).await;
    assert_eq!(listed["jobs"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_can_put_a_job_on_an_anchor_and_the_move_takes_it_along() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let at: Timestamp = in_secs(7_200).parse().unwrap();
    put(&api, "launch", &at.to_string()).await;
    let job = api.create(reminder(json!({"after": "1h"}))).await;
    let id = job["id"].as_str().unwrap();
    let (status, edited) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{id}"),
            Some(json!({"schedule": {"anchor": "launch", "offset": "-30m"}})),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    let half_hour = SignedDuration::from_mins(30);
    assert_eq!(edited["schedule"]["at"], shown(at - half_hour));
    let moved_to = at + SignedDuration::from_hours(1);
    let (_, moved) = put(&api, "launch", &moved_to.to_string()).await;
    assert_eq!(moved["jobs_moved"], 1);
    let (_, got) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(got["schedule"]["at"], shown(moved_to - half_hour));
    // The schedule as read (its resolved `at` beside the anchor) may be sent back as is; an
    // `at` the anchor does not resolve to is refused naming it.
    let (status, same) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{id}"),
            Some(json!({"schedule": got["schedule"].clone()})),
        )
        .await;
    assert_eq!(status, 200, "{same}");
    assert_eq!(same["schedule"], got["schedule"]);
    assert_eq!(same["next_due_at"], got["next_due_at"]);
    let mut elsewhere = got["schedule"].clone();
    elsewhere["at"] = json!(shown(moved_to));
    let (status, refused) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{id}"),
            Some(json!({"schedule": elsewhere})),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(error(&refused), ("invalid_anchor", "schedule.at"));
    // The preview of an anchored schedule answers its instant now.
    let (status, preview) = api
        .call(
            "POST",
            "/v1/schedules/preview",
            Some(json!({"schedule": {"anchor": "launch", "offset": "+1h"}})),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["fire_times"],
        json!([shown(moved_to + SignedDuration::from_hours(1))])
    );
    let words = preview["description"].as_str().unwrap();
    assert!(
        words.ends_with("(anchor \"launch\" 1h, moving with it)"),
        "{words}"
    );
}
