//! Roles on API keys, one test per role: on every route group (jobs read, jobs write, trigger,
//! queue reads, a worker's queue calls, dead-letter reads, replays and purges, the signing
//! secret, breakers, the audit log, the node-wide views) the role's key makes a call it may make
//! and is refused one it may not, with `403 insufficient_role` naming the roles that may — and a refused call
//! changes nothing. And the route table itself: every route has a role, and the OpenAPI document
//! states it for every operation.

use std::collections::BTreeMap;
use std::time::Duration;

use hourglass_server::auth::{ApiKeyConfig, Need, Role, hash_key};
use hourglass_server::routes::route_needs;
use serde_json::{Value, json};

use crate::support::{Api, PATIENCE, Receiver, start_node, start_node_with, test_config};

/// A node with three keys: `setup` (every namespace, admin) makes the fixtures; `ns` (namespace
/// `acme`) and `all` (every namespace) have the role under test.
struct Fixture {
    node: hourglass_server::Node,
    /// The role's namespace key.
    ns: Api,
    /// The role's key of every namespace, acting in `acme`.
    all: Api,
    /// An admin of every namespace, to set up and to look behind a refused call.
    setup: Api,
    /// A recurring job on queue `q`, never due by itself.
    job: String,
    /// Two dead letters of `acme`: one to replay, one to purge.
    letters: [String; 2],
    _receiver: Receiver,
}

fn key(secret: &str, namespace: Option<&str>, role: Role) -> ApiKeyConfig {
    ApiKeyConfig {
        sha256: hash_key(secret),
        namespace: namespace.map(Into::into),
        all_namespaces: namespace.is_none(),
        role,
    }
}

impl Fixture {
    async fn start(role: Role, dir: &std::path::Path) -> Fixture {
        let mut config = test_config(dir);
        config.api_keys = vec![
            key("setup", None, Role::Admin),
            key("ns", Some("acme"), role),
            key("all", None, role),
        ];
        let node = start_node_with(config).await;
        let api = |secret: &str| Api::new(node.addr()).with_key(secret);
        let setup = api("setup").in_namespace("acme");
        let receiver = Receiver::start().await;
        let job = setup
            .create(json!({
                "schedule": {"every": "1h", "start": in_ms(3_600_000)},
                "target": {"queue": "q"},
            }))
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        for _ in 0..2 {
            setup
                .create(json!({
                    "schedule": {"after": "100ms"},
                    "target": {"webhook": {"url": format!("http://{}/status/410", receiver.addr())}},
                }))
                .await;
        }
        let letters = two_dead_letters(&setup).await;
        Fixture {
            ns: api("ns"),
            all: api("all").in_namespace("acme"),
            setup,
            job,
            letters,
            _receiver: receiver,
            node,
        }
    }

    /// A queue message due now, for a lease.
    async fn due_message(&self) {
        self.setup
            .create(json!({"schedule": {"at": in_ms(0)}, "target": {"queue": "q"}}))
            .await;
    }
}

fn in_ms(ms: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(ms);
    format!("{at:.3}")
}

