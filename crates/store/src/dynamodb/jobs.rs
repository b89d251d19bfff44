//! Jobs as the API changes them: creating batches (with idempotent keys), edits and lifecycle
//! transitions (decided by `rules.rs`, applied under the token read, with a fence entry for other
//! nodes), reading, listing and counting.

use std::collections::HashMap;

use hourglass_core::{JobId, JobSpec, JobState};

use super::Inner;
use super::complete::finished_at;
use super::item::{
    Attrs, Item, KEY_SK, Lane, NAMESPACE_INDEX, due_sk, encode_spec, job_from_item, job_id,
    job_key, key, key_pk, n, namespace_pk, new_job_item, ord, queues_pk, s, state_code,
};
use super::table::{Change, Query, TRANSACTION_LIMIT, delete, put, put_new};
use crate::rules::{TransitionPlan, plan_transition, plan_update};
use crate::{Created, JobQuery, JobRecord, JobUpdate, NewJob, Result, StoreError, Transition};

/// How often a write that lost a race (a key taken meanwhile, a job changed between its read and
/// its conditional write) is decided again before the call reports the store unavailable.
const RACES: usize = 5;

/// A decision about one job of a create batch, made before anything is written.
enum Creation {
    New,
    /// The key is held, with the same fingerprint, by this stored job.
    Existing(Box<JobRecord>),
    /// The key is taken, with the same fingerprint, by the job at this index of the same batch.
    SameAs(usize),
}

pub(super) async fn create_jobs(inner: &Inner, jobs: Vec<NewJob>) -> Result<Vec<Created>> {
    for _ in 0..RACES {
        let decisions = decide(inner, &jobs).await?;
        if write_new(inner, &jobs, &decisions).await? {
            let mut dues = super::Dues::default();
            for (job, decision) in jobs.iter().zip(&decisions) {
                if matches!(decision, Creation::New) {
                    let at = job.first_due.as_millisecond();
                    dues.add(&job.namespace, job.spec.target.queue(), at);
                }
            }
            inner.announce(dues);
            let mut out: Vec<Created> = Vec::with_capacity(jobs.len());
            for (job, decision) in jobs.into_iter().zip(decisions) {
                let created = match decision {
                    Creation::New => Created::New(job.into_record()),
                    Creation::Existing(record) => Created::Existing(*record),
                    Creation::SameAs(i) => Created::Existing(out[i].record().clone()),
                };
                out.push(created);
            }
            return Ok(out);
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: the batch's keys kept being taken by concurrent creates; try again".into(),
    ))
}

/// Decides every job of the batch: new, the stored holder of its key, or an earlier job of the
/// batch; a key held with another fingerprint fails the whole batch.
async fn decide(inner: &Inner, jobs: &[NewJob]) -> Result<Vec<Creation>> {
    let mut decisions = Vec::with_capacity(jobs.len());
    let mut batch_keys: HashMap<(&str, &str), usize> = HashMap::new();
    for (index, job) in jobs.iter().enumerate() {
        let Some(job_key_text) = &job.key else {
            decisions.push(Creation::New);
            continue;
        };
        let slot = (job.namespace.as_str(), job_key_text.as_str());
        let stored = match inner
            .get(key(key_pk(&job.namespace, job_key_text), KEY_SK))
            .await?
        {
            Some(held) => {
                let holder = job_id(held.str("job")?)?;
                match inner.get(job_key(holder)).await? {
                    Some(item) => Some((holder, held.num("fp")?, job_from_item(&item)?)),
                    // The key's job was purged under it: the key is free again.
                    None => {
                        release_key(inner, &job.namespace, job_key_text, holder).await?;
                        None
                    }
                }
            }
            None => None,
        };
        let (holder, fingerprint, decision) = match (stored, batch_keys.get(&slot)) {
            (Some((holder, fingerprint, record)), _) => {
                (holder, fingerprint, Creation::Existing(Box::new(record)))
            }
            (None, Some(&i)) => (jobs[i].id, jobs[i].fingerprint, Creation::SameAs(i)),
            (None, None) => {
                batch_keys.insert(slot, index);
                (job.id, job.fingerprint, Creation::New)
            }
        };
        if fingerprint != job.fingerprint {
            return Err(StoreError::KeyConflict {
                index,
                key: job_key_text.clone(),
                existing: holder,
            });
        }
        decisions.push(decision);
    }
    Ok(decisions)
}

