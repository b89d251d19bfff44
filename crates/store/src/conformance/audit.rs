//! The audit log: entries of every kind come back as appended, newest first, page by page after
//! a cursor; a namespace sees only its own; a job filter finds the entries about one job; and
//! retention deletes the oldest entries before a cutoff, a batch at a time.

use std::collections::HashSet;
use std::sync::Arc;

use hourglass_core::JobId;
use jiff::Timestamp;

use super::{T0, ms, t};
use crate::{AuditAction, AuditCursor, AuditQuery, AuditRecord, Store};

fn record(namespace: &str, at: Timestamp, action: AuditAction, jobs: Vec<JobId>) -> AuditRecord {
    AuditRecord {
        at,
        namespace: namespace.into(),
        key_id: "k-1a2b3c".into(),
        action,
        count: jobs.len() as u32,
        jobs,
        dead_letter: None,
        fields: Vec::new(),
        name: None,
    }
}

fn query(namespace: &str, before: Option<AuditCursor>, limit: usize) -> AuditQuery {
    AuditQuery {
        namespace: namespace.into(),
        before,
        job: None,
        limit,
    }
}

/// One entry of every action, a second apart, the way the API writes them.
fn every_kind(namespace: &str) -> Vec<AuditRecord> {
    let base = t(T0);
    let job = uuid::Uuid::now_v7();
    let batch: Vec<JobId> = (0..3).map(|_| uuid::Uuid::now_v7()).collect();
    AuditAction::ALL
        .into_iter()
        .enumerate()
        .map(|(i, action)| {
            let at = base + ms(1000 * i as i64);
            let mut entry = record(namespace, at, action, vec![job]);
            match action {
                AuditAction::Create => {
                    entry.jobs = batch.clone();
                    entry.count = 1000;
                }
                AuditAction::Change => {
                    entry.fields = vec!["schedule".into(), "payload".into()];
                }
                AuditAction::Replay => entry.dead_letter = Some(42),
                AuditAction::Purge => {
                    entry.jobs = Vec::new();
                    entry.count = 0;
                    entry.dead_letter = Some(43);
                }
                AuditAction::RotateSecret => {
                    entry.jobs = Vec::new();
                    entry.count = 0;
                }
                AuditAction::PutCalendar | AuditAction::DeleteCalendar => {
                    entry.name = Some("de-holidays".into());
                }
                AuditAction::PutAnchor | AuditAction::DeleteAnchor => {
                    entry.jobs = batch.clone();
                    entry.count = 3;
                    entry.name = Some("flight-LH400".into());
                }
                _ => {}
            }
            entry
        })
        .collect()
}

pub async fn audit_entries_of_every_kind_page_newest_first(store: Arc<dyn Store>) {
    let appended = every_kind("a");
    for entry in &appended {
        store.append_audit(entry.clone()).await.unwrap();
    }
    let all = store.audit_entries(query("a", None, 100)).await.unwrap();
    let records: Vec<AuditRecord> = all.iter().map(|e| e.record.clone()).collect();
    let mut newest_first = appended.clone();
    newest_first.reverse();
    assert_eq!(records, newest_first, "every field comes back as appended");
    assert!(all.windows(2).all(|w| w[0].cursor > w[1].cursor));

    // Pages of two, each after the previous page's last cursor, add up to the whole log.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = store.audit_entries(query("a", before, 2)).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        before = Some(last.cursor);
        paged.extend(page.into_iter().map(|e| e.record));
    }
    assert_eq!(paged, newest_first);
    assert!(
        store
            .audit_entries(query("a", None, 0))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn audit_entries_in_one_millisecond_page_without_loss(store: Arc<dyn Store>) {
    let at = t(T0);
    for _ in 0..5 {
        let entry = record("a", at, AuditAction::Pause, vec![uuid::Uuid::now_v7()]);
        store.append_audit(entry).await.unwrap();
    }
    let mut seen = HashSet::new();
    let mut before = None;
    loop {
        let page = store.audit_entries(query("a", before, 2)).await.unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.cursor);
        for entry in page {
            assert!(seen.insert(entry.record.jobs[0]), "an entry came twice");
        }
    }
    assert_eq!(seen.len(), 5);
}

