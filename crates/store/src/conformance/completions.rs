//! Completions under the fence: deliveries, retries, recurring jobs moving on, dead letters,
//! and large batches with their run records.

use std::sync::Arc;

use hourglass_core::{Action, Completion, FencingToken, JobState, Next, Occurrence};

use super::{T0, claim, create, delivered, done, every_second, lease, ms, one_off, t};
use crate::{
    Applied, ClaimScope, JobQuery, JobRecord, JobUpdate, LAST_ERROR_BYTES, RunOutcome, Store,
    StoreError, Transition,
};

pub async fn stale_token_cannot_complete(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let first = claim(&*store, ClaimScope::Fired, base, 10, "n1").await;
    let later = base + ms(31_000);
    let second = claim(&*store, ClaimScope::Fired, later, 10, "n2").await;
    let stale = delivered(&first[0]);
    assert_eq!(
        store.complete(vec![stale], later).await.unwrap(),
        vec![Applied::StaleLease]
    );
    let job = store.get_job(None, first[0].job_id).await.unwrap().unwrap();
    assert_eq!(
        job.state,
        JobState::Active,
        "stale write must change nothing"
    );
    assert!(store.runs(None, job.id, None, 10).await.unwrap().is_empty());
    let fresh = delivered(&second[0]);
    assert_eq!(
        store.complete(vec![fresh], later).await.unwrap(),
        vec![Applied::Yes]
    );
}

/// A completion ends its claim: the same token cannot settle the occurrence a second time. (A
/// queue worker's receipt is that token: a message nacked once must not be acked, or nacked
/// again, with it; a recurring job acked twice must not skip an occurrence.)
pub async fn a_completion_ends_its_claim(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base), every_second("a", base)]).await;
    let claimed = claim(&*store, ClaimScope::Fired, base + ms(1), 10, "n1").await;
    assert_eq!(claimed.len(), 2);
    let retry = |occ| {
        done(
            occ,
            Action::Retry {
                at: base + ms(60_000),
            },
        )
    };
    let first: Vec<_> = claimed.iter().map(retry).collect();
    assert_eq!(
        store.complete(first, base + ms(2)).await.unwrap(),
        vec![Applied::Yes, Applied::Yes]
    );
    // The same tokens again: a retry counted twice, and a delivery of a message already
    // handed back.
    let again: Vec<_> = claimed.iter().map(retry).collect();
    assert_eq!(
        store.complete(again, base + ms(3)).await.unwrap(),
        vec![Applied::StaleLease, Applied::StaleLease]
    );
    let delivered_now: Vec<_> = claimed.iter().map(delivered).collect();
    assert_eq!(
        store.complete(delivered_now, base + ms(4)).await.unwrap(),
        vec![Applied::StaleLease, Applied::StaleLease]
    );
    for occ in &claimed {
        let job = store.get_job(Some("a"), occ.job_id).await.unwrap().unwrap();
        assert_eq!(job.state, JobState::Active, "{job:?}");
        assert_eq!(job.attempt, 1, "one retry counted: {job:?}");
        assert_eq!(
            store
                .runs(Some("a"), occ.job_id, None, 10)
                .await
                .unwrap()
                .len(),
            1
        );
    }
    // Claimed again when the retry is due, a fresh token settles it.
    let retried = claim(&*store, ClaimScope::Fired, base + ms(60_000), 10, "n1").await;
    assert_eq!(retried.len(), 2);
    let fresh: Vec<_> = retried.iter().map(delivered).collect();
    assert_eq!(
        store.complete(fresh, base + ms(60_001)).await.unwrap(),
        vec![Applied::Yes, Applied::Yes]
    );
}

