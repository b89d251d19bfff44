//! Pull queues end to end on a real node: a queue message is leasable at its due time and not
//! before, a long poll returns when it becomes due, leases lapse into redeliveries with a higher
//! attempt, acks finish, nacks retry (with a delay) and dead-letter after the last attempt, stale
//! receipts are refused, extensions hold, type filters and counts are right, and a queue lists
//! its messages waiting and leased.

use std::time::{Duration, Instant};

use crate::support::{Api, start_node};
use serde_json::{Value, json};

fn in_ms(ms: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(ms);
    format!("{at:.3}")
}

fn ms_of(rfc3339: &Value) -> i64 {
    rfc3339
        .as_str()
        .expect("a timestamp")
        .parse::<jiff::Timestamp>()
        .expect("rfc 3339")
        .as_millisecond()
}

async fn lease(api: &Api, queue: &str, body: Value) -> Vec<Value> {
    let (status, out) = api
        .call("POST", &format!("/v1/queues/{queue}/lease"), Some(body))
        .await;
    assert_eq!(status, 200, "{out}");
    out["messages"].as_array().expect("messages").clone()
}

async fn settle(api: &Api, queue: &str, verb: &str, body: Value) -> Value {
    let (status, out) = api
        .call("POST", &format!("/v1/queues/{queue}/{verb}"), Some(body))
        .await;
    assert_eq!(status, 200, "{out}");
    out
}

