//! Completions. A one-off delivered (or completed by a skip) leaves its job item as it was: its
//! completion is a record in a *settlement* of its entry's root, one item for all the jobs of one
//! leased entry that one call completes, so that a batch of deliveries costs one write (a write
//! unit a started KB of records) instead of one per job. A settlement is written only while the
//! entry's lease is still the claim's (read strongly just before), and a record counts only while
//! the job item is still at the version it names: an edit since voids it. Readers fold records
//! into the job (`jobs.rs`), its runs (`history.rs`) and the next claim of the entry.
//!
//! Every other completion (a retry, the next occurrence of a recurring job, a dead letter, a job
//! that ends in another way) changes the job item under its version, and moves it to a new entry
//! when it has another attempt or occurrence: the entry first, then the job item, then its run,
//! none a transaction (a crash between them can lose the run's record, never the job). The
//! retries and next occurrences of fired jobs one call completes share their new entries, one per
//! second of fire times (`move_fired`), as a create batch's jobs do. A dead letter is written in
//! one transaction with its job, so a failed job always has its letter.
//!
//! Once every job a lease took from an entry is settled or moved, the claimer deletes the entry.
//! A queue message acknowledged through another process (serverless: another API function
//! instance) is completed on its job item instead, and marked gone in its shared entry (the
//! entry is deleted when it was the last); an entry whose claims did not all end where they were
//! made is deleted by the claim that next finds all its jobs settled.

use std::collections::HashMap;

use futures_util::StreamExt;
use hourglass_core::{Completion, JobId, JobState};
use jiff::Timestamp;
use rand::Rng;

use super::Inner;
use super::claim::CONCURRENCY;
use super::entry::{Entry, Listed, Root, root_item, split_token};
use super::item::{Attrs, Item, Lane, job_key, key, letter_pk, letters_pk, n, ord, s, state_code};
use super::run_items::{overlap_item, run_item};
use super::settled::{RECORDS, Settled, SettledRun, pack};
use super::table::{Change, Query, TTL, put, put_new};
use crate::rules::{LastError, RowChange, plan_completion};
use crate::{Applied, Result, StoreError};

/// How long the engine gathers delivered one-offs' completions for this store
/// (`Store::completion_linger`): an entry's window, so that at a few fires a second the jobs of
/// one entry still share a settlement (at 5 a second, half a linger made 2.4 settlements an entry
/// of 5 jobs). A job then shows as completed up to a second after its delivery.
pub(super) const SETTLE_LINGER: std::time::Duration =
    std::time::Duration::from_millis(super::entry::WINDOW_MS as u64);

pub(super) async fn complete(
    inner: &Inner,
    batch: Vec<Completion>,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    let now = now.as_millisecond();
    let mut answers: Vec<Option<Applied>> = vec![None; batch.len()];
    // Deliveries of one-offs this node claimed, by the entry they were claimed from.
    let mut settling: HashMap<super::Held, Vec<usize>> = HashMap::new();
    for (i, c) in batch.iter().enumerate() {
        let plan = plan_completion(c);
        let settles = matches!(
            plan.row,
            RowChange::Finish {
                state: JobState::Completed,
                ..
            }
        ) && plan.dead_letter.is_none()
            // A callback is created in a transaction with its job's change (`complete_one`).
            && c.callback.is_none()
            // A settlement lists runs under the settled job's id; the run of a job delivering
            // an `allow` job's occurrence is that job's (`attempt_item`).
            && c.origin.is_none();
        if settles && let Some(held) = inner.held(c.job_id, c.token.as_i64()) {
            settling.entry(held).or_default().push(i);
        }
    }
    for (held, indexes) in settling {
        let applied = settle(inner, &held.pk, &held.sk, &indexes, &batch, now).await?;
        for (i, applied) in indexes.into_iter().zip(applied) {
            answers[i] = Some(applied);
        }
    }
    // Reschedules of fired occurrences this node claimed share their new entries.
    let moving: Vec<usize> = (0..batch.len())
        .filter(|&i| answers[i].is_none() && moves_fired(inner, &batch[i]))
        .collect();
    if !moving.is_empty() {
        for (i, applied) in move_fired(inner, &batch, &moving, now).await? {
            answers[i] = Some(applied);
        }
    }
    let rest: Vec<usize> = (0..batch.len()).filter(|i| answers[*i].is_none()).collect();
    let one_by_one = futures_util::stream::iter(rest)
        .map(|i| {
            let c = &batch[i];
            async move { (i, complete_one(inner, c, now).await) }
        })
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    for (i, applied) in one_by_one {
        answers[i] = Some(applied?);
    }
    // Answered either way, each claim has ended.
    for c in &batch {
        inner.settle_held(c.job_id, c.token.as_i64()).await?;
    }
    Ok(answers.into_iter().map(|a| a.expect("answered")).collect())
}

