//! Jobs as the API changes them: creating batches (with idempotent keys), edits and lifecycle
//! transitions (decided by `rules.rs`, applied under the version read, with a fence entry for
//! other nodes), reading (the job item with its claim and a settled delivery folded in), listing
//! (from the namespace's registry) and counting.

use std::collections::HashMap;

use hourglass_core::{JobId, JobSpec, JobState, from_ms};

use super::Inner;
use super::entry::{Entry, Listed, QUEUE_LISTED, Root, root_item, windows, windows_of};
use super::item::{
    Attrs, Item, KEY_SK, Lane, encode_spec, job_id, job_key, key, key_pk, n, new_job_item, ord,
    payload_key, queues_pk, registry_pk, s, state_code,
};
use super::payload;
// Where the other writers of job items (completions, claims) have long found it.
pub(super) use super::listing::keep_listed;
use super::table::{Change, Query, TTL, delete, put};
use crate::rules::{TransitionPlan, plan_transition, plan_update};
use crate::{AuditRecord, Created, JobRecord, JobUpdate, NewJob, Result, StoreError, Transition};

/// How long a key item without its job is taken to belong to a create still under way.
pub(super) const KEY_GRACE_MS: i64 = 60_000;

/// How often a write that lost a race (a key taken meanwhile, a job changed between its read and
/// its conditional write) is decided again before the call reports the store unavailable.
const RACES: usize = 5;

/// Waits before deciding a lost race again: a random time up to 25 ms doubled for each race
/// lost, so that writers racing for one item (a job's edits and its completions, creates of
/// one key) do not meet again at once.
async fn after_lost_race(race: usize) {
    if race == 0 {
        return;
    }
    let ceiling = 25u64 << race.min(6);
    let wait = rand::random::<u64>() % ceiling;
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
}

/// A decision about one job of a create batch, made before anything is written.
enum Creation {
    New,
    /// The key is held, with the same fingerprint, by this stored job.
    Existing(Box<JobRecord>),
    /// The key is taken, with the same fingerprint, by the job at this index of the same batch.
    SameAs(usize),
}