async fn job(api: &Api, id: &Value) -> Value {
    let (status, job) = api
        .call("GET", &format!("/v1/jobs/{}", id.as_str().unwrap()), None)
        .await;
    assert_eq!(status, 200);
    job
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_leased_at_its_due_time_acked_once_and_never_again() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());

    let created = api
        .create(json!({
            "type": "email.send",
            "schedule": {"at": in_ms(600)},
            "target": {"queue": "emails"},
            "payload": {"to": "a@example.com"}
        }))
        .await;
    assert_eq!(created["target"], json!({"queue": "emails"}));
    let due = ms_of(&created["next_due_at"]);

    assert!(
        lease(&api, "emails", json!({"max": 10})).await.is_empty(),
        "nothing before the due time"
    );
    // A long poll that starts before the due time returns at it, not at the end of its wait. An
    // unwoken poll would look again when its wait ran out and return the message then, so what
    // tells them apart is what ended the poll: it returned before its (longest allowed) wait ran
    // out. Correct behaviour returns after about 0.6 s of the 20 s.
    let wait = Duration::from_millis(hourglass_server::queues::MAX_WAIT_MS);
    let started = Instant::now();
    let got = lease(
        &api,
        "emails",
        json!({"max": 10, "wait_ms": wait.as_millis() as u64}),
    )
    .await;
    let leased_at = jiff::Timestamp::now().as_millisecond();
    assert!(
        started.elapsed() < wait,
        "the long poll ran out its wait ({:?}) instead of returning at the due time",
        started.elapsed()
    );
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert!(leased_at >= due, "leased {} ms early", due - leased_at);
    assert_eq!(m["job_id"], created["id"]);
    assert_eq!(m["type"], "email.send");
    assert_eq!(m["payload"], json!({"to": "a@example.com"}));
    assert_eq!(m["attempt"], 1);
    assert_eq!(m["max_attempts"], created["retry"]["max_attempts"]);
    assert_eq!(ms_of(&m["due_at"]), due);
    let id_hex = created["id"].as_str().unwrap().replace('-', "");
    assert_eq!(m["delivery_id"], format!("{id_hex}_{due}"));
    assert!(ms_of(&m["visible_until"]) >= leased_at + 29_000);

    let (status, q) = api.call("GET", "/v1/queues/emails", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        (q["available"].as_u64(), q["in_flight"].as_u64()),
        (Some(0), Some(1))
    );

    let out = settle(&api, "emails", "ack", json!({"receipts": [m["receipt"]]})).await;
    assert_eq!(out["succeeded"], json!([m["receipt"]]));
    assert_eq!(out["failed"], json!([]));
    let done = job(&api, &created["id"]).await;
    assert_eq!(done["state"], "completed");
    // Acking twice is refused: the receipt's lease ended with the first ack.
    let again = settle(&api, "emails", "ack", json!({"receipts": [m["receipt"]]})).await;
    assert_eq!(again["failed"][0]["code"], "stale_receipt");
    assert!(
        lease(&api, "emails", json!({"wait_ms": 300}))
            .await
            .is_empty()
    );
    let (_, runs) = api
        .call(
            "GET",
            &format!("/v1/jobs/{}/runs", created["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs["runs"][0]["outcome"], "delivered");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_is_redelivered_and_its_receipt_goes_stale() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let created = api
        .create(json!({"schedule": {"after": "1ms"}, "target": {"queue": "q"}}))
        .await;

    let first = lease(&api, "q", json!({"visibility_ms": 1000, "wait_ms": 2000})).await;
    assert_eq!(first.len(), 1);
    assert!(
        lease(&api, "q", json!({"wait_ms": 0})).await.is_empty(),
        "invisible while leased"
    );
    // The poll returns when the first lease lapses, before its own wait runs out (an unwoken
    // poll would take the message only then).
    let wait_ms = hourglass_server::queues::MAX_WAIT_MS;
    let started = Instant::now();
    let second = lease(
        &api,
        "q",
        json!({"visibility_ms": 5000, "wait_ms": wait_ms}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_millis(wait_ms),
        "the long poll ran out its wait ({:?}) instead of returning when the lease lapsed",
        started.elapsed()
    );
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["job_id"], created["id"]);
    assert_eq!(second[0]["attempt"], 2, "the lapsed lease was attempt 1");
    assert_eq!(second[0]["delivery_id"], first[0]["delivery_id"]);
    assert_ne!(second[0]["receipt"], first[0]["receipt"]);

    for verb in ["ack", "extend", "nack"] {
        let mut body = json!({"receipts": [first[0]["receipt"]]});
        if verb == "extend" {
            body["visibility_ms"] = json!(60_000);
        }
        let out = settle(&api, "q", verb, body).await;
        assert_eq!(out["succeeded"], json!([]), "{verb}");
        assert_eq!(out["failed"][0]["code"], "stale_receipt", "{verb}");
        assert_eq!(out["failed"][0]["receipt"], first[0]["receipt"]);
    }
    // A receipt is good only in its own queue.
    let elsewhere = settle(
        &api,
        "other",
        "ack",
        json!({"receipts": [second[0]["receipt"]]}),
    )
    .await;
    assert_eq!(elsewhere["failed"][0]["code"], "stale_receipt");
    assert_eq!(job(&api, &created["id"]).await["state"], "active");

    let out = settle(
        &api,
        "q",
        "ack",
        json!({"receipts": [second[0]["receipt"]]}),
    )
    .await;
    assert_eq!(out["succeeded"], json!([second[0]["receipt"]]));
    assert_eq!(job(&api, &created["id"]).await["state"], "completed");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nack_retries_after_its_delay_and_dead_letters_after_the_last_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let created = api
        .create(json!({
            "type": "report",
            "schedule": {"after": "1ms"},
            "target": {"queue": "q"},
            "retry": {"max_attempts": 2},
            "payload": {"n": 1}
        }))
        .await;

    let first = lease(&api, "q", json!({"wait_ms": 2000})).await;
    let nacked_at = Instant::now();
    let out = settle(
        &api,
        "q",
        "nack",
        json!({"receipts": [first[0]["receipt"]], "delay_ms": 700}),
    )
    .await;
    assert_eq!(out["succeeded"], json!([first[0]["receipt"]]));
    assert!(
        lease(&api, "q", json!({"wait_ms": 0})).await.is_empty(),
        "the delay holds"
    );
    let second = lease(&api, "q", json!({"wait_ms": 5000})).await;
    assert!(nacked_at.elapsed() >= Duration::from_millis(700));
    assert_eq!(second[0]["attempt"], 2);

    // The second attempt was the last: a nack dead-letters it.
    settle(
        &api,
        "q",
        "nack",
        json!({"receipts": [second[0]["receipt"]]}),
    )
    .await;
    assert_eq!(job(&api, &created["id"]).await["state"], "failed");
    let (_, letters) = api.call("GET", "/v1/dead-letters", None).await;
    let letters = letters["dead_letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0]["job_id"], created["id"]);
    assert_eq!(letters[0]["attempts"], 2);
    assert!(lease(&api, "q", json!({"wait_ms": 300})).await.is_empty());

    // Replay puts it back on the queue as a new one-off.
    let id = letters[0]["id"].as_str().unwrap();
    let (status, _) = api
        .call("POST", &format!("/v1/dead-letters/{id}/replay"), None)
        .await;
    assert_eq!(status, 201);
    let replayed = lease(&api, "q", json!({"wait_ms": 3000})).await;
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["payload"], json!({"n": 1}));
    node.shutdown().await;
}

/// A nacked message's receipt is spent: acking it afterwards must not complete the job the worker
/// handed back, and nacking it again must not spend another attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nacked_receipt_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let created = api
        .create(json!({
            "schedule": {"after": "1ms"},
            "target": {"queue": "q"},
            "payload": {"n": 1}
        }))
        .await;
    let leased = lease(&api, "q", json!({"wait_ms": 2000})).await;
    let receipt = leased[0]["receipt"].clone();
    let out = settle(
        &api,
        "q",
        "nack",
        json!({"receipts": [receipt], "delay_ms": 60000}),
    )
    .await;
    assert_eq!(out["succeeded"], json!([receipt]));
    for verb in ["ack", "nack", "extend"] {
        let body = if verb == "extend" {
            json!({"receipts": [receipt], "visibility_ms": 30000})
        } else {
            json!({"receipts": [receipt]})
        };
        let out = settle(&api, "q", verb, body).await;
        assert_eq!(out["failed"][0]["code"], "stale_receipt", "{verb}: {out}");
    }
    let job = job(&api, &created["id"]).await;
    assert_eq!(job["state"], "active", "{job}");
    assert_eq!(job["attempt"], 1, "one nack, one attempt spent: {job}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_whose_leases_lapse_every_time_are_dead_lettered() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let created = api
        .create(json!({
            "schedule": {"after": "1ms"},
            "target": {"queue": "q"},
            "retry": {"max_attempts": 2}
        }))
        .await;
    for attempt in 1..=2 {
        let got = lease(&api, "q", json!({"visibility_ms": 1000, "wait_ms": 3000})).await;
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["attempt"], attempt);
    }
    // The second lease lapses too; the next look finds the attempts used up.
    assert!(lease(&api, "q", json!({"wait_ms": 2000})).await.is_empty());
    assert_eq!(job(&api, &created["id"]).await["state"], "failed");
    let (_, letters) = api.call("GET", "/v1/dead-letters", None).await;
    assert_eq!(letters["dead_letters"][0]["job_id"], created["id"]);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_keeps_a_message_invisible_and_types_filter_leases() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    for t in ["a", "b", "c"] {
        api.create(json!({"type": t, "schedule": {"after": "1ms"}, "target": {"queue": "q"}}))
            .await;
    }
    let b = lease(
        &api,
        "q",
        json!({"types": ["b"], "visibility_ms": 1000, "wait_ms": 2000}),
    )
    .await;
    assert_eq!(b.len(), 1);
    assert_eq!(b[0]["type"], "b");
    let out = settle(
        &api,
        "q",
        "extend",
        json!({"receipts": [b[0]["receipt"]], "visibility_ms": 10_000}),
    )
    .await;
    assert_eq!(out["succeeded"], json!([b[0]["receipt"]]));
    assert!(ms_of(&out["visible_until"]) > ms_of(&b[0]["visible_until"]));
    // Past the first visibility timeout, the extended message is still invisible.
    let rest = lease(&api, "q", json!({"max": 10, "wait_ms": 1500})).await;
    let mut types: Vec<_> = rest.iter().map(|m| m["type"].as_str().unwrap()).collect();
    types.sort();
    assert_eq!(types, vec!["a", "c"]);
    let late = lease(&api, "q", json!({"wait_ms": 1500})).await;
    assert!(late.is_empty(), "extended past the first expiry: {late:?}");

    let (_, all) = api.call("GET", "/v1/queues", None).await;
    assert_eq!(
        all,
        json!({"queues": [{"name": "q", "available": 0, "in_flight": 3, "scheduled": 0,
                            "oldest_available_age_ms": null}], "next_cursor": null})
    );
    let (status, none) = api.call("GET", "/v1/queues/nothing-here", None).await;
    assert_eq!(status, 200);
    assert_eq!(none["available"], 0);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_queue_job_moves_on_when_acked() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let created = api
        .create(json!({"schedule": {"every": "1s", "max_runs": 3}, "target": {"queue": "tick"}}))
        .await;
    let mut dues = Vec::new();
    for _ in 0..3 {
        let got = lease(&api, "tick", json!({"wait_ms": 3000})).await;
        assert_eq!(got.len(), 1);
        dues.push(ms_of(&got[0]["due_at"]));
        settle(
            &api,
            "tick",
            "ack",
            json!({"receipts": [got[0]["receipt"]]}),
        )
        .await;
    }
    assert_eq!(dues[1] - dues[0], 1000);
    assert_eq!(dues[2] - dues[1], 1000);
    let done = job(&api, &created["id"]).await;
    assert_eq!(done["state"], "completed");
    assert_eq!(done["runs"], 3);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queue_requests_get_a_named_field_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    api.create(json!({"schedule": {"after": "1ms"}, "target": {"queue": "q"}}))
        .await;
    let cases: Vec<(&str, &str, Value, u16, &str, &str)> = vec![
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"max": 0}),
            422,
            "invalid_field",
            "max",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"max": 1001}),
            422,
            "invalid_field",
            "max",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"wait_ms": 20_001}),
            422,
            "invalid_field",
            "wait_ms",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"visibility_ms": 999}),
            422,
            "invalid_field",
            "visibility_ms",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"types": []}),
            422,
            "invalid_field",
            "types",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"types": ["ok", ""]}),
            422,
            "invalid_field",
            "types[1]",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"max": "1"}),
            422,
            "invalid_field",
            "max",
        ),
        (
            "POST",
            "/v1/queues/q/lease",
            json!({"maxx": 1}),
            422,
            "unknown_field",
            "maxx",
        ),
        (
            "POST",
            "/v1/queues/b%20d/lease",
            json!({}),
            400,
            "invalid_queue",
            "name",
        ),
        (
            "POST",
            "/v1/queues/q/ack",
            json!({"receipts": []}),
            422,
            "invalid_field",
            "receipts",
        ),
        (
            "POST",
            "/v1/queues/q/ack",
            json!({"receipts": ["nope"]}),
            422,
            "invalid_receipt",
            "receipts[0]",
        ),
        (
            "POST",
            "/v1/queues/q/ack",
            json!({}),
            422,
            "missing_field",
            "receipts",
        ),
        (
            "POST",
            "/v1/queues/q/nack",
            json!({"receipts": ["x"], "delay_ms": 1}),
            422,
            "invalid_receipt",
            "receipts[0]",
        ),
        (
            "POST",
            "/v1/queues/q/extend",
            json!({"receipts": ["x"]}),
            422,
            "missing_field",
            "visibility_ms",
        ),
        (
            "POST",
            "/v1/jobs",
            json!({"schedule": {"after": "1s"}, "target": {"queue": "a b"}}),
            422,
            "invalid_queue",
            "target.queue",
        ),
        (
            "POST",
            "/v1/jobs",
            json!({"schedule": {"after": "1s"}, "target": {"queue": "q", "webhook": {"url": "http://127.0.0.1/"}}}),
            422,
            "invalid_target",
            "target",
        ),
    ];
    for (method, path, body, status, code, field) in cases {
        let (got, out) = api.call(method, path, Some(body.clone())).await;
        assert_eq!(got, status, "{path} {body}: {out}");
        assert_eq!(out["error"]["code"], code, "{path} {body}: {out}");
        let got_field = out["error"]["field"].as_str().unwrap_or_default();
        assert!(
            got_field == field,
            "{path} {body}: field {got_field:?}, wanted {field:?}"
        );
    }
    // None of that leased, acked or created anything.
    let (_, q) = api.call("GET", "/v1/queues/q", None).await;
    assert_eq!(
        (q["available"].as_u64(), q["in_flight"].as_u64()),
        (Some(1), Some(0))
    );
    let (_, jobs) = api.call("GET", "/v1/jobs", None).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1);
    node.shutdown().await;
}