/// Whether `c` reschedules (a retry, or a recurring job's next occurrence, without a dead letter)
/// an occurrence this store handed out from an entry of the fired lane.
fn moves_fired(inner: &Inner, c: &Completion) -> bool {
    let plan = plan_completion(c);
    plan.dead_letter.is_none()
        && c.callback.is_none()
        && matches!(
            plan.row,
            RowChange::Retry { .. } | RowChange::Advance { .. }
        )
        && inner
            .held(c.job_id, c.token.as_i64())
            .is_some_and(|held| Lane::is_fired(&held.pk))
}

/// Reschedules of fired occurrences this node claimed (`moves_fired`): like a create batch, the
/// jobs of one call that fall due again within one window share a new entry (one write, however
/// many they are), written before the job items that name it. Each job item is then changed under
/// its version, without a transaction: a job whose change is refused stays where it was, and its
/// listing in the new entry is stale, dropped by whoever leases that entry.
async fn move_fired(
    inner: &Inner,
    batch: &[Completion],
    indexes: &[usize],
    now: i64,
) -> Result<Vec<(usize, Applied)>> {
    let mut answers = Vec::with_capacity(indexes.len());
    let mut ids: Vec<JobId> = indexes.iter().map(|&i| batch[i].job_id).collect();
    ids.sort();
    ids.dedup();
    let mut jobs: HashMap<JobId, Item> = HashMap::with_capacity(ids.len());
    for item in inner
        .get_many(ids.into_iter().map(job_key).collect())
        .await?
    {
        jobs.insert(super::item::job_id(item.str("id")?)?, item);
    }
    // The entries the claims came from, each read once: their lease must still be the claims'.
    let mut leases: HashMap<super::Held, Option<Entry>> = HashMap::new();
    let mut moves = Vec::new();
    for &i in indexes {
        let c = &batch[i];
        let (version, ltok) = split_token(c.token.as_i64());
        let Some(job) = jobs
            .get(&c.job_id)
            .filter(|j| j.num("tok").ok() == Some(version))
        else {
            answers.push((i, Applied::StaleLease));
            continue;
        };
        let Some(held) = inner.held(c.job_id, c.token.as_i64()) else {
            answers.push((i, Applied::StaleLease));
            continue;
        };
        if !leases.contains_key(&held) {
            let entry = match inner.get(key(held.pk.clone(), &held.sk)).await? {
                Some(item) => Some(Entry::from_item(&item)?),
                None => None,
            };
            leases.insert(held.clone(), entry);
        }
        let holds = leases[&held].as_ref().is_some_and(|e| {
            e.ltok == ltok
                && e.owner.is_some()
                && e.jobs
                    .iter()
                    .any(|j| j.id == c.job_id && j.version == version)
        });
        if !holds {
            answers.push((i, Applied::StaleLease));
            continue;
        }
        let plan = plan_completion(c);
        let (mut change, fire, ttl) = row_change(inner, c, &plan.row, now);
        let ttl = retry_ttl(inner, job, &plan.row, &mut change, ttl)?;
        if let LastError::Write(error) = plan.last_error {
            change.set_or_remove("lerr", error.map(s));
        }
        moves.push(Move {
            i,
            c,
            job,
            change,
            fire: fire.expect("a reschedule has a next fire time"),
            ttl,
            retry: matches!(plan.row, RowChange::Retry { .. }),
        });
    }
    // The new entries first: a job item never names an entry that is not there.
    let listed: Vec<Listed> = moves
        .iter()
        .map(|m| Listed {
            id: m.c.job_id,
            fire: m.fire,
            version: split_token(m.c.token.as_i64()).0 + 1,
        })
        .collect();
    let mut roots: HashMap<JobId, Root> = HashMap::with_capacity(listed.len());
    let mut entries = Vec::new();
    for window in super::entry::windows(listed) {
        let root = inner.new_root(Lane::Fired, window[0].fire);
        entries.push(root_item(&root, &window, None));
        for job in &window {
            roots.insert(job.id, root.clone());
        }
    }
    inner.put_many(entries).await?;
    let mut applying = Vec::with_capacity(moves.len());
    for m in moves {
        let root = roots[&m.c.job_id].clone();
        applying.push(apply_move(inner, m, root));
    }
    let changed = futures_util::stream::iter(applying)
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let mut runs = Vec::new();
    for result in changed {
        let (m, applied) = result?;
        if !applied {
            answers.push((m.i, Applied::StaleLease));
            continue;
        }
        runs.extend(run_item(inner, m.c, &plan_completion(m.c)));
        runs.extend(overlap_item(inner, m.c));
        if m.retry {
            super::jobs::keep_listed(inner, m.job, m.ttl).await?;
        }
        answers.push((m.i, Applied::Yes));
    }
    inner.put_many(runs).await?;
    Ok(answers)
}

