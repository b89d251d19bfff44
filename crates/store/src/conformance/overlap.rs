//! Overlap policies and backfills (issue 37): a store keeps a job's overlap policy and backfill
//! record with its spec; a completion whose next occurrence carries an overlap skip counts the
//! dropped occurrences and records them as one skipped run beside the run that completed; and a
//! backfill, an edit moving the job's due time into the past, is claimable at once.

use std::sync::Arc;

use hourglass_core::backfill::{Backfill, Range};
use hourglass_core::overlap::OverlapSkip;
use hourglass_core::{Action, Next, OverlapPolicy};

use super::{T0, claim, create, done, every_second, ms, t};
use crate::{ClaimScope, JobUpdate, RunOutcome, Store};

pub async fn overlap_skips_are_counted_and_recorded_as_a_skipped_run(store: Arc<dyn Store>) {
    let anchor = t(T0);
    let mut job = every_second("a", anchor);
    job.spec.overlap = OverlapPolicy::Skip;
    let mut failing = every_second("a", anchor);
    failing.spec.overlap = OverlapPolicy::BufferOne;
    let (id, failing_id) = (job.id, failing.id);
    create(&*store, vec![job, failing]).await;
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(read.spec.overlap, OverlapPolicy::Skip, "the policy is kept");
    let claimed = claim(&*store, ClaimScope::Fired, anchor, 10, "n1").await;
    assert_eq!(claimed.len(), 2);
    // Each ran 3.5 s: the occurrences at +1 s, +2 s and +3 s fell due meanwhile.
    let ended = anchor + ms(3_500);
    let skip = |count| OverlapSkip {
        first: anchor + ms(1_000),
        count,
    };
    let mut completions = Vec::new();
    for occ in &claimed {
        let (next, dropped) = if occ.job_id == id {
            (anchor + ms(4_000), 3)
        } else {
            (anchor + ms(3_000), 2)
        };
        let next = Some(Next {
            overlap: Some(skip(dropped)),
            ..Next::at(next)
        });
        let action = if occ.job_id == id {
            Action::Delivered {
                next,
                skipped: dropped,
            }
        } else {
            Action::DeadLetter {
                next,
                skipped: dropped,
                reason: "http 410".into(),
            }
        };
        completions.push(done(occ, action));
    }
    store.complete(completions, ended).await.unwrap();
    for (id, next, dropped, outcome) in [
        (id, 4_000, 3, RunOutcome::Delivered),
        (failing_id, 3_000, 2, RunOutcome::DeadLetter),
    ] {
        let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
        assert_eq!(read.next_due, Some(anchor + ms(next)));
        assert_eq!((read.runs, read.skipped), (1, dropped));
        let runs = store.runs(Some("a"), id, None, 10).await.unwrap();
        let mut kept: Vec<_> = runs
            .iter()
            .map(|r| (r.outcome, r.due, r.attempt, r.error.clone()))
            .collect();
        kept.sort_by_key(|(_, _, attempt, _)| *attempt);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(
            kept[0],
            (
                RunOutcome::Skipped,
                anchor + ms(1_000),
                0,
                Some(format!(
                    "overlap: {dropped} occurrences fell due while the previous one was in flight"
                ))
            )
        );
        assert_eq!((kept[1].0, kept[1].1), (outcome, anchor));
        // The skipped run is stamped after the run that overlapped started.
        let skipped = runs.iter().find(|r| r.attempt == 0).unwrap();
        let ran = runs.iter().find(|r| r.attempt == 1).unwrap();
        assert!(skipped.started_at > ran.started_at);
    }
}

pub async fn a_backfill_is_kept_with_the_spec_and_claimable_at_once(store: Arc<dyn Store>) {
    let anchor = t(T0);
    let job = every_second("a", anchor + ms(60_000));
    let id = job.id;
    create(&*store, vec![job]).await;
    let now = anchor + ms(30_000);
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    let mut spec = read.spec.clone();
    let backfill = Backfill {
        latest: Range {
            from: anchor,
            to: anchor + ms(3_000),
            at: now,
        },
        resume: anchor + ms(60_000),
        earlier: vec![Range {
            from: anchor - ms(10_000),
            to: anchor - ms(5_000),
            at: anchor,
        }],
    };
    spec.backfill = Some(backfill.clone());
    spec.overlap = OverlapPolicy::BufferOne;
    let updated = store
        .update_job(
            Some("a"),
            id,
            JobUpdate {
                read_token: None,
                spec,
                payload: read.payload.clone(),
                next_due: Some(anchor),
                now,
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(updated.next_due, Some(anchor));
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(
        read.spec.backfill,
        Some(backfill),
        "the record is kept whole"
    );
    assert_eq!(read.spec.overlap, OverlapPolicy::BufferOne);
    // Due in the past: claimed at once, named by its nominal time, with the record.
    let claimed = claim(&*store, ClaimScope::Fired, now, 10, "n1").await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].due, anchor);
    assert!(claimed[0].spec.backfill.is_some());
    // Its completion moves the job to the next backfilled occurrence.
    let next = Next::at(now + ms(100));
    let completion = done(
        &claimed[0],
        Action::Delivered {
            next: Some(Next {
                due: anchor + ms(1_000),
                ..next
            }),
            skipped: 0,
        },
    );
    store.complete(vec![completion], now).await.unwrap();
    let read = store.get_job(Some("a"), id).await.unwrap().unwrap();
    assert_eq!(
        (read.next_due, read.next_attempt),
        (Some(anchor + ms(1_000)), Some(now + ms(100)))
    );
}
