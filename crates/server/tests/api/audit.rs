//! The audit log over HTTP: every kind of change a client makes (create, batch create, patch,
//! pause, resume, trigger, cancel, replay, dead-letter delete, secret rotation) leaves one entry
//! naming the key's id (never the key), the job or dead letter, and for a patch the fields; a
//! repeated idempotent request leaves none; pages follow their cursor; a job filter; readers and
//! workers are refused; a patch that changes nothing leaves none; another namespace's entries stay invisible; bad queries name the field.

use hourglass_server::auth::{ApiKeyConfig, Role, hash_key, key_id};
use serde_json::{Value, json};

use crate::support::{Api, Receiver, start_node_with, test_config};

fn key(secret: &str, namespace: &str, role: Role) -> ApiKeyConfig {
    ApiKeyConfig {
        sha256: hash_key(secret),
        namespace: Some(namespace.into()),
        all_namespaces: false,
        role,
    }
}

/// Every entry of the namespace, newest first, read `limit` at a time after each page's cursor.
async fn all_entries(api: &Api, query: &str, limit: usize) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/audit?limit={limit}{query}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = api.call("GET", &path, None).await;
        assert_eq!(status, 200, "{path}: {page}");
        let got = page["entries"].as_array().unwrap().clone();
        assert!(got.len() <= limit);
        entries.extend(got);
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return entries,
        }
    }
}