async fn two_dead_letters(api: &Api) -> [String; 2] {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (status, page) = api.call("GET", "/v1/dead-letters", None).await;
        assert_eq!(status, 200, "{page}");
        if let [a, b] = page["dead_letters"].as_array().unwrap().as_slice() {
            return [a, b].map(|l| l["id"].as_str().unwrap().to_owned());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not two dead letters after {PATIENCE:?}: {page}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

trait InNamespace {
    fn in_namespace(self, namespace: &str) -> Api;
}

impl InNamespace for Api {
    /// The same client, sending `hourglass-namespace` with every request.
    fn in_namespace(mut self, namespace: &str) -> Api {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("hourglass-namespace", namespace.parse().unwrap());
        self.client = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        self
    }
}

/// Asserts the call was refused for its role: 403 `insufficient_role`, on the authorization
/// header, naming every role that may make it.
fn assert_refused(what: &str, (status, body): &(u16, Value), may: &[&str]) {
    assert_eq!(*status, 403, "{what}: {body}");
    assert_eq!(body["error"]["code"], "insufficient_role", "{what}: {body}");
    assert_eq!(body["error"]["field"], "authorization", "{what}: {body}");
    let message = body["error"]["message"].as_str().unwrap();
    for role in may {
        assert!(
            message.contains(role),
            "{what}: {role} not named in {message}"
        );
    }
}

fn assert_status(what: &str, (status, body): &(u16, Value), expected: u16) {
    assert_eq!(*status, expected, "{what}: {body}");
}

/// Jobs read: allowed to `reader`, `writer`, `admin`.
async fn jobs_read(f: &Fixture, allowed: bool) {
    let calls = [
        f.ns.call("GET", "/v1/jobs", None).await,
        f.ns.call("GET", &format!("/v1/jobs/{}", f.job), None).await,
        f.ns.call("GET", &format!("/v1/jobs/{}/runs", f.job), None)
            .await,
        f.ns.call("GET", "/v1/connections", None).await,
    ];
    for (i, call) in calls.iter().enumerate() {
        match allowed {
            true => assert_status(&format!("jobs read {i}"), call, 200),
            false => assert_refused(&format!("jobs read {i}"), call, &["reader", "writer"]),
        }
    }
}

/// Jobs write and trigger: allowed to `writer`, `admin`.
async fn jobs_write_and_trigger(f: &Fixture, allowed: bool) {
    let before = f
        .setup
        .call("GET", &format!("/v1/jobs/{}", f.job), None)
        .await
        .1;
    let jobs_before = f.setup.call("GET", "/v1/jobs?limit=1000", None).await.1;
    let create =
        f.ns.call(
            "POST",
            "/v1/jobs",
            Some(json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}})),
        )
        .await;
    let pause =
        f.ns.call("POST", &format!("/v1/jobs/{}/pause", f.job), None)
            .await;
    let resume =
        f.ns.call("POST", &format!("/v1/jobs/{}/resume", f.job), None)
            .await;
    let patch =
        f.ns.call(
            "PATCH",
            &format!("/v1/jobs/{}", f.job),
            Some(json!({"type": "renamed"})),
        )
        .await;
    let trigger =
        f.ns.call("POST", &format!("/v1/jobs/{}/trigger", f.job), None)
            .await;
    let after = f
        .setup
        .call("GET", &format!("/v1/jobs/{}", f.job), None)
        .await
        .1;
    if allowed {
        assert_status("create", &create, 201);
        assert_status("pause", &pause, 200);
        assert_status("resume", &resume, 200);
        assert_status("patch", &patch, 200);
        assert_status("trigger", &trigger, 200);
        assert_eq!(after["type"], "renamed");
        assert!(trigger.1["delivery_id"].is_string(), "{}", trigger.1);
    } else {
        for (what, call) in [
            ("create", &create),
            ("pause", &pause),
            ("resume", &resume),
            ("patch", &patch),
            ("trigger", &trigger),
        ] {
            assert_refused(what, call, &["writer", "admin"]);
        }
        // Nothing changed: the job as it was, and no other job stored.
        assert_eq!(before, after, "a refused write changed the job");
        let jobs_after = f.setup.call("GET", "/v1/jobs?limit=1000", None).await.1;
        assert_eq!(jobs_before, jobs_after, "a refused create stored a job");
    }
}

/// Queue reads: every role.
async fn queue_reads(f: &Fixture) {
    for path in ["/v1/queues", "/v1/queues/q", "/v1/queues/q/messages"] {
        let call = f.ns.call("GET", path, None).await;
        assert_status(path, &call, 200);
    }
}