/// A reschedule `move_fired` applies: the job item's change, and what follows it.
struct Move<'a> {
    i: usize,
    c: &'a Completion,
    job: &'a Item,
    change: Change,
    fire: i64,
    ttl: Option<i64>,
    retry: bool,
}

/// Changes the job item of `m` to name its new entry `root`: whether the change was applied.
async fn apply_move<'a>(inner: &Inner, mut m: Move<'a>, root: Root) -> Result<(Move<'a>, bool)> {
    moved_to(&mut m.change, m.c, m.fire, &root);
    let change = std::mem::replace(&mut m.change, Change::new(job_key(m.c.job_id)));
    let applied = inner.update(change, false).await?.is_some();
    Ok((m, applied))
}

/// Records the completions at `indexes` (deliveries of one-offs claimed from the entry `pk`,
/// `sk`) in one settlement, if the lease on that entry is still theirs.
async fn settle(
    inner: &Inner,
    pk: &str,
    sk: &str,
    indexes: &[usize],
    batch: &[Completion],
    now: i64,
) -> Result<Vec<Applied>> {
    let stale = vec![Applied::StaleLease; indexes.len()];
    let Some(item) = inner.get(key(pk.to_owned(), sk)).await? else {
        return Ok(stale);
    };
    let entry = Entry::from_item(&item)?;
    let (_, ltok) = split_token(batch[indexes[0]].token.as_i64());
    if entry.ltok != ltok || entry.owner.is_none() {
        return Ok(stale);
    }
    // Still listed at the claimed version: an edit or cancel since takes a job out of its entry.
    let answers: Vec<Applied> = indexes
        .iter()
        .map(|&i| {
            let (version, _) = split_token(batch[i].token.as_i64());
            let listed = entry
                .jobs
                .iter()
                .any(|j| j.id == batch[i].job_id && j.version == version);
            if listed {
                Applied::Yes
            } else {
                Applied::StaleLease
            }
        })
        .collect();
    let indexes: Vec<usize> = indexes
        .iter()
        .zip(&answers)
        .filter(|(_, a)| **a == Applied::Yes)
        .map(|(i, _)| *i)
        .collect();
    if indexes.is_empty() {
        return Ok(answers);
    }
    let mut records = Vec::with_capacity(indexes.len());
    for &i in &indexes {
        let c = &batch[i];
        let plan = plan_completion(c);
        let RowChange::Finish {
            state,
            ran,
            skipped,
            attempt,
        } = plan.row
        else {
            unreachable!("only finishing completions settle");
        };
        let (version, _) = split_token(c.token.as_i64());
        records.push(Settled {
            id: c.job_id,
            v: version,
            tok: c.token.as_i64(),
            fin: state_code(state),
            ran,
            skip: skipped,
            att: attempt,
            up: now,
            run: plan
                .run
                .as_ref()
                .filter(|_| inner.history)
                .map(|run| SettledRun {
                    due: c.due.as_millisecond(),
                    att: run.attempt.attempt,
                    started: run.attempt.started_at.as_millisecond(),
                    lat: run.attempt.latency_ms,
                    status: run.attempt.status,
                    err: run.attempt.error.clone(),
                    resp: run.attempt.response.clone(),
                    out: run.outcome.as_str().to_owned(),
                }),
        });
    }
    let mut settlement = key(
        entry.root.settlements(),
        &format!("{}#{:016x}", ord(ltok), rand::random::<u64>()),
    );
    settlement.insert(RECORDS.into(), pack(&records));
    if let Some(ttl) = inner.finished_ttl(now) {
        settlement.insert(TTL.into(), n(ttl));
    }
    inner.put(settlement).await?;
    Ok(answers)
}