fn actions(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_leaves_one_entry_with_its_key_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.api_keys = vec![
        key("admin-secret", "acme", Role::Admin),
        key("writer-secret", "acme", Role::Writer),
        key("reader-secret", "acme", Role::Reader),
        key("worker-secret", "acme", Role::Worker),
        key("other-secret", "other", Role::Admin),
    ];
    let node = start_node_with(config).await;
    let api = |secret: &str| Api::new(node.addr()).with_key(secret);
    let (admin, writer) = (api("admin-secret"), api("writer-secret"));
    let (admin_id, writer_id) = (
        key_id(&hash_key("admin-secret")),
        key_id(&hash_key("writer-secret")),
    );
    let receiver = Receiver::start().await;

    // The writer's changes to one job, and a batch.
    let job = writer
        .create(json!({"key": "nightly", "schedule": {"every": "1h"}, "target": {"queue": "q"}}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The same keyed create again changes nothing: no entry.
    let (status, _) = writer
        .call(
            "POST",
            "/v1/jobs",
            Some(json!({"key": "nightly", "schedule": {"every": "1h"}, "target": {"queue": "q"}})),
        )
        .await;
    assert_eq!(status, 200);
    let batch: Vec<Value> = (0..25)
        .map(|_| json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}}))
        .collect();
    let (status, created) = writer
        .call("POST", "/v1/jobs/batch", Some(json!({"jobs": batch})))
        .await;
    assert_eq!(status, 201, "{created}");
    let patch = json!({"type": "renamed", "payload": {"n": 2}});
    let (status, body) = writer
        .call("PATCH", &format!("/v1/jobs/{job}"), Some(patch.clone()))
        .await;
    assert_eq!(status, 200, "{body}");
    // The same patch again (a client retrying after a lost answer) changes nothing: the job as
    // it is, unwritten, and no entry.
    let (status, again) = writer
        .call("PATCH", &format!("/v1/jobs/{job}"), Some(patch))
        .await;
    assert_eq!(status, 200, "{again}");
    assert!(body["updated_at"].is_string(), "{body}");
    assert_eq!(again["updated_at"], body["updated_at"], "{again}");
    assert_eq!(again["type"], "renamed", "{again}");
    for (method, path) in [
        ("POST", format!("/v1/jobs/{job}/pause")),
        ("POST", format!("/v1/jobs/{job}/resume")),
    ] {
        let (status, body) = writer.call(method, &path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    // A keyed trigger, then its retry: one entry.
    for _ in 0..2 {
        let response = writer
            .client
            .post(format!("{}/v1/jobs/{job}/trigger", writer.base))
            .bearer_auth("writer-secret")
            .header("content-type", "application/json")
            .header("idempotency-key", "t-1")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let (status, body) = writer
        .call("DELETE", &format!("/v1/jobs/{job}"), None)
        .await;
    assert_eq!(status, 200, "{body}");

    // Two dead letters (by the admin's creates): one replayed, one deleted; then a rotation.
    let mut letters = Vec::new();
    for _ in 0..2 {
        let failing = admin
            .create(json!({
                "schedule": {"after": "1ms"},
                "target": {"webhook": {"url": format!("http://{}/status/410", receiver.addr())}},
            }))
            .await;
        admin.settled_job(failing["id"].as_str().unwrap()).await;
    }
    let (status, page) = admin.call("GET", "/v1/dead-letters", None).await;
    assert_eq!(status, 200, "{page}");
    for letter in page["dead_letters"].as_array().unwrap() {
        letters.push(letter["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(letters.len(), 2, "{page}");
    let (status, replayed) = admin
        .call(
            "POST",
            &format!("/v1/dead-letters/{}/replay", letters[0]),
            None,
        )
        .await;
    assert_eq!(status, 201, "{replayed}");
    let (status, body) = admin
        .call("DELETE", &format!("/v1/dead-letters/{}", letters[1]), None)
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = admin.call("POST", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{body}");

    // The log, newest first, read three at a time.
    let entries = all_entries(&admin, "", 3).await;
    assert_eq!(
        actions(&entries),
        [
            "rotate_secret",
            "purge",
            "replay",
            "create",
            "create",
            "cancel",
            "trigger",
            "resume",
            "pause",
            "change",
            "create",
            "create"
        ],
        "{entries:#?}"
    );
    // Read in one page, the same entries.
    assert_eq!(all_entries(&admin, "", 1000).await, entries);
    for (i, entry) in entries.iter().enumerate() {
        let by = if i < 5 { &admin_id } else { &writer_id };
        assert_eq!(entry["key_id"].as_str().unwrap(), by, "{entry}");
    }
    assert!(entries.iter().all(|e| e["namespace"] == "acme"));
    let text = serde_json::to_string(&entries).unwrap();
    for secret in ["admin-secret", "writer-secret"] {
        assert!(!text.contains(secret), "a key is in the log");
        assert!(
            !text.contains(&hash_key(secret)),
            "a key's hash is in the log"
        );
    }
    // What each entry concerns.
    assert_eq!(entries[0]["jobs"], json!([]));
    assert_eq!(entries[1]["dead_letter_id"], json!(letters[1]));
    assert_eq!(entries[2]["dead_letter_id"], json!(letters[0]));
    assert_eq!(entries[2]["jobs"], json!([replayed["id"]]));
    for entry in &entries[5..10] {
        assert_eq!(entry["jobs"], json!([job]), "{entry}");
        assert_eq!(entry["job_count"], 1);
    }
    assert_eq!(entries[9]["fields"], json!(["type", "payload"]));
    assert!(entries[5..9].iter().all(|e| e["fields"] == json!([])));
    // The batch: its 25 jobs counted, its first 20 listed, in order.
    let batch_ids: Vec<Value> = created["jobs"].as_array().unwrap()[..20]
        .iter()
        .map(|j| j["id"].clone())
        .collect();
    assert_eq!(entries[10]["job_count"], 25);
    assert_eq!(entries[10]["jobs"], Value::Array(batch_ids));
    assert_eq!(entries[11]["jobs"], json!([job]));

    // One job's entries.
    let of_job = all_entries(&writer, &format!("&job={job}"), 2).await;
    assert_eq!(
        actions(&of_job),
        ["cancel", "trigger", "resume", "pause", "change", "create"]
    );

    // Readers and workers may not read it.
    for secret in ["reader-secret", "worker-secret"] {
        let (status, body) = api(secret).call("GET", "/v1/audit", None).await;
        assert_eq!(status, 403, "{secret}: {body}");
        assert_eq!(body["error"]["code"], "insufficient_role", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("writer")
        );
    }

    // Another namespace sees none of it, and its own changes only.
    let other = api("other-secret");
    assert_eq!(all_entries(&other, "", 10).await, Vec::<Value>::new());
    assert_eq!(
        all_entries(&other, &format!("&job={job}"), 10).await,
        Vec::<Value>::new()
    );
    other
        .create(json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}}))
        .await;
    let theirs = all_entries(&other, "", 10).await;
    assert_eq!(actions(&theirs), ["create"]);
    assert_eq!(theirs[0]["namespace"], "other");
    assert_eq!(all_entries(&admin, "", 1000).await, entries);

    // Bad queries name their field and change nothing.
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("cursor=abc", "cursor"),
        ("cursor=1.2.3", "cursor"),
        ("job=not-a-job", "job"),
    ] {
        let (status, body) = admin.call("GET", &format!("/v1/audit?{query}"), None).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }
    node.shutdown().await;
}

/// Without keys (development mode) every change is recorded as the key `open`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keys_changes_are_recorded_as_open() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node_with(test_config(dir.path())).await;
    let api = Api::new(node.addr());
    let job = api
        .create(json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}}))
        .await;
    let (status, page) = api.call("GET", "/v1/audit", None).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["entries"][0]["key_id"], "open");
    assert_eq!(page["entries"][0]["jobs"], json!([job["id"]]));
    assert_eq!(page["next_cursor"], Value::Null);
    node.shutdown().await;
}