async fn messages(api: &Api, path: &str) -> Value {
    let (status, out) = api.call("GET", path, None).await;
    assert_eq!(status, 200, "{path}: {out}");
    out
}

/// A queue lists its messages oldest first: waiting (available now or scheduled later) and
/// leased, each leased one with when its lease lapses, a nacked one with its error; an acked one
/// is gone. Listing leases nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_lists_its_messages_waiting_and_leased() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let mut ids = Vec::new();
    for after in ["1ms", "1ms", "1h"] {
        let job = api
            .create(json!({
                "type": "email.send",
                "schedule": {"after": after},
                "target": {"queue": "emails"},
                "payload": {"to": "a@example.com"},
            }))
            .await;
        ids.push(job["id"].clone());
    }
    api.create(json!({"schedule": {"after": "1ms"}, "target": {"queue": "other"}}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let held = loop {
        let got = lease(
            &api,
            "emails",
            json!({"max": 1, "wait_ms": 1000, "visibility_ms": 60_000}),
        )
        .await;
        if let Some(message) = got.into_iter().next() {
            break message;
        }
        assert!(Instant::now() < deadline, "nothing to lease");
    };

    let page = messages(&api, "/v1/queues/emails/messages?payload=true").await;
    let listed = page["messages"].as_array().expect("messages");
    assert_eq!(page["next_cursor"], Value::Null);
    let listed_ids: Vec<&Value> = listed.iter().map(|m| &m["job_id"]).collect();
    assert_eq!(listed_ids, ids.iter().collect::<Vec<_>>(), "oldest first");
    let fields: Vec<&str> = listed[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "job_id",
        "key",
        "type",
        "status",
        "due_at",
        "available_at",
        "leased_until",
        "failed_attempts",
        "max_attempts",
        "delivery_id",
        "last_error",
        "payload",
        "created_at",
    ];
    expected.sort();
    let mut fields = fields;
    fields.sort();
    assert_eq!(
        fields, expected,
        "no receipt: only the lease holder settles"
    );
    let by_id = |id: &Value| listed.iter().find(|m| m["job_id"] == *id).unwrap().clone();

    let leased = by_id(&held["job_id"]);
    assert_eq!(leased["status"], "leased", "{leased}");
    assert_eq!(leased["leased_until"], held["visible_until"], "{leased}");
    assert_eq!(leased["available_at"], Value::Null);
    assert_eq!(leased["delivery_id"], held["delivery_id"]);
    assert_eq!(leased["failed_attempts"], 0);
    assert_eq!(leased["max_attempts"], held["max_attempts"]);
    assert_eq!(leased["payload"], json!({"to": "a@example.com"}));
    let waiting = listed
        .iter()
        .find(|m| m["job_id"] != held["job_id"] && m["job_id"] != ids[2])
        .unwrap();
    assert_eq!(waiting["status"], "available", "{waiting}");
    assert_eq!(waiting["available_at"], waiting["due_at"]);
    assert_eq!(waiting["leased_until"], Value::Null);
    let later = by_id(&ids[2]);
    assert_eq!(later["status"], "scheduled", "{later}");
    assert_eq!(later["available_at"], later["due_at"]);
    assert!(ms_of(&later["due_at"]) > jiff::Timestamp::now().as_millisecond() + 3_000_000);

    // Listing leased nothing: the available one is still there to lease.
    let (_, counts) = api.call("GET", "/v1/queues/emails", None).await;
    assert_eq!(
        (
            &counts["available"],
            &counts["in_flight"],
            &counts["scheduled"]
        ),
        (&json!(1), &json!(1), &json!(1)),
        "{counts}"
    );

    // Pages of two, then the rest.
    let first = messages(&api, "/v1/queues/emails/messages?limit=2").await;
    assert_eq!(first["messages"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a full page has a cursor");
    let rest = messages(
        &api,
        &format!("/v1/queues/emails/messages?limit=2&cursor={cursor}"),
    )
    .await;
    assert_eq!(rest["messages"].as_array().unwrap().len(), 1);
    assert_eq!(rest["messages"][0]["job_id"], ids[2]);
    assert_eq!(rest["next_cursor"], Value::Null);

    // Nacked with a delay: waiting again, one failed attempt, and why.
    settle(
        &api,
        "emails",
        "nack",
        json!({"receipts": [held["receipt"]], "delay_ms": 600_000}),
    )
    .await;
    let nacked = messages(&api, "/v1/queues/emails/messages").await["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["job_id"] == held["job_id"])
        .unwrap()
        .clone();
    assert_eq!(nacked["status"], "scheduled", "{nacked}");
    assert_eq!(nacked["failed_attempts"], 1);
    assert_eq!(nacked["last_error"], "nacked by the worker");
    assert_eq!(nacked["leased_until"], Value::Null);
    assert!(ms_of(&nacked["available_at"]) > ms_of(&nacked["due_at"]) + 500_000);

    // Acked, a message is gone. Another queue's are never listed; an unused queue lists none.
    let again = lease(&api, "emails", json!({"max": 1})).await;
    assert_eq!(again.len(), 1);
    settle(
        &api,
        "emails",
        "ack",
        json!({"receipts": [again[0]["receipt"]]}),
    )
    .await;
    let after_ack = messages(&api, "/v1/queues/emails/messages").await;
    let left: Vec<&Value> = after_ack["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["job_id"])
        .collect();
    assert_eq!(left.len(), 2, "{after_ack}");
    assert!(!left.contains(&&again[0]["job_id"]));
    let other = messages(&api, "/v1/queues/other/messages").await;
    assert_eq!(other["messages"].as_array().unwrap().len(), 1);
    let none = messages(&api, "/v1/queues/unused/messages").await;
    assert_eq!(none, json!({"messages": [], "next_cursor": null}));
    node.shutdown().await;
}

/// Bad paging of a queue's messages names its field; an unknown parameter is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_message_listings_name_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let cases = [
        ("/v1/queues/b%20d/messages", "invalid_queue", "name"),
        ("/v1/queues/q/messages?limit=0", "invalid_query", "limit"),
        ("/v1/queues/q/messages?limit=1001", "invalid_query", "limit"),
        ("/v1/queues/q/messages?limit=ten", "invalid_query", "limit"),
        (
            "/v1/queues/q/messages?cursor=nope",
            "invalid_query",
            "cursor",
        ),
        (
            "/v1/queues/q/messages?state=active",
            "invalid_query",
            "state",
        ),
    ];
    for (path, code, field) in cases {
        let (status, out) = api.call("GET", path, None).await;
        assert_eq!(status, 400, "{path}: {out}");
        assert_eq!(out["error"]["code"], code, "{path}: {out}");
        assert_eq!(out["error"]["field"], field, "{path}: {out}");
    }
    node.shutdown().await;
}

/// Issue 39, defect 9: receipts were `<job id>.<counter from 1>`; with the job id from the
/// message listing, one extend with 1,000 guessed tokens took over another worker's lease. Now a
/// receipt carries a MAC under the store's receipt key: the right job id and token with no MAC
/// is not a receipt (422), and under a wrong MAC it is refused like an unknown one, whatever the
/// token, while the real receipt keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_receipt_with_the_right_job_and_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let created = api
        .create(json!({"schedule": {"after": "1s"}, "target": {"queue": "forge"}}))
        .await;
    let got = lease(&api, "forge", json!({"wait_ms": 5000})).await;
    assert_eq!(got.len(), 1);
    let real = got[0]["receipt"].as_str().unwrap().to_string();
    let parts: Vec<&str> = real.split('.').collect();
    assert_eq!(parts.len(), 3, "{real}");
    assert_eq!(parts[0], created["id"].as_str().unwrap().replace('-', ""));
    let (job_hex, token) = (parts[0], parts[1]);

    // The old form: job and token only.
    let (status, out) = api
        .call(
            "POST",
            "/v1/queues/forge/extend",
            Some(json!({"receipts": [format!("{job_hex}.{token}")], "visibility_ms": 60000})),
        )
        .await;
    assert_eq!(status, 422, "{out}");
    assert_eq!(out["error"]["code"], "invalid_receipt", "{out}");

    // Guesses of every token up to 1,000 under a made-up MAC (the real token among them).
    let guesses: Vec<String> = (1..=1000)
        .map(|t| format!("{job_hex}.{t}.AAAAAAAAAAAAAAAAAAAAAA"))
        .collect();
    let out = settle(
        &api,
        "forge",
        "extend",
        json!({"receipts": guesses, "visibility_ms": 60000}),
    )
    .await;
    assert_eq!(out["succeeded"], json!([]), "a guess was taken");
    assert_eq!(out["failed"].as_array().unwrap().len(), 1000);
    assert!(
        out["failed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["code"] == "stale_receipt")
    );
    for verb in ["ack", "nack"] {
        // 22 characters, the last one's spare bits zero: a well-formed MAC, just not ours.
        let forged = format!("{job_hex}.{token}.{}A", "B".repeat(21));
        let out = settle(&api, "forge", verb, json!({"receipts": [forged]})).await;
        assert_eq!(out["failed"][0]["code"], "stale_receipt", "{verb}: {out}");
    }
    assert_eq!(job(&api, &created["id"]).await["state"], "active");

    // The real receipt still holds the lease.
    let out = settle(&api, "forge", "ack", json!({"receipts": [real]})).await;
    assert_eq!(out["succeeded"], json!([real]), "{out}");
    assert_eq!(job(&api, &created["id"]).await["state"], "completed");
}

/// `GET /v1/queues` is paged like every other listing (issue 39, defect 16): `limit` queues by
/// name, and `next_cursor` while more follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_list_is_paged_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let names: Vec<String> = (0..7).map(|i| format!("q{i}")).collect();
    for name in names.iter().rev() {
        api.create(json!({"schedule": {"after": "1h"}, "target": {"queue": name}}))
            .await;
    }
    let mut listed = Vec::new();
    let mut path = "/v1/queues?limit=3".to_owned();
    let mut pages = 0;
    loop {
        let page = messages(&api, &path).await;
        let queues = page["queues"].as_array().expect("queues");
        assert!(queues.len() <= 3, "{page}");
        listed.extend(
            queues
                .iter()
                .map(|q| q["name"].as_str().unwrap().to_owned()),
        );
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/queues?limit=3&cursor={cursor}"),
            None => break,
        }
        assert!(pages < 10, "the pages never end");
    }
    assert_eq!(listed, names);
    assert_eq!(pages, 3);
    // Without a limit, the first page holds up to 100, and says there is nothing more.
    let all = messages(&api, "/v1/queues").await;
    assert_eq!(all["queues"].as_array().unwrap().len(), 7);
    assert_eq!(all["next_cursor"], Value::Null);
    let (status, bad) = api.call("GET", "/v1/queues?cursor=a%2Fb", None).await;
    assert_eq!(
        (status, bad["error"]["field"].as_str()),
        (400, Some("cursor"))
    );
    let (status, _) = api.call("GET", "/v1/queues?limit=0", None).await;
    assert_eq!(status, 400);
    node.shutdown().await;
}
