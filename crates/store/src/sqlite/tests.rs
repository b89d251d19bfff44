//! Unit tests of the embedded store: what the conformance suite cannot bring about from
//! outside (a failed group commit, databases written by older versions).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hourglass_core::{Completion, from_ms};
use jiff::Timestamp;
use rusqlite::params;

use super::SqliteStore;
use super::codec::encode_spec;
use super::schema::{MIGRATIONS, SCHEMA, open_connection};
use crate::conformance::fixtures::lease;
use crate::{ClaimScope, Created, Lease, NewJob, Store};

fn queue_job(due: Timestamp) -> NewJob {
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: "a".into(),
        key: None,
        spec: hourglass_core::JobSpec {
            job_type: None,
            schedule: hourglass_core::Schedule::at(due),
            target: hourglass_core::Target::Queue(hourglass_core::QueueTarget { name: "q".into() }),
            retry: Default::default(),
            misfire: Default::default(),
            overlap: Default::default(),
            backfill: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: None,
        fingerprint: 1,
        first_due: due,
        now: due,
    }
}

/// A group commit that fails (a full disk) after an ack and a claim of the same message ran
/// in it: the claim found the message acked, in the group's own uncommitted view, and took
/// its lapse entry out of the schedule. The rollback restores the lease, so the entry must
/// come back too, or the message would never be available again until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_group_commit_loses_no_lease_from_the_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let t0 = from_ms(1_000_000);
    let at = |ms: i64| from_ms(1_000_000 + ms);
    let lease = |now| Lease {
        owner: "w".into(),
        ttl: Duration::from_secs(1),
        now,
    };
    let scope = ClaimScope::Queue {
        namespace: "a",
        queue: "q",
        types: None,
        max_bytes: None,
    };
    store.create_jobs(vec![queue_job(t0)], None).await.unwrap();
    let first = store.claim_due(scope, t0, 10, &lease(t0)).await.unwrap();
    assert_eq!(first.len(), 1);
    // The first lease lapses; the message is leased again, its entry due for a look now.
    let second = store
        .claim_due(scope, at(2_000), 10, &lease(at(2_000)))
        .await
        .unwrap();
    assert_eq!((second.len(), second[0].attempt), (1, 2));

    // Hold the writer, queue the ack and then a claim behind it, so that both run in the
    // next group, and make that group's commit fail.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let blocker = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .write(move |_| {
                    started_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    Ok(())
                })
                .await
        }
    });
    tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
        .await
        .unwrap();
    store.commit_faults.store(1, Ordering::SeqCst);
    let queued = |n: usize| {
        let store = store.clone();
        async move {
            while store.writer.max_capacity() - store.writer.capacity() < n {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    };
    let ack = tokio::spawn({
        let (store, occ) = (store.clone(), second[0].clone());
        async move {
            let delivered = Completion {
                job_id: occ.job_id,
                token: occ.token,
                due: occ.due,
                attempt: None,
                action: hourglass_core::Action::Delivered {
                    next: None,
                    skipped: 0,
                },
                callback: None,
                origin: None,
            };
            store.complete(vec![delivered], at(2_500)).await
        }
    });
    queued(1).await;
    let claim = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .claim_due(scope, at(2_600), 10, &lease(at(2_600)))
                .await
        }
    });
    queued(2).await;
    go_tx.send(()).unwrap();
    blocker
        .await
        .unwrap()
        .expect("the blocker's own commit passes");
    assert!(ack.await.unwrap().is_err(), "the ack's commit failed");
    assert!(claim.await.unwrap().is_err(), "the claim's commit failed");

    // The second lease stands, unacked: once it lapses, the message is available again.
    let third = store
        .claim_due(scope, at(3_500), 10, &lease(at(3_500)))
        .await
        .unwrap();
    assert_eq!(
        third
            .iter()
            .map(|o| (o.job_id, o.attempt))
            .collect::<Vec<_>>(),
        [(second[0].job_id, 3)],
        "the message whose ack was rolled back comes back"
    );
}

