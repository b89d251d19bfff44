//! `POST /v1/schedules/preview` through a real node: cron due times checked against instants
//! computed here independently with jiff (across a DST change), truncation by `max_runs` and
//! `end`, and bad input answered with the same codes and field paths a create gives.

use crate::support::{Api, start_node};
use jiff::civil::{Date, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use serde_json::{Value, json};

const BERLIN_WEEKDAYS: &str = "0 30 9 * * MON-FRI";

/// Weekdays at 09:30 Berlin wall-clock time at or after `from`, the slow obvious way: walk the
/// calendar day by day and ask jiff for each day's 09:30 (a time no Berlin DST change touches).
fn berlin_weekdays_0930(from: Timestamp, n: usize) -> Vec<Timestamp> {
    let tz = TimeZone::get("Europe/Berlin").unwrap();
    let mut date = from.to_zoned(tz.clone()).date();
    let mut out = Vec::new();
    while out.len() < n {
        if !matches!(date.weekday(), Weekday::Saturday | Weekday::Sunday) {
            let t = date
                .at(9, 30, 0, 0)
                .to_zoned(tz.clone())
                .unwrap()
                .timestamp();
            if t >= from {
                out.push(t);
            }
        }
        date = date.tomorrow().unwrap();
    }
    out
}

fn instants(preview: &Value) -> Vec<Timestamp> {
    preview["fire_times"]
        .as_array()
        .unwrap_or_else(|| panic!("no fire_times in {preview}"))
        .iter()
        .map(|t| {
            let text = t.as_str().expect("fire time is a string");
            // The API's instant format: UTC with exactly three fractional digits.
            assert!(
                text.ends_with('Z') && text.len() == "2026-01-01T00:00:00.000Z".len(),
                "{text}"
            );
            text.parse().expect("RFC 3339")
        })
        .collect()
}

fn strictly_increasing(times: &[Timestamp]) -> bool {
    times.windows(2).all(|w| w[0] < w[1])
}

/// The last Sunday of March after `now`: Berlin's spring-forward day (02:00 CET → 03:00 CEST).
fn next_spring_forward(now: Timestamp) -> Date {
    let year = now.to_zoned(TimeZone::UTC).year() + 1;
    let mut day = Date::new(year, 3, 31).unwrap();
    while day.weekday() != Weekday::Sunday {
        day = day.yesterday().unwrap();
    }
    day
}

async fn preview(api: &Api, body: Value) -> (u16, Value) {
    api.call("POST", "/v1/schedules/preview", Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn berlin_weekday_cron_lists_the_right_instants() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());

    // From now. The node reads its clock (to the millisecond) between `before` and `after`; the
    // answer must match the expectation from one of them (they differ only if a 09:30 falls in
    // between).
    let now_ms = || Timestamp::from_millisecond(Timestamp::now().as_millisecond()).unwrap();
    let before = now_ms();
    let (status, body) = preview(
        &api,
        json!({"schedule": {"cron": BERLIN_WEEKDAYS, "timezone": "Europe/Berlin"}}),
    )
    .await;
    let after = now_ms();
    assert_eq!(status, 200, "{body}");
    let times = instants(&body);
    assert_eq!(times.len(), 10, "count defaults to 10");
    assert!(strictly_increasing(&times), "{times:?}");
    assert!(times[0] >= before);
    assert!(
        times == berlin_weekdays_0930(before, 10) || times == berlin_weekdays_0930(after, 10),
        "{times:?}"
    );
    assert_eq!(
        body["description"],
        "At 09:30, on Monday, Tuesday, Wednesday, Thursday, and Friday (Europe/Berlin)"
    );

    // From a start two days before a spring-forward: 09:30 stays 09:30 local while its UTC
    // instant moves an hour earlier across the change.
    let change = next_spring_forward(before);
    let start = change
        .checked_sub(2.days())
        .unwrap()
        .at(0, 0, 0, 0)
        .to_zoned(TimeZone::get("Europe/Berlin").unwrap())
        .unwrap()
        .timestamp();
    let (status, body) = preview(
        &api,
        json!({
            "schedule": {"cron": BERLIN_WEEKDAYS, "timezone": "Europe/Berlin", "start": start.to_string()},
            "count": 10
        }),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let times = instants(&body);
    assert_eq!(times, berlin_weekdays_0930(start, 10));
    let utc_hours: Vec<i8> = times
        .iter()
        .map(|t| t.to_zoned(TimeZone::UTC).hour())
        .collect();
    assert_eq!(utc_hours[0], 8, "Friday before the change: 09:30 CET");
    assert!(
        utc_hours[1..].iter().all(|h| *h == 7),
        "after the change: 09:30 CEST, {utc_hours:?}"
    );
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .ends_with(&format!("(Europe/Berlin), from {start:.3}")),
        "{body}"
    );

    // count bounds are inclusive.
    for count in [1, 100] {
        let (status, body) = preview(
            &api,
            json!({"schedule": {"cron": "* * * * * *"}, "count": count}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let times = instants(&body);
        assert_eq!(times.len(), count);
        assert!(strictly_increasing(&times));
        assert!(
            times
                .windows(2)
                .all(|w| w[1].duration_since(w[0]).as_secs() == 1)
        );
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_runs_and_end_cut_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    // A fixed day in the future, so the expected instants are literals.
    let year = Timestamp::now().to_zoned(TimeZone::UTC).year() + 1;
    let at = |rest: &str| format!("{year}-{rest}");
    let ts = |rest: &str| at(rest).parse::<Timestamp>().unwrap();
    let noon = |day: u8| ts(&format!("01-{day:02}T12:00:00Z"));

    // max_runs: three runs, though ten were asked for.
    let (status, body) = preview(
        &api,
        json!({"schedule": {"cron": "0 12 * * *", "start": at("01-01T00:00:00Z"), "max_runs": 3}, "count": 10}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(instants(&body), [noon(1), noon(2), noon(3)]);
    assert!(
        body["description"]
            .as_str()
            .unwrap()
            .ends_with(", at most 3 runs"),
        "{body}"
    );

    // end is inclusive: an occurrence due exactly at the end still runs.
    let (status, body) = preview(
        &api,
        json!({"schedule": {"cron": "0 12 * * *", "start": at("01-01T00:00:00Z"), "end": at("01-05T12:00:00Z")}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(instants(&body), (1..=5).map(noon).collect::<Vec<_>>());
    assert_eq!(
        body["description"],
        format!(
            "At 12:00 (UTC), from {year}-01-01T00:00:00.000Z, until {year}-01-05T12:00:00.000Z"
        )
    );

    // An interval is anchored at its start; end and max_runs cut it the same way, whichever
    // comes first.
    let (status, body) = preview(
        &api,
        json!({"schedule": {"every": "1h", "start": at("01-01T00:00:00Z"), "end": at("01-01T03:30:00Z")}, "count": 10}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let hours: Vec<Timestamp> = (0..4)
        .map(|h| ts(&format!("01-01T{h:02}:00:00Z")))
        .collect();
    assert_eq!(instants(&body), hours);
    assert_eq!(
        body["description"],
        format!("every 1h from {year}-01-01T00:00:00.000Z, until {year}-01-01T03:30:00.000Z")
    );
    let (status, body) = preview(
        &api,
        json!({"schedule": {"every": "1h", "start": at("01-01T00:00:00Z"), "max_runs": 2}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(instants(&body), hours[..2]);

    // Without a start an interval begins one interval from now (the node's now, to the ms).
    let ms = |t: Timestamp| t.as_millisecond();
    let before = Timestamp::now();
    let (status, body) = preview(&api, json!({"schedule": {"every": "15m"}, "count": 3})).await;
    let after = Timestamp::now();
    assert_eq!(status, 200, "{body}");
    let times = instants(&body);
    assert_eq!(times.len(), 3);
    let first = ms(times[0]);
    assert!(
        first >= ms(before + 15.minutes()) && first <= ms(after + 15.minutes()),
        "{times:?}"
    );
    assert!(
        times
            .windows(2)
            .all(|w| w[1].duration_since(w[0]).as_secs() == 15 * 60)
    );

    // One-offs have one due time, whatever the count.
    let (status, body) = preview(
        &api,
        json!({"schedule": {"at": at("03-01T09:00:00+01:00")}, "count": 5}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(instants(&body), [ts("03-01T08:00:00Z")]);
    assert_eq!(
        body["description"],
        format!("once at {year}-03-01T08:00:00.000Z")
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_documented_errors() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let year = Timestamp::now().to_zoned(TimeZone::UTC).year() + 1;

    // Bad schedules: the preview answers exactly what a create of the same schedule answers.
    let schedules = [
        (
            json!({"cron": "61 * * * *"}),
            "invalid_cron",
            "schedule.cron",
        ),
        (json!({"cron": "* * *"}), "invalid_cron", "schedule.cron"),
        (
            json!({"cron": BERLIN_WEEKDAYS, "timezone": "Europe/Berln"}),
            "unknown_timezone",
            "schedule.timezone",
        ),
        (
            json!({"cron": "0 0 30 2 *"}),
            "cron_never_fires",
            "schedule.cron",
        ),
        (
            json!({"cron": "0 12 * * *", "start": format!("{year}-01-01T13:00:00Z"), "end": format!("{year}-01-01T14:00:00Z")}),
            "schedule_never_fires",
            "schedule",
        ),
        (
            json!({"every": "500ms"}),
            "invalid_duration",
            "schedule.every",
        ),
        (
            json!({"at": "2030-03-01T09:00:00", "every": "1m"}),
            "invalid_schedule",
            "schedule",
        ),
        (json!({"at": "tomorrow"}), "invalid_instant", "schedule.at"),
        (
            json!({"every": "1m", "max_runs": 0}),
            "invalid_field",
            "schedule.max_runs",
        ),
        (
            json!({"cron": "* * * * *", "timezon": "UTC"}),
            "unknown_field",
            "schedule.timezon",
        ),
    ];
    for (schedule, code, field) in schedules {
        let (status, body) = preview(&api, json!({"schedule": schedule})).await;
        assert_eq!(
            (
                status,
                body["error"]["code"].as_str(),
                body["error"]["field"].as_str()
            ),
            (422, Some(code), Some(field)),
            "{schedule}: {body}"
        );
        let (create_status, created) = api
            .call(
                "POST",
                "/v1/jobs",
                Some(json!({"schedule": schedule, "target": {"webhook": {"url": "http://127.0.0.1:9/x"}}})),
            )
            .await;
        assert_eq!(
            (
                create_status,
                &created["error"]["code"],
                &created["error"]["field"]
            ),
            (status, &body["error"]["code"], &body["error"]["field"]),
            "create and preview disagree on {schedule}"
        );
    }

    // count: out of range or not a whole number is `invalid_field` on `count`.
    for count in [json!(0), json!(101), json!(-1), json!(2.5), json!("10")] {
        let (status, body) = preview(
            &api,
            json!({"schedule": {"cron": "* * * * *"}, "count": count}),
        )
        .await;
        assert_eq!(status, 422, "count {count}: {body}");
        assert_eq!(body["error"]["code"], "invalid_field", "count {count}");
        assert_eq!(body["error"]["field"], "count", "count {count}");
    }

    // The request's own shape.
    let (status, body) = preview(&api, json!({"count": 3})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("missing_field"))
    );
    assert_eq!(body["error"]["field"], "schedule");
    let (status, body) =
        preview(&api, json!({"schedule": {"cron": "* * * * *"}, "limit": 3})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("unknown_field"))
    );
    assert_eq!(body["error"]["field"], "limit");
    let response = api
        .client
        .post(format!("{}/v1/schedules/preview", api.base))
        .header("content-type", "application/json")
        .body("{\"schedule\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_requires_an_api_key_when_keys_are_configured() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::test_config(dir.path());
    config.api_keys = vec![hourglass_server::auth::ApiKeyConfig {
        sha256: hourglass_server::auth::hash_key("preview-key"),
        namespace: Some("acme".into()),
        all_namespaces: false,
        ..Default::default()
    }];
    let node = crate::support::start_node_with(config).await;
    let body = json!({"schedule": {"cron": "* * * * *"}, "count": 2});
    let (status, answer) = preview(&Api::new(node.addr()), body.clone()).await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["code"], "unauthorized");
    let (status, answer) = preview(&Api::new(node.addr()).with_key("preview-key"), body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(instants(&answer).len(), 2);
    node.shutdown().await;
}

/// Issue 37: a jittered job shows its next due and fire times, and the preview of its schedule
/// for its id agrees with them; without jitter neither the job nor the preview grows a field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jittered_job_and_its_preview_show_due_and_fire_times() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let year = Timestamp::now().to_zoned(TimeZone::UTC).year() + 1;
    let schedule = json!({"cron": "0 12 * * *", "start": format!("{year}-01-01T00:00:00Z")});
    let mut jittered = schedule.clone();
    jittered["jitter"] = json!("10m");
    let body = |schedule: &Value| json!({"schedule": schedule, "target": {"webhook": {"url": "https://example.com/hook"}}});
    let job = api.create(body(&jittered)).await;
    assert_eq!(job["schedule"]["jitter"], "10m", "{job}");
    let due: Timestamp = job["next_due_at"].as_str().unwrap().parse().unwrap();
    let fire: Timestamp = job["next_fire_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(due, format!("{year}-01-01T12:00:00Z").parse().unwrap());
    assert!(fire >= due && fire < due + 10.minutes(), "{job}");
    let (status, got) = api
        .call(
            "GET",
            &format!("/v1/jobs/{}", job["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(got["next_fire_at"], job["next_fire_at"]);

    let (status, shown) = preview(
        &api,
        json!({"schedule": jittered, "count": 3, "job_id": job["id"]}),
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["fire_times"][0], job["next_fire_at"], "{shown}");
    assert_eq!(shown["nominal_times"][0], job["next_due_at"], "{shown}");
    assert_eq!(shown["nominal_times"].as_array().unwrap().len(), 3);
    assert!(strictly_increasing(&instants(&shown)));

    // Without jitter: no new field anywhere.
    let plain = api.create(body(&schedule)).await;
    assert!(plain.get("next_fire_at").is_none(), "{plain}");
    assert!(plain["schedule"].get("jitter").is_none(), "{plain}");
    let (_, shown) = preview(&api, json!({"schedule": schedule, "count": 3})).await;
    assert!(shown.get("nominal_times").is_none(), "{shown}");

    let (status, err) = preview(&api, json!({"schedule": jittered, "job_id": "not-a-uuid"})).await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["field"], "job_id", "{err}");
}
