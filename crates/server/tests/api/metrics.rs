//! `/metrics` against ground truth: a node delivers one-offs that succeed, fail for good and fail
//! once then succeed (plus a short interval job), and the counters it serves must equal what the
//! receiver saw, exactly.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::support::{Api, Delivery, Receiver, start_node_with, test_config};
use serde_json::{Value, json};

const OK: usize = 6;
const GONE: usize = 3;
const FLAKY: usize = 4;

/// A parsed Prometheus/OpenMetrics text exposition: series name and sorted labels → value.
struct Scrape(HashMap<(String, BTreeMap<String, String>), f64>);

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut series = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (head, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("malformed line {line:?}"));
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("malformed value in {line:?}"));
            let (name, labels) = match head.split_once('{') {
                Some((name, rest)) => {
                    let body = rest.strip_suffix('}').expect("closing brace");
                    let labels = body
                        .split(',')
                        .filter(|pair| !pair.is_empty())
                        .map(|pair| {
                            let (k, v) = pair.split_once('=').expect("label pair");
                            (k.to_string(), v.trim_matches('"').to_string())
                        })
                        .collect();
                    (name, labels)
                }
                None => (head, BTreeMap::new()),
            };
            let previous = series.insert((name.to_string(), labels), value);
            assert!(previous.is_none(), "series repeated: {line}");
        }
        Scrape(series)
    }

    /// The value of a series, 0 when absent (prometheus-client prints a labelled counter only
    /// once it has been incremented).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.0
            .get(&(name.to_string(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    /// The value of an unlabelled series that must be present.
    fn must(&self, name: &str) -> f64 {
        *self
            .0
            .get(&(name.to_string(), BTreeMap::new()))
            .unwrap_or_else(|| panic!("{name} is not exposed"))
    }

    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.0.keys().map(|(n, _)| n.as_str()).collect();
        names.sort();
        names.dedup();
        names
    }
}

async fn scrape(api: &Api) -> (Scrape, String) {
    let response = api
        .client
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    (Scrape::parse(&text), text)
}

fn deliveries(outcome: &str) -> [(&'static str, &str); 2] {
    [("target", "webhook"), ("outcome", outcome)]
}

fn is_2xx(d: &Delivery) -> bool {
    (200..300).contains(&d.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_match_what_the_receiver_saw() {
    let dir = tempfile::tempdir().unwrap();
    // Whole-store figures read afresh at every scrape, so the last scrape shows the final state
    // (a node samples them at most every 10 s by default).
    let mut config = test_config(dir.path());
    config.store_figures_ttl = Duration::ZERO;
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();

    // Names first: every documented family is exposed under its documented name (no prefix).
    let (before, text) = scrape(&api).await;
    for name in [
        "hourglass_fire_lateness_seconds_count",
        "hourglass_misfire_skipped_occurrences_total",
        "hourglass_stale_completions_total",
        "hourglass_claimed_occurrences_total",
        "hourglass_in_flight",
        "hourglass_timer_queue",
        "hourglass_store_errors_total",
        "hourglass_due_backlog",
        "hourglass_due_backlog_age_seconds",
        "hourglass_queue_oldest_available_age_seconds",
        "hourglass_queue_leased_total",
    ] {
        assert_eq!(before.must(name), 0.0, "{name} at start\n{text}");
    }
    // The build's tz database release, so operators can see every node computes cron fire
    // times from the same one.
    let tzdata = hourglass_core::cron::tzdata_version();
    assert!(
        tzdata.len() == 5 && tzdata[..4].bytes().all(|b| b.is_ascii_digit()),
        "{tzdata}"
    );
    assert_eq!(
        before.get(
            "hourglass_build_info",
            &[("version", env!("CARGO_PKG_VERSION")), ("tzdata", tzdata)]
        ),
        1.0,
        "{text}"
    );
    for state in ["active", "paused", "completed", "failed", "cancelled"] {
        assert_eq!(before.get("hourglass_jobs", &[("state", state)]), 0.0);
        assert!(
            text.contains(&format!("hourglass_jobs{{state=\"{state}\"}} 0")),
            "{state}"
        );
    }
    for stage in ["dispatch", "complete"] {
        assert!(text.contains(&format!("hourglass_stage_queue{{stage=\"{stage}\"}} 0")));
    }
    // Labelled families start with their known series at zero.
    for outcome in ["delivered", "retry", "dead_letter", "skipped"] {
        assert!(
            text.contains(&format!(
                "hourglass_deliveries_total{{target=\"webhook\",outcome=\"{outcome}\"}} 0"
            )),
            "{outcome}\n{text}"
        );
    }
    for schedule in ["at", "cron", "every"] {
        assert_eq!(
            before.get("hourglass_jobs_created_total", &[("schedule", schedule)]),
            0.0
        );
        assert!(text.contains(&format!(
            "hourglass_jobs_created_total{{schedule=\"{schedule}\"}} 0"
        )));
    }

    let retry = json!({"max_attempts": 3, "initial_backoff": "100ms", "max_backoff": "200ms"});
    let mut jobs = Vec::new();
    let create = |path: String, schedule: Value| {
        let api = api.clone();
        let retry = retry.clone();
        async move {
            api.create(json!({
                "schedule": schedule,
                "target": {"webhook": {"url": path}},
                "retry": retry,
            }))
            .await
        }
    };
    let hook = |path: &str| format!("http://{recv_addr}{path}");
    for i in 0..OK {
        // Spread a little so not everything lands in one claim and one completion batch.
        let after = format!("{}ms", 200 + 50 * i);
        jobs.push(create(hook("/status/204"), json!({"after": after})).await);
    }
    for _ in 0..GONE {
        jobs.push(create(hook("/status/410"), json!({"after": "250ms"})).await);
    }
    for _ in 0..FLAKY {
        jobs.push(create(hook("/flaky/1"), json!({"after": "300ms"})).await);
    }
    // A recurring job: two on-time runs, each advancing to the next occurrence.
    jobs.push(create(hook("/every"), json!({"every": "1s", "max_runs": 2})).await);

    let expected_receipts = OK + GONE + 2 * FLAKY + 2;
    receiver
        .wait_for(Duration::from_secs(15), "every delivery", |d| {
            d.len() >= expected_receipts
        })
        .await;

    // Completions are written after the receiver answers; wait until every job says so.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for job in &jobs {
        let id = job["id"].as_str().unwrap();
        loop {
            let (status, now) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
            assert_eq!(status, 200);
            if now["state"] != "active" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {id} still active: {now}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // The in-flight gauge drops just after the completion commits; let it settle.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let (after, text) = loop {
        let (after, text) = scrape(&api).await;
        if after.must("hourglass_in_flight") == 0.0 || tokio::time::Instant::now() >= deadline {
            break (after, text);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // Ground truth from the receiver.
    let seen = receiver.deliveries();
    assert_eq!(seen.len(), expected_receipts, "no extra deliveries");
    let mut by_id: BTreeMap<&str, Vec<&Delivery>> = BTreeMap::new();
    for d in &seen {
        by_id.entry(d.header("webhook-id")).or_default().push(d);
    }
    let succeeded = seen.iter().filter(|d| is_2xx(d)).count();
    // A failure followed by another attempt of the same occurrence was retried; an occurrence
    // whose last attempt failed was dead-lettered.
    let retried: usize = by_id
        .values()
        .map(|attempts| attempts[..attempts.len() - 1].len())
        .sum();
    let dead: usize = by_id
        .values()
        .filter(|attempts| !is_2xx(attempts.last().unwrap()))
        .count();
    let first_attempts = seen
        .iter()
        .filter(|d| d.header("hourglass-attempt") == "1")
        .count();
    assert_eq!(
        (succeeded, retried, dead, first_attempts),
        (OK + FLAKY + 2, FLAKY, GONE, OK + GONE + FLAKY + 2),
        "the receiver saw what the jobs were built to produce"
    );
    let (_, letters) = api.call("GET", "/v1/dead-letters", None).await;
    assert_eq!(letters["dead_letters"].as_array().unwrap().len(), dead);

    let counter = |outcome| after.get("hourglass_deliveries_total", &deliveries(outcome));
    let report = format!("\n{text}");
    assert_eq!(counter("delivered"), succeeded as f64, "delivered{report}");
    assert_eq!(counter("retry"), retried as f64, "retry{report}");
    assert_eq!(counter("dead_letter"), dead as f64, "dead_letter{report}");
    assert_eq!(counter("skipped"), 0.0, "skipped{report}");
    assert_eq!(
        after.must("hourglass_fire_lateness_seconds_count"),
        first_attempts as f64,
        "lateness observations{report}"
    );
    assert!(
        after.must("hourglass_claimed_occurrences_total") >= seen.len() as f64,
        "every attempt was claimed{report}"
    );
    assert_eq!(after.must("hourglass_in_flight"), 0.0, "in flight{report}");
    assert_eq!(
        after.must("hourglass_timer_queue"),
        0.0,
        "timer queue{report}"
    );
    assert_eq!(
        after.must("hourglass_misfire_skipped_occurrences_total"),
        0.0
    );
    assert_eq!(after.must("hourglass_stale_completions_total"), 0.0);
    assert_eq!(after.must("hourglass_store_errors_total"), 0.0);
    // Response codes, by code, as the receiver answered them.
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for d in &seen {
        *codes.entry(d.status.to_string()).or_default() += 1;
    }
    for (code, n) in &codes {
        assert_eq!(
            after.get("hourglass_webhook_responses_total", &[("code", code)]),
            *n as f64,
            "responses with {code}{report}"
        );
    }
    // Every store operation is timed: at least the creates and the completions.
    let timed = |op| {
        after.get(
            "hourglass_store_operation_seconds_count",
            &[("op", op), ("outcome", "ok")],
        )
    };
    assert!(timed("create_jobs") >= one_offs_created(&jobs), "{report}");
    assert!(timed("complete") >= 1.0, "{report}");
    assert!(timed("claim_due") >= 1.0, "{report}");

    // The API's own counters.
    let one_offs = (OK + GONE + FLAKY) as f64;
    assert_eq!(
        after.get("hourglass_jobs_created_total", &[("schedule", "at")]),
        one_offs
    );
    assert_eq!(
        after.get("hourglass_jobs_created_total", &[("schedule", "every")]),
        1.0
    );
    assert_eq!(
        after.get(
            "hourglass_api_requests_total",
            &[("method", "POST"), ("route", "/v1/jobs"), ("status", "2xx")]
        ),
        one_offs + 1.0
    );
    // Job reads are counted by route template, not by id.
    let reads = after.get(
        "hourglass_api_requests_total",
        &[
            ("method", "GET"),
            ("route", "/v1/jobs/{id}"),
            ("status", "2xx"),
        ],
    );
    assert!(reads >= jobs.len() as f64, "{reads}{report}");
    assert!(
        !text.contains(jobs[0]["id"].as_str().unwrap()),
        "a job id became a label"
    );
    let (status, _) = api.call("GET", "/no/such/route", None).await;
    assert_eq!(status, 404);
    let (again, again_text) = scrape(&api).await;
    let state = |s| again.get("hourglass_jobs", &[("state", s)]);
    assert_eq!(
        (state("completed"), state("failed"), state("active")),
        ((OK + FLAKY + 1) as f64, GONE as f64, 0.0),
        "jobs by state\n{again_text}"
    );
    assert_eq!(again.must("hourglass_due_backlog"), 0.0);
    assert_eq!(
        again.get(
            "hourglass_api_requests_total",
            &[("method", "GET"), ("route", "unmatched"), ("status", "4xx")]
        ),
        1.0
    );
    assert!(
        again.names().iter().all(|n| n.starts_with("hourglass_")),
        "{:?}",
        again.names()
    );
    node.shutdown().await;
}

fn one_offs_created(jobs: &[Value]) -> f64 {
    // One create call per job in this test (no batches).
    jobs.len() as f64
}