/// A worker's calls: allowed to `worker`, `writer`, `admin`.
async fn worker_calls(f: &Fixture, allowed: bool) {
    f.due_message().await;
    let lease =
        f.ns.call(
            "POST",
            "/v1/queues/q/lease",
            Some(json!({"max": 1, "wait_ms": 5000})),
        )
        .await;
    if allowed {
        assert_status("lease", &lease, 200);
        let receipt = lease.1["messages"][0]["receipt"].clone();
        assert!(receipt.is_string(), "a message was leased: {}", lease.1);
        let settle = |verb: &'static str, body: Value| async move {
            let call =
                f.ns.call("POST", &format!("/v1/queues/q/{verb}"), Some(body))
                    .await;
            assert_status(verb, &call, 200);
            assert_eq!(
                call.1["succeeded"].as_array().map(Vec::len),
                Some(1),
                "{verb}: {}",
                call.1
            );
        };
        settle(
            "extend",
            json!({"receipts": [receipt], "visibility_ms": 60_000}),
        )
        .await;
        settle("nack", json!({"receipts": [receipt], "delay_ms": 0})).await;
        // The nack made the message due again: leased anew, with a new receipt, and acked.
        let again =
            f.ns.call(
                "POST",
                "/v1/queues/q/lease",
                Some(json!({"max": 1, "wait_ms": 5000})),
            )
            .await;
        assert_status("lease again", &again, 200);
        let receipt = again.1["messages"][0]["receipt"].clone();
        assert!(receipt.is_string(), "leased again: {}", again.1);
        settle("ack", json!({"receipts": [receipt]})).await;
    } else {
        assert_refused("lease", &lease, &["worker", "writer", "admin"]);
        for verb in ["ack", "nack", "extend"] {
            let call =
                f.ns.call(
                    "POST",
                    &format!("/v1/queues/q/{verb}"),
                    Some(json!({"receipts": ["x"]})),
                )
                .await;
            assert_refused(verb, &call, &["worker", "writer", "admin"]);
        }
        // The message is still waiting, unleased.
        let (_, queue) = f.setup.call("GET", "/v1/queues/q", None).await;
        assert_eq!(queue["in_flight"], 0, "{queue}");
    }
}

/// Dead letters: read by `reader`, `writer`, `admin`; replayed and purged by `admin` only.
async fn dead_letters(f: &Fixture, may_read: bool, may_replay: bool) {
    let [replayed, purged] = &f.letters;
    let list = f.ns.call("GET", "/v1/dead-letters", None).await;
    let one =
        f.ns.call("GET", &format!("/v1/dead-letters/{replayed}"), None)
            .await;
    for (what, call) in [("list", &list), ("get", &one)] {
        match may_read {
            true => assert_status(what, call, 200),
            false => assert_refused(what, call, &["reader", "writer", "admin"]),
        }
    }
    let replay =
        f.ns.call("POST", &format!("/v1/dead-letters/{replayed}/replay"), None)
            .await;
    let purge =
        f.ns.call("DELETE", &format!("/v1/dead-letters/{purged}"), None)
            .await;
    // What is left of the two letters (the replayed job may dead-letter again, as a new letter).
    let mut left = Vec::new();
    for id in &f.letters {
        left.push(
            f.setup
                .call("GET", &format!("/v1/dead-letters/{id}"), None)
                .await
                .0,
        );
    }
    if may_replay {
        assert_status("replay", &replay, 201);
        assert_status("purge", &purge, 204);
        assert_eq!(left, [404, 404], "both letters are gone");
    } else {
        assert_refused("replay", &replay, &["admin"]);
        assert_refused("purge", &purge, &["admin"]);
        assert_eq!(left, [200, 200], "both letters are still there");
    }
}

/// The signing secret (read and rotation) and breakers: `admin` only.
async fn secrets_and_breakers(f: &Fixture, allowed: bool) {
    let before = f.setup.call("GET", "/v1/signing-secret", None).await.1;
    let read = f.ns.call("GET", "/v1/signing-secret", None).await;
    let rotate =
        f.ns.call("POST", "/v1/signing-secret", Some(json!({"overlap": "0s"})))
            .await;
    let breakers = f.ns.call("GET", "/v1/breakers", None).await;
    let after = f.setup.call("GET", "/v1/signing-secret", None).await.1;
    if allowed {
        assert_status("read the secret", &read, 200);
        assert_status("rotate", &rotate, 200);
        assert_status("breakers", &breakers, 200);
        assert_ne!(before["signing_secret"], after["signing_secret"]);
    } else {
        assert_refused("read the secret", &read, &["admin"]);
        assert_refused("rotate", &rotate, &["admin"]);
        assert_refused("breakers", &breakers, &["admin"]);
        assert_eq!(before, after, "a refused rotation changed the secret");
    }
}

/// The audit log: read by `writer` and `admin`, a namespace key and a key of every namespace.
async fn audit_read(f: &Fixture, allowed: bool) {
    for (who, api) in [("namespace key", &f.ns), ("every namespace", &f.all)] {
        let call = api.call("GET", "/v1/audit", None).await;
        match allowed {
            true => assert_status(&format!("audit, {who}"), &call, 200),
            false => assert_refused(&format!("audit, {who}"), &call, &["writer", "admin"]),
        }
    }
}

