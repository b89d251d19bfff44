//! Upgrades: stores written by earlier versions, committed as fixtures under
//! `tests/it/fixtures/upgrade/<version>/`, are opened by this binary, which must find and fire
//! every job in them and read their history back as it was written.
//!
//! Each fixture directory holds an embedded store (`embedded.db`, the data directory's
//! `hourglass.db`) and a PostgreSQL dump (`postgres.sql`, plain SQL from `pg_dump`), each with a
//! manifest (`embedded.json`, `postgres.json`) naming its jobs by role and recording what the API
//! answered for them when the fixture was written. Both hold jobs of every kind and state in two
//! namespaces: one-offs that were due seconds after the fixture was written (overdue ever after,
//! so they fire at start), one due in 2099, a cron job with a key and an `every` job (their first
//! occurrence overdue too; the default misfire policy fires one and goes on from now), a paused
//! and a cancelled job, a completed job with a failed and a delivered run, a dead-lettered one-off
//! with its letter, queue messages (one available, one scheduled in 2099), a payload stored out of
//! the job row, and each namespace's webhook signing secret.
//!
//! `write_upgrade_fixtures` (ignored; `scripts/upgrade-fixtures`) writes them with the current
//! binary. A schema change adds a directory: RELEASING.md says when.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::postgres::{TestDatabase, admin_url};
use crate::support::{Api, Delivery, NodeOptions, Nodes, Receiver, eventually, rfc3339_ms};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/fixtures/upgrade");
/// The loopback ports the fixtures' webhooks point at (one per store, so the two tests may run
/// together): below Linux's ephemeral range, so no test's client socket holds them.
const EMBEDDED_PORT: u16 = 17461;
const POSTGRES_PORT: u16 = 17462;
/// The namespaces of the fixtures' jobs.
const NAMESPACES: [&str; 2] = ["acme", "globex"];
/// A one-off due this far in the future.
const FAR_FUTURE: &str = "2099-01-01T00:00:00.000Z";
/// How far after the fixture is written its "overdue" jobs are due: long enough for the writer
/// to stop the node before any of them fires.
const PENDING_AFTER_MS: i64 = 30_000;
/// How long a test waits for what must happen at once (a node that is merely slow on a busy CI
/// machine still makes it).
const PATIENCE: Duration = Duration::from_secs(90);

#[tokio::test]
async fn embedded_stores_of_earlier_versions_open_and_fire_every_job() {
    let fixtures = fixture_dirs();
    for dir in &fixtures {
        println!("fixture {}", dir.display());
        let manifest = read_manifest(&dir.join("embedded.json"));
        let nodes = Nodes::default();
        let data = nodes.data_dir("upgrade");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::copy(dir.join("embedded.db"), data.join("hourglass.db"))
            .expect("copy the fixture's store into the data directory");
        let receiver = Receiver::start_on(manifest_port(&manifest)).await;
        let node = nodes
            .start(&upgraded(NodeOptions::embedded("upgrade")))
            .await;
        check_upgraded(&node.api, &manifest, &receiver).await;
    }
}

#[tokio::test]
async fn postgres_dumps_of_earlier_versions_open_and_fire_every_job() {
    let fixtures = fixture_dirs();
    let admin = admin_url();
    for dir in &fixtures {
        println!("fixture {}", dir.display());
        let manifest = read_manifest(&dir.join("postgres.json"));
        let db = TestDatabase::create(&admin, "upgrade").await;
        load_dump(&db.url, &dir.join("postgres.sql"));
        let receiver = Receiver::start_on(manifest_port(&manifest)).await;
        let nodes = Nodes::default();
        let node = nodes
            .start(&upgraded(NodeOptions::postgres("upgrade", &db.url, "5s")))
            .await;
        check_upgraded(&node.api, &manifest, &receiver).await;
    }
}

/// The node that opens a fixture: without retention, which would otherwise delete the finished
/// jobs and their runs (and dead letters, were their retention on) once the fixture is older
/// than the retention (7 days by default): fixtures are never rewritten.
fn upgraded(mut options: NodeOptions) -> NodeOptions {
    options
        .args
        .extend(["--retention".to_string(), "off".to_string()]);
    options
}

