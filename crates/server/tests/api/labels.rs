//! Job labels over HTTP: kept on create and replaced by a PATCH, selected by `label=` in a
//! listing (equality and existence, ANDed, with the other filters), every malformed label or
//! selector refused naming it, and the bulk actions by selector: the count they answer, their
//! cursor past the per-request maximum, one audit entry each, and never another namespace's jobs.

use serde_json::{Value, json};

use crate::support::{Api, start_node};

/// The same node seen from another namespace (development mode: the header names it).
fn in_namespace(api: &Api, namespace: &str) -> Api {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("hourglass-namespace", namespace.parse().unwrap());
    Api {
        base: api.base.clone(),
        client: reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap(),
        api_key: None,
    }
}

fn job(labels: Value) -> Value {
    json!({
        "schedule": {"every": "1h"},
        "target": {"queue": "work"},
        "labels": labels,
    })
}

/// The ids a listing answers, in order.
async fn ids(api: &Api, query: &str) -> Vec<String> {
    let (status, page) = api.call("GET", &format!("/v1/jobs?{query}"), None).await;
    assert_eq!(status, 200, "{query}: {page}");
    page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn state(api: &Api, job: &Value) -> Value {
    let path = format!("/v1/jobs/{}", id(job));
    api.call("GET", &path, None).await.1["state"].clone()
}

async fn bulk(api: &Api, action: &str, query: &str) -> Value {
    let path = format!("/v1/jobs/bulk/{action}?{query}");
    let (status, answer) = api.call("POST", &path, None).await;
    assert_eq!(status, 200, "{path}: {answer}");
    answer
}

fn id(job: &Value) -> String {
    job["id"].as_str().unwrap().to_owned()
}

async fn expect_error(
    api: &Api,
    method: &str,
    path: &str,
    body: Option<Value>,
    want: (u16, &str, &str),
) {
    let (status, answer) = api.call(method, path, body).await;
    let got = (
        status,
        answer["error"]["code"].as_str().unwrap_or_default(),
        answer["error"]["field"].as_str().unwrap_or_default(),
    );
    assert_eq!(got, want, "{method} {path}: {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_kept_selected_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let a = api
        .create(job(json!({"tenant": "acme", "kind": "reminder"})))
        .await;
    let b = api.create(job(json!({"tenant": "acme"}))).await;
    let c = api
        .create(job(json!({"tenant": "globex", "kind": "invoice"})))
        .await;
    let plain = api
        .create(json!({"schedule": {"every": "1h"}, "target": {"queue": "work"}}))
        .await;
    // The same labels in another namespace: never selected from this one.
    let other = in_namespace(&api, "other");
    let elsewhere = other.create(job(json!({"tenant": "acme"}))).await;

    assert_eq!(a["labels"], json!({"tenant": "acme", "kind": "reminder"}));
    assert!(plain.get("labels").is_none(), "{plain}");
    let (_, got) = api.call("GET", &format!("/v1/jobs/{}", id(&a)), None).await;
    assert_eq!(got["labels"], a["labels"]);

    assert_eq!(ids(&api, "label=tenant=acme").await, [id(&a), id(&b)]);
    assert_eq!(ids(&api, "label=kind").await, [id(&a), id(&c)]);
    assert_eq!(ids(&api, "label=tenant=acme&label=kind").await, [id(&a)]);
    // Percent-encoded like any query value; the cursor and limit page through a selection.
    assert_eq!(ids(&api, "label=tenant%3Dglobex").await, [id(&c)]);
    assert_eq!(ids(&api, "label=tenant=acme&limit=1").await, [id(&a)]);
    assert_eq!(
        ids(&api, &format!("label=tenant=acme&cursor={}", id(&a))).await,
        [id(&b)]
    );
    assert_eq!(ids(&other, "label=tenant=acme").await, [id(&elsewhere)]);

    // A PATCH replaces the labels whole, and the selectors follow.
    let (status, patched) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{}", id(&b)),
            Some(json!({"labels": {"tenant": "initech", "kind": "reminder"}})),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["labels"],
        json!({"tenant": "initech", "kind": "reminder"})
    );
    assert_eq!(ids(&api, "label=tenant=acme").await, [id(&a)]);
    assert_eq!(ids(&api, "label=kind=reminder").await, [id(&a), id(&b)]);
    let (status, patched) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{}", id(&b)),
            Some(json!({"labels": {}})),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert!(patched.get("labels").is_none(), "{patched}");
    assert_eq!(ids(&api, "label=kind=reminder").await, [id(&a)]);

    // With the state filter.
    api.call("POST", &format!("/v1/jobs/{}/pause", id(&a)), None)
        .await;
    assert_eq!(ids(&api, "label=kind&state=paused").await, [id(&a)]);
    assert_eq!(ids(&api, "label=kind&state=active").await, [id(&c)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_malformed_label_or_selector_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let too_many: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (json!(too_many), "labels"),
        (json!({"Tenant": "acme"}), "labels.Tenant"),
        (json!({"-x": "acme"}), "labels.-x"),
        (json!({"tenant": "v".repeat(256)}), "labels.tenant"),
        (json!({"tenant": ""}), "labels.tenant"),
        (json!({"tenant": "a\nb"}), "labels.tenant"),
    ];
    for (labels, field) in &cases {
        expect_error(
            &api,
            "POST",
            "/v1/jobs",
            Some(job(labels.clone())),
            (422, "invalid_label", field),
        )
        .await;
    }
    // Not a map of strings: the shape error names the field.
    let (status, answer) = api
        .call("POST", "/v1/jobs", Some(job(json!({"tenant": 1}))))
        .await;
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]["field"]
            .as_str()
            .unwrap()
            .starts_with("labels"),
        "{answer}"
    );
    // In a batch, the job is named too.
    let batch = json!({"jobs": [job(json!({"ok": "1"})), job(json!({"Bad": "1"}))]});
    expect_error(
        &api,
        "POST",
        "/v1/jobs/batch",
        Some(batch),
        (422, "invalid_label", "jobs[1].labels.Bad"),
    )
    .await;
    // A PATCH is checked the same way and changes nothing.
    let kept = api.create(job(json!({"tenant": "acme"}))).await;
    let path = format!("/v1/jobs/{}", id(&kept));
    expect_error(
        &api,
        "PATCH",
        &path,
        Some(json!({"labels": {"tenant": "x".repeat(300)}})),
        (422, "invalid_label", "labels.tenant"),
    )
    .await;
    let (_, got) = api.call("GET", &path, None).await;
    assert_eq!(got["labels"], json!({"tenant": "acme"}));
    // Nothing was created by the refused requests.
    assert_eq!(ids(&api, "").await, [id(&kept)]);

    // Selectors: bad syntax, too many, on a listing and on a bulk action.
    let nine = (0..9)
        .map(|i| format!("label=k{i}"))
        .collect::<Vec<_>>()
        .join("&");
    for query in [
        "label=Tenant=acme",
        "label=",
        "label=tenant=",
        "label==acme",
        nine.as_str(),
    ] {
        expect_error(
            &api,
            "GET",
            &format!("/v1/jobs?{query}"),
            None,
            (400, "invalid_query", "label"),
        )
        .await;
        expect_error(
            &api,
            "POST",
            &format!("/v1/jobs/bulk/pause?{query}"),
            None,
            (400, "invalid_query", "label"),
        )
        .await;
    }
    // A bulk action needs a selector, and names one of the four actions.
    for action in ["pause", "resume", "cancel", "trigger"] {
        expect_error(
            &api,
            "POST",
            &format!("/v1/jobs/bulk/{action}"),
            None,
            (422, "selector_required", "label"),
        )
        .await;
    }
    expect_error(
        &api,
        "POST",
        "/v1/jobs/bulk/pause?type=x",
        None,
        (422, "selector_required", "label"),
    )
    .await;
    expect_error(
        &api,
        "POST",
        "/v1/jobs/bulk/delete?label=tenant",
        None,
        (404, "not_found", ""),
    )
    .await;
    expect_error(
        &api,
        "POST",
        "/v1/jobs/bulk/pause?label=tenant&cursor=nope",
        None,
        (400, "invalid_query", "cursor"),
    )
    .await;
    expect_error(
        &api,
        "POST",
        "/v1/jobs/bulk/pause?label=tenant&state=active",
        None,
        (400, "invalid_query", "state"),
    )
    .await;
    let (_, got) = api.call("GET", &path, None).await;
    assert_eq!(got["state"], "active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_actions_change_the_selected_jobs_of_the_namespace_only() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let a = api
        .create(job(json!({"tenant": "acme", "kind": "reminder"})))
        .await;
    let b = api.create(job(json!({"tenant": "acme"}))).await;
    let c = api.create(job(json!({"tenant": "globex"}))).await;
    let other = in_namespace(&api, "other");
    let elsewhere = other.create(job(json!({"tenant": "acme"}))).await;
    assert_eq!(
        bulk(&api, "pause", "label=tenant=acme").await,
        json!({"changed": 2, "more": false})
    );
    assert_eq!(state(&api, &a).await, "paused");
    assert_eq!(state(&api, &b).await, "paused");
    assert_eq!(state(&api, &c).await, "active");
    assert_eq!(state(&other, &elsewhere).await, "active");
    // Already paused: nothing changes, and it says so.
    assert_eq!(bulk(&api, "pause", "label=tenant=acme").await["changed"], 0);
    assert_eq!(
        bulk(&api, "resume", "label=tenant=acme&label=kind").await["changed"],
        1
    );
    assert_eq!(state(&api, &a).await, "active");
    assert_eq!(bulk(&api, "trigger", "label=tenant").await["changed"], 3);
    assert_eq!(
        bulk(&api, "cancel", "label=tenant=acme").await["changed"],
        2
    );
    assert_eq!(state(&api, &b).await, "cancelled");
    // A cancelled job is not cancelled again, nor triggered.
    assert_eq!(
        bulk(&api, "cancel", "label=tenant=acme").await["changed"],
        0
    );
    assert_eq!(
        bulk(&api, "trigger", "label=tenant=acme").await["changed"],
        0
    );
    assert_eq!(state(&other, &elsewhere).await, "active");

    // One audit entry a request, naming the jobs it changed.
    let (status, page) = api.call("GET", "/v1/audit?limit=3", None).await;
    assert_eq!(status, 200, "{page}");
    let newest = &page["entries"][0];
    assert_eq!(newest["action"], "cancel", "{page}");
    assert_eq!(newest["job_count"], 2, "{page}");
    let mut named: Vec<&str> = newest["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j.as_str().unwrap())
        .collect();
    named.sort();
    let mut want = [id(&a), id(&b)];
    want.sort();
    assert_eq!(named, want);
    // The request that changed nothing left no entry.
    assert_eq!(page["entries"][1]["action"], "trigger", "{page}");
    assert_eq!(page["entries"][1]["job_count"], 3, "{page}");
}

/// Past 1000 selected jobs a request changes the first 1000 in id order and answers `more`
/// with the cursor to go on from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_action_stops_at_its_maximum_and_goes_on_from_its_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    for n in [1000, 1] {
        let jobs: Vec<Value> = (0..n).map(|_| job(json!({"batch": "big"}))).collect();
        let (status, answer) = api
            .call("POST", "/v1/jobs/batch", Some(json!({"jobs": jobs})))
            .await;
        assert_eq!(status, 201, "{answer}");
    }
    let (status, first) = api
        .call("POST", "/v1/jobs/bulk/trigger?label=batch=big", None)
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (&first["changed"], &first["more"]),
        (&json!(1000), &json!(true)),
        "{first}"
    );
    let cursor = first["next_cursor"].as_str().unwrap();
    let (status, rest) = api
        .call(
            "POST",
            &format!("/v1/jobs/bulk/trigger?label=batch=big&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(rest, json!({"changed": 1, "more": false}));
}