/// The job item's change for a row change, fenced by the claim's version (and the job being
/// active), with the job's next fire time when it stays active: the caller then names the entry
/// that lists it there (`moved_to`).
fn row_change(
    inner: &Inner,
    c: &Completion,
    row: &RowChange,
    now: i64,
) -> (Change, Option<i64>, Option<i64>) {
    let (version, _) = split_token(c.token.as_i64());
    let mut change = Change::new(job_key(c.job_id));
    change.when(
        "#tok = {} AND #st = {}",
        &["tok", "st"],
        vec![n(version), n(state_code(JobState::Active))],
    );
    let mut ttl = None;
    let fire = match *row {
        RowChange::Retry { fire } => {
            change.set("fire", n(fire));
            match &c.attempt {
                Some(attempt) => change.set("att", n(i64::from(attempt.attempt))),
                None => change.add("att", 1),
            }
            Some(fire)
        }
        RowChange::Advance {
            due,
            fire,
            ran,
            skipped,
        } => {
            change.set("due", n(due));
            change.set("fire", n(fire));
            change.set("att", n(0));
            change.add("runs", ran as i64);
            change.add("skip", skipped as i64);
            Some(fire)
        }
        RowChange::Finish {
            state,
            ran,
            skipped,
            attempt,
        } => {
            change.set("st", n(state_code(state)));
            change.remove("fire");
            change.remove("epk");
            change.remove("ekey");
            if let Some(attempt) = attempt {
                change.set("att", n(i64::from(attempt)));
            }
            change.add("runs", ran as i64);
            change.add("skip", skipped as i64);
            ttl = inner.finished_ttl(now);
            change.set_or_remove(TTL, ttl.map(n));
            None
        }
    };
    // A completion ends its claim: the same token cannot settle the occurrence again.
    change.add("tok", 1);
    change.set("up", n(now));
    (change, fire, ttl)
}

/// Names `root` as the entry that lists the job the change moves, and returns its listing there.
fn moved_to(change: &mut Change, c: &Completion, fire: i64, root: &Root) -> Listed {
    change.set("epk", s(&root.pk));
    change.set("ekey", s(&root.key));
    Listed {
        id: c.job_id,
        fire,
        version: split_token(c.token.as_i64()).0 + 1,
    }
}

/// A one-off's item outlives its latest attempt by the retention (and a day): a retry moves its
/// expiry. A recurring job's item has none while it runs.
fn retry_ttl(
    inner: &Inner,
    job: &Item,
    row: &RowChange,
    change: &mut Change,
    ttl: Option<i64>,
) -> Result<Option<i64>> {
    Ok(match *row {
        RowChange::Retry { fire } if job.opt_num(TTL)?.is_some() => {
            let ttl = inner.one_off_ttl(false, fire);
            change.set_or_remove(TTL, ttl.map(n));
            ttl
        }
        RowChange::Retry { .. } => None,
        _ => ttl,
    })
}

