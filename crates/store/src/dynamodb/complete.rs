//! Completions: each is applied only under its claim's fencing token, as `rules.rs` plans it. A
//! completion that records nothing is one conditional update; one that records a run or a dead
//! letter is one transaction (the job and its history change together or not at all). A batch is
//! atomic per completion, not as a whole: each completion is its own request, sent concurrently.

use futures_util::StreamExt;
use hourglass_core::{Completion, JobState};
use jiff::Timestamp;
use rand::Rng;

use super::Inner;
use super::claim::CONCURRENCY;
use super::item::{
    Attrs, due_sk, job_key, key, letter_pk, letters_pk, n, ord, run_pk, run_sk, s, state_code,
};
use super::table::{Change, put, put_new};
use crate::rules::{LastError, RowChange, plan_completion};
use crate::{Applied, Result, RunCursor, StoreError};

pub(super) async fn complete(
    inner: &Inner,
    batch: Vec<Completion>,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    let now = now.as_millisecond();
    let answers = futures_util::stream::iter(batch)
        .map(|c| async move { complete_one(inner, c, now).await })
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    answers.into_iter().collect()
}

/// The job item's change for a row change, fenced by `token` (and the job being active).
pub(super) fn row_change(inner: &Inner, c: &Completion, row: &RowChange, now: i64) -> Change {
    let mut change = Change::new(job_key(c.job_id));
    change.when(
        "#tok = {} AND #st = {}",
        &["tok", "st"],
        vec![n(c.token), n(state_code(JobState::Active))],
    );
    match *row {
        RowChange::Retry { fire } => {
            change.set("fire", n(fire));
            change.set("dsk", s(due_sk(fire, c.job_id)));
            change.add("att", 1);
        }
        RowChange::Advance { due, ran, skipped } => {
            change.set("due", n(due));
            change.set("fire", n(due));
            change.set("dsk", s(due_sk(due, c.job_id)));
            change.set("att", n(0));
            change.add("runs", ran as i64);
            change.add("skip", skipped as i64);
        }
        RowChange::Finish {
            state,
            ran,
            skipped,
            attempt,
        } => {
            change.set("st", n(state_code(state)));
            change.remove("fire");
            change.remove("dpk");
            change.remove("dsk");
            if let Some(attempt) = attempt {
                change.set("att", n(i64::from(attempt)));
            }
            change.add("runs", ran as i64);
            change.add("skip", skipped as i64);
            finished_at(inner, &mut change, c.job_id, now);
        }
    }
    change.remove("lowner");
    change.remove("lfire");
    // A completion ends its claim: the same token cannot settle the occurrence again.
    change.add("tok", 1);
    change.set("up", n(now));
    change
}

/// Puts a job that just finished into the age index, for retention.
pub(super) fn finished_at(inner: &Inner, change: &mut Change, id: hourglass_core::JobId, now: i64) {
    change.set("apk", s(format!("f#{}", inner.shard_of(id))));
    change.set("ask", s(format!("{}#{id}", ord(now))));
}

