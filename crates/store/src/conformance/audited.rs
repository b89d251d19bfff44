//! Audit entries written with their changes (issue 40): every change the API makes hands the
//! store its entry, and the store writes it in the change's transaction, only when the change is
//! applied. A refusal (a stale read token, an invalid state, a key conflict, a missing job), a
//! no-op (a cancelled job cancelled again, a keyed trigger repeated) and an idempotent repeat (a
//! keyed create finding its job) leave no entry; an applied change leaves exactly one, with the
//! fields it was given and, where the store decides them, the jobs it created, moved or
//! cancelled.

use std::sync::Arc;

use hourglass_core::{Action, Calendar, JobId};
use jiff::Timestamp;

use super::anchors::{anchor, on_anchor};
use super::{T0, claim, create, done, ms, one_off, t};
use crate::{
    AUDIT_JOB_IDS, AnchorDelete, AnchorDeleted, AuditAction, AuditQuery, AuditRecord,
    CalendarRecord, ClaimScope, Created, JobUpdate, Store, StoreError, Transition,
};

/// An entry as the engine hands it over, naming `jobs` (none where the store names them).
fn entry(action: AuditAction, jobs: &[JobId], at: Timestamp) -> AuditRecord {
    AuditRecord {
        at,
        namespace: "a".into(),
        key_id: "k-audit".into(),
        action,
        jobs: jobs.to_vec(),
        count: jobs.len() as u32,
        dead_letter: None,
        fields: Vec::new(),
        name: None,
    }
}

/// Namespace `a`'s log, oldest first.
async fn log(store: &dyn Store) -> Vec<AuditRecord> {
    let query = AuditQuery {
        namespace: "a".into(),
        before: None,
        job: None,
        limit: 1000,
    };
    let mut records: Vec<AuditRecord> = store
        .audit_entries(query)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.record)
        .collect();
    records.reverse();
    records
}

/// Asserts that the log grew by exactly `expected` since it held `before` entries, and answers
/// its new length.
async fn grew_by(store: &dyn Store, before: usize, expected: &[AuditRecord], what: &str) -> usize {
    let now = log(store).await;
    assert_eq!(
        &now[before.min(now.len())..],
        expected,
        "{what}: the entries written"
    );
    now.len()
}