async fn release_key(inner: &Inner, namespace: &str, key_text: &str, holder: JobId) -> Result<()> {
    let action = delete(
        &inner.table,
        key(key_pk(namespace, key_text), KEY_SK),
        Some(&holder.to_string()),
    );
    // Someone else released or reused it meanwhile: nothing to do either way.
    inner.transact(vec![action]).await.map(|_| ())
}

/// Writes the new jobs (with their keys and queue names), in as few transactions as the service
/// allows. `false` when a key was taken meanwhile: whatever this call wrote is undone, and the
/// batch must be decided again.
async fn write_new(inner: &Inner, jobs: &[NewJob], decisions: &[Creation]) -> Result<bool> {
    // Each new job's writes, kept together in one transaction.
    let mut groups: Vec<Vec<aws_sdk_dynamodb::types::TransactWriteItem>> = Vec::new();
    let mut undo: Vec<Vec<Item>> = Vec::new();
    let mut queues = Vec::new();
    for (job, decision) in jobs.iter().zip(decisions) {
        if !matches!(decision, Creation::New) {
            continue;
        }
        let mut group = vec![put_new(
            &inner.table,
            new_job_item(job, inner.shard_of(job.id)),
        )];
        let mut keys = vec![job_key(job.id)];
        if let Some(key_text) = &job.key {
            let mut item = key(key_pk(&job.namespace, key_text), KEY_SK);
            item.insert("job".into(), s(job.id.to_string()));
            item.insert("fp".into(), n(job.fingerprint));
            keys.push(item.clone());
            group.push(put_new(&inner.table, item));
        }
        if let Some(queue) = job.spec.target.queue() {
            queues.push((job.namespace.clone(), queue.to_owned()));
        }
        groups.push(group);
        undo.push(keys);
    }
    register_queues(inner, queues).await?;
    if groups.is_empty() {
        return Ok(true);
    }
    // A lone unkeyed job needs no transaction (half the write cost).
    if groups.len() == 1 && groups[0].len() == 1 {
        let job = jobs
            .iter()
            .zip(decisions)
            .find(|(_, d)| matches!(d, Creation::New))
            .map(|(j, _)| j)
            .expect("one new job");
        if inner
            .put_new(new_job_item(job, inner.shard_of(job.id)))
            .await?
        {
            return Ok(true);
        }
        return Err(StoreError::Unavailable(format!(
            "job id {} is already used",
            job.id
        )));
    }
    let mut chunks: Vec<(Vec<_>, Vec<Item>)> = vec![(Vec::new(), Vec::new())];
    for (group, keys) in groups.into_iter().zip(undo) {
        let last = chunks.last_mut().expect("a chunk");
        if last.0.len() + group.len() > TRANSACTION_LIMIT {
            chunks.push((Vec::new(), Vec::new()));
        }
        let last = chunks.last_mut().expect("a chunk");
        last.0.extend(group);
        last.1.extend(keys);
    }
    let mut written: Vec<Item> = Vec::new();
    for (actions, keys) in chunks {
        let outcome = inner.transact(actions.clone()).await;
        match outcome {
            Ok(Ok(())) => written.extend(keys),
            Ok(Err(failed)) => {
                inner.delete_many(written).await?;
                // A key item failed its condition: taken by a concurrent create.
                let key_taken = failed
                    .iter()
                    .zip(&actions)
                    .any(|(f, a)| *f && is_key_put(a));
                if key_taken {
                    return Ok(false);
                }
                return Err(StoreError::Unavailable(
                    "a job id of the batch is already used".into(),
                ));
            }
            Err(e) => {
                // Best effort: the batch is reported failed, so leave nothing of it behind.
                if let Err(undo) = inner.delete_many(written).await {
                    tracing::warn!(error = %undo, "could not undo part of a failed create batch");
                }
                return Err(e);
            }
        }
    }
    Ok(true)
}