/// A store of schema version 4 (queues named by two strings in the due index) gives each
/// of its queues a key, and its waiting messages stay leasable and counted.
#[tokio::test]
async fn a_version_4_store_keys_its_queues() {
    let dir = tempfile::tempdir().unwrap();
    let ids = [uuid::Uuid::now_v7(), uuid::Uuid::now_v7()];
    {
        let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        for sql in &MIGRATIONS[..4] {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch("PRAGMA user_version = 4").unwrap();
        let spec = |queue: &str| {
            encode_spec(
                &serde_json::from_value(serde_json::json!({
                    "schedule": {"kind": {"at": "2030-01-01T00:00:00Z"}},
                    "target": {"queue": {"name": queue}},
                }))
                .expect("the storage encoding of a queue job"),
            )
        };
        for (id, queue) in ids.iter().zip(["emails", "sms"]) {
            conn.execute(
                "INSERT INTO jobs (id, namespace, state, spec, fingerprint, due_ms, fire_ms,
                                   created_ms, updated_ms, queue)
                 VALUES (?1, 'a', 0, ?2, 0, 1000, 1000, 0, 0, ?3)",
                params![id.as_bytes().as_slice(), spec(queue), queue],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    let stats = store.queue_stats("a", None, from_ms(2000)).await.unwrap();
    let names: Vec<_> = stats
        .iter()
        .map(|s| (s.name.as_str(), s.available))
        .collect();
    assert_eq!(names, [("emails", 1), ("sms", 1)]);
    let lease = lease("n", from_ms(2000));
    let scope = ClaimScope::Queue {
        namespace: "a",
        queue: "sms",
        types: None,
        max_bytes: None,
    };
    assert_eq!(store.next_due(scope).await.unwrap(), Some(from_ms(1000)));
    let claimed = store
        .claim_due(scope, from_ms(2000), 10, &lease)
        .await
        .unwrap();
    assert_eq!(
        claimed.iter().map(|o| o.job_id).collect::<Vec<_>>(),
        [ids[1]]
    );
}

/// A data directory written by the first release (schema version 0: no queue column, one due
/// index over every active job) opens, migrates, and keeps firing its jobs.
#[tokio::test]
async fn a_version_0_store_migrates_and_keeps_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let (due_id, keyed_id) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let stored = {
        let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute_batch("CREATE INDEX jobs_due ON jobs(fire_ms) WHERE state = 0;")
            .unwrap();
        let spec = r#"{"schedule":{"kind":{"at":"2030-01-01T00:00:00Z"}},"target":{"webhook":{"url":"https://example.com/"}}}"#;
        let stored: hourglass_core::JobSpec =
            serde_json::from_str(spec).expect("the test's v0 spec must be in the storage encoding");
        // As the first release wrote it: JSON text, not packed.
        for (id, key, due) in [(due_id, None, 1000), (keyed_id, Some("k"), 9_000_000)] {
            conn.execute(
                "INSERT INTO jobs (id, namespace, key, state, spec, fingerprint, due_ms,
                                   fire_ms, created_ms, updated_ms)
                 VALUES (?1, 'default', ?2, 0, ?3, 7, ?4, ?4, 0, 0)",
                params![id.as_bytes().as_slice(), key, spec, due],
            )
            .unwrap();
        }
        stored
    };
    let store = SqliteStore::open(dir.path()).unwrap();
    let lease = lease("n", from_ms(2000));
    let claimed = store
        .claim_due(ClaimScope::Fired, from_ms(2000), 10, &lease)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job_id, due_id);
    assert_eq!(*claimed[0].spec, stored);
    // The keyed job kept its key: creating it again with the same request finds it.
    let again = NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: "default".into(),
        key: Some("k".into()),
        spec: stored,
        payload: None,
        fingerprint: 7,
        first_due: from_ms(9_000_000),
        now: from_ms(2000),
    };
    let created = store.create_jobs(vec![again], None).await.unwrap();
    assert!(
        matches!(&created[0], Created::Existing(job) if job.id == keyed_id),
        "{created:?}"
    );
    drop(store);
    let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, MIGRATIONS.len() as i64);
    // Reopening an up-to-date store applies nothing twice.
    drop(conn);
    SqliteStore::open(dir.path()).unwrap();
}