pub async fn an_entry_commits_with_its_change_and_never_with_a_refusal(store: Arc<dyn Store>) {
    let base = t(T0);
    let s = &*store;

    // A batch create names the jobs it created, in order (the first `AUDIT_JOB_IDS`).
    let mut batch: Vec<_> = (0..AUDIT_JOB_IDS + 2)
        .map(|i| one_off("a", base + ms(60_000 + i as i64)))
        .collect();
    batch[0].key = Some("k".into());
    let ids: Vec<JobId> = batch.iter().map(|j| j.id).collect();
    let keyed = batch[0].clone();
    let created = s
        .create_jobs(batch, Some(entry(AuditAction::Create, &[], base)))
        .await
        .unwrap();
    assert!(created.iter().all(|c| matches!(c, Created::New(_))));
    let mut n = grew_by(
        s,
        0,
        &[AuditRecord {
            jobs: ids[..AUDIT_JOB_IDS].to_vec(),
            count: ids.len() as u32,
            ..entry(AuditAction::Create, &[], base)
        }],
        "a batch create",
    )
    .await;
    let job = ids[0];

    // The same keyed create again finds its job: nothing created, nothing recorded.
    let again = s
        .create_jobs(
            vec![keyed.clone()],
            Some(entry(AuditAction::Create, &[], base)),
        )
        .await
        .unwrap();
    assert!(matches!(&again[0], Created::Existing(r) if r.id == job));
    n = grew_by(s, n, &[], "an idempotent repeat").await;

    // A key conflict refuses the whole batch, entry and all.
    let fresh = one_off("a", base);
    let fresh_id = fresh.id;
    let conflicting = crate::NewJob {
        id: uuid::Uuid::now_v7(),
        fingerprint: keyed.fingerprint + 1,
        ..keyed
    };
    let refused = s
        .create_jobs(
            vec![fresh, conflicting],
            Some(entry(AuditAction::Create, &[], base)),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::KeyConflict { .. })),
        "{refused:?}"
    );
    assert!(s.get_job(None, fresh_id).await.unwrap().is_none());
    n = grew_by(s, n, &[], "a key conflict").await;

    // An edit under a stale reading is refused; under the current one it lands with its entry.
    let read = s.get_job(Some("a"), job).await.unwrap().unwrap();
    let stale = s
        .transition(Some("a"), job, Transition::Pause { now: base }, None)
        .await
        .unwrap();
    assert_ne!(stale.token, read.token);
    let edit = |read: &crate::JobRecord| JobUpdate {
        spec: read.spec.clone(),
        payload: Some(r#"{"n":2}"#.into()),
        next_due: read.next_due,
        now: base + ms(1),
        read_token: Some(read.token),
    };
    let mut change = entry(AuditAction::Change, &[job], base + ms(1));
    change.fields = vec!["payload".into()];
    let refused = s
        .update_job(Some("a"), job, edit(&read), Some(change.clone()))
        .await;
    assert!(matches!(refused, Err(StoreError::Changed)), "{refused:?}");
    n = grew_by(s, n, &[], "a refused edit").await;
    let edited = s
        .update_job(Some("a"), job, edit(&stale), Some(change.clone()))
        .await
        .unwrap();
    assert_eq!(edited.payload.as_deref(), Some(r#"{"n":2}"#));
    n = grew_by(s, n, &[change], "an edit").await;

    // Transitions: applied with one entry; a no-op or a refusal with none.
    let cancel = entry(AuditAction::Cancel, &[job], base + ms(2));
    s.transition(
        Some("a"),
        job,
        Transition::Cancel { now: base + ms(2) },
        Some(cancel.clone()),
    )
    .await
    .unwrap();
    n = grew_by(s, n, std::slice::from_ref(&cancel), "a cancel").await;
    s.transition(
        Some("a"),
        job,
        Transition::Cancel { now: base + ms(3) },
        Some(cancel.clone()),
    )
    .await
    .unwrap();
    n = grew_by(s, n, &[], "a cancel of a cancelled job").await;
    let refused = s
        .transition(
            Some("a"),
            job,
            Transition::Pause { now: base + ms(3) },
            Some(entry(AuditAction::Pause, &[job], base + ms(3))),
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::InvalidState { .. })),
        "{refused:?}"
    );
    let missing = uuid::Uuid::now_v7();
    let refused = s
        .transition(
            Some("a"),
            missing,
            Transition::Pause { now: base + ms(3) },
            Some(entry(AuditAction::Pause, &[missing], base + ms(3))),
        )
        .await;
    assert!(matches!(refused, Err(StoreError::NotFound)), "{refused:?}");
    n = grew_by(s, n, &[], "refused transitions").await;
    let other = ids[1];
    let trigger = entry(AuditAction::Trigger, &[other], base + ms(4));
    for _ in 0..2 {
        let keyed = Transition::Trigger {
            now: base + ms(4),
            key: Some("t-1".into()),
        };
        s.transition(Some("a"), other, keyed, Some(trigger.clone()))
            .await
            .unwrap();
    }
    n = grew_by(s, n, &[trigger], "a keyed trigger and its retry").await;

    // A dead letter's delete, once.
    let letter = dead_letter(s, base).await;
    let mut purge = entry(AuditAction::Purge, &[], base + ms(5));
    purge.dead_letter = Some(letter);
    for _ in 0..2 {
        s.delete_dead_letter(Some("a"), letter, Some(purge.clone()))
            .await
            .unwrap();
    }
    n = grew_by(s, n, &[purge], "a dead letter deleted, then again").await;

    // A rotation.
    let rotate = entry(AuditAction::RotateSecret, &[], base + ms(6));
    s.rotate_signing_secret("a", "s3cret", None, Some(rotate.clone()))
        .await
        .unwrap();
    n = grew_by(s, n, &[rotate], "a rotation").await;

    // A calendar put, then deleted (and a delete of none).
    let calendar = CalendarRecord {
        namespace: "a".into(),
        name: "holidays".into(),
        calendar: Calendar::new("UTC", vec![], vec![], &[], base).expect("calendar"),
        updated_at: base,
    };
    let named = |action, at| AuditRecord {
        name: Some("holidays".into()),
        ..entry(action, &[], at)
    };
    let put = named(AuditAction::PutCalendar, base + ms(7));
    s.put_calendar(&calendar, Some(put.clone())).await.unwrap();
    let delete = named(AuditAction::DeleteCalendar, base + ms(8));
    assert!(
        s.delete_calendar("a", "holidays", Some(delete.clone()))
            .await
            .unwrap()
    );
    assert!(
        !s.delete_calendar("a", "holidays", Some(delete.clone()))
            .await
            .unwrap()
    );
    grew_by(s, n, &[put, delete], "a calendar put and deleted").await;

    // An anchor moved names the jobs it moved; its delete counts those it cancelled, and a
    // refused delete writes nothing.
    let at = base + ms(3_600_000);
    s.put_anchor(&anchor("a", "x", at, base), None)
        .await
        .unwrap();
    let on = on_anchor("a", "x", at, -60_000);
    let on_id = on.id;
    create(s, vec![on]).await;
    n = log(s).await.len();
    let named = |action, at| AuditRecord {
        name: Some("x".into()),
        ..entry(action, &[], at)
    };
    let moved = s
        .put_anchor(
            &anchor("a", "x", at + ms(60_000), base + ms(9)),
            Some(named(AuditAction::PutAnchor, base + ms(9))),
        )
        .await
        .unwrap();
    assert_eq!(moved.iter().map(|j| j.id).collect::<Vec<_>>(), [on_id]);
    let put = AuditRecord {
        jobs: vec![on_id],
        count: 1,
        ..named(AuditAction::PutAnchor, base + ms(9))
    };
    n = grew_by(s, n, &[put], "an anchor moved").await;
    let refused = s
        .delete_anchor(
            "a",
            "x",
            AnchorDelete::IfUnused,
            Some(named(AuditAction::DeleteAnchor, base + ms(10))),
        )
        .await
        .unwrap();
    assert_eq!(refused, AnchorDeleted::InUse(on_id));
    n = grew_by(s, n, &[], "an anchor delete refused").await;
    let deleted = s
        .delete_anchor(
            "a",
            "x",
            AnchorDelete::Cancel { now: base + ms(10) },
            Some(named(AuditAction::DeleteAnchor, base + ms(10))),
        )
        .await
        .unwrap();
    assert_eq!(deleted, AnchorDeleted::Deleted { cancelled: 1 });
    let delete = AuditRecord {
        count: 1,
        ..named(AuditAction::DeleteAnchor, base + ms(10))
    };
    grew_by(s, n, &[delete], "an anchor deleted").await;
}