async fn complete_one(inner: &Inner, c: &Completion, now: i64) -> Result<Applied> {
    let plan = plan_completion(c);
    let (version, _) = split_token(c.token.as_i64());
    // The job's lane and queue attributes decide where a move goes: read it (strongly), and
    // answer stale at once when it moved on.
    let Some(job) = inner.get(job_key(c.job_id)).await? else {
        return Ok(Applied::StaleLease);
    };
    if job.num("tok")? != version {
        return Ok(Applied::StaleLease);
    }
    let Some(held) = held_entry(inner, c, &job).await? else {
        return Ok(Applied::StaleLease);
    };
    let namespace = job.str("ns")?.to_owned();
    let queue_name = job.opt_str("queue")?.map(str::to_owned);
    let job_type = job.opt_str("jtype")?.map(str::to_owned);
    let lane = match &queue_name {
        Some(queue) => Lane::Queue {
            namespace: &namespace,
            queue,
        },
        None => Lane::Fired,
    };
    let payload_bytes = match super::payload::version_of(&job)? {
        Some(_) => super::payload::INLINE_MAX + 1,
        None => job.opt_str("payload")?.map_or(0, str::len),
    };
    let size = [payload_bytes];
    let queue = queue_name.as_ref().map(|_| (&job_type, &size[..]));
    let (mut change, fire, ttl) = row_change(inner, c, &plan.row, now);
    let entry = fire.map(|fire| {
        let root = inner.new_root(lane, fire);
        let listed = moved_to(&mut change, c, fire, &root);
        root_item(&root, &[listed], queue)
    });
    let ttl = retry_ttl(inner, &job, &plan.row, &mut change, ttl)?;
    if let LastError::Write(error) = plan.last_error {
        change.set_or_remove("lerr", error.map(s));
    }
    let run = run_item(inner, c, &plan);
    // A queue message leaves its old entry with the completion, so that queue counts never see
    // the message twice.
    let old_entry = queue_name.as_ref().map(|_| held);
    // The callback job this completion creates, as actions of its transaction.
    let callback = match &c.callback {
        Some(callback) => {
            let job = crate::NewJob::callback(callback, hourglass_core::from_ms(now));
            super::callback::create_actions(inner, &job).await?
        }
        None => Vec::new(),
    };
    if let Some(letter) = plan.dead_letter {
        let mut actions = vec![change.into_action(&inner.table)];
        if let Some(entry) = entry {
            actions.push(put(&inner.table, entry));
        }
        if let Some(run) = run {
            actions.push(put(&inner.table, run));
        }
        actions.extend(callback);
        let applied =
            dead_letter(inner, c, &job, actions, letter.reason, letter.attempts, now).await?;
        if applied == Applied::Yes {
            if let Some(skipped) = overlap_item(inner, c) {
                inner.put(skipped).await?;
            }
            super::jobs::keep_listed(inner, &job, ttl).await?;
            if let Some(old) = old_entry {
                leave_entry(inner, &old, c).await?;
            }
        }
        return Ok(applied);
    }
    if callback.is_empty() {
        // The new entry first: a job item never names an entry that is not there.
        if let Some(entry) = &entry {
            inner.put(entry.clone()).await?;
        }
        if inner.update(change, false).await?.is_none() {
            if let Some(entry) = entry {
                inner
                    .delete_many(vec![key(entry.str("pk")?.to_owned(), entry.str("sk")?)])
                    .await?;
            }
            return Ok(Applied::StaleLease);
        }
    } else {
        // The job's change, its new entry and the callback job together, or nothing.
        let mut actions = vec![change.into_action(&inner.table)];
        actions.extend(entry.map(|entry| put(&inner.table, entry)));
        actions.extend(callback);
        match inner.transact(actions).await? {
            Ok(()) => {}
            Err(failed) if failed.first() == Some(&true) => return Ok(Applied::StaleLease),
            Err(_) => {
                return Err(StoreError::Unavailable(
                    "dynamodb: the callback job's id is already used".into(),
                ));
            }
        }
    }
    if let Some(run) = run {
        inner.put(run).await?;
    }
    if let Some(skipped) = overlap_item(inner, c) {
        inner.put(skipped).await?;
    }
    if !matches!(plan.row, RowChange::Advance { .. }) {
        super::jobs::keep_listed(inner, &job, ttl).await?;
    }
    if let Some(old) = old_entry {
        leave_entry(inner, &old, c).await?;
    }
    Ok(Applied::Yes)
}

/// Takes a completed queue message out of the leased entry it was claimed from: deletes the
/// entry when the message is the last it lists, else marks the message gone in it (as an edit
/// does, `jobs::unlist`), so that queue counts never see it twice. The entry's other messages
/// keep their lease; the last of its claims to end deletes it.
async fn leave_entry(inner: &Inner, entry: &Entry, c: &Completion) -> Result<()> {
    if entry.jobs.iter().all(|j| j.id == c.job_id) {
        inner.forget(c.job_id, c.token.as_i64());
        return super::claim::delete_entry(inner, &entry.root.pk, &entry.sk, entry.ltok).await;
    }
    let mut change = Change::new(entry.key());
    entry.listing_exists(&mut change);
    change.append(
        super::entry::GONE,
        aws_sdk_dynamodb::types::AttributeValue::L(vec![
            aws_sdk_dynamodb::types::AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
                c.job_id.as_bytes().to_vec(),
            )),
        ]),
    );
    change.bump(super::entry::GEN);
    inner.update(change, false).await.map(|_| ())
}