pub(super) async fn create_jobs(
    inner: &Inner,
    jobs: Vec<NewJob>,
    audit: Option<&AuditRecord>,
) -> Result<Vec<Created>> {
    for race in 0..RACES {
        after_lost_race(race).await;
        let decisions = decide(inner, &jobs).await?;
        if write_new(inner, &jobs, &decisions, audit).await? {
            let mut dues = super::Dues::default();
            for (job, decision) in jobs.iter().zip(&decisions) {
                if matches!(decision, Creation::New) {
                    let at = job.first_fire().as_millisecond();
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
                match read_job(inner, None, holder).await? {
                    Some(read) => Some((holder, held.num("fp")?, read.record)),
                    // A create that wrote the key is still writing its job (a key item is written
                    // first): not decided until it is done, or has clearly failed.
                    None if held
                        .opt_num("cr")?
                        .is_some_and(|cr| job.now.as_millisecond() - cr < KEY_GRACE_MS) =>
                    {
                        return Err(StoreError::Unavailable(format!(
                            "key {job_key_text:?} is being used by a create still under way; \
                             try again"
                        )));
                    }
                    // The key's job was purged under it, or its create failed: the key is free
                    // again.
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

/// Writes the new jobs: their keys (each a conditional put, so a key taken meanwhile is seen),
/// payload items, job items, due entries, and last the namespace's registry item, which makes
/// them listed, with `audit` naming them beside it in that last request. Nothing here is a
/// transaction (which would bill every item twice); a failure deletes what this call wrote, its
/// audit entry included. `false` when a key was taken meanwhile: the batch must be decided
/// again.
async fn write_new(
    inner: &Inner,
    jobs: &[NewJob],
    decisions: &[Creation],
    audit: Option<&AuditRecord>,
) -> Result<bool> {
    let new: Vec<&NewJob> = jobs
        .iter()
        .zip(decisions)
        .filter(|(_, d)| matches!(d, Creation::New))
        .map(|(j, _)| j)
        .collect();
    if new.is_empty() {
        return Ok(true);
    }
    register_queues(
        inner,
        new.iter()
            .filter_map(|j| Some((j.namespace.clone(), j.spec.target.queue()?.to_owned())))
            .collect(),
    )
    .await?;
    let mut written: Vec<Item> = Vec::new();
    let outcome = write_parts(inner, &new, audit, &mut written).await;
    // Undone in the reverse order: an entry goes before the job items it lists (a claim trusting
    // its snapshot must never find an entry whose jobs were undone).
    written.reverse();
    match outcome {
        Ok(true) => Ok(true),
        Ok(false) => {
            inner.delete_many(written).await?;
            Ok(false)
        }
        Err(e) => {
            // Best effort: the batch is reported failed, so leave nothing of it behind.
            if let Err(undo) = inner.delete_many(written).await {
                tracing::warn!(error = %undo, "could not undo part of a failed create batch");
            }
            Err(e)
        }
    }
}

async fn write_parts(
    inner: &Inner,
    new: &[&NewJob],
    audit: Option<&AuditRecord>,
    written: &mut Vec<Item>,
) -> Result<bool> {
    for job in new {
        let Some(key_text) = &job.key else { continue };
        let mut item = key(key_pk(&job.namespace, key_text), KEY_SK);
        item.insert("job".into(), s(job.id.to_string()));
        item.insert("fp".into(), n(job.fingerprint));
        item.insert("cr".into(), n(job.now.as_millisecond()));
        let keyed = key(key_pk(&job.namespace, key_text), KEY_SK);
        if !inner.put_new(item).await? {
            return Ok(false);
        }
        written.push(keyed);
    }
    let payloads: Vec<Item> = new
        .iter()
        .filter_map(|j| {
            let payload = j.payload.as_deref().filter(|p| payload::lives_out(p))?;
            Some(payload::payload_item(j.id, payload, 0))
        })
        .collect();
    written.extend(new.iter().map(|j| payload_key(j.id)));
    inner.put_many(payloads).await?;
    // Entries: a create batch's fired jobs by time window; its queue messages by queue and job
    // type, then by time window (at most `QUEUE_LISTED` an entry).
    let mut roots: HashMap<JobId, Root> = HashMap::with_capacity(new.len());
    let mut entries = Vec::new();
    let mut fired = Vec::new();
    let mut queued: HashMap<(&str, &str, &Option<String>), Vec<Listed>> = HashMap::new();
    let mut sizes: HashMap<JobId, usize> = HashMap::new();
    for job in new {
        let listed = Listed {
            id: job.id,
            fire: job.first_fire().as_millisecond(),
            version: 0,
        };
        match job.spec.target.queue() {
            None => fired.push(listed),
            Some(queue) => {
                sizes.insert(job.id, job.payload.as_deref().map_or(0, str::len));
                queued
                    .entry((&job.namespace, queue, &job.spec.job_type))
                    .or_default()
                    .push(listed);
            }
        }
    }
    // Each fired entry's snapshot (`snapshot.rs`), written with the job items, before the entry.
    let by_id: HashMap<JobId, &NewJob> = new.iter().map(|j| (j.id, *j)).collect();
    let mut snapshots = Vec::new();
    for window in windows(fired) {
        let root = inner.new_root(Lane::Fired, window[0].fire);
        let (entry, snapshot) = super::snapshot::fired_entry(inner, &root, &window, &by_id);
        snapshots.extend(snapshot);
        entries.push(entry);
        for listed in &window {
            roots.insert(listed.id, root.clone());
        }
    }
    for ((namespace, queue, job_type), messages) in queued {
        let lane = Lane::Queue { namespace, queue };
        for window in windows_of(messages, QUEUE_LISTED) {
            let root = inner.new_root(lane, window[0].fire);
            let window_sizes: Vec<usize> = window.iter().map(|j| sizes[&j.id]).collect();
            entries.push(root_item(&root, &window, Some((job_type, &window_sizes))));
            for listed in &window {
                roots.insert(listed.id, root.clone());
            }
        }
    }
    // What lists them, written last: a job is in its namespace's listing once its batch is
    // whole. Each job item names its registry item and that item's expiry.
    let mut by_namespace: HashMap<&str, Vec<JobId>> = HashMap::new();
    // A registry item expires with the last of its jobs (never, with a recurring one).
    let mut expiry: HashMap<&str, Option<i64>> = HashMap::new();
    for job in new {
        by_namespace.entry(&job.namespace).or_default().push(job.id);
        let ttl = inner.one_off_ttl(
            job.spec.schedule.is_recurring(),
            job.first_fire().as_millisecond(),
        );
        let slot = expiry.entry(&job.namespace).or_insert(ttl);
        *slot = match (*slot, ttl) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
    }
    let mut registered: HashMap<&str, (String, Option<i64>)> = HashMap::new();
    let registry: Vec<Item> = by_namespace
        .into_iter()
        .map(|(namespace, mut ids)| {
            ids.sort();
            let mut item = key(
                registry_pk(namespace),
                &format!("{}#{:016x}", ids[0], rand::random::<u64>()),
            );
            let mut bytes = Vec::with_capacity(ids.len() * 16);
            for id in &ids {
                bytes.extend_from_slice(id.as_bytes());
            }
            item.insert(
                "ids".into(),
                aws_sdk_dynamodb::types::AttributeValue::B(
                    aws_sdk_dynamodb::primitives::Blob::new(bytes),
                ),
            );
            let ttl = expiry.get(namespace).copied().flatten();
            if let Some(ttl) = ttl {
                item.insert(TTL.into(), n(ttl));
            }
            registered.insert(
                namespace,
                (item["sk"].as_s().expect("a string").clone(), ttl),
            );
            item
        })
        .collect();
    let homes: Vec<Item> = new
        .iter()
        .map(|j| {
            let mut home = new_job_item(
                j,
                &roots[&j.id],
                inner.one_off_ttl(
                    j.spec.schedule.is_recurring(),
                    j.first_fire().as_millisecond(),
                ),
            );
            let (sk, ttl) = &registered[j.namespace.as_str()];
            home.insert("reg".into(), s(sk));
            if let Some(ttl) = ttl {
                home.insert("regttl".into(), n(*ttl));
            }
            home
        })
        .collect();
    written.extend(new.iter().map(|j| job_key(j.id)));
    for snapshot in &snapshots {
        written.push(key(snapshot.str("pk")?.to_owned(), snapshot.str("sk")?));
    }
    let mut homes = homes;
    homes.extend(snapshots);
    inner.put_many(homes).await?;
    for entry in &entries {
        written.push(key(entry.str("pk")?.to_owned(), entry.str("sk")?));
    }
    inner.put_many(entries).await?;
    // The batch's audit entry in the last request, beside the registry items: as near to the
    // jobs' own writes as a batch that is not a transaction allows (`audit.rs`).
    let mut last = registry;
    if let Some(audit) = audit {
        let entry = super::audit::item(inner, &audit.clone().naming(new.iter().map(|j| j.id)));
        written.push(key(entry.str("pk")?.to_owned(), entry.str("sk")?));
        last.push(entry);
    }
    inner.put_many(last).await?;
    Ok(true)
}

/// Records queue names a namespace uses (for its queue list), once per name and process.
pub(super) async fn register_queues(inner: &Inner, queues: Vec<(String, String)>) -> Result<()> {
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
        .map(|read| read.record))
}

/// A job as read: its record (with its claim and a settled delivery folded in), the version of
/// its payload item if it has one, and its item's version (`tok`).
pub(super) struct ReadJob {
    pub(super) record: JobRecord,
    pub(super) payload_version: Option<i64>,
    pub(super) version: i64,
    pub(super) root: Option<Root>,
    /// The entry (root or part) that lists the job at its version, if one does.
    pub(super) listing: Option<Entry>,
    /// The job item as read.
    pub(super) home: Item,
}

/// A job in a namespace, as [`ReadJob`] tells it.
pub(super) async fn read_job(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
) -> Result<Option<ReadJob>> {
    let Some(item) = inner.get(job_key(id)).await? else {
        return Ok(None);
    };
    if namespace.is_some_and(|ns| item.str("ns").is_ok_and(|held| held != ns)) {
        return Ok(None);
    }
    let version = item.num("tok")?;
    let root = Root::of_job(&item)?;
    let home = item;
    let Some((mut record, payload_version)) = inner.read_job(id).await? else {
        return Ok(None);
    };
    if record.token.as_i64() != super::entry::record_token(version) {
        // Changed between the two reads: the second is the newer.
        return Box::pin(read_job(inner, namespace, id)).await;
    }
    let listing = fold(inner, &mut record, root.as_ref()).await?;
    Ok(Some(ReadJob {
        record,
        payload_version,
        version,
        root,
        listing,
        home,
    }))
}

/// What the job item alone does not tell: the lease of the entry that lists it (and a queue
/// message's lapsed leases, attempts its item has not counted), and a delivery settled in its
/// root's settlements (a one-off delivered leaves its job item as it was). Answers the entry
/// part that lists the job, if one does.
pub(super) async fn fold(
    inner: &Inner,
    record: &mut JobRecord,
    root: Option<&Root>,
) -> Result<Option<Entry>> {
    let (JobState::Active, Some(root)) = (record.state, root) else {
        return Ok(None);
    };
    let version = record.token.as_i64() >> super::entry::LEASE_BITS;
    let parts = inner
        .query(&Query::new(root.pk.clone()).prefix(format!("{}#", root.key)))
        .await?;
    let mut leased_ever = false;
    let mut listing = None;
    for part in &parts {
        let entry = Entry::from_item(part)?;
        leased_ever |= entry.ltok > 0;
        if entry
            .jobs
            .iter()
            .any(|j| j.id == record.id && j.version == version)
        {
            listing = Some(entry);
        }
    }
    if let Some(entry) = &listing {
        record.attempt += entry.lapses as u32;
        if entry.owner.is_some() {
            record.next_attempt = None;
            record.leased_until = entry.until.map(from_ms);
            record.token = hourglass_core::FencingToken::from_i64(super::entry::claim_token(
                version, entry.ltok,
            ));
        }
        if !leased_ever {
            return Ok(listing);
        }
    }
    if let Some(settled) = super::settled::settled(inner, root, record.id, version).await? {
        settled.apply(record);
        return Ok(None);
    }
    Ok(listing)
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

/// A fence entry: other nodes holding a claim on `id` below `token` drop it (see `history.rs`'s
/// poller).
fn fence(id: JobId, token: i64, now: i64) -> Item {
    let mut item = key(
        super::history::FENCE_PK.to_owned(),
        &format!("{}#{id}#{}", ord(now), ord(token)),
    );
    item.insert("job".into(), s(id.to_string()));
    item.insert("tok".into(), n(token));
    // Fences matter for seconds.
    item.insert(TTL.into(), n(now / 1000 + 3600));
    item
}

/// A changed job's state, fire and due times, the version the change leaves, and when.
struct Placement {
    state: JobState,
    fire: Option<i64>,
    due: Option<i64>,
    version: i64,
    now: i64,
}

/// Where a changed job is scheduled: a new root entry listing it at `version` when it is active
/// with a fire time (its item names that root), none otherwise. Also sets the item's expiry.
fn reschedule(
    inner: &Inner,
    change: &mut Change,
    record: &JobRecord,
    spec: &JobSpec,
    place: Placement,
) -> (Option<Item>, Option<i64>) {
    let Placement {
        state,
        fire,
        due,
        version,
        now,
    } = place;
    let entry = match fire {
        Some(fire) if state == JobState::Active => {
            let lane = Lane::of_spec(&record.namespace, spec);
            let root = inner.new_root(lane, fire);
            change.set("epk", s(&root.pk));
            change.set("ekey", s(&root.key));
            let listed = Listed {
                id: record.id,
                fire,
                version,
            };
            let size = [record.payload.as_deref().map_or(0, str::len)];
            let queue = spec.target.queue().map(|_| (&spec.job_type, &size[..]));
            Some(root_item(&root, &[listed], queue))
        }
        _ => {
            change.remove("epk");
            change.remove("ekey");
            None
        }
    };
    let ttl = if state.is_terminal() {
        inner.finished_ttl(now)
    } else if state == JobState::Active {
        // After the fire time (jittered, or moved by a calendar's roll: the one it fires at).
        fire.or(due)
            .and_then(|at| inner.one_off_ttl(spec.schedule.is_recurring(), at))
    } else {
        None
    };
    change.set_or_remove(TTL, ttl.map(n));
    (entry, ttl)
}

/// Takes a changed job out of the entry that lists it, as that entry was read (a claim or
/// another change since fails the transaction, which is then decided again): the entry is
/// deleted when the job was its last. So an edited or cancelled job leaves no listing behind for
/// the claims, counts and due times that read entries.
fn unlist(inner: &Inner, read: &ReadJob) -> Option<aws_sdk_dynamodb::types::TransactWriteItem> {
    let entry = read.listing.as_ref()?;
    let id = read.record.id;
    let mut change = Change::new(entry.key());
    if entry.jobs.iter().all(|j| j.id == id) {
        // Its last job: the entry goes, as read (a lease or a change since fails this).
        entry.listing_as_read(&mut change);
        return Some(change.into_delete(&inner.table));
    }
    // Marked gone, with no condition but the entry's being there: edits and cancels of several
    // jobs of one create batch at once all land, where rewriting the listing would have them
    // conflict on it. A lease is conditioned on the count of such marks it read.
    entry.listing_exists(&mut change);
    change.append(
        super::entry::GONE,
        aws_sdk_dynamodb::types::AttributeValue::L(vec![
            aws_sdk_dynamodb::types::AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(
                id.as_bytes().to_vec(),
            )),
        ]),
    );
    change.bump(super::entry::GEN);
    Some(change.into_action(&inner.table))
}

/// A change of a job read at `version`, applied only if no one changed it since; it raises the
/// version, which voids every claim made before it.
fn guarded(id: JobId, version: i64, state: JobState, now: i64) -> Change {
    let mut change = Change::new(job_key(id));
    change.when("#tok = {}", &["tok"], vec![n(version)]);
    change.set("st", n(state_code(state)));
    change.set("att", n(0));
    change.add("tok", 1);
    change.set("up", n(now));
    change
}

/// Reads a job in a namespace, or answers not found.
async fn load(inner: &Inner, namespace: Option<&str>, id: JobId) -> Result<ReadJob> {
    read_job(inner, namespace, id)
        .await?
        .ok_or(StoreError::NotFound)
}

pub(super) async fn update_job(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
    update: JobUpdate,
    audit: Option<&AuditRecord>,
) -> Result<JobRecord> {
    let mut registered = false;
    for race in 0..RACES {
        after_lost_race(race).await;
        let read = load(inner, namespace, id).await?;
        let record = &read.record;
        let (state, due, fire) = plan_update(record, &update)?;
        let now = update.now.as_millisecond();
        if !super::snapshot::settled_create(inner, &read, now, &mut registered).await? {
            continue;
        }
        if let Some(queue) = update.spec.target.queue() {
            register_queues(inner, vec![(record.namespace.clone(), queue.to_owned())]).await?;
        }
        let version = read.version + 1;
        let mut change = guarded(id, read.version, state, now);
        change.set("spec", s(encode_spec(&update.spec)));
        // The payload in its own item at the version this edit leaves, or inline.
        let mut actions = Vec::with_capacity(5);
        match update.payload.as_deref() {
            Some(payload) if payload::lives_out(payload) => {
                change.remove("payload");
                change.set(payload::VERSION, n(version));
                let item = payload::payload_item(id, payload, version);
                actions.push(put(&inner.table, item));
            }
            inline => {
                change.set_or_remove("payload", inline.map(s));
                change.remove(payload::VERSION);
                if read.payload_version.is_some() {
                    actions.push(delete(&inner.table, payload_key(id), None));
                }
            }
        }
        change.set_or_remove("jtype", update.spec.job_type.as_deref().map(s));
        change.set_or_remove("queue", update.spec.target.queue().map(s));
        change.set_or_remove("due", due.map(n));
        change.set_or_remove("fire", fire.map(n));
        let mut edited = record.clone();
        edited.payload = update.payload.clone();
        let place = Placement {
            state,
            fire,
            due,
            version,
            now,
        };
        let (entry, ttl) = reschedule(inner, &mut change, &edited, &update.spec, place);
        actions.extend(unlist(inner, &read));
        if let Some(entry) = entry {
            actions.push(put(&inner.table, entry));
        }
        actions.push(change.into_action(&inner.table));
        actions.push(put(
            &inner.table,
            fence(id, super::entry::record_token(version), now),
        ));
        actions.extend(audit.map(|entry| super::audit::put_action(inner, entry)));
        if inner.transact(actions).await?.is_ok() {
            keep_listed(inner, &read.home, ttl).await?;
            announce_change(inner, record, &update.spec, fire, version);
            return load(inner, namespace, id).await.map(|read| read.record);
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
    reason: Option<&str>,
    audit: Option<&AuditRecord>,
) -> Result<JobRecord> {
    let mut registered = false;
    for race in 0..RACES {
        after_lost_race(race).await;
        let read = load(inner, namespace, id).await?;
        let record = &read.record;
        let (state, due, fire, clear_key, trigger_key, now) =
            match plan_transition(record, transition.clone())? {
                TransitionPlan::Unchanged => return Ok(read.record),
                TransitionPlan::Apply {
                    state,
                    due,
                    fire,
                    clear_key,
                    trigger_key,
                    now,
                } => (state, due, fire, clear_key, trigger_key, now),
            };
        if !super::snapshot::settled_create(inner, &read, now, &mut registered).await? {
            continue;
        }
        let version = read.version + 1;
        let mut change = guarded(id, read.version, state, now);
        change.set_or_remove("due", due.map(n));
        change.set_or_remove("fire", fire.map(n));
        if let Some(reason) = reason {
            change.set("lerr", s(reason));
        }
        let place = Placement {
            state,
            fire,
            due,
            version,
            now,
        };
        let (entry, ttl) = reschedule(inner, &mut change, record, &record.spec, place);
        if let Some(key_text) = &trigger_key {
            change.set("tkey", s(key_text));
            change.set("tdue", n(now));
        }
        let mut actions = Vec::with_capacity(5);
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
        actions.extend(unlist(inner, &read));
        if let Some(entry) = entry {
            actions.push(put(&inner.table, entry));
        }
        actions.push(change.into_action(&inner.table));
        actions.push(put(
            &inner.table,
            fence(id, super::entry::record_token(version), now),
        ));
        actions.extend(audit.map(|entry| super::audit::put_action(inner, entry)));
        if inner.transact(actions).await?.is_ok() {
            keep_listed(inner, &read.home, ttl).await?;
            announce_change(inner, record, &record.spec, fire, version);
            return load(inner, namespace, id).await.map(|read| read.record);
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: the job kept changing under the transition; try again".into(),
    ))
}

/// An edit or transition applied to the job read as `record`, leaving it at `version`: older
/// claims are fenced, and the job is due at `fire` if it has one.
fn announce_change(
    inner: &Inner,
    record: &JobRecord,
    spec: &JobSpec,
    fire: Option<i64>,
    version: i64,
) {
    if let Some(fire) = fire {
        let mut dues = super::Dues::default();
        dues.add(&record.namespace, spec.target.queue(), fire);
        inner.announce(dues);
    }
    inner.fence(record.id, super::entry::record_token(version));
}
