//! Unit tests of the wire shapes' validation and answers.

use super::*;
use serde_json::json;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

const NOW: &str = "2026-11-23T21:10:00.250Z";

fn preview(schedule: Value, count: u64) -> Result<SchedulePreview, ValidationError> {
    let request = PreviewRequest {
        schedule: serde_json::from_value(schedule).unwrap(),
        count: Some(count),
        job_id: None,
    };
    super::preview(&request, ts(NOW), &Limits::default(), &Default::default())
}

#[test]
fn jitter_is_validated_and_names_its_field() {
    let now = ts(NOW);
    for (jitter, code) in [
        ("soon", "invalid_duration"),
        ("-5m", "invalid_duration"),
        ("0s", "invalid_duration"),
        ("1.5ms", "invalid_duration"),
        ("24h1ms", "invalid_duration"),
    ] {
        for base in [
            json!({"every": "1h"}),
            json!({"cron": "0 * * * *"}),
            json!({"after": "5m"}),
        ] {
            let mut input = base.clone();
            input["jitter"] = json!(jitter);
            let input: ScheduleIn = serde_json::from_value(input).unwrap();
            let err = schedule(&input, now, &Limits::default(), &Default::default()).unwrap_err();
            assert_eq!(
                (err.code, err.field.as_str()),
                (code, "schedule.jitter"),
                "{jitter}"
            );
        }
    }
    let input: ScheduleIn = serde_json::from_value(json!({"at": NOW, "jitter": "24h"})).unwrap();
    let valid = schedule(&input, now, &Limits::default(), &Default::default()).unwrap();
    assert_eq!(valid.jitter, Some(Duration::from_secs(86_400)));
    assert_eq!(schedule_out(&valid).jitter.as_deref(), Some("24h"));
}