/// The entry that lists the claim's job, if the claim's lease still holds it: the entry this
/// store remembers handing the claim out from, or (a claim another process made, such as a
/// queue lease completed through another API function) the part of the job's root that lists it.
pub(super) async fn held_entry(inner: &Inner, c: &Completion, job: &Item) -> Result<Option<Entry>> {
    let (version, ltok) = split_token(c.token.as_i64());
    let entry = match inner.held(c.job_id, c.token.as_i64()) {
        Some(held) => match inner.get(key(held.pk, &held.sk)).await? {
            Some(item) => Some(Entry::from_item(&item)?),
            None => None,
        },
        None => match Root::of_job(job)? {
            Some(root) => listing_part(inner, &root, c.job_id, version).await?,
            None => None,
        },
    };
    Ok(entry.filter(|e| {
        e.ltok == ltok
            && e.owner.is_some()
            && e.jobs
                .iter()
                .any(|j| j.id == c.job_id && j.version == version)
    }))
}

/// The part of `root` that lists job `id` at `version`, if one does.
pub(super) async fn listing_part(
    inner: &Inner,
    root: &Root,
    id: JobId,
    version: i64,
) -> Result<Option<Entry>> {
    let mut found = None;
    for item in inner
        .query(&Query::new(root.pk.clone()).prefix(format!("{}#", root.key)))
        .await?
    {
        let entry = Entry::from_item(&item)?;
        if entry
            .jobs
            .iter()
            .any(|j| j.id == id && j.version == version)
        {
            found = Some(entry);
        }
    }
    Ok(found)
}

/// Applies a completion that dead-letters its occurrence: the job's change and the letter in one
/// transaction.
async fn dead_letter(
    inner: &Inner,
    c: &Completion,
    job: &Item,
    actions: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
    reason: &str,
    attempts: u32,
    now: i64,
) -> Result<Applied> {
    let (version, _) = split_token(c.token.as_i64());
    let payload = match super::payload::version_of(job)? {
        None => job.opt_str("payload")?.map(str::to_owned),
        Some(payload_version) => {
            match inner
                .claimed_payload(c.job_id, payload_version, version)
                .await?
            {
                Some(payload) => Some(payload),
                // Edited since the read: the transaction would be refused.
                None => return Ok(Applied::StaleLease),
            }
        }
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
        // Under the occurrence's origin, as its runs: its delivery id is the parent's.
        let (letter_job, letter_due) = c.run_of();
        put_attr("job", s(letter_job.to_string()));
        put_attr("due", n(letter_due.as_millisecond()));
        put_attr("atts", n(i64::from(attempts)));
        put_attr("reason", s(reason));
        put_attr("spec", s(job.str("spec")?));
        if let Some(payload) = &payload {
            put_attr("payload", s(payload));
        }
        put_attr("cr", n(now));
        let mut attempt = actions.clone();
        let letter_at = attempt.len();
        attempt.push(put_new(&inner.table, item));
        // The namespace's list of letters, and the list of all of them (both in id order).
        for list in letter_lists(inner, job.str("ns")?, id) {
            attempt.push(put(&inner.table, list));
        }
        match inner.transact(attempt).await? {
            Ok(()) => return Ok(Applied::Yes),
            Err(failed) if failed.first() == Some(&true) => return Ok(Applied::StaleLease),
            // The letter's id was taken: another tail.
            Err(failed) if failed.get(letter_at) == Some(&true) => continue,
            // Another item's condition: the callback job this completion creates exists.
            Err(_) => {
                return Err(StoreError::Unavailable(
                    "dynamodb: the dead letter's callback job could not be created (its id is \
                     taken); nothing was changed"
                        .into(),
                ));
            }
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: no free dead-letter id after four tries".into(),
    ))
}

/// The items that list dead letter `id` of `namespace`: in its namespace's list, and in one of
/// the shards of the list of all letters.
pub(super) fn letter_lists(inner: &Inner, namespace: &str, id: i64) -> [Item; 2] {
    [
        key(letters_pk(namespace), &ord(id)),
        key(format!("dl#{}", id % i64::from(inner.shards)), &ord(id)),
    ]
}