/// A failed attempt's answer is kept with its run, as given (multi-byte text included), and a
/// delivered one keeps none.
pub async fn a_runs_response_is_kept(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let mut failed = done(
        &occ,
        Action::Retry {
            at: base + ms(1_000),
        },
    );
    let answer = "{\"error\": \"quota exceeded für Kunde 42\"}".to_string();
    if let Some(a) = failed.attempt.as_mut() {
        a.status = Some(503);
        a.error = Some("http 503".into());
        a.response = Some(answer.clone());
    }
    assert_eq!(
        store.complete(vec![failed], base + ms(2)).await.unwrap(),
        vec![Applied::Yes]
    );
    let again = claim(&*store, ClaimScope::Fired, base + ms(1_000), 10, "n1")
        .await
        .remove(0);
    assert_eq!(
        store
            .complete(vec![delivered(&again)], base + ms(1_001))
            .await
            .unwrap(),
        vec![Applied::Yes]
    );
    let runs = store.runs(Some("a"), occ.job_id, None, 10).await.unwrap();
    assert_eq!(runs.len(), 2);
    // Newest first.
    assert_eq!(
        (runs[0].outcome.as_str(), runs[0].response.as_deref()),
        ("delivered", None)
    );
    assert_eq!(runs[1].outcome, RunOutcome::Retry);
    assert_eq!(runs[1].response.as_deref(), Some(answer.as_str()));
}

pub async fn delivered_one_off_completes_with_run_history(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let applied = store
        .complete(vec![delivered(&occ)], base + ms(5))
        .await
        .unwrap();
    assert_eq!(applied, vec![Applied::Yes]);
    let job = store.get_job(Some("a"), occ.job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.runs, 1);
    let runs = store.runs(Some("a"), occ.job_id, None, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].status, runs[0].outcome.as_str()),
        (Some(200), "delivered")
    );
    assert_eq!(store.next_due(ClaimScope::Fired).await.unwrap(), None);
}

/// A batch larger than a backend's internal chunks (the embedded store inserts runs 64 a
/// statement), with retries, deliveries and a stale completion mixed: each applied completion
/// records exactly its own run, with its own fields.
pub async fn a_large_completion_batch_records_every_run(store: Arc<dyn Store>) {
    let base = t(T0);
    let n = 131;
    create(
        &*store,
        (0..n).map(|i| one_off("a", base + ms(i))).collect(),
    )
    .await;
    let claimed = store
        .claim_due(ClaimScope::Fired, base + ms(n), 500, &lease("n1", base))
        .await
        .unwrap();
    assert_eq!(claimed.len(), n as usize);
    let mut batch = Vec::new();
    for (i, occ) in claimed.iter().enumerate() {
        let action = if i % 3 == 0 {
            Action::Retry {
                at: base + ms(60_000),
            }
        } else {
            Action::Delivered {
                next: None,
                skipped: 0,
            }
        };
        let mut c = done(occ, action);
        let a = c.attempt.as_mut().expect("attempt");
        a.latency_ms = i as u32;
        if i % 3 == 0 {
            a.status = Some(500);
            a.error = Some(format!("boom {i}"));
        }
        batch.push(c);
        if i == 70 {
            // An earlier lease's completion of the same occurrence, refused by its token.
            let mut stale = done(
                occ,
                Action::Delivered {
                    next: None,
                    skipped: 0,
                },
            );
            stale.token = FencingToken::from_i64(stale.token.as_i64() - 1);
            batch.push(stale);
        }
    }
    let applied = store.complete(batch, base + ms(5)).await.unwrap();
    assert_eq!(applied.len(), n as usize + 1);
    assert_eq!(applied[71], Applied::StaleLease);
    assert_eq!(
        applied.iter().filter(|a| **a == Applied::Yes).count(),
        n as usize
    );
    for (i, occ) in claimed.iter().enumerate() {
        let runs = store.runs(Some("a"), occ.job_id, None, 10).await.unwrap();
        assert_eq!(runs.len(), 1, "job {i}: {runs:?}");
        let run = &runs[0];
        let retried = i % 3 == 0;
        assert_eq!(
            (
                run.job_id,
                run.due,
                run.attempt,
                run.latency_ms,
                run.status,
                run.error.clone(),
                run.outcome.as_str()
            ),
            (
                occ.job_id,
                occ.due,
                occ.attempt,
                i as u32,
                Some(if retried { 500 } else { 200 }),
                retried.then(|| format!("boom {i}")),
                if retried { "retry" } else { "delivered" }
            ),
            "job {i}"
        );
    }
}

pub async fn recurring_advances_in_the_same_transaction(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![every_second("a", base)]).await;
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let next = base + ms(1000);
    store
        .complete(
            vec![done(
                &occ,
                Action::Delivered {
                    next: Some(Next::at(next)),
                    skipped: 2,
                },
            )],
            base,
        )
        .await
        .unwrap();
    let job = store.get_job(None, occ.job_id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.next_due, job.runs, job.skipped, job.attempt),
        (JobState::Active, Some(next), 1, 2, 0)
    );
    let again = claim(&*store, ClaimScope::Fired, next, 10, "n1").await;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].due, again[0].runs_done), (next, 1));
}