pub async fn audit_logs_are_per_namespace_and_filter_by_job(store: Arc<dyn Store>) {
    let base = t(T0);
    let (x, y) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let batch: Vec<JobId> = vec![uuid::Uuid::now_v7(), y, uuid::Uuid::now_v7()];
    let entries = [
        record("a", base, AuditAction::Create, vec![x]),
        record("a", base + ms(1), AuditAction::Create, batch),
        record("a", base + ms(2), AuditAction::Pause, vec![x]),
        record("b", base + ms(3), AuditAction::Cancel, vec![x]),
        record("a", base + ms(4), AuditAction::Trigger, vec![y]),
    ];
    for entry in &entries {
        store.append_audit(entry.clone()).await.unwrap();
    }
    let of = |ns: &str, job: Option<JobId>, limit: usize| {
        let store = store.clone();
        let q = AuditQuery {
            job,
            ..query(ns, None, limit)
        };
        async move {
            store
                .audit_entries(q)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.record)
                .collect::<Vec<_>>()
        }
    };
    let a = of("a", None, 10).await;
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|r| r.namespace == "a"));
    assert_eq!(of("b", None, 10).await, vec![entries[3].clone()]);
    assert!(of("c", None, 10).await.is_empty());
    // A job's entries, its namespace's only, including a batch that listed it.
    assert_eq!(
        of("a", Some(x), 10).await,
        vec![entries[2].clone(), entries[0].clone()]
    );
    assert_eq!(
        of("a", Some(y), 10).await,
        vec![entries[4].clone(), entries[1].clone()]
    );
    assert_eq!(of("a", Some(y), 1).await, vec![entries[4].clone()]);
    assert_eq!(of("b", Some(y), 10).await, vec![]);
    // A filtered page resumes after its cursor.
    let first = store
        .audit_entries(AuditQuery {
            job: Some(x),
            ..query("a", None, 1)
        })
        .await
        .unwrap();
    let rest = store
        .audit_entries(AuditQuery {
            job: Some(x),
            ..query("a", Some(first[0].cursor), 10)
        })
        .await
        .unwrap();
    assert_eq!(
        rest.into_iter().map(|e| e.record).collect::<Vec<_>>(),
        vec![entries[0].clone()]
    );
}

pub async fn old_audit_entries_are_purged_oldest_first(store: Arc<dyn Store>) {
    let base = t(T0);
    for i in 0..5 {
        let ns = if i % 2 == 0 { "a" } else { "b" };
        let entry = record(ns, base + ms(60_000 * i), AuditAction::Trigger, Vec::new());
        store.append_audit(entry).await.unwrap();
    }
    let left = |store: Arc<dyn Store>| async move {
        let mut at = Vec::new();
        for ns in ["a", "b"] {
            for entry in store.audit_entries(query(ns, None, 10)).await.unwrap() {
                at.push(entry.record.at);
            }
        }
        at.sort();
        at
    };
    assert_eq!(store.purge_audit(base, 10).await.unwrap(), 0);
    // Three are older than 2.5 minutes, but the sweep takes two at a time.
    let cutoff = base + ms(150_000);
    assert_eq!(store.purge_audit(cutoff, 2).await.unwrap(), 2);
    assert_eq!(
        left(store.clone()).await,
        (2..5).map(|i| base + ms(60_000 * i)).collect::<Vec<_>>()
    );
    assert_eq!(store.purge_audit(cutoff, 2).await.unwrap(), 1);
    assert_eq!(store.purge_audit(cutoff, 2).await.unwrap(), 0);
    assert_eq!(left(store.clone()).await.len(), 2);
}