/// The query plan of `sql` with `params`, one line a step.
fn plan(conn: &rusqlite::Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> String {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let rows = stmt
        .query_map(params, |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    rows.join("\n")
}

/// A namespace's listings seek to that namespace in its index, so a tenant with ten jobs is not
/// answered by walking another tenant's million; only a listing of every namespace walks them.
#[test]
fn a_namespace_listing_seeks_its_namespace_and_never_walks_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    for sql in MIGRATIONS {
        conn.execute_batch(sql).unwrap();
    }
    let every_filter = crate::JobQuery {
        namespace: Some("small".into()),
        state: Some(hourglass_core::JobState::Active),
        job_type: Some("t".into()),
        due_before: Some(from_ms(2_000)),
        due_after: Some(from_ms(1_000)),
        after: Some(uuid::Uuid::now_v7()),
        limit: 10,
        queue: Some("q".into()),
        labels: Vec::new(),
        anchor: None,
    };
    let only_namespace = crate::JobQuery {
        namespace: Some("small".into()),
        state: None,
        job_type: None,
        due_before: None,
        due_after: None,
        after: None,
        limit: 10,
        queue: None,
        labels: Vec::new(),
        anchor: None,
    };
    for query in [&every_filter, &only_namespace] {
        let found = super::jobs::with_list_statement(query, |sql, params| plan(&conn, sql, params));
        assert!(
            found.contains("USING INDEX jobs_namespace (namespace=?"),
            "{query:?}: {found}"
        );
        assert!(!found.contains("SCAN"), "{query:?}: {found}");
    }
    let every_namespace = crate::JobQuery {
        namespace: None,
        ..only_namespace
    };
    let found =
        super::jobs::with_list_statement(&every_namespace, |sql, params| plan(&conn, sql, params));
    assert!(!found.contains("jobs_namespace"), "{found}");

    let found = super::history::with_dead_letters_statement(Some("small"), None, 10, |sql, p| {
        plan(&conn, sql, p)
    });
    assert!(
        found.contains("USING INDEX dead_letters_namespace (namespace=? AND id>?)"),
        "{found}"
    );
}

/// A label listing of a namespace is driven by the label index in id order (an equality by
/// `job_labels_pair`, an existence by `job_labels_key`), from the cursor on: no scan of the jobs
/// and no sort, so a page costs a page of index entries however many jobs the store holds.
#[test]
fn a_label_listing_reads_its_label_index_in_id_order() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    for sql in MIGRATIONS {
        conn.execute_batch(sql).unwrap();
    }
    let selectors = |texts: &[&str]| -> Vec<hourglass_core::Selector> {
        texts
            .iter()
            .map(|t| hourglass_core::Selector::parse(t).unwrap())
            .collect()
    };
    let cases = [
        (selectors(&["kind", "tenant=acme"]), "job_labels_pair"),
        (selectors(&["kind"]), "job_labels_key"),
    ];
    for (labels, index) in cases {
        let query = crate::JobQuery {
            namespace: Some("small".into()),
            state: Some(hourglass_core::JobState::Active),
            after: Some(uuid::Uuid::now_v7()),
            limit: 10,
            labels,
            ..Default::default()
        };
        let found =
            super::jobs::with_list_statement(&query, |sql, params| plan(&conn, sql, params));
        assert!(
            found.contains(&format!("USING COVERING INDEX {index}")),
            "{found}"
        );
        assert!(!found.contains("SCAN"), "{found}");
        assert!(!found.contains("TEMP B-TREE"), "{found}");
    }
}