fn is_key_put(action: &aws_sdk_dynamodb::types::TransactWriteItem) -> bool {
    action
        .put()
        .and_then(|p| p.item().get("sk"))
        .is_some_and(|sk| sk.as_s().is_ok_and(|sk| sk == KEY_SK))
}

/// Records queue names a namespace uses (for its queue list), once per name and process.
async fn register_queues(inner: &Inner, queues: Vec<(String, String)>) -> Result<()> {
    for (namespace, queue) in queues {
        let fresh = inner
            .known_queues
            .lock()
            .map(|known| !known.contains(&(namespace.clone(), queue.clone())))
            .unwrap_or(true);
        if !fresh {
            continue;
        }
        inner.put(key(queues_pk(&namespace), &queue)).await?;
        if let Ok(mut known) = inner.known_queues.lock() {
            known.insert((namespace, queue));
        }
    }
    Ok(())
}

fn in_namespace(record: JobRecord, namespace: Option<&str>) -> Option<JobRecord> {
    namespace
        .is_none_or(|ns| ns == record.namespace)
        .then_some(record)
}

pub(super) async fn get_job(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
) -> Result<Option<JobRecord>> {
    match inner.get(job_key(id)).await? {
        Some(item) => Ok(in_namespace(job_from_item(&item)?, namespace)),
        None => Ok(None),
    }
}

pub(super) async fn get_job_by_key(
    inner: &Inner,
    namespace: &str,
    key_text: &str,
) -> Result<Option<JobRecord>> {
    let Some(held) = inner.get(key(key_pk(namespace, key_text), KEY_SK)).await? else {
        return Ok(None);
    };
    get_job(inner, Some(namespace), job_id(held.str("job")?)?).await
}

/// The attributes a job record is read from.
const JOB_ATTRS: [&str; 21] = [
    "pk", "id", "ns", "key", "st", "spec", "payload", "due", "fire", "att", "runs", "skip", "cr",
    "up", "tok", "tkey", "tdue", "lowner", "jtype", "queue", "lerr",
];

fn matches(query: &JobQuery, job: &JobRecord) -> bool {
    let due = job.next_due.map(|t| t.as_millisecond());
    query.state.is_none_or(|s| s == job.state)
        && query
            .job_type
            .as_ref()
            .is_none_or(|t| job.spec.job_type.as_ref() == Some(t))
        // A job without a due time is in no due window (as NULL compares in SQL).
        && query
            .due_before
            .is_none_or(|b| due.is_some_and(|d| d < b.as_millisecond()))
        && query
            .due_after
            .is_none_or(|a| due.is_some_and(|d| d >= a.as_millisecond()))
        && query
            .queue
            .as_deref()
            .is_none_or(|q| job.spec.target.queue() == Some(q))
}