/// The node-wide views: an `admin` key of every namespace; a namespace key of any role is
/// refused for its scope (`forbidden`), a key of every namespace without the role for its role.
async fn node_views(f: &Fixture, allowed: bool) {
    for path in ["/metrics", "/v1/summary", "/v1/nodes"] {
        let (status, body) = f.ns.call("GET", path, None).await;
        assert_eq!(status, 403, "{path} with a namespace key: {body}");
        assert_eq!(body["error"]["code"], "forbidden", "{path}: {body}");
        let call = f.all.call("GET", path, None).await;
        match allowed {
            true => assert_status(path, &call, 200),
            false => assert_refused(path, &call, &["admin"]),
        }
    }
    // The key of every namespace acts in the namespace it names, with its role there too.
    let rotate = f.all.call("POST", "/v1/signing-secret", None).await;
    match allowed {
        true => assert_status("rotate, every namespace", &rotate, 200),
        false => assert_refused("rotate, every namespace", &rotate, &["admin"]),
    }
}

/// `GET /v1/whoami` with the role's two keys: the namespace, role and scope, and routes that
/// include `may` and exclude `may_not` (as `"METHOD path"`); the node-wide views only for an admin
/// of every namespace, routes without a key never, and never the key itself.
async fn whoami(f: &Fixture, role: &str, may: &[&str], may_not: &[&str]) {
    for (api, all, secret) in [(&f.ns, false, "ns"), (&f.all, true, "all")] {
        let (status, body) = api.call("GET", "/v1/whoami", None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["namespace"], "acme", "{body}");
        assert_eq!(body["role"], role, "{body}");
        assert_eq!(body["all_namespaces"], all, "{body}");
        assert_eq!(body["development"], false, "{body}");
        assert!(!body.to_string().contains(&hash_key(secret)), "{body}");
        assert_eq!(body["key_id"], hash_key(secret)[..12], "{body}");
        let routes: Vec<String> = body["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["method"].as_str().unwrap(),
                    r["path"].as_str().unwrap()
                )
            })
            .collect();
        for route in may {
            assert!(
                routes.iter().any(|r| r == route),
                "{role}: {route} missing from {routes:?}"
            );
        }
        for route in may_not
            .iter()
            .chain(&["GET /healthz", "GET /v1/openapi.json"])
        {
            assert!(
                !routes.iter().any(|r| r == route),
                "{role}: {route} in {routes:?}"
            );
        }
        let node_wide = routes.iter().any(|r| r == "GET /v1/nodes");
        assert_eq!(
            node_wide,
            all && role == "admin",
            "{role}, all {all}: {routes:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_reads_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::start(Role::Reader, dir.path()).await;
    whoami(
        &f,
        "reader",
        &["GET /v1/jobs", "GET /v1/dead-letters", "GET /v1/whoami"],
        &[
            "POST /v1/jobs",
            "POST /v1/queues/{name}/lease",
            "GET /v1/signing-secret",
        ],
    )
    .await;
    jobs_read(&f, true).await;
    jobs_write_and_trigger(&f, false).await;
    queue_reads(&f).await;
    worker_calls(&f, false).await;
    dead_letters(&f, true, false).await;
    secrets_and_breakers(&f, false).await;
    node_views(&f, false).await;
    audit_read(&f, false).await;
    f.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_works_queues_and_reads_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::start(Role::Worker, dir.path()).await;
    whoami(
        &f,
        "worker",
        &[
            "POST /v1/queues/{name}/lease",
            "POST /v1/queues/{name}/ack",
            "GET /v1/queues",
        ],
        &["GET /v1/jobs", "POST /v1/jobs", "GET /v1/dead-letters"],
    )
    .await;
    jobs_read(&f, false).await;
    jobs_write_and_trigger(&f, false).await;
    queue_reads(&f).await;
    worker_calls(&f, true).await;
    dead_letters(&f, false, false).await;
    secrets_and_breakers(&f, false).await;
    node_views(&f, false).await;
    audit_read(&f, false).await;
    f.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_changes_jobs_but_not_secrets_or_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::start(Role::Writer, dir.path()).await;
    whoami(
        &f,
        "writer",
        &[
            "POST /v1/jobs",
            "PATCH /v1/jobs/{id}",
            "POST /v1/queues/{name}/lease",
        ],
        &[
            "POST /v1/dead-letters/{id}/replay",
            "POST /v1/signing-secret",
            "GET /v1/breakers",
        ],
    )
    .await;
    jobs_read(&f, true).await;
    queue_reads(&f).await;
    worker_calls(&f, true).await;
    dead_letters(&f, true, false).await;
    secrets_and_breakers(&f, false).await;
    node_views(&f, false).await;
    jobs_write_and_trigger(&f, true).await;
    audit_read(&f, true).await;
    f.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_may_do_everything() {
    let dir = tempfile::tempdir().unwrap();
    let f = Fixture::start(Role::Admin, dir.path()).await;
    whoami(
        &f,
        "admin",
        &[
            "POST /v1/signing-secret",
            "DELETE /v1/dead-letters/{id}",
            "POST /v1/jobs",
        ],
        &[],
    )
    .await;
    jobs_read(&f, true).await;
    queue_reads(&f).await;
    worker_calls(&f, true).await;
    dead_letters(&f, true, true).await;
    secrets_and_breakers(&f, true).await;
    node_views(&f, true).await;
    jobs_write_and_trigger(&f, true).await;
    audit_read(&f, true).await;
    f.node.shutdown().await;
}

/// Without API keys (development) every caller is an admin of every namespace, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keys_whoami_says_development_and_admin_of_every_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr()).in_namespace("other");
    let (status, body) = api.call("GET", "/v1/whoami", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["development"], true, "{body}");
    assert_eq!(body["key_id"], "open", "{body}");
    assert_eq!(body["role"], "admin", "{body}");
    assert_eq!(body["all_namespaces"], true, "{body}");
    assert_eq!(body["namespace"], "other", "{body}");
    let routes = body["routes"].as_array().unwrap();
    assert!(
        routes
            .iter()
            .any(|r| r["method"] == "GET" && r["path"] == "/v1/nodes"),
        "{body}"
    );
    node.shutdown().await;
}

