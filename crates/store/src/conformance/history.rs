//! Run history and dead letters, and retention: paging runs, listing and deleting dead letters,
//! purging old finished work and old dead letters.

use std::sync::Arc;

use hourglass_core::{Action, Completion, JobState, Next};

use super::{T0, attempt, claim, create, done, every_second, ms, one_off, t};
use crate::{Applied, ClaimScope, Purged, RunCursor, RunOutcome, Store, StoreError, Transition};

pub async fn dead_letters_are_recorded_listed_and_deleted(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base), one_off("b", base)]).await;
    let claimed = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    let batch = claimed
        .iter()
        .map(|occ| {
            done(
                occ,
                Action::DeadLetter {
                    next: None,
                    skipped: 0,
                    reason: "http 500".into(),
                },
            )
        })
        .collect();
    store.complete(batch, base).await.unwrap();
    let letters = store.dead_letters(Some("a"), None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (letter.reason.as_str(), letter.due, letter.attempts),
        ("http 500", base, 1)
    );
    assert_eq!(letter.payload.as_deref(), Some(r#"{"n":1}"#));
    let job = store.get_job(None, letter.job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(store.dead_letters(None, None, 10).await.unwrap().len(), 2);
    assert!(
        store
            .get_dead_letter(Some("b"), letter.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .delete_dead_letter(Some("b"), letter.id, None)
            .await
            .unwrap()
    );
    assert!(
        store
            .delete_dead_letter(Some("a"), letter.id, None)
            .await
            .unwrap()
    );
    assert!(
        store
            .get_dead_letter(None, letter.id)
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn purge_removes_only_old_finished_work(store: Arc<dyn Store>) {
    let base = t(T0);
    // Finished an hour ago: a delivered one-off and a cancelled one.
    let done_early = one_off("a", base);
    let cancelled = one_off("a", base + ms(3_600_000));
    // Still to come, and a recurring job with an old run and a recent one.
    let waiting = one_off("a", base + ms(86_400_000));
    let recurring = every_second("a", base);
    let (done_id, cancelled_id, waiting_id, recurring_id) =
        (done_early.id, cancelled.id, waiting.id, recurring.id);
    create(&*store, vec![done_early, cancelled, waiting, recurring]).await;
    let claimed = claim(&*store, ClaimScope::Fired, base, 10, "n").await;
    assert_eq!(claimed.len(), 2);
    let finish = claimed
        .iter()
        .map(|occ| {
            let next = (occ.job_id == recurring_id).then(|| Next::at(base + ms(1000)));
            done(occ, Action::Delivered { next, skipped: 0 })
        })
        .collect();
    store.complete(finish, base).await.unwrap();
    store
        .transition(
            Some("a"),
            cancelled_id,
            Transition::Cancel { now: base },
            None,
        )
        .await
        .unwrap();
    // A recent run of the recurring job, two hours later.
    let later = base + ms(7_200_000);
    let again = claim(&*store, ClaimScope::Fired, later, 10, "n").await;
    assert_eq!(again.len(), 1);
    let mut recent = done(
        &again[0],
        Action::Delivered {
            next: Some(Next::at(later + ms(1000))),
            skipped: 0,
        },
    );
    recent.attempt = attempt(1, later);
    store.complete(vec![recent], later).await.unwrap();

    // Keep one hour: everything finished or run before `later - 1h` goes.
    let cutoff = later - ms(3_600_000);
    let purged = store.purge(cutoff, 100).await.unwrap();
    assert_eq!(
        purged,
        Purged { jobs: 2, runs: 2 },
        "two old jobs, the done job's run and the recurring job's old run"
    );
    assert!(store.get_job(None, done_id).await.unwrap().is_none());
    assert!(store.get_job(None, cancelled_id).await.unwrap().is_none());
    assert!(
        store.get_job(None, waiting_id).await.unwrap().is_some(),
        "live jobs stay"
    );
    let kept = store.runs(None, recurring_id, None, 10).await.unwrap();
    assert_eq!(kept.len(), 1, "the recent run stays");
    assert_eq!(kept[0].started_at, later);
    assert_eq!(
        store.purge(cutoff, 100).await.unwrap(),
        Purged::default(),
        "nothing twice"
    );
    assert_eq!(store.count_jobs(None).await.unwrap(), 2);
}

/// A job's runs come newest first, a page at a time: each page resumes after the last run of the
/// one before, and runs that started in the same millisecond keep the order they were recorded in
/// (newest first) across a page boundary.
pub async fn runs_page_newest_first_and_resume_after_a_cursor(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    // Five attempts; the third and fourth start in the same millisecond.
    let starts = [0, 1000, 2000, 2000, 3000].map(|n| base + ms(n));
    for (i, started) in starts.iter().enumerate() {
        let occ = claim(&*store, ClaimScope::Fired, *started, 10, "n1")
            .await
            .remove(0);
        assert_eq!(occ.attempt, i as u32 + 1);
        let action = match starts.get(i + 1) {
            Some(next) => Action::Retry { at: *next },
            None => Action::Delivered {
                next: None,
                skipped: 0,
            },
        };
        let completion = Completion {
            attempt: attempt(occ.attempt, *started),
            ..done(&occ, action)
        };
        assert_eq!(
            store.complete(vec![completion], *started).await.unwrap(),
            vec![Applied::Yes]
        );
    }

    let mut pages = Vec::new();
    let mut before = None;
    loop {
        let page = store.runs(Some("a"), id, before, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        before = page.last().map(|r| r.cursor);
        pages.push(page.iter().map(|r| r.attempt).collect::<Vec<_>>());
        assert!(pages.len() <= 3, "paging does not end: {pages:?}");
    }
    assert_eq!(pages, vec![vec![5, 4], vec![3, 2], vec![1]]);

    let all = store.runs(Some("a"), id, None, 10).await.unwrap();
    let attempts: Vec<u32> = all.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, vec![5, 4, 3, 2, 1]);
    assert_eq!(all[0].outcome, RunOutcome::Delivered);
    assert!(
        all.windows(2).all(|w| w[0].cursor != w[1].cursor),
        "every run has a cursor of its own"
    );
    // A cursor survives its text form, and the first page is the one before the newest cursor.
    let text = all[1].cursor.encode();
    assert_eq!(RunCursor::parse(&text), Some(all[1].cursor));
    let after_second = store
        .runs(Some("a"), id, RunCursor::parse(&text), 10)
        .await
        .unwrap();
    assert_eq!(after_second, all[2..].to_vec());
    assert_eq!(
        store
            .runs(Some("a"), id, Some(RunCursor::NEWEST), 10)
            .await
            .unwrap(),
        all
    );
    // Another namespace sees no such job, whatever the cursor.
    assert!(matches!(
        store.runs(Some("b"), id, before, 10).await,
        Err(StoreError::NotFound)
    ));
}

/// The dead-letter sweep deletes letters recorded before the cutoff, oldest first, no more than it
/// is asked to look at, in every namespace; younger letters stay.
pub async fn old_dead_letters_are_purged_oldest_first(store: Arc<dyn Store>) {
    let base = t(T0);
    // Five letters, recorded a minute apart, across two namespaces.
    let mut ids = Vec::new();
    for i in 0..5 {
        let at = base + ms(60_000 * i);
        let job = one_off(if i % 2 == 0 { "a" } else { "b" }, at);
        ids.push(job.id);
        create(&*store, vec![job]).await;
        let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
            .await
            .remove(0);
        let letter = Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        };
        store.complete(vec![done(&occ, letter)], at).await.unwrap();
    }
    let left = |store: Arc<dyn Store>| async move {
        let letters = store.dead_letters(None, None, 10).await.unwrap();
        letters.iter().map(|l| l.job_id).collect::<Vec<_>>()
    };
    assert_eq!(left(store.clone()).await, ids);

    // Nothing is older than the first letter.
    assert_eq!(store.purge_dead_letters(base, 10).await.unwrap(), 0);
    // Three are older than 2.5 minutes, but the sweep looks at two at a time.
    let cutoff = base + ms(150_000);
    assert_eq!(store.purge_dead_letters(cutoff, 2).await.unwrap(), 2);
    assert_eq!(left(store.clone()).await, ids[2..].to_vec());
    assert_eq!(store.purge_dead_letters(cutoff, 2).await.unwrap(), 1);
    assert_eq!(store.purge_dead_letters(cutoff, 2).await.unwrap(), 0);
    assert_eq!(left(store.clone()).await, ids[3..].to_vec());
    // The jobs themselves are the job sweep's business.
    assert!(store.get_job(None, ids[0]).await.unwrap().is_some());
}