pub(super) async fn list_jobs(inner: &Inner, query: JobQuery) -> Result<Vec<JobRecord>> {
    let mut out = Vec::new();
    if query.limit == 0 {
        return Ok(out);
    }
    let Some(namespace) = query.namespace.clone() else {
        // Across namespaces: a scan (admin only; see the module's opening comment).
        let mut jobs = Vec::new();
        for item in inner.scan("j#", &JOB_ATTRS).await? {
            let job = job_from_item(&item)?;
            if query.after.is_none_or(|after| job.id > after) && matches(&query, &job) {
                jobs.push(job);
            }
        }
        jobs.sort_by_key(|j| j.id);
        jobs.truncate(query.limit);
        return Ok(jobs);
    };
    // A namespace's ids in order, a page at a time, each page's jobs read and filtered.
    let page = query.limit.clamp(25, 100);
    let mut after = query.after;
    loop {
        let mut ids_query = Query::new(Some(NAMESPACE_INDEX), namespace_pk(&namespace)).limit(page);
        if let Some(after) = after {
            ids_query = ids_query.above(after.to_string());
        }
        let entries = inner.query(&ids_query).await?;
        let mut ids = Vec::with_capacity(entries.len());
        for entry in &entries {
            ids.push(job_id(entry.str("nsk")?)?);
        }
        let mut jobs = Vec::with_capacity(ids.len());
        for item in inner
            .get_many(ids.iter().map(|id| job_key(*id)).collect())
            .await?
        {
            jobs.push(job_from_item(&item)?);
        }
        jobs.sort_by_key(|j| j.id);
        for job in jobs {
            if job.namespace == namespace && matches(&query, &job) {
                out.push(job);
                if out.len() == query.limit {
                    return Ok(out);
                }
            }
        }
        match ids.last() {
            Some(last) if entries.len() == page => after = Some(*last),
            _ => return Ok(out),
        }
    }
}

pub(super) async fn count_jobs(inner: &Inner, namespace: Option<&str>) -> Result<u64> {
    let items = match namespace {
        Some(ns) => {
            inner
                .query(&Query::new(Some(NAMESPACE_INDEX), namespace_pk(ns)))
                .await?
        }
        None => inner.scan("j#", &["pk"]).await?,
    };
    Ok(items.len() as u64)
}

/// A fence entry: other nodes holding a claim on `id` below `token` drop it (see `history.rs`'s
/// poller).
fn fence(inner: &Inner, id: JobId, token: i64, now: i64) -> Item {
    let mut item = key(
        format!("x#{}", inner.shard_of(id)),
        &format!("{}#{id}#{}", ord(now), ord(token)),
    );
    item.insert("job".into(), s(id.to_string()));
    item.insert("tok".into(), n(token));
    // Fences matter for seconds; DynamoDB's TTL (when enabled on `expires`) and the retention
    // sweep remove them.
    item.insert("expires".into(), n(now / 1000 + 3600));
    item
}

/// Where a job's item sits in the indexes for its state and fire time.
fn place(
    inner: &Inner,
    change: &mut Change,
    record: &JobRecord,
    spec: &JobSpec,
    state: JobState,
    fire: Option<i64>,
    now: i64,
) {
    match fire {
        Some(fire) if state == JobState::Active => {
            let lane = Lane::of_spec(&record.namespace, spec);
            change.set("dpk", s(lane.partition(inner.shard_of(record.id))));
            change.set("dsk", s(due_sk(fire, record.id)));
        }
        _ => {
            change.remove("dpk");
            change.remove("dsk");
        }
    }
    if state.is_terminal() {
        finished_at(inner, change, record.id, now);
    } else {
        change.remove("apk");
        change.remove("ask");
    }
}

/// Reads a job in a namespace, or answers not found.
async fn load(inner: &Inner, namespace: Option<&str>, id: JobId) -> Result<JobRecord> {
    get_job(inner, namespace, id)
        .await?
        .ok_or(StoreError::NotFound)
}

/// A change of a job read at `record.token`, applied only if no one changed it since.
fn guarded(record: &JobRecord, state: JobState, now: i64) -> Change {
    let mut change = Change::new(job_key(record.id));
    change.when("#tok = {}", &["tok"], vec![n(record.token)]);
    change.set("st", n(state_code(state)));
    change.set("att", n(0));
    change.remove("lowner");
    change.remove("lfire");
    change.add("tok", 1);
    change.set("up", n(now));
    change
}

