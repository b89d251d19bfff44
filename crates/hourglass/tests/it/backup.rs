//! `hourglass backup` against a running node under load: while jobs keep being created, a
//! backup is taken; a new node opened on the backup has every job acknowledged before the backup
//! began, nothing that was never acknowledged, and the copy passes SQLite's integrity check.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Api, NodeOptions, NodeProc, Nodes, eventually};

/// Jobs per batch create, and the jobs acknowledged before the backup starts.
const BATCH: usize = 50;
const BEFORE_BACKUP: usize = 3_000;
/// Writers creating batches at once.
const WRITERS: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backup_under_load_restores_every_acknowledged_job() {
    let nodes = Nodes::default();
    let live = nodes.start(&NodeOptions::embedded("live")).await;

    // Every id the node acknowledged, in acknowledgement order. Queue jobs due in an hour: the
    // node stores them and fires nothing during the test.
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (api, acked, stop) = (live.api.clone(), acked.clone(), stop.clone());
            tokio::spawn(async move {
                let mut batches = 0;
                while !stop.load(Ordering::Acquire) {
                    let jobs: Vec<Value> = (0..BATCH)
                        .map(|i| {
                            json!({
                                "type": "backup.test",
                                "key": format!("w{w}-b{batches}-{i}"),
                                "schedule": {"after": "1h"},
                                "target": {"queue": "backup"},
                                // Over the embedded store's inline limit: payloads kept
                                // apart from their job rows are copied too.
                                "payload": {"writer": w, "batch": batches, "i": i, "pad": "p".repeat(300)},
                            })
                        })
                        .collect();
                    let (status, body) = api
                        .call("POST", "/v1/jobs/batch", Some(json!({"jobs": jobs})))
                        .await;
                    assert_eq!(status, 201, "batch create: {body}");
                    let ids = body["jobs"]
                        .as_array()
                        .expect("jobs")
                        .iter()
                        .map(|j| j["id"].as_str().expect("id").to_string());
                    acked.lock().unwrap().extend(ids);
                    batches += 1;
                }
            })
        })
        .collect();

    let enough = eventually(Duration::from_secs(120), Duration::from_millis(20), || {
        let n = acked.lock().unwrap().len();
        async move { n >= BEFORE_BACKUP }
    })
    .await;
    assert!(
        enough,
        "the writers did not get {BEFORE_BACKUP} jobs acknowledged"
    );

    // What was acknowledged before the backup starts: the backup must hold all of it.
    let before: BTreeSet<String> = acked.lock().unwrap().iter().cloned().collect();
    let live_dir = nodes.data_dir("live");
    let (db, wal) = (
        file_len(&live_dir.join("hourglass.db")),
        file_len(&live_dir.join("hourglass.db-wal")),
    );
    println!("at the backup: hourglass.db {db} bytes, hourglass.db-wal {wal} bytes");
    let out = tempfile::tempdir().expect("temp dir");
    let copy = out.path().join("hourglass-backup.db");
    let backup = tokio::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .arg("backup")
        .arg("--data-dir")
        .arg(&live_dir)
        .arg(&copy)
        .env_remove("HOURGLASS_CONFIG")
        .env_remove("HOURGLASS_STORE")
        .output()
        .await
        .expect("run hourglass backup");
    let during = acked.lock().unwrap().len() - before.len();
    let stdout = String::from_utf8_lossy(&backup.stdout).into_owned();
    assert!(
        backup.status.success(),
        "hourglass backup failed: {}\n{stdout}{}",
        backup.status,
        String::from_utf8_lossy(&backup.stderr)
    );
    println!("{}", stdout.trim_end());

    // Keep writing a little after the backup, then stop: the node kept serving throughout.
    let after = acked.lock().unwrap().len();
    let more = eventually(Duration::from_secs(60), Duration::from_millis(20), || {
        let n = acked.lock().unwrap().len();
        async move { n >= after + BATCH * WRITERS }
    })
    .await;
    assert!(
        more,
        "the node stopped acknowledging creates after the backup"
    );
    stop.store(true, Ordering::Release);
    for writer in writers {
        writer.await.expect("writer");
    }
    let all: BTreeSet<String> = acked.lock().unwrap().iter().cloned().collect();
    println!(
        "acknowledged: {} before the backup, {during} while it ran, {} in all",
        before.len(),
        all.len()
    );

    // The copy is one consistent file.
    assert!(
        !out.path().join("hourglass-backup.db-wal").exists(),
        "the backup left a -wal file beside it"
    );
    assert!(
        !out.path().join("hourglass-backup.db.partial").exists(),
        "the backup left its partial file"
    );
    let in_copy = {
        let conn = rusqlite::Connection::open(&copy).expect("open the backup");
        let verdict: String = conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .expect("integrity check");
        assert_eq!(verdict, "ok", "the backup fails its integrity check");
        let jobs: i64 = conn
            .query_row("SELECT count(*) FROM jobs", [], |row| row.get(0))
            .expect("count jobs");
        usize::try_from(jobs).expect("a count")
    };
    assert!(
        stdout.contains(&format!("backed up {in_copy} jobs")),
        "the command's summary does not match the copy ({in_copy} jobs): {stdout}"
    );

    // A second backup to the same path is refused, leaving the first untouched.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
        .arg("backup")
        .arg("--data-dir")
        .arg(&live_dir)
        .arg(&copy)
        .env_remove("HOURGLASS_CONFIG")
        .env_remove("HOURGLASS_STORE")
        .output()
        .expect("run hourglass backup");
    assert!(
        !again.status.success(),
        "a backup overwrote an existing file"
    );

    // Restore: the copy as a fresh data directory's database, opened by a new node.
    let restored_dir = nodes.data_dir("restored");
    std::fs::create_dir_all(&restored_dir).expect("restored data dir");
    std::fs::copy(&copy, restored_dir.join("hourglass.db")).expect("put the backup in place");
    let restored = nodes.start(&NodeOptions::embedded("restored")).await;
    let listed = list_all(&restored).await;
    let ids: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(ids.len(), listed.len(), "a job was listed twice");
    let missing: Vec<&String> = before.difference(&ids).collect();
    assert!(
        missing.is_empty(),
        "{} jobs acknowledged before the backup are not in it, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let unknown: Vec<&String> = ids.difference(&all).collect();
    assert!(
        unknown.is_empty(),
        "the backup holds jobs that were never acknowledged: {unknown:?}"
    );
    assert_eq!(
        ids.len(),
        in_copy,
        "the restored node lists every job in the copy"
    );
    println!(
        "restored node: {} jobs ({} acknowledged before the backup, {} later ones)",
        ids.len(),
        before.len(),
        ids.len() - before.len()
    );

    // The restored node works: one of the copied jobs reads back whole, and it takes new jobs.
    let first = before.iter().next().expect("a job");
    let (status, job) = restored
        .api
        .call("GET", &format!("/v1/jobs/{first}"), None)
        .await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["type"], "backup.test");
    assert_eq!(job["state"], "active");
    assert_eq!(
        job["payload"]["pad"],
        "p".repeat(300),
        "its payload came along"
    );
    Api::create(
        &restored.api,
        json!({"schedule": {"after": "1h"}, "target": {"queue": "backup"}}),
    )
    .await;
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Every job's id on `node`, paging through the list endpoint.
async fn list_all(node: &NodeProc) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/jobs?limit=1000&cursor={c}"),
            None => "/v1/jobs?limit=1000".to_string(),
        };
        let (status, page) = node.api.call("GET", &path, None).await;
        assert_eq!(status, 200, "list: {page}");
        ids.extend(
            page["jobs"]
                .as_array()
                .expect("jobs")
                .iter()
                .map(|j| j["id"].as_str().expect("id").to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return ids,
        }
    }
}