/// A key without `role` is an admin, as every key was before roles: existing configs keep
/// working. (The config file's parsing is the binary's test; this is the node's default.)
#[test]
fn a_key_without_a_role_is_an_admin() {
    assert_eq!(ApiKeyConfig::default().role, Role::Admin);
    let read: ApiKeyConfig =
        serde_json::from_value(json!({"sha256": "00", "admin": true})).unwrap();
    assert!(
        read.all_namespaces,
        "`admin = true` still means every namespace"
    );
    assert_eq!(read.role, Role::Admin);
}

/// The route table and the OpenAPI document agree: every route under `/v1/` and `/metrics` has a
/// need, every documented operation is in the table, and each operation's `x-roles` lists the
/// roles its need admits (none for a route without a key).
#[test]
fn every_route_has_a_role_and_the_document_states_it() {
    let doc: Value = serde_json::from_str(include_str!("../../openapi.json")).unwrap();
    let table: BTreeMap<(String, String), Need> = route_needs()
        .into_iter()
        .map(|(method, path, need)| ((method.to_lowercase(), path), need))
        .collect();
    let mut documented = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if op.get("responses").is_none() {
                continue;
            }
            documented += 1;
            let need = table
                .get(&(method.clone(), path.clone()))
                .unwrap_or_else(|| panic!("{method} {path} is documented but not in the table"));
            let roles: Option<Vec<&str>> = op.get("x-roles").map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r.as_str().unwrap())
                    .collect()
            });
            let expected: Vec<&str> = need.roles().iter().map(|r| r.as_str()).collect();
            match need {
                Need::Open => assert_eq!(roles, None, "{method} {path}: x-roles"),
                _ => assert_eq!(roles, Some(expected), "{method} {path}: x-roles"),
            }
            let open = op["security"].as_array().is_some_and(Vec::is_empty);
            assert_eq!(open, *need == Need::Open, "{method} {path}: security");
            if *need != Need::Open {
                assert!(
                    op["responses"]["403"].is_object(),
                    "{method} {path}: no 403 documented"
                );
            }
        }
    }
    // Every route of the table but the dashboard's page and assets is documented.
    let api_routes = table
        .keys()
        .filter(|(_, path)| path != "/" && !path.starts_with("/dashboard/"))
        .count();
    assert_eq!(api_routes, documented, "routes and operations differ");
}