pub(super) async fn update_job(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
    update: JobUpdate,
) -> Result<JobRecord> {
    for _ in 0..RACES {
        let record = load(inner, namespace, id).await?;
        let (state, due, fire) = plan_update(&record, &update)?;
        let now = update.now.as_millisecond();
        if let Some(queue) = update.spec.target.queue() {
            register_queues(inner, vec![(record.namespace.clone(), queue.to_owned())]).await?;
        }
        let mut change = guarded(&record, state, now);
        change.set("spec", s(encode_spec(&update.spec)));
        change.set_or_remove("payload", update.payload.as_deref().map(s));
        change.set_or_remove("jtype", update.spec.job_type.as_deref().map(s));
        change.set_or_remove("queue", update.spec.target.queue().map(s));
        change.set_or_remove("due", due.map(n));
        change.set_or_remove("fire", fire.map(n));
        place(inner, &mut change, &record, &update.spec, state, fire, now);
        let actions = vec![
            change.into_action(&inner.table),
            put(&inner.table, fence(inner, id, record.token + 1, now)),
        ];
        if inner.transact(actions).await?.is_ok() {
            announce_change(inner, &record, &update.spec, fire);
            return load(inner, namespace, id).await;
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: the job kept changing under the edit; try again".into(),
    ))
}

pub(super) async fn transition(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
    transition: Transition,
) -> Result<JobRecord> {
    for _ in 0..RACES {
        let record = load(inner, namespace, id).await?;
        let (state, due, fire, clear_key, trigger_key, now) =
            match plan_transition(&record, transition.clone())? {
                TransitionPlan::Unchanged => return Ok(record),
                TransitionPlan::Apply {
                    state,
                    due,
                    fire,
                    clear_key,
                    trigger_key,
                    now,
                } => (state, due, fire, clear_key, trigger_key, now),
            };
        let mut change = guarded(&record, state, now);
        change.set_or_remove("due", due.map(n));
        change.set_or_remove("fire", fire.map(n));
        place(inner, &mut change, &record, &record.spec, state, fire, now);
        if let Some(key_text) = &trigger_key {
            change.set("tkey", s(key_text));
            change.set("tdue", n(now));
        }
        let mut actions = Vec::with_capacity(3);
        if clear_key && let Some(key_text) = &record.key {
            change.remove("key");
            // A cancelled job frees its key for a new job (unless it no longer holds it).
            let key_item = key(key_pk(&record.namespace, key_text), KEY_SK);
            if inner
                .get(key_item.clone())
                .await?
                .is_some_and(|held| held.str("job").is_ok_and(|j| j == id.to_string()))
            {
                actions.push(delete(&inner.table, key_item, Some(&id.to_string())));
            }
        }
        actions.push(change.into_action(&inner.table));
        actions.push(put(&inner.table, fence(inner, id, record.token + 1, now)));
        if inner.transact(actions).await?.is_ok() {
            announce_change(inner, &record, &record.spec, fire);
            return load(inner, namespace, id).await;
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: the job kept changing under the transition; try again".into(),
    ))
}

/// An edit or transition applied to the job read as `record`: older claims are fenced, and the
/// job is due at `fire` if it has one.
fn announce_change(inner: &Inner, record: &JobRecord, spec: &JobSpec, fire: Option<i64>) {
    if let Some(fire) = fire {
        let mut dues = super::Dues::default();
        dues.add(&record.namespace, spec.target.queue(), fire);
        inner.announce(dues);
    }
    inner.fence(record.id, record.token + 1);
}

/// Keys of a job's own items besides the job: its key item, when it still holds it.
pub(super) async fn key_item_of(inner: &Inner, item: &Item) -> Result<Option<Item>> {
    let (Some(key_text), namespace, id) = (item.opt_str("key")?, item.str("ns")?, item.str("id")?)
    else {
        return Ok(None);
    };
    let key_item = key(key_pk(namespace, key_text), KEY_SK);
    Ok(inner
        .get(key_item.clone())
        .await?
        .filter(|held| held.str("job").is_ok_and(|j| j == id))
        .map(|_| key_item))
}