/// Decoding claimed specs through the cache gives what decoding each gives, and a claim of jobs
/// sharing a spec decodes it once: recurring jobs share the decoded spec, one-offs that differ
/// only in their instant share one entry, each with its own instant.
#[test]
fn the_spec_cache_answers_each_spec_as_decoded_and_keeps_one_entry_for_a_shared_one() {
    use super::codec::{SpecCache, decode_spec};
    let cache = SpecCache::default();
    let encoded = |value: serde_json::Value| {
        encode_spec(&serde_json::from_value(value).expect("a valid spec"))
    };
    let cron = encoded(serde_json::json!({
        "schedule": {"kind": {"cron": {"expr": "* * * * *", "tz": "Europe/Berlin"}}},
        "target": {"webhook": {"url": "https://example.com/h"}}}));
    let first = cache.decode(&cron).unwrap();
    assert!(Arc::ptr_eq(&first, &cache.decode(&cron).unwrap()));
    assert_eq!(*first, decode_spec(&cron).unwrap());
    let mut entries = 1;
    for (i, job_type) in [None, Some("reminder")].into_iter().enumerate() {
        for ms in [0i64, 1, 999, 1_797_331_872_345, -86_400_000] {
            for nanos in [0i64, 1, 999_999] {
                let at = jiff::Timestamp::from_nanosecond(
                    i128::from(ms) * 1_000_000 + i128::from(nanos),
                )
                .unwrap();
                let stored = encoded(serde_json::json!({
                    "job_type": job_type,
                    "schedule": {"kind": {"at": at}, "max_runs": 1},
                    "target": {"webhook": {"url": "https://example.com/h"}}}));
                let spec = cache.decode(&stored).unwrap();
                assert_eq!(*spec, decode_spec(&stored).unwrap(), "{at}");
            }
        }
        // Whole milliseconds and nanoseconds pack with two widths: one entry each.
        entries += 2;
        assert_eq!(cache.len(), entries, "after the one-offs of type {i}");
    }
}

/// Specs carrying large header sets fill the cache's byte bound long before its count: it is
/// emptied, never grown past the bound.
#[test]
fn the_spec_cache_keeps_to_its_byte_bound() {
    use super::codec::SpecCache;
    let cache = SpecCache::default();
    let value = "v".repeat(14_000);
    for i in 0..300 {
        let spec: hourglass_core::JobSpec = serde_json::from_value(serde_json::json!({
            "schedule": {"kind": {"cron": {"expr": "* * * * *", "tz": "UTC"}}},
            "target": {"webhook": {"url": format!("https://example.com/{i}"),
                                   "headers": {"x-big": value}}}}))
        .unwrap();
        let decoded = cache.decode(&encode_spec(&spec)).unwrap();
        assert_eq!(*decoded, spec);
    }
    // 16 MiB over about 70 KB an entry: at most about 234 at once.
    assert!(cache.len() < 240, "{}", cache.len());
}

fn fired_job(due: Timestamp) -> NewJob {
    let mut job = queue_job(due);
    job.spec.target = hourglass_core::Target::Webhook(hourglass_core::WebhookTarget {
        url: "https://example.com/".parse().unwrap(),
        headers: Default::default(),
        rate_limit: None,
        batch: None,
    });
    job
}

/// A fired claim leaves the due index while its lease runs (migration 11), so its lapse is told
/// by the lease schedule alone: the next due time, the backlog gauge and the next claim must all
/// find it there, and a completion must take its entry away.
#[tokio::test]
async fn a_fired_claim_out_of_the_due_index_is_found_again_when_it_lapses() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    let t0 = from_ms(1_000_000);
    let at = |ms: i64| from_ms(1_000_000 + ms);
    let lease = |owner: &str, now| Lease {
        owner: owner.into(),
        ttl: Duration::from_secs(1),
        now,
    };
    store
        .create_jobs(vec![fired_job(t0), fired_job(at(60_000))], None)
        .await
        .unwrap();
    let first = store
        .claim_due(ClaimScope::Fired, t0, 10, &lease("n1", t0))
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    // Held: the next due time is the lease's end, not the other job's fire time, and the held
    // occurrence is no backlog.
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(at(1_000))
    );
    assert_eq!(store.gauges(at(500)).await.unwrap().due_backlog, 0);
    // Lapsed: backlog again, since its lease's end.
    let gauges = store.gauges(at(1_500)).await.unwrap();
    assert_eq!(
        (gauges.due_backlog, gauges.oldest_backlog),
        (1, Some(at(1_000)))
    );
    let second = store
        .claim_due(ClaimScope::Fired, at(1_500), 10, &lease("n2", at(1_500)))
        .await
        .unwrap();
    assert_eq!(second.len(), 1, "the lapsed claim is taken again");
    assert_eq!((second[0].job_id, second[0].fire_at), (first[0].job_id, t0));
    assert_eq!(
        second[0].attempt, first[0].attempt,
        "a lapse spends no attempt"
    );
    assert!(second[0].token > first[0].token);
    // Completed under the second lease: nothing of it is left to look at.
    let done = Completion {
        job_id: second[0].job_id,
        token: second[0].token,
        due: second[0].due,
        attempt: None,
        action: hourglass_core::Action::Delivered {
            next: None,
            skipped: 0,
        },
        callback: None,
        origin: None,
    };
    store.complete(vec![done], at(1_600)).await.unwrap();
    assert_eq!(store.leases.next_check(super::leases::FIRED), None);
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(at(60_000))
    );
}