/// A dead letter of namespace `a`, made by a claim and a completion that gives up.
async fn dead_letter(store: &dyn Store, at: Timestamp) -> i64 {
    let job = one_off("a", at - ms(1));
    let id = job.id;
    create(store, vec![job]).await;
    let claimed = claim(store, ClaimScope::Fired, at, 100, "n1").await;
    let occ = claimed
        .iter()
        .find(|occ| occ.job_id == id)
        .expect("the job is claimed");
    let gave_up = Action::DeadLetter {
        next: None,
        skipped: 0,
        reason: "http 500".into(),
    };
    store.complete(vec![done(occ, gave_up)], at).await.unwrap();
    let letters = store.dead_letters(Some("a"), None, 10).await.unwrap();
    letters
        .iter()
        .find(|l| l.job_id == id)
        .expect("its dead letter")
        .id
}

/// A namespace's anchors and its audit entries never read as each other: the anchors list only
/// anchors (whatever their names), the log only entries, and the log's retention sweep leaves
/// the anchors alone.
pub async fn anchors_and_audit_entries_stay_apart(store: Arc<dyn Store>) {
    let base = t(T0);
    let s = &*store;
    let names = ["0-first", "x"];
    for (i, name) in names.into_iter().enumerate() {
        let put = AuditRecord {
            name: Some(name.into()),
            ..entry(AuditAction::PutAnchor, &[], base + ms(i as i64))
        };
        let record = anchor("a", name, base + ms(60_000), base + ms(i as i64));
        s.put_anchor(&record, Some(put)).await.unwrap();
    }
    let listed: Vec<String> = s
        .list_anchors("a")
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(listed, names);
    let logged: Vec<Option<String>> = log(s).await.into_iter().map(|e| e.name).collect();
    assert_eq!(logged, names.map(|n| Some(n.to_owned())));
    // The sweep takes entries older than the cutoff (none kept by a store whose entries expire
    // by themselves), and never an anchor.
    s.purge_audit(base + ms(3_600_000), 100).await.unwrap();
    for name in names {
        assert!(s.get_anchor("a", name).await.unwrap().is_some(), "{name}");
    }
    assert_eq!(s.list_anchors("a").await.unwrap().len(), 2);
}
