//! Everything besides jobs and claims: run history, dead letters, retention, counts for metrics
//! and queues, signing secrets, and the poller that stands in for `NOTIFY`.

use std::collections::{HashMap, HashSet};
use std::sync::Weak;
use std::time::Duration;

use hourglass_core::{JobId, JobState, from_ms};
use jiff::Timestamp;

use super::Inner;
use super::entry::{Entry, Root};
use super::item::{
    Attrs, Item, LETTER_SK, Lane, SECRETS_SK, job_id, job_key, key, letter_from_item, letter_pk,
    letters_pk, n, ord, queues_pk, run_from_item, run_pk, run_sk, s, secrets_pk,
};
use super::table::{Change, Query};
use crate::rules::Visibility;
use crate::{
    DeadLetter, Purged, QueueStats, Result, RunCursor, RunRecord, SigningSecrets, StoreError,
    StoreEvent, StoreGauges,
};

pub(super) async fn runs(
    inner: &Inner,
    namespace: Option<&str>,
    id: JobId,
    before: Option<RunCursor>,
    limit: usize,
) -> Result<Vec<RunRecord>> {
    let Some(read) = super::jobs::read_job(inner, namespace, id).await? else {
        return Err(StoreError::NotFound);
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    let before = before.unwrap_or(RunCursor::NEWEST);
    let items = inner
        .query(
            &Query::new(run_pk(id))
                .below(run_sk(before))
                .backward()
                .limit(limit),
        )
        .await?;
    let mut runs: Vec<RunRecord> = items.iter().map(run_from_item).collect::<Result<_>>()?;
    // A settled delivery's run lives in its settlement: the newest run, when there is one.
    if let Some(root) = &read.root
        && let Some(run) = super::settled::settled_run(inner, root, id, read.version).await?
        && (run.cursor.started_ms, run.cursor.seq) < (before.started_ms, before.seq)
    {
        runs.push(run);
        runs.sort_by_key(|r| std::cmp::Reverse((r.cursor.started_ms, r.cursor.seq)));
        runs.truncate(limit);
    }
    Ok(runs)
}

pub(super) async fn dead_letters(
    inner: &Inner,
    namespace: Option<&str>,
    after: Option<i64>,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let after = ord(after.unwrap_or(0));
    let entries = match namespace {
        Some(ns) => {
            inner
                .query(&Query::new(letters_pk(ns)).above(after).limit(limit))
                .await?
        }
        None => {
            inner
                .query_shards(
                    |shard| format!("dl#{shard}"),
                    |partition| Query::new(partition).above(after.clone()).limit(limit),
                )
                .await?
        }
    };
    let mut ids = Vec::with_capacity(entries.len());
    for entry in &entries {
        ids.push(
            entry
                .str("sk")?
                .parse::<i64>()
                .map_err(|_| StoreError::Corrupt(format!("dead letter list entry {entry:?}")))?,
        );
    }
    let keys = ids
        .iter()
        .map(|id| key(letter_pk(*id), LETTER_SK))
        .collect();
    let mut letters = Vec::with_capacity(ids.len());
    for item in inner.get_many(keys).await? {
        let letter = letter_from_item(&item)?;
        if namespace.is_none_or(|ns| ns == letter.namespace) {
            letters.push(letter);
        }
    }
    letters.sort_by_key(|l| l.id);
    Ok(letters)
}

pub(super) async fn get_dead_letter(
    inner: &Inner,
    namespace: Option<&str>,
    id: i64,
) -> Result<Option<DeadLetter>> {
    match inner.get(key(letter_pk(id), LETTER_SK)).await? {
        Some(item) => {
            let letter = letter_from_item(&item)?;
            Ok(namespace
                .is_none_or(|ns| ns == letter.namespace)
                .then_some(letter))
        }
        None => Ok(None),
    }
}

pub(super) async fn delete_dead_letter(
    inner: &Inner,
    namespace: Option<&str>,
    id: i64,
    audit: Option<&crate::AuditRecord>,
) -> Result<bool> {
    let mut change = Change::new(key(letter_pk(id), LETTER_SK));
    change.when("attribute_exists(#pk)", &["pk"], vec![]);
    if let Some(ns) = namespace {
        change.when("#ns = {}", &["ns"], vec![s(ns)]);
    }
    // The letter and its list entries in one transaction, the namespace checked on the letter.
    let Some(letter) = get_dead_letter(inner, namespace, id).await? else {
        return Ok(false);
    };
    let mut actions = vec![change.into_delete(&inner.table)];
    for list in super::complete::letter_lists(inner, &letter.namespace, id) {
        actions.push(super::table::delete(&inner.table, list, None));
    }
    actions.extend(audit.map(|entry| super::audit::put_action(inner, entry)));
    Ok(inner.transact(actions).await?.is_ok())
}

pub(super) async fn purge(inner: &Inner, before: Timestamp, limit: usize) -> Result<Purged> {
    let mut purged = Purged::default();
    // With retention on, DynamoDB's time to live deletes all this, for free.
    if inner.retention_ms.is_some() || limit == 0 {
        return Ok(purged);
    }
    let before = before.as_millisecond();
    // Finished jobs last changed before the cutoff (settled ones included), longest finished
    // first, with their runs: a scan (see the module's opening comment).
    let mut finished = Vec::new();
    for item in inner.scan("j#", &[]).await? {
        let mut record = super::item::job_from_item(&item)?;
        let root = Root::of_job(&item)?;
        super::jobs::fold(inner, &mut record, root.as_ref()).await?;
        if record.state.is_terminal() && record.updated_at.as_millisecond() < before {
            finished.push((record.updated_at, item, root, record));
        }
    }
    finished.sort_by_key(|(up, ..)| *up);
    finished.truncate(limit);
    for (_, item, root, record) in finished {
        let id = record.id;
        let runs = inner.query(&Query::new(run_pk(id))).await?;
        purged.runs += runs.len() as u64;
        if let Some(root) = &root
            && super::settled::settled_run(inner, root, id, item.num("tok")?)
                .await?
                .is_some()
        {
            purged.runs += 1;
        }
        let mut keys: Vec<Item> = runs
            .iter()
            .map(|run| Ok(key(run.str("pk")?.to_owned(), run.str("sk")?)))
            .collect::<Result<_>>()?;
        if let Some(key_item) = key_item_of(inner, &item).await? {
            keys.push(key_item);
        }
        if super::payload::version_of(&item)?.is_some() {
            keys.push(super::item::payload_key(id));
        }
        keys.push(job_key(id));
        inner.delete_many(keys).await?;
        purged.jobs += 1;
    }
    // Then old runs of any job (recurring ones live on), oldest first.
    let mut old = Vec::new();
    for run in inner.scan("r#", &[]).await? {
        if run.num("started")? < before {
            old.push(run);
        }
    }
    old.sort_by_key(|run| run.num("started").unwrap_or_default());
    old.truncate(limit);
    purged.runs += old.len() as u64;
    let keys = old
        .iter()
        .map(|run| Ok(key(run.str("pk")?.to_owned(), run.str("sk")?)))
        .collect::<Result<Vec<_>>>()?;
    inner.delete_many(keys).await?;
    Ok(purged)
}

pub(super) async fn purge_dead_letters(
    inner: &Inner,
    before: Timestamp,
    limit: usize,
) -> Result<u64> {
    let before = before.as_millisecond();
    // Only the `limit` oldest letters are looked at, as the SQL sweep does.
    let oldest = dead_letters(inner, None, None, limit).await?;
    let mut deleted = 0;
    for letter in oldest
        .iter()
        .filter(|letter| letter.created_at.as_millisecond() < before)
    {
        let mut keys = vec![key(letter_pk(letter.id), LETTER_SK)];
        keys.extend(super::complete::letter_lists(
            inner,
            &letter.namespace,
            letter.id,
        ));
        inner.delete_many(keys).await?;
        deleted += 1;
    }
    Ok(deleted)
}

/// Every job item, with claims and settled deliveries folded in (a scan: gauges are sampled
/// rarely on this backend).
async fn every_job(inner: &Inner) -> Result<Vec<crate::JobRecord>> {
    let mut out = Vec::new();
    for item in inner.scan("j#", &[]).await? {
        let mut record = super::item::job_from_item(&item)?;
        let root = Root::of_job(&item)?;
        super::jobs::fold(inner, &mut record, root.as_ref()).await?;
        out.push(record);
    }
    Ok(out)
}

pub(super) async fn gauges(inner: &Inner, now: Timestamp) -> Result<StoreGauges> {
    let now = now.as_millisecond();
    let mut gauges = StoreGauges {
        jobs_by_state: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
        ..Default::default()
    };
    let mut queues = Visibility::default();
    for job in every_job(inner).await? {
        if let Some(slot) = gauges
            .jobs_by_state
            .iter_mut()
            .find(|(s, _)| *s == job.state)
        {
            slot.1 += 1;
        }
        if job.state != JobState::Active {
            continue;
        }
        let (fire, leased) = match (job.leased_until, job.next_attempt) {
            (Some(until), _) => (until.as_millisecond(), true),
            (None, Some(at)) => (at.as_millisecond(), false),
            (None, None) => continue,
        };
        if job.spec.target.queue().is_some() {
            queues.count(fire, leased, now);
        } else if fire <= now {
            // Unclaimed occurrences, and claims whose lease lapsed (backlog again).
            gauges.due_backlog += 1;
            gauges.oldest_backlog = Some(
                gauges
                    .oldest_backlog
                    .map_or(from_ms(fire), |o| o.min(from_ms(fire))),
            );
        }
    }
    gauges.queue_available = queues.available;
    gauges.queue_in_flight = queues.in_flight;
    gauges.queue_scheduled = queues.scheduled;
    gauges.oldest_queue_available = queues.oldest_available.map(from_ms);
    Ok(gauges)
}

pub(super) async fn queue_stats(
    inner: &Inner,
    namespace: &str,
    queue: Option<&str>,
    now: Timestamp,
) -> Result<Vec<QueueStats>> {
    let now = now.as_millisecond();
    let names: Vec<String> = match queue {
        Some(name) => vec![name.to_owned()],
        None => {
            let mut names = Vec::new();
            for item in inner.query(&Query::new(queues_pk(namespace))).await? {
                names.push(item.str("sk")?.to_owned());
            }
            names
        }
    };
    let mut out = Vec::new();
    for name in names {
        let lane = Lane::Queue {
            namespace,
            queue: &name,
        };
        // Each message an entry lists counts once: an edited or moved one is marked gone in it
        // (see `jobs.rs`); an acknowledged one stays listed, and settled, until the last claim of
        // its entry's lease ends, so the settlements of an entry leased before are read.
        let entries = inner
            .query_shards(|shard| lane.partition(shard), Query::new)
            .await?;
        let mut counts = Visibility::default();
        let mut settled: HashMap<Root, HashSet<(JobId, i64)>> = HashMap::new();
        for item in &entries {
            let entry = Entry::from_item(item)?;
            if entry.ltok > 0 && !settled.contains_key(&entry.root) {
                let done = super::settled::settled_jobs(inner, &entry.root).await?;
                settled.insert(entry.root.clone(), done);
            }
            let done = settled.get(&entry.root);
            for job in &entry.jobs {
                if done.is_some_and(|d| d.contains(&(job.id, job.version))) {
                    continue;
                }
                match (&entry.owner, entry.until) {
                    (Some(_), Some(until)) => counts.count(until, true, now),
                    _ => counts.count(job.fire, false, now),
                }
            }
        }
        // Every queue that has active jobs, or the one asked for even when it has none.
        if counts.total() == 0 && queue.is_none() {
            continue;
        }
        out.push(QueueStats {
            name,
            available: counts.available,
            in_flight: counts.in_flight,
            scheduled: counts.scheduled,
            oldest_available: counts.oldest_available.map(from_ms),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

pub(super) async fn signing_secrets(
    inner: &Inner,
    namespace: &str,
) -> Result<Option<SigningSecrets>> {
    let Some(item) = inner.get(key(secrets_pk(namespace), SECRETS_SK)).await? else {
        return Ok(None);
    };
    Ok(Some(SigningSecrets {
        current: item.str("cur")?.to_owned(),
        previous: match (item.opt_str("prev")?, item.opt_num("until")?) {
            (Some(previous), Some(until)) => Some((previous.to_owned(), from_ms(until))),
            _ => None,
        },
    }))
}

pub(super) async fn init_signing_secret(
    inner: &Inner,
    namespace: &str,
    secret: &str,
) -> Result<String> {
    let mut item = key(secrets_pk(namespace), SECRETS_SK);
    item.insert("cur".into(), s(secret));
    if inner.put_new(item).await? {
        return Ok(secret.to_owned());
    }
    // Another node set it first: theirs is the secret.
    signing_secrets(inner, namespace)
        .await?
        .map(|s| s.current)
        .ok_or_else(|| StoreError::Unavailable("the signing secret vanished".into()))
}

pub(super) async fn rotate_signing_secret(
    inner: &Inner,
    namespace: &str,
    secret: &str,
    previous_until: Option<Timestamp>,
    audit: Option<&crate::AuditRecord>,
) -> Result<()> {
    for _ in 0..5 {
        let old = signing_secrets(inner, namespace).await?;
        let mut change = Change::new(key(secrets_pk(namespace), SECRETS_SK));
        change.set("cur", s(secret));
        match (&old, previous_until) {
            // The replaced secret stays valid until `until`; without one it stops at once.
            (Some(old), Some(until)) => {
                change.set("prev", s(&old.current));
                change.set("until", n(until.as_millisecond()));
            }
            _ => {
                change.remove("prev");
                change.remove("until");
            }
        }
        // Applied only over the secret it read, so two rotations at once cannot lose one's
        // previous secret.
        match &old {
            Some(old) => change.when("#cur = {}", &["cur"], vec![s(&old.current)]),
            None => change.when("attribute_not_exists(#cur)", &["cur"], vec![]),
        }
        // With an entry to write, the rotation and its entry are one transaction.
        let rotated = match audit {
            None => inner.update(change, false).await?.is_some(),
            Some(entry) => {
                let actions = vec![
                    change.into_action(&inner.table),
                    super::audit::put_action(inner, entry),
                ];
                inner.transact(actions).await?.is_ok()
            }
        };
        if rotated {
            return Ok(());
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: the signing secret kept changing under the rotation; try again".into(),
    ))
}

/// The partition of the fence log.
pub(super) const FENCE_PK: &str = "x";

/// How far back the poller reads fence entries on each pass: entries are stamped with the
/// writer's clock, so a writer running behind this node is still heard.
const FENCE_WINDOW: Duration = Duration::from_secs(10);

/// While anyone listens, every `interval`: one [`StoreEvent::Resync`] (re-read the due index:
/// other writers may have made something due) and a [`StoreEvent::Fenced`] for each fence entry
/// not yet seen. Ends when the store is dropped.
pub(super) async fn poll_events(inner: Weak<Inner>, interval: Duration) {
    let mut seen: HashSet<(JobId, i64)> = HashSet::new();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        let events = &inner.events;
        if events.receiver_count() == 0 {
            seen.clear();
            continue;
        }
        let since = unix_ms_now() - FENCE_WINDOW.as_millis() as i64;
        // One partition: fences are rare (edits and transitions), and one eventually consistent
        // query a poll is the cheapest read there is.
        let fences = inner
            .query(
                &Query::new(FENCE_PK.to_owned())
                    .above(ord(since))
                    .eventually_consistent(),
            )
            .await;
        match fences {
            Ok(entries) => {
                let mut current = HashSet::new();
                for entry in entries {
                    let (Ok(Some(job)), Ok(Some(token))) =
                        (entry.opt_str("job"), entry.opt_num("tok"))
                    else {
                        continue;
                    };
                    let Ok(job_id) = job_id(job) else { continue };
                    current.insert((job_id, token));
                    if !seen.contains(&(job_id, token)) {
                        let token = hourglass_core::FencingToken::from_i64(token);
                        let _ = events.send(StoreEvent::Fenced { job_id, token });
                    }
                }
                // Entries leave the window; forget them with it.
                seen = current;
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the fence log"),
        }
        let _ = events.send(StoreEvent::Resync);
    }
}

/// The machine's clock, read directly: only to choose which fence entries to read again, never
/// for a scheduling decision.
#[allow(
    clippy::disallowed_methods,
    reason = "picks the fence log's read window; no scheduling decision"
)]
fn unix_ms_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A scan (every partition of the table): a rare operator's step, re-sealing the secrets under
/// a new key, not a request's.
pub(super) async fn signing_namespaces(inner: &Inner) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for item in inner.scan("s#", &["pk", "sk"]).await? {
        if item.str("sk")? == SECRETS_SK
            && let Some(name) = item.str("pk")?.strip_prefix("s#")
        {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

pub(super) async fn replace_signing_secrets(
    inner: &Inner,
    namespace: &str,
    expected: &SigningSecrets,
    replacement: &SigningSecrets,
) -> Result<bool> {
    let mut change = Change::new(key(secrets_pk(namespace), SECRETS_SK));
    change.set("cur", s(&replacement.current));
    match &replacement.previous {
        Some((previous, until)) => {
            change.set("prev", s(previous));
            change.set("until", n(until.as_millisecond()));
        }
        None => {
            change.remove("prev");
            change.remove("until");
        }
    }
    match &expected.previous {
        Some((previous, until)) => change.when(
            "#cur = {} AND #prev = {} AND #until = {}",
            &["cur", "prev", "until"],
            vec![s(&expected.current), s(previous), n(until.as_millisecond())],
        ),
        None => change.when(
            "#cur = {} AND attribute_not_exists(#prev)",
            &["cur", "prev"],
            vec![s(&expected.current)],
        ),
    }
    Ok(inner.update(change, false).await?.is_some())
}

/// Keys of a job's own items besides the job: its key item, when it still holds it.
async fn key_item_of(inner: &Inner, item: &Item) -> Result<Option<Item>> {
    let (Some(key_text), namespace, id) = (item.opt_str("key")?, item.str("ns")?, item.str("id")?)
    else {
        return Ok(None);
    };
    let key_item = key(
        super::item::key_pk(namespace, key_text),
        super::item::KEY_SK,
    );
    Ok(inner
        .get(key_item.clone())
        .await?
        .filter(|held| held.str("job").is_ok_and(|j| j == id))
        .map(|_| key_item))
}
