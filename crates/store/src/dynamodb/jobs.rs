//! Jobs as the API changes them: creating batches (with idempotent keys), edits and lifecycle
//! transitions (decided by `rules.rs`, applied under the token read, with a fence entry for other
//! nodes), reading, listing and counting.

use std::collections::HashMap;

use hourglass_core::{JobId, JobSpec, JobState};

use super::Inner;
use super::complete::finished_at;
use super::item::{
    Attrs, Item, KEY_SK, Lane, NAMESPACE_INDEX, due_sk, encode_spec, item_bytes, job_from_item,
    job_id, job_key, key, key_pk, n, namespace_pk, new_job_item, ord, payload_key, queues_pk, s,
    state_code,
};
use super::payload;
use super::table::{Change, Query, TRANSACTION_BYTES, TRANSACTION_LIMIT, delete, put, put_new};
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
                match inner.read_job(holder).await? {
                    Some((record, _)) => Some((holder, held.num("fp")?, record)),
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
    // Each new job's writes, kept together in one transaction, with the bytes of their items.
    let mut groups: Vec<(Vec<aws_sdk_dynamodb::types::TransactWriteItem>, usize)> = Vec::new();
    let mut undo: Vec<Vec<Item>> = Vec::new();
    let mut queues = Vec::new();
    for (job, decision) in jobs.iter().zip(decisions) {
        if !matches!(decision, Creation::New) {
            continue;
        }
        let item = new_job_item(job, inner.shard_of(job.id));
        let mut bytes = item_bytes(&item);
        let mut group = vec![put_new(&inner.table, item)];
        let mut keys = vec![job_key(job.id)];
        if let Some(payload) = job.payload.as_deref().filter(|p| payload::lives_out(p)) {
            let item = payload::payload_item(job.id, payload, 0);
            bytes += item_bytes(&item);
            group.push(put_new(&inner.table, item));
            keys.push(payload_key(job.id));
        }
        if let Some(key_text) = &job.key {
            let mut item = key(key_pk(&job.namespace, key_text), KEY_SK);
            item.insert("job".into(), s(job.id.to_string()));
            item.insert("fp".into(), n(job.fingerprint));
            keys.push(item.clone());
            bytes += item_bytes(&item);
            group.push(put_new(&inner.table, item));
        }
        if let Some(queue) = job.spec.target.queue() {
            queues.push((job.namespace.clone(), queue.to_owned()));
        }
        groups.push((group, bytes));
        undo.push(keys);
    }
    register_queues(inner, queues).await?;
    if groups.is_empty() {
        return Ok(true);
    }
    // A lone unkeyed job needs no transaction (half the write cost): its payload item, if it has
    // one, is written first, so that whoever can read the job can read its payload.
    if groups.len() == 1 && undo[0].iter().all(|k| !is_key_item(k)) {
        let job = jobs
            .iter()
            .zip(decisions)
            .find(|(_, d)| matches!(d, Creation::New))
            .map(|(j, _)| j)
            .expect("one new job");
        let used = || StoreError::Unavailable(format!("job id {} is already used", job.id));
        let payload = job.payload.as_deref().filter(|p| payload::lives_out(p));
        if let Some(payload) = payload
            && !inner
                .put_new(payload::payload_item(job.id, payload, 0))
                .await?
        {
            return Err(used());
        }
        if inner
            .put_new(new_job_item(job, inner.shard_of(job.id)))
            .await?
        {
            return Ok(true);
        }
        if payload.is_some() {
            // Ours (it did not exist a moment ago): not left behind without its job.
            inner.delete_many(vec![payload_key(job.id)]).await?;
        }
        return Err(used());
    }
    let chunks = pack(groups.into_iter().zip(undo).map(|((g, b), k)| (g, b, k)));
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

/// Packs each new job's writes (its actions, their items' bytes, and the keys that undo them),
/// kept whole and in order, into as few transactions as the service's limits allow: at most
/// [`TRANSACTION_LIMIT`] actions and [`TRANSACTION_BYTES`] of items each.
fn pack<A>(
    groups: impl IntoIterator<Item = (Vec<A>, usize, Vec<Item>)>,
) -> Vec<(Vec<A>, Vec<Item>)> {
    let mut chunks: Vec<(Vec<A>, Vec<Item>)> = Vec::new();
    let mut chunk_bytes = 0;
    for (actions, bytes, keys) in groups {
        let full = chunks.last().is_none_or(|(chunk, _)| {
            chunk.len() + actions.len() > TRANSACTION_LIMIT
                || chunk_bytes + bytes > TRANSACTION_BYTES
        });
        if full {
            chunks.push((Vec::new(), Vec::new()));
            chunk_bytes = 0;
        }
        let last = chunks.last_mut().expect("a chunk");
        last.0.extend(actions);
        last.1.extend(keys);
        chunk_bytes += bytes;
    }
    chunks
}

fn is_key_put(action: &aws_sdk_dynamodb::types::TransactWriteItem) -> bool {
    action.put().is_some_and(|p| is_key_item(p.item()))
}

fn is_key_item(item: &Item) -> bool {
    item.get("sk")
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

pub(super) async fn get_job(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
) -> Result<Option<JobRecord>> {
    Ok(read_job(inner, namespace, id)
        .await?
        .map(|(record, _)| record))
}

/// A job in a namespace with its payload, and the version of its payload item if it has one.
async fn read_job(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
) -> Result<Option<(JobRecord, Option<i64>)>> {
    Ok(inner
        .read_job(id)
        .await?
        .filter(|(record, _)| namespace.is_none_or(|ns| ns == record.namespace)))
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

/// The attributes a job record is read from (`pout` is [`payload::VERSION`]).
pub(super) const JOB_ATTRS: [&str; 22] = [
    "pk", "id", "ns", "key", "st", "spec", "payload", "due", "fire", "att", "runs", "skip", "cr",
    "up", "tok", "tkey", "tdue", "lowner", "jtype", "queue", "lerr", "pout",
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
                jobs.push((job.id, item));
            }
        }
        jobs.sort_by_key(|(id, _)| *id);
        jobs.truncate(query.limit);
        // Payloads only for the page: read after the cut.
        let mut jobs = inner
            .records(jobs.into_iter().map(|(_, item)| item).collect())
            .await?;
        jobs.retain(|job| matches(&query, job));
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
        let mut jobs = inner
            .records(
                inner
                    .get_many(ids.iter().map(|id| job_key(*id)).collect())
                    .await?,
            )
            .await?;
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

/// Reads a job in a namespace (with the version of its payload item, if it has one), or answers
/// not found.
async fn load(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
) -> Result<(JobRecord, Option<i64>)> {
    read_job(inner, namespace, id)
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
        let (record, stored_version) = load(inner, namespace, id).await?;
        let (state, due, fire) = plan_update(&record, &update)?;
        let now = update.now.as_millisecond();
        if let Some(queue) = update.spec.target.queue() {
            register_queues(inner, vec![(record.namespace.clone(), queue.to_owned())]).await?;
        }
        let mut change = guarded(&record, state, now);
        change.set("spec", s(encode_spec(&update.spec)));
        // The payload in its own item at the token this edit leaves, or inline.
        let mut actions = Vec::with_capacity(3);
        match update.payload.as_deref() {
            Some(payload) if payload::lives_out(payload) => {
                let version = record.token + 1;
                change.remove("payload");
                change.set(payload::VERSION, n(version));
                let item = payload::payload_item(id, payload, version);
                actions.push(put(&inner.table, item));
            }
            inline => {
                change.set_or_remove("payload", inline.map(s));
                change.remove(payload::VERSION);
                if stored_version.is_some() {
                    actions.push(delete(&inner.table, payload_key(id), None));
                }
            }
        }
        change.set_or_remove("jtype", update.spec.job_type.as_deref().map(s));
        change.set_or_remove("queue", update.spec.target.queue().map(s));
        change.set_or_remove("due", due.map(n));
        change.set_or_remove("fire", fire.map(n));
        place(inner, &mut change, &record, &update.spec, state, fire, now);
        actions.push(change.into_action(&inner.table));
        actions.push(put(&inner.table, fence(inner, id, record.token + 1, now)));
        if inner.transact(actions).await?.is_ok() {
            announce_change(inner, &record, &update.spec, fire);
            return load(inner, namespace, id).await.map(|(record, _)| record);
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
        let (record, _) = load(inner, namespace, id).await?;
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
            return load(inner, namespace, id).await.map(|(record, _)| record);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups of (job number, actions, bytes); what `pack` made of them, as job numbers.
    fn packed(groups: &[(u32, usize, usize)]) -> Vec<Vec<u32>> {
        let chunks = pack(groups.iter().map(|&(job, actions, bytes)| {
            (vec![job; actions], bytes, vec![key(job.to_string(), "j")])
        }));
        for (actions, keys) in &chunks {
            assert!(
                !actions.is_empty() && !keys.is_empty(),
                "an empty transaction"
            );
        }
        chunks
            .into_iter()
            .map(|(mut actions, _)| {
                actions.dedup();
                actions
            })
            .collect()
    }

    #[test]
    fn transactions_stay_under_the_action_limit() {
        // 60 jobs of one action and 60 of two: 180 actions.
        let groups: Vec<_> = (0..120).map(|i| (i, 1 + (i >= 60) as usize, 500)).collect();
        let chunks = packed(&groups);
        assert_eq!(chunks.len(), 2);
        // The first takes 60 one-action jobs and 20 two-action ones: exactly 100 actions.
        assert_eq!(chunks[0], (0..80).collect::<Vec<_>>());
        assert_eq!(chunks[1], (80..120).collect::<Vec<_>>());
    }

    #[test]
    fn transactions_stay_under_the_size_limit() {
        // Twenty jobs with a 256 KiB payload each (5 MiB in all) and small ones between.
        let big = 256 * 1024 + 700;
        let groups: Vec<_> = (0..40)
            .map(|i| if i % 2 == 0 { (i, 2, big) } else { (i, 1, 700) })
            .collect();
        let chunks = packed(&groups);
        let bytes =
            |chunk: &Vec<u32>| -> usize { chunk.iter().map(|&i| groups[i as usize].2).sum() };
        assert!(chunks.len() >= 2, "5 MiB in one transaction");
        for chunk in &chunks {
            assert!(bytes(chunk) <= TRANSACTION_BYTES, "{} bytes", bytes(chunk));
        }
        // In order, every job once.
        let flat: Vec<u32> = chunks.concat();
        assert_eq!(flat, (0..40).collect::<Vec<_>>());
    }
}