pub async fn retry_moves_fire_time_and_counts_attempts(store: Arc<dyn Store>) {
    let base = t(T0);
    create(&*store, vec![one_off("a", base)]).await;
    let job = |id| {
        let store = store.clone();
        async move { store.get_job(None, id).await.unwrap().expect("job") }
    };
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    assert_eq!(job(occ.job_id).await.next_attempt, None, "claimed");
    let retry_at = base + ms(2000);
    store
        .complete(vec![done(&occ, Action::Retry { at: retry_at })], base)
        .await
        .unwrap();
    let waiting = job(occ.job_id).await;
    assert_eq!(
        (waiting.next_due, waiting.next_attempt, waiting.attempt),
        (Some(base), Some(retry_at), 1),
        "the nominal due time stays; the next attempt waits out the backoff"
    );
    assert_eq!(
        store.next_due(ClaimScope::Fired).await.unwrap(),
        Some(retry_at)
    );
    assert!(
        store
            .claim_due(ClaimScope::Fired, retry_at - ms(1), 10, &lease("n1", base))
            .await
            .unwrap()
            .is_empty()
    );
    let second = claim(&*store, ClaimScope::Fired, retry_at, 10, "n1")
        .await
        .remove(0);
    assert_eq!(
        (second.attempt, second.due, second.fire_at),
        (2, base, retry_at)
    );
    let runs = store.runs(None, occ.job_id, None, 10).await.unwrap();
    assert_eq!(runs[0].outcome, RunOutcome::Retry);
}

/// A one-off dead-lettered on its third failed attempt shows three attempts, on the job as on
/// its dead letter (the job showed two: the last failure was never counted).
pub async fn a_dead_lettered_job_counts_its_last_attempt(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = one_off("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let mut at = base;
    for _ in 0..2 {
        let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
            .await
            .remove(0);
        at += ms(1000);
        store
            .complete(vec![done(&occ, Action::Retry { at })], at)
            .await
            .unwrap();
    }
    let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
        .await
        .remove(0);
    assert_eq!(occ.attempt, 3);
    let letter = done(
        &occ,
        Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 500".into(),
        },
    );
    assert_eq!(
        store.complete(vec![letter], at).await.unwrap(),
        vec![Applied::Yes]
    );
    let job = store.get_job(None, id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempt), (JobState::Failed, 3));
    let letters = store.dead_letters(Some("a"), None, 10).await.unwrap();
    assert_eq!(letters[0].attempts, 3);
}