/// Calendars and anchors written and deleted leave one entry each, naming the calendar or
/// anchor, with the jobs a calendar put re-planned or an anchor put moved (an anchor delete
/// counts the jobs it cancelled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calendar_and_anchor_changes_leave_entries_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node_with(test_config(dir.path())).await;
    let api = Api::new(node.addr());
    let put = |path: &'static str, body: Value| {
        let api = &api;
        async move {
            let (status, answer) = api.call("PUT", path, Some(body)).await;
            assert!(status == 200 || status == 201, "{path}: {answer}");
            answer
        }
    };
    let saturdays = json!({"timezone": "UTC", "exclude": {"weekdays": ["SAT"]}});
    put("/v1/calendars/business", saturdays).await;
    let daily = api
        .create(json!({
            "schedule": {"cron": "0 0 9 * * *", "calendar": "business"},
            "target": {"queue": "q"},
        }))
        .await;
    let weekends = json!({"timezone": "UTC", "exclude": {"weekdays": ["SAT", "SUN"]}});
    assert_eq!(
        put("/v1/calendars/business", weekends).await["replanned"],
        1
    );
    let at = |days: i64| {
        (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days)).to_string()
    };
    put("/v1/anchors/flight", json!({"at": at(10)})).await;
    let reminder = api
        .create(json!({
            "schedule": {"anchor": "flight", "offset": "-8h"},
            "target": {"queue": "q"},
        }))
        .await;
    assert_eq!(
        put("/v1/anchors/flight", json!({"at": at(11)})).await["jobs_moved"],
        1
    );
    let (status, deleted) = api.call("DELETE", "/v1/anchors/flight", None).await;
    assert_eq!(status, 200, "{deleted}");
    let (status, body) = api
        .call(
            "DELETE",
            &format!("/v1/jobs/{}", daily["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = api.call("DELETE", "/v1/calendars/business", None).await;
    assert_eq!(status, 204, "{body}");

    let entries = all_entries(&api, "", 100).await;
    assert_eq!(
        actions(&entries),
        [
            "delete_calendar",
            "cancel",
            "delete_anchor",
            "put_anchor",
            "create",
            "put_anchor",
            "put_calendar",
            "create",
            "put_calendar"
        ],
        "{entries:#?}"
    );
    let names: Vec<&Value> = entries.iter().map(|e| &e["name"]).collect();
    assert_eq!(
        names,
        [
            &json!("business"),
            &Value::Null,
            &json!("flight"),
            &json!("flight"),
            &Value::Null,
            &json!("flight"),
            &json!("business"),
            &Value::Null,
            &json!("business"),
        ]
    );
    // The anchor's delete cancelled the reminder; its move moved it; its creation, nothing.
    assert_eq!(entries[2]["job_count"], 1);
    assert_eq!(entries[3]["jobs"], json!([reminder["id"]]));
    assert_eq!(entries[5]["jobs"], json!([]));
    // The calendar's second put re-planned the daily job; its first, nothing.
    assert_eq!(entries[6]["jobs"], json!([daily["id"]]));
    assert_eq!(entries[8]["job_count"], 0);
    node.shutdown().await;
}