async fn complete_one(inner: &Inner, c: Completion, now: i64) -> Result<Applied> {
    let plan = plan_completion(&c);
    let mut change = row_change(inner, &c, &plan.row, now);
    if let LastError::Write(error) = plan.last_error {
        change.set_or_remove("lerr", error.map(s));
    }
    if plan.run.is_none() && plan.dead_letter.is_none() {
        return Ok(match inner.update(change, false).await? {
            Some(_) => Applied::Yes,
            None => Applied::StaleLease,
        });
    }
    // The run's place in the job's history: the token this completion leaves behind is unique
    // to it within the job.
    let mut actions = vec![change.into_action(&inner.table)];
    if let Some(run) = &plan.run {
        let attempt = run.attempt;
        let cursor = RunCursor {
            started_ms: attempt.started_at.as_millisecond(),
            seq: c.token + 1,
        };
        let mut item = key(run_pk(c.job_id), &run_sk(cursor));
        let mut put_attr = |name: &str, value| {
            item.insert(name.to_owned(), value);
        };
        put_attr("job", s(c.job_id.to_string()));
        put_attr("seq", n(cursor.seq));
        put_attr("due", n(c.due.as_millisecond()));
        put_attr("att", n(i64::from(attempt.attempt)));
        put_attr("started", n(cursor.started_ms));
        put_attr("lat", n(i64::from(attempt.latency_ms)));
        if let Some(status) = attempt.status {
            put_attr("status", n(i64::from(status)));
        }
        if let Some(error) = &attempt.error {
            put_attr("err", s(error));
        }
        if let Some(response) = &attempt.response {
            put_attr("resp", s(response));
        }
        put_attr("outcome", s(run.outcome.as_str()));
        put_attr("apk", s(format!("r#{}", inner.shard_of(c.job_id))));
        put_attr(
            "ask",
            s(format!(
                "{}#{}",
                ord(cursor.started_ms),
                run_sk_tail(&c, cursor)
            )),
        );
        actions.push(put(&inner.table, item));
    }
    let Some(letter) = plan.dead_letter else {
        return fenced(inner, actions).await;
    };
    // The letter copies the job's namespace, spec and payload as stored: read them (a change
    // since would have raised the token, and the transaction would be refused).
    let Some(job) = inner.get(job_key(c.job_id)).await? else {
        return Ok(Applied::StaleLease);
    };
    if job.num("tok")? != c.token {
        return Ok(Applied::StaleLease);
    }
    let payload = match super::payload::version_of(&job)? {
        None => job.opt_str("payload")?.map(str::to_owned),
        Some(version) => match inner.claimed_payload(c.job_id, version, c.token).await? {
            Some(payload) => Some(payload),
            // Edited since the read: the transaction would be refused.
            None => return Ok(Applied::StaleLease),
        },
    };
    // Dead-letter ids: the recording time with a random tail, so they sort by age and stay
    // below 2^53 (exact in JSON numbers everywhere). A collision fails the letter's condition
    // and is tried again with another tail.
    for _ in 0..4 {
        let id = (now.max(0) << 10) | rand::rng().random_range(0..1024);
        let mut item = key(letter_pk(id), super::item::LETTER_SK);
        let mut put_attr = |name: &str, value| {
            item.insert(name.to_owned(), value);
        };
        put_attr("id", n(id));
        put_attr("ns", s(job.str("ns")?));
        put_attr("job", s(c.job_id.to_string()));
        put_attr("due", n(c.due.as_millisecond()));
        put_attr("atts", n(i64::from(letter.attempts)));
        put_attr("reason", s(letter.reason));
        put_attr("spec", s(job.str("spec")?));
        if let Some(payload) = &payload {
            put_attr("payload", s(payload));
        }
        put_attr("cr", n(now));
        put_attr("npk", s(letters_pk(job.str("ns")?)));
        put_attr("nsk", s(ord(id)));
        put_attr("apk", s(format!("d#{}", id % i64::from(inner.shards))));
        put_attr("ask", s(ord(id)));
        let mut attempt = actions.clone();
        attempt.push(put_new(&inner.table, item));
        match inner.transact(attempt).await? {
            Ok(()) => return Ok(Applied::Yes),
            Err(failed) if failed.first() == Some(&true) => return Ok(Applied::StaleLease),
            Err(_) => continue,
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: no free dead-letter id after four tries".into(),
    ))
}

/// A run's tail in the age index: its job and sequence, so that runs of one instant differ.
fn run_sk_tail(c: &Completion, cursor: RunCursor) -> String {
    format!("{}#{}", c.job_id, ord(cursor.seq))
}

/// Sends a completion's transaction: stale when the job's condition failed.
async fn fenced(
    inner: &Inner,
    actions: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
) -> Result<Applied> {
    match inner.transact(actions).await? {
        Ok(()) => Ok(Applied::Yes),
        Err(_) => Ok(Applied::StaleLease),
    }
}