#[test]
fn a_jittered_preview_lists_fire_and_nominal_times_of_the_job() {
    let out = preview(json!({"every": "1h", "start": "2026-11-24T00:00:00Z"}), 3).unwrap();
    assert_eq!(out.nominal_times, None, "left out without jitter");
    let jittered = json!({"every": "1h", "start": "2026-11-24T00:00:00Z", "jitter": "10m"});
    let request = |job_id: Option<&str>| PreviewRequest {
        schedule: serde_json::from_value(jittered.clone()).unwrap(),
        count: Some(3),
        job_id: job_id.map(String::from),
    };
    let job = "0190f3c2-7b1e-7a3b-9c4d-5e6f708192a3";
    let out = super::preview(
        &request(Some(job)),
        ts(NOW),
        &Limits::default(),
        &Default::default(),
    )
    .unwrap();
    let nominal = out.nominal_times.clone().unwrap();
    assert_eq!(nominal, out_of_jitter(&out.fire_times, &nominal));
    assert_eq!(
        nominal,
        [
            "2026-11-24T00:00:00.000Z",
            "2026-11-24T01:00:00.000Z",
            "2026-11-24T02:00:00.000Z"
        ]
    );
    // The job's own offsets: what it fires at.
    let schedule: Schedule = {
        let input: ScheduleIn = serde_json::from_value(jittered.clone()).unwrap();
        super::schedule(&input, ts(NOW), &Limits::default(), &Default::default()).unwrap()
    };
    let id: uuid::Uuid = job.parse().unwrap();
    for (fire, due) in out.fire_times.iter().zip(&nominal) {
        assert_eq!(*fire, rfc3339(schedule.fire_time(id, ts(due))));
    }
    assert!(out.description.ends_with(", each up to 10m late (jitter)"));
    let err = super::preview(
        &request(Some("nope")),
        ts(NOW),
        &Limits::default(),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(err.field, "job_id");
}

/// Checks each fire time lies in its nominal time's window (10 minutes) and answers the
/// nominal times.
fn out_of_jitter(fires: &[String], nominal: &[String]) -> Vec<String> {
    assert_eq!(fires.len(), nominal.len());
    for (fire, due) in fires.iter().zip(nominal) {
        let offset = ts(fire).as_millisecond() - ts(due).as_millisecond();
        assert!((0..600_000).contains(&offset), "{fire} vs {due}");
    }
    nominal.to_vec()
}

#[test]
fn past_start_anchors_an_interval_and_nothing_before_now_runs() {
    // start yesterday at :30 → runs at :30 of every hour, from the first one after now.
    let out = preview(json!({"every": "1h", "start": "2026-11-22T08:30:00Z"}), 3).unwrap();
    assert_eq!(
        out.fire_times,
        [
            "2026-11-23T21:30:00.000Z",
            "2026-11-23T22:30:00.000Z",
            "2026-11-23T23:30:00.000Z"
        ]
    );
    assert_eq!(
        out.description,
        "every 1h aligned to 2026-11-22T08:30:00.000Z"
    );
    // A cron job's past start bounds nothing still to come, and the words do not name it.
    let out = preview(
        json!({"cron": "0 0 * * * *", "start": "2026-11-22T08:30:00Z"}),
        2,
    )
    .unwrap();
    assert_eq!(
        out.fire_times,
        ["2026-11-23T22:00:00.000Z", "2026-11-23T23:00:00.000Z"]
    );
    let words = CronSchedule::parse("0 0 * * * *", "UTC")
        .unwrap()
        .describe();
    assert_eq!(out.description, format!("{words} (UTC)"));
    // A future start is still named.
    let out = preview(
        json!({"cron": "0 0 * * * *", "start": "2026-12-01T00:00:00Z"}),
        1,
    )
    .unwrap();
    assert_eq!(out.fire_times, ["2026-12-01T00:00:00.000Z"]);
    assert!(
        out.description.ends_with(", from 2026-12-01T00:00:00.000Z"),
        "{}",
        out.description
    );
}

#[test]
fn leap_day_starting_2096_is_accepted_with_its_2104_run() {
    let out = preview(
        json!({"cron": "0 0 0 29 2 *", "start": "2096-03-01T00:00:00Z"}),
        2,
    )
    .unwrap();
    assert_eq!(
        out.fire_times,
        ["2104-02-29T00:00:00.000Z", "2108-02-29T00:00:00.000Z"]
    );
    // Still refused when the first run would be past the 100-year horizon, or never.
    for (cron, start) in [
        ("0 0 0 29 2 *", "2125-03-01T00:00:00Z"),
        ("0 0 30 2 *", "2026-12-01T00:00:00Z"),
    ] {
        let err = preview(json!({"cron": cron, "start": start}), 1).unwrap_err();
        assert_eq!(
            (err.code, err.field.as_str()),
            ("cron_never_fires", "schedule.cron")
        );
    }
}

#[test]
fn zone_names_that_are_no_place_are_refused() {
    for zone in ["localtime", "Factory", "posixrules", "Etc/Unknown"] {
        let err = preview(json!({"cron": "0 0 * * *", "timezone": zone}), 1).unwrap_err();
        assert_eq!(
            (err.code, err.field.as_str()),
            ("unknown_timezone", "schedule.timezone"),
            "{zone}"
        );
    }
    for zone in ["US/Eastern", "UTC", "America/Nuuk"] {
        preview(json!({"cron": "0 0 * * *", "timezone": zone}), 1)
            .unwrap_or_else(|e| panic!("{zone}: {e:?}"));
    }
}

#[test]
fn lw_preview_words_say_last_weekday() {
    let out = preview(json!({"cron": "0 0 LW * *"}), 2).unwrap();
    assert_eq!(
        out.description,
        "At 00:00, on the last weekday of the month (UTC)"
    );
    assert_eq!(
        out.fire_times,
        ["2026-11-30T00:00:00.000Z", "2026-12-31T00:00:00.000Z"]
    );
}

/// The last-URL memo answers only exactly the text it parsed: a different text after it is
/// parsed (and refused when invalid), and the memo's URL is what a parse of that text gives.
#[test]
fn a_repeated_url_is_the_same_parse_and_another_is_parsed_afresh() {
    let limits = Limits::default();
    let field = "target.webhook.url";
    let first = parse_url("HTTP://Example.COM:80/a?b#c", field, &limits).unwrap();
    assert_eq!(first.as_str(), "http://example.com/a?b#c");
    let again = parse_url("HTTP://Example.COM:80/a?b#c", field, &limits).unwrap();
    assert_eq!(again, first);
    let other = parse_url("https://example.org/x", field, &limits).unwrap();
    assert_eq!(other.as_str(), "https://example.org/x");
    let bad = parse_url("https://exa mple.org/x", field, &limits).unwrap_err();
    assert_eq!(bad.field, field);
    // The refused text did not replace the memo, and the memo did not answer it.
    assert_eq!(
        parse_url("https://example.org/x", field, &limits).unwrap(),
        other
    );
    assert!(parse_url("https://exa mple.org/x", field, &limits).is_err());
}