/// Writes this version's fixtures: `scripts/upgrade-fixtures` runs it (with PostgreSQL).
/// `HOURGLASS_UPGRADE_FIXTURE` names the directory (default: the crate's version); an existing
/// one is kept unless `HOURGLASS_UPGRADE_FIXTURE_OVERWRITE=1`.
#[tokio::test]
#[ignore = "writes the upgrade fixtures; run by scripts/upgrade-fixtures"]
async fn write_upgrade_fixtures() {
    let name = std::env::var("HOURGLASS_UPGRADE_FIXTURE")
        .unwrap_or_else(|_| env!("CARGO_PKG_VERSION").to_string());
    let dir = Path::new(FIXTURES).join(&name);
    let overwrite = std::env::var("HOURGLASS_UPGRADE_FIXTURE_OVERWRITE").as_deref() == Ok("1");
    assert!(
        overwrite || !dir.exists(),
        "{} exists: a committed fixture stays as its version wrote it (set \
         HOURGLASS_UPGRADE_FIXTURE to a new name, or HOURGLASS_UPGRADE_FIXTURE_OVERWRITE=1)",
        dir.display()
    );
    std::fs::create_dir_all(&dir).unwrap();

    // The embedded store: written by a node, then copied whole (WAL included) and compacted.
    {
        let nodes = Nodes::default();
        let receiver = Receiver::start_on(EMBEDDED_PORT).await;
        let node = nodes.start(&NodeOptions::embedded("writer")).await;
        let mut manifest = populate(&node.api, &receiver).await;
        node.terminate(Duration::from_secs(30)).await;
        assert_pending_untouched(&manifest, &receiver);
        let db = nodes.data_dir("writer").join("hourglass.db");
        let target = dir.join("embedded.db");
        let _ = std::fs::remove_file(&target);
        let conn = rusqlite::Connection::open(&db).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        conn.execute("VACUUM INTO ?1", [target.to_str().unwrap()])
            .unwrap();
        drop(conn);
        manifest["schema_version"] = json!(version);
        write_manifest(&dir.join("embedded.json"), &manifest);
    }

    // PostgreSQL: written by a node into a database of its own, then dumped as plain SQL.
    {
        let db = TestDatabase::create(&admin_url(), "upgrade_writer").await;
        let nodes = Nodes::default();
        let receiver = Receiver::start_on(POSTGRES_PORT).await;
        let node = nodes
            .start(&NodeOptions::postgres("writer", &db.url, "5s"))
            .await;
        let mut manifest = populate(&node.api, &receiver).await;
        node.terminate(Duration::from_secs(30)).await;
        assert_pending_untouched(&manifest, &receiver);
        let rows = crate::support::postgres::query(
            &db.url,
            "SELECT MAX(version) FROM hourglass_migrations",
        )
        .await;
        manifest["schema_version"] = json!(rows[0].get::<_, i32>(0));
        write_manifest(&dir.join("postgres.json"), &manifest);
        let out = std::process::Command::new("pg_dump")
            .args(["--no-owner", "--no-privileges", "--dbname", &db.url])
            .output()
            .expect("run pg_dump");
        assert!(
            out.status.success(),
            "pg_dump failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // `\restrict` and `\unrestrict` (pg_dump since 17.6, 16.10, 15.14, ...) are psql
        // meta-commands older psql versions refuse; they guard against a hostile server, which a
        // committed fixture is not.
        let sql: String = String::from_utf8(out.stdout)
            .expect("the dump is UTF-8")
            .lines()
            .filter(|line| !line.starts_with("\\restrict") && !line.starts_with("\\unrestrict"))
            .map(|line| format!("{line}\n"))
            .collect();
        std::fs::write(dir.join("postgres.sql"), sql).unwrap();
    }
    println!("fixtures written to {}", dir.display());
}

/// Creates the fixture's jobs through the API of a fresh node and records them by role.
async fn populate(api: &Api, receiver: &Receiver) -> Value {
    let base = format!("http://127.0.0.1:{}", receiver.port());
    let mut jobs = serde_json::Map::new();
    let mut secrets = serde_json::Map::new();
    for ns in NAMESPACES {
        let (status, secret) = call(api, ns, "GET", "/v1/signing-secret", None).await;
        assert_eq!(status, 200, "{secret}");
        secrets.insert(ns.into(), secret["signing_secret"].clone());
    }

    // History first: a job that fails once and is then delivered, and one that is dead-lettered.
    let completed = create(
        api,
        "acme",
        json!({"type": "report.send", "schedule": {"after": "1s"},
               "target": {"webhook": {"url": format!("{base}/flaky")}},
               "retry": {"max_attempts": 3, "initial_backoff": "1s", "max_backoff": "1s"},
               "payload": {"role": "completed"}}),
    )
    .await;
    let failed = create(
        api,
        "acme",
        json!({"type": "report.send", "schedule": {"after": "1s"},
               "target": {"webhook": {"url": format!("{base}/status/400")}},
               "payload": {"role": "failed"}}),
    )
    .await;
    for (id, state) in [(&completed, "completed"), (&failed, "failed")] {
        let reached = eventually(PATIENCE, Duration::from_millis(100), || async {
            let (_, job) = call(api, "acme", "GET", &format!("/v1/jobs/{id}"), None).await;
            job["state"] == state
        })
        .await;
        assert!(reached, "job {id} never became {state}");
    }

    // What the upgraded node must fire: due shortly after the node is stopped, so overdue when
    // it starts again.
    let soon = rfc3339_ms(crate::support::now_ms() + PENDING_AFTER_MS);
    let hook = |path: &str| json!({"webhook": {"url": format!("{base}{path}")}});
    let roles: Vec<(&str, &str, Value)> = vec![
        (
            "overdue",
            "acme",
            json!({"type": "reminder", "schedule": {"at": soon}, "target": hook("/overdue"),
                   "payload": {"role": "overdue"}}),
        ),
        (
            "overdue_large",
            "globex",
            json!({"schedule": {"at": soon}, "target": hook("/overdue-large"),
                   "payload": {"role": "overdue_large", "text": "x".repeat(600)}}),
        ),
        (
            "future",
            "acme",
            json!({"schedule": {"at": FAR_FUTURE}, "target": hook("/future"),
                   "payload": {"role": "future"}}),
        ),
        (
            "cron",
            "acme",
            json!({"key": "digest", "type": "digest",
                   "schedule": {"cron": "* * * * * *", "timezone": "Europe/Berlin", "start": soon},
                   "target": {"webhook": {"url": format!("{base}/cron"),
                                          "headers": {"authorization": "Bearer fixture"}}},
                   "payload": {"role": "cron"}}),
        ),
        (
            "every",
            "globex",
            json!({"key": "poll", "schedule": {"every": "1s", "start": soon},
                   "target": hook("/every"), "misfire": {"policy": "once"},
                   "payload": {"role": "every"}}),
        ),
        (
            "paused",
            "acme",
            json!({"schedule": {"every": "1s", "start": soon}, "target": hook("/paused"),
                   "payload": {"role": "paused"}}),
        ),
        (
            "cancelled",
            "globex",
            json!({"schedule": {"at": soon}, "target": hook("/cancelled"),
                   "payload": {"role": "cancelled"}}),
        ),
        (
            "queued",
            "acme",
            json!({"type": "email.send", "schedule": {"at": soon},
                   "target": {"queue": "emails"}, "payload": {"role": "queued"}}),
        ),
        (
            "queued_future",
            "acme",
            json!({"type": "email.send", "schedule": {"at": FAR_FUTURE},
                   "target": {"queue": "emails"}, "payload": {"role": "queued_future"}}),
        ),
    ];
    let mut ids = BTreeMap::new();
    for (role, ns, body) in roles {
        ids.insert(role, (ns, create(api, ns, body).await));
    }
    let (status, body) = call(
        api,
        "acme",
        "POST",
        &format!("/v1/jobs/{}/pause", ids["paused"].1),
        None,
    )
    .await;
    assert_eq!(status, 200, "pause: {body}");
    let (status, body) = call(
        api,
        "globex",
        "DELETE",
        &format!("/v1/jobs/{}", ids["cancelled"].1),
        None,
    )
    .await;
    assert!(status < 300, "cancel: {status} {body}");

    ids.insert("completed", ("acme", completed));
    ids.insert("failed", ("acme", failed));
    for (role, (ns, id)) in &ids {
        let (_, job) = call(api, ns, "GET", &format!("/v1/jobs/{id}"), None).await;
        let (_, runs) = call(api, ns, "GET", &format!("/v1/jobs/{id}/runs"), None).await;
        jobs.insert(
            role.to_string(),
            json!({"namespace": ns, "id": id, "job": job, "runs": runs}),
        );
    }
    let (_, dead_letters) = call(api, "acme", "GET", "/v1/dead-letters", None).await;
    json!({
        "written_by": env!("CARGO_PKG_VERSION"),
        "receiver_port": receiver.port(),
        "signing_secrets": secrets,
        "jobs": jobs,
        "dead_letters": {"acme": dead_letters},
    })
}

/// The writer stops its node before the pending jobs are due: none of them may have fired.
fn assert_pending_untouched(manifest: &Value, receiver: &Receiver) {
    let history = [job_id(manifest, "completed"), job_id(manifest, "failed")];
    let early: Vec<Delivery> = receiver
        .deliveries()
        .into_iter()
        .filter(|d| !history.contains(&d.job_id()))
        .collect();
    assert!(
        early.is_empty(),
        "pending jobs fired while the fixture was written (the writer was too slow: raise \
         PENDING_AFTER_MS): {early:?}"
    );
}

/// What an upgraded node must do with a fixture's store.
async fn check_upgraded(api: &Api, manifest: &Value, receiver: &Receiver) {
    // Each namespace keeps its signing secret.
    for (ns, secret) in manifest["signing_secrets"].as_object().unwrap() {
        let (status, body) = call(api, ns, "GET", "/v1/signing-secret", None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(&body["signing_secret"], secret, "signing secret of {ns}");
    }

    // What no occurrence touches reads back as it was written: fields the API answered then
    // must still be there with the same values (new fields may be added).
    for role in ["completed", "failed", "future", "paused", "cancelled"] {
        let (ns, id) = role_job(manifest, role);
        let (status, job) = call(api, ns, "GET", &format!("/v1/jobs/{id}"), None).await;
        assert_eq!(status, 200, "{role}: {job}");
        assert_contains(&job, &manifest["jobs"][role]["job"], &format!("{role} job"));
    }
    for role in ["completed", "failed"] {
        let (ns, id) = role_job(manifest, role);
        let (_, runs) = call(api, ns, "GET", &format!("/v1/jobs/{id}/runs"), None).await;
        assert_contains(
            &runs,
            &manifest["jobs"][role]["runs"],
            &format!("{role} runs"),
        );
    }
    let (_, letters) = call(api, "acme", "GET", "/v1/dead-letters", None).await;
    let written = &manifest["dead_letters"]["acme"];
    assert_contains(&letters, written, "dead letters");
    let letter_id = match &written["dead_letters"][0]["id"] {
        Value::String(id) => id.clone(),
        other => other.to_string(),
    };
    let (status, letter) = call(
        api,
        "acme",
        "GET",
        &format!("/v1/dead-letters/{}", letter_id),
        None,
    )
    .await;
    assert_eq!(status, 200, "dead letter {letter_id}: {letter}");
    assert_eq!(letter["job_id"], json!(job_id(manifest, "failed")));
    // A key still names its job.
    let (status, job) = call(api, "acme", "GET", "/v1/jobs/key:digest", None).await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["id"], json!(job_id(manifest, "cron")));

    // Every active job fires: the overdue one-offs once, the recurring jobs again and again.
    let wanted = [
        ("overdue", 1),
        ("overdue_large", 1),
        ("cron", 2),
        ("every", 2),
    ];
    let fired = eventually(PATIENCE, Duration::from_millis(100), || async {
        wanted
            .iter()
            .all(|(role, n)| receiver.of_job(job_id(manifest, role)).len() >= *n)
    })
    .await;
    assert!(
        fired,
        "not every active job fired; deliveries: {:?}",
        receiver
            .deliveries()
            .iter()
            .map(|d| (d.path.clone(), d.header("hourglass-job-id")))
            .collect::<Vec<_>>()
    );
    for (role, _) in wanted {
        let (ns, id) = role_job(manifest, role);
        let secret = manifest["signing_secrets"][ns].as_str().unwrap();
        let key = hourglass_engine::signing::SigningKey::parse(secret).expect("a whsec_ secret");
        for delivery in receiver.of_job(id) {
            assert!(
                key.verify(
                    delivery.header("webhook-id"),
                    delivery.header("webhook-timestamp"),
                    &delivery.body,
                    delivery.header("webhook-signature"),
                ),
                "{role}: a delivery not signed with {ns}'s stored secret"
            );
            let payload: Value = serde_json::from_slice(&delivery.body).unwrap();
            assert_eq!(
                payload, manifest["jobs"][role]["job"]["payload"],
                "{role}: payload"
            );
        }
    }
    assert_eq!(
        receiver.of_job(job_id(manifest, "cron"))[0].header("authorization"),
        "Bearer fixture",
        "the cron job's stored header"
    );
    for role in ["overdue", "overdue_large"] {
        let (ns, id) = role_job(manifest, role);
        let done = eventually(PATIENCE, Duration::from_millis(100), || async {
            let (_, job) = call(api, ns, "GET", &format!("/v1/jobs/{id}"), None).await;
            job["state"] == "completed"
        })
        .await;
        assert!(done, "{role} never completed");
    }

    // The overdue queue message is leasable; the one due in 2099 is not.
    let (status, leased) = call(
        api,
        "acme",
        "POST",
        "/v1/queues/emails/lease",
        Some(json!({"max": 10})),
    )
    .await;
    assert_eq!(status, 200, "{leased}");
    let messages = leased["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "leased: {leased}");
    assert_eq!(messages[0]["job_id"], json!(job_id(manifest, "queued")));
    assert_eq!(messages[0]["payload"], json!({"role": "queued"}));
    let (status, acked) = call(
        api,
        "acme",
        "POST",
        "/v1/queues/emails/ack",
        Some(json!({"receipts": [messages[0]["receipt"]]})),
    )
    .await;
    assert_eq!(status, 200, "{acked}");
    assert_eq!(
        acked["succeeded"].as_array().map(Vec::len),
        Some(1),
        "{acked}"
    );
    let (_, queue) = call(api, "acme", "GET", "/v1/queues/emails", None).await;
    assert_eq!(queue["scheduled"], json!(1), "{queue}");

    // The store takes new work too.
    let fresh = create(
        api,
        "globex",
        json!({"schedule": {"after": "1s"},
               "target": {"webhook": {"url": format!("http://127.0.0.1:{}/fresh", receiver.port())}}}),
    )
    .await;
    let delivered = eventually(PATIENCE, Duration::from_millis(100), || async {
        !receiver.of_job(&fresh).is_empty()
    })
    .await;
    assert!(
        delivered,
        "a job created after the upgrade was not delivered"
    );

    // Nothing paused, cancelled or far in the future fired.
    for role in ["paused", "cancelled", "future"] {
        assert!(
            receiver.of_job(job_id(manifest, role)).is_empty(),
            "the {role} job fired"
        );
    }
}

/// `actual` holds everything `written` holds: each field of an object (more may be added),
/// arrays element by element and of the same length, other values equal.
fn assert_contains(actual: &Value, written: &Value, at: &str) {
    match (actual, written) {
        (Value::Object(actual), Value::Object(written)) => {
            for (field, value) in written {
                let Some(now) = actual.get(field) else {
                    panic!("{at}: field {field} is gone (it was {value})");
                };
                assert_contains(now, value, &format!("{at}.{field}"));
            }
        }
        (Value::Array(actual), Value::Array(written)) => {
            assert_eq!(
                actual.len(),
                written.len(),
                "{at}: {} items now, {} when written",
                actual.len(),
                written.len()
            );
            for (i, (now, then)) in actual.iter().zip(written).enumerate() {
                assert_contains(now, then, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(actual, written, "{at}"),
    }
}

async fn call(api: &Api, ns: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = api
        .client
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", api.base),
        )
        .header("hourglass-namespace", ns);
    request = match body {
        Some(body) => request.json(&body),
        None if method != "GET" => request.header("content-type", "application/json"),
        None => request,
    };
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

async fn create(api: &Api, ns: &str, body: Value) -> String {
    let (status, job) = call(api, ns, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, 201, "create in {ns}: {job}");
    job["id"].as_str().unwrap().to_string()
}

fn job_id<'a>(manifest: &'a Value, role: &str) -> &'a str {
    role_job(manifest, role).1
}

fn role_job<'a>(manifest: &'a Value, role: &str) -> (&'a str, &'a str) {
    let job = &manifest["jobs"][role];
    match (job["namespace"].as_str(), job["id"].as_str()) {
        (Some(ns), Some(id)) => (ns, id),
        _ => panic!("the manifest has no job for role {role}"),
    }
}

fn manifest_port(manifest: &Value) -> u16 {
    manifest["receiver_port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .expect("receiver_port in the manifest")
}

/// The fixture directories, oldest first by name; at least one.
fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(FIXTURES)
        .unwrap_or_else(|e| panic!("{FIXTURES}: {e}"))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "no upgrade fixtures under {FIXTURES}");
    dirs
}

fn read_manifest(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write_manifest(path: &Path, manifest: &Value) {
    let text = serde_json::to_string_pretty(manifest).unwrap();
    std::fs::write(path, format!("{text}\n")).unwrap();
}

/// Loads a plain-SQL dump into the database at `url` with psql, stopping at the first error.
fn load_dump(url: &str, dump: &Path) {
    let out = std::process::Command::new("psql")
        .args([
            "--quiet",
            "--no-psqlrc",
            "-v",
            "ON_ERROR_STOP=1",
            "--dbname",
            url,
            "--file",
        ])
        .arg(dump)
        .output()
        .expect("run psql (PostgreSQL's client; scripts/with-postgres installs it)");
    assert!(
        out.status.success(),
        "loading {} failed: {}",
        dump.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