/// The fired claim and next-due queries seek the due index (which holds unleased rows only)
/// instead of scanning the jobs.
#[test]
fn fired_claims_and_next_due_use_the_due_index() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open_connection(&dir.path().join("hourglass.db")).unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    for sql in MIGRATIONS {
        conn.execute_batch(sql).unwrap();
    }
    for sql in [
        "SELECT id FROM jobs
         WHERE state = 0 AND queue IS NULL AND lease_owner IS NULL AND fire_ms <= ?1
         ORDER BY fire_ms LIMIT 10",
        "SELECT MIN(fire_ms) FROM jobs
         WHERE state = 0 AND queue IS NULL AND lease_owner IS NULL AND ?1 IS NOT NULL",
    ] {
        let plan = plan(&conn, sql, &[&5_i64]);
        assert!(plan.contains("jobs_due"), "{sql}\n{plan}");
        assert!(
            !plan.contains("SCAN jobs\n") && plan != "SCAN jobs",
            "{plan}"
        );
    }
}

/// A payload over `INLINE_PAYLOAD_MAX` bytes lives in `job_payloads`, out of the job row that
/// every claim and completion rewrites; an edit moves it in or out, and a job purged by
/// retention takes its payload row with it. Rows of a store from before (version 11, payloads
/// inline whatever their size) read as they are.
#[tokio::test]
async fn large_payloads_live_out_of_the_job_row() {
    use super::codec::INLINE_PAYLOAD_MAX;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hourglass.db");
    let big = |c: char| {
        format!(
            r#"{{"pad":"{}"}}"#,
            c.to_string().repeat(INLINE_PAYLOAD_MAX)
        )
    };
    // Written inline by a version-11 store.
    let old = fired_job(from_ms(1000));
    {
        let conn = open_connection(&path).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        super::schema::migrate_to(&conn, 11).unwrap();
        conn.execute(
            "INSERT INTO jobs (id, namespace, state, spec, payload, fingerprint, due_ms, fire_ms,
                               created_ms, updated_ms)
             VALUES (?1, 'a', 0, ?2, ?3, 1, 1000, 1000, 0, 0)",
            params![
                old.id.as_bytes().as_slice(),
                encode_spec(&old.spec),
                big('o')
            ],
        )
        .unwrap();
    }
    let store = SqliteStore::open(dir.path()).unwrap();
    let mut large = fired_job(from_ms(1000));
    large.payload = Some(big('l'));
    let mut small = fired_job(from_ms(1000));
    small.payload = Some("[1]".into());
    let (large_id, small_id) = (large.id, small.id);
    store.create_jobs(vec![large, small], None).await.unwrap();

    let conn = open_connection(&path).unwrap();
    let stored = |id: uuid::Uuid| -> (Option<String>, bool, Option<String>) {
        conn.query_row(
            "SELECT payload, payload_out,
                    (SELECT p.payload FROM job_payloads p WHERE p.seq = jobs.seq)
             FROM jobs WHERE id = ?1",
            [id.as_bytes().as_slice()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
    };
    assert_eq!(stored(large_id), (None, true, Some(big('l'))));
    assert_eq!(stored(small_id), (Some("[1]".into()), false, None));
    assert_eq!(stored(old.id), (Some(big('o')), false, None));

    let lease = lease("n", from_ms(1000));
    let claimed = store
        .claim_due(ClaimScope::Fired, from_ms(1000), 10, &lease)
        .await
        .unwrap();
    let payload_of = |id| {
        claimed
            .iter()
            .find(|o| o.job_id == id)
            .and_then(|o| o.payload.as_deref().map(str::to_owned))
    };
    assert_eq!(payload_of(large_id), Some(big('l')));
    assert_eq!(payload_of(old.id), Some(big('o')));

    // Edits move the payload in and out of the row.
    let edit = |payload: String| crate::JobUpdate {
        read_token: None,
        spec: fired_job(from_ms(1000)).spec,
        payload: Some(payload),
        next_due: Some(from_ms(1000)),
        now: from_ms(1000),
    };
    store
        .update_job(None, large_id, edit("[2]".into()), None)
        .await
        .unwrap();
    assert_eq!(stored(large_id), (Some("[2]".into()), false, None));
    store
        .update_job(None, small_id, edit(big('s')), None)
        .await
        .unwrap();
    assert_eq!(stored(small_id), (None, true, Some(big('s'))));

    // Done and purged: no payload row is left behind. The edits made two jobs due again; the
    // old one is still held by the first claim.
    let old_claim = claimed.into_iter().find(|o| o.job_id == old.id).unwrap();
    let mut claimed = store
        .claim_due(ClaimScope::Fired, from_ms(1000), 10, &lease)
        .await
        .unwrap();
    claimed.push(old_claim);
    let done: Vec<_> = claimed
        .iter()
        .map(crate::conformance::fixtures::delivered_without_run)
        .collect();
    assert_eq!(done.len(), 3);
    store.complete(done, from_ms(2000)).await.unwrap();
    let purged = store.purge(from_ms(10_000), 100).await.unwrap();
    assert_eq!(purged.jobs, 3);
    let left: i64 = conn
        .query_row("SELECT COUNT(*) FROM job_payloads", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0, "payload rows follow their jobs");
}

/// A crash of the writer around its group commit (the process dying there): before the commit,
/// the create is neither acknowledged nor stored; after it, it is stored but still not
/// acknowledged (its client retries with its key). Either way every create acknowledged before
/// is there when the directory is opened again, and each create's audit entry is there exactly
/// when its job is (written in the same group commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_around_the_group_commit_loses_no_acknowledged_job() {
    use crate::conformance::fixtures::{audited_jobs, create_entry};
    use crate::failpoint::{SQLITE_AFTER_COMMIT, SQLITE_BEFORE_COMMIT};
    let t0 = from_ms(1_000_000);
    for (point, stored) in [(SQLITE_BEFORE_COMMIT, false), (SQLITE_AFTER_COMMIT, true)] {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let acknowledged = fired_job(t0);
        let entry = || Some(create_entry(&acknowledged.namespace));
        store
            .create_jobs(vec![acknowledged.clone()], entry())
            .await
            .unwrap();
        store.failpoints.arm(point);
        let crashed = fired_job(t0);
        let answer = store.create_jobs(vec![crashed.clone()], entry()).await;
        assert!(
            answer.is_err(),
            "{point}: a dead writer acknowledged a create"
        );
        drop(store);

        let store = SqliteStore::open(dir.path()).unwrap();
        let found = |id| {
            let store = &store;
            async move { store.get_job(None, id).await.unwrap().is_some() }
        };
        assert!(
            found(acknowledged.id).await,
            "{point}: an acknowledged job was lost"
        );
        assert_eq!(found(crashed.id).await, stored, "{point}");
        let audited = audited_jobs(&store, &acknowledged.namespace).await;
        let expected = match stored {
            true => vec![crashed.id, acknowledged.id],
            false => vec![acknowledged.id],
        };
        assert_eq!(audited, expected, "{point}: the entries follow their jobs");
    }
}