/// A job keeps the error of its latest failed attempt, bounded, through retries, edits and
/// transitions, until an occurrence is delivered; a stale completion and a skipped occurrence
/// leave it as it is.
pub async fn a_job_keeps_the_error_of_its_latest_failed_attempt(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = every_second("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let last_error = |store: Arc<dyn Store>| async move {
        let job = store.get_job(Some("a"), id).await.unwrap().expect("job");
        job.last_error
    };
    let failed = |occ: &Occurrence, error: &str, action| {
        let mut c = done(occ, action);
        if let Some(a) = c.attempt.as_mut() {
            a.status = Some(500);
            a.error = Some(error.into());
        }
        c
    };
    assert_eq!(last_error(store.clone()).await, None, "nothing failed yet");

    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let retry_at = base + ms(500);
    let c = failed(&occ, "http 500", Action::Retry { at: retry_at });
    store.complete(vec![c], base).await.unwrap();
    assert_eq!(last_error(store.clone()).await.as_deref(), Some("http 500"));
    let listed = store
        .list_jobs(JobQuery {
            namespace: Some("a".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed[0].last_error.as_deref(),
        Some("http 500"),
        "listed too"
    );

    // The next failure replaces it, cut to its bound at a character boundary.
    let occ = claim(&*store, ClaimScope::Fired, retry_at, 10, "n1")
        .await
        .remove(0);
    let long = format!("x{}", "é".repeat(LAST_ERROR_BYTES));
    let c = failed(
        &occ,
        &long,
        Action::Retry {
            at: retry_at + ms(500),
        },
    );
    store.complete(vec![c], retry_at).await.unwrap();
    let kept = last_error(store.clone()).await.expect("an error");
    assert_eq!(kept.len(), LAST_ERROR_BYTES - 1);
    assert!(long.starts_with(&kept));

    // Transitions keep it; a stale completion does not touch it.
    store
        .transition(Some("a"), id, Transition::Pause { now: retry_at }, None)
        .await
        .unwrap();
    let resumed = store
        .transition(Some("a"), id, Transition::Resume { now: retry_at }, None)
        .await
        .unwrap();
    assert_eq!(resumed.last_error.as_deref(), Some(kept.as_str()));
    let stale = failed(&occ, "stale", Action::Retry { at: retry_at });
    assert_eq!(
        store.complete(vec![stale], retry_at).await.unwrap(),
        vec![Applied::StaleLease]
    );
    assert_eq!(
        last_error(store.clone()).await.as_deref(),
        Some(kept.as_str())
    );

    // Dead-lettered, the job moves on to its next occurrence with that attempt's error.
    let at = resumed.next_attempt.expect("active");
    let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
        .await
        .remove(0);
    let next = Some(Next::at(at + ms(1_000)));
    let action = Action::DeadLetter {
        next,
        skipped: 0,
        reason: "http 410".into(),
    };
    store
        .complete(vec![failed(&occ, "http 410", action)], at)
        .await
        .unwrap();
    assert_eq!(last_error(store.clone()).await.as_deref(), Some("http 410"));

    // A skipped occurrence made no attempt: the error stays. A delivery clears it.
    let at = at + ms(1_000);
    let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
        .await
        .remove(0);
    let skip = Completion {
        attempt: None,
        ..done(
            &occ,
            Action::Skipped {
                next: Some(Next::at(at + ms(1_000))),
                skipped: 1,
            },
        )
    };
    store.complete(vec![skip], at).await.unwrap();
    assert_eq!(last_error(store.clone()).await.as_deref(), Some("http 410"));
    let at = at + ms(1_000);
    let occ = claim(&*store, ClaimScope::Fired, at, 10, "n1")
        .await
        .remove(0);
    let ok = done(
        &occ,
        Action::Delivered {
            next: Some(Next::at(at + ms(1_000))),
            skipped: 0,
        },
    );
    store.complete(vec![ok], at).await.unwrap();
    assert_eq!(
        last_error(store.clone()).await,
        None,
        "a delivery clears it"
    );
}

/// An update computed from a reading of the job (an edit that keeps its pending occurrence)
/// applies only while the job is as read: a completion in between makes it refuse with `Changed`
/// and change nothing, instead of moving the job back to the occurrence just delivered (which
/// would fire it again and count it twice). Read again, it applies.
pub async fn an_update_under_a_stale_reading_changes_nothing(store: Arc<dyn Store>) {
    let base = t(T0);
    let job = every_second("a", base);
    let id = job.id;
    create(&*store, vec![job]).await;
    let read = store.get_job(None, id).await.unwrap().unwrap();
    let occ = claim(&*store, ClaimScope::Fired, base, 10, "n1")
        .await
        .remove(0);
    let next = base + ms(1000);
    let delivered = Action::Delivered {
        next: Some(Next::at(next)),
        skipped: 0,
    };
    store
        .complete(vec![done(&occ, delivered)], base)
        .await
        .unwrap();
    let edit = |from: &JobRecord| JobUpdate {
        spec: from.spec.clone(),
        payload: Some("\"edited\"".into()),
        next_due: from.next_due,
        now: base,
        read_token: Some(from.token),
    };
    let stale = store
        .update_job(Some("a"), read.id, edit(&read), None)
        .await;
    assert!(matches!(stale, Err(StoreError::Changed)), "{stale:?}");
    let job = store.get_job(None, read.id).await.unwrap().unwrap();
    assert_eq!(
        (job.next_due, job.runs),
        (Some(next), 1),
        "the delivery stands"
    );
    assert_eq!(job.payload, read.payload, "nothing was written");
    let applied = store
        .update_job(Some("a"), read.id, edit(&job), None)
        .await
        .unwrap();
    assert_eq!(applied.next_due, Some(next));
    assert_eq!(applied.payload.as_deref(), Some("\"edited\""));
}
