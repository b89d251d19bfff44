//! Snapshots: what a claim needs to fire a create batch's jobs, written once beside their entry,
//! so that the first claim of a fresh entry reads one small item instead of every job item.
//!
//! Reading a job item costs half a read unit however small it is (every item a `GetItem` or
//! `BatchGetItem` returns is rounded up to 4 KB), and that was the whole of a fired one-off's
//! reads. A snapshot (`c#<entry pk>#<root key>`, sort key `c`) packs, for the jobs of one fired
//! entry of a create batch, each job's namespace, spec and small payload: spec *templates* (the
//! spec as JSON with its schedule left out, shared by the jobs that have the same one) and per
//! job its template, its schedule unless it is `at` its listed fire time, and its payload inline
//! or a mark that it lives in its own item (`payload.rs`). A job fired later than it falls due
//! (its schedule's jitter) is not carried: the claim takes a carried job's due time to be its
//! fire time. A claim reads the snapshots of the
//! entries it leased in one eventually consistent `BatchGetItem` (half a unit each up to 4 KB).
//!
//! **When a claim may trust it instead of the job items.** A snapshot tells a job as created, at
//! version 0. The job item can change afterwards in two ways: by an edit or a transition, which
//! takes the job out of its entry in the same transaction (`jobs::unlist`: the entry's `gone`
//! list and `gen` count, on which every lease is conditioned), and by the holder of a lease of
//! the entry (completions, retries, releases, extensions: all under a lease, which leaves the
//! entry's lease counter above 0 for good). So a claim trusts a snapshot only for an entry it
//! read **never leased** (`ltok` absent, which its lease is conditioned on, with the listing and
//! the `gone` count as read) listing the job at version 0 and not gone, and only before the
//! snapshot's expiry; otherwise it reads the job items as before.
//!
//! That leaves one window: an edit in the instant between a create writing its job items and
//! writing its entries finds no entry to take the job out of, and the entry written after it
//! would list the job as created. So an edit or transition of an active job that no entry lists,
//! while its create batch is not yet registered (its registry item is written last, after the
//! entries), is refused as a create still under way ([`settled_create`]), as a keyed create
//! waits for one; and a create that fails undoes its entries before its job items.
//!
//! **Only where it pays.** A snapshot costs a write unit a started KB; each job it carries saves
//! half a read unit, a tenth of a write unit's price. So it carries a group of jobs (one
//! template) only while the group averages at most [`BYTES_A_JOB`] bytes a job, and it is
//! written only when it carries at least ten jobs a write unit it costs (a lone job, or an entry
//! of a few, is read from its job items as before, which is cheaper). A snapshot
//! is never rewritten or deleted: it expires through DynamoDB's time to live, for free.
//!
//! **Why an item of its own, not inside the entry.** An entry is written three times (created,
//! leased, deleted), each billed at its whole size, and read by every probe and claim query of
//! its shard: copies inside it would be paid for at every one of those. Beside it, they are
//! written once and read once. (Reading the job items only for jobs the fence log names would
//! still leave the claim without what to fire: the copy is what saves the read.)

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use hourglass_core::{JobId, JobSpec, JobState, Occurrence, Schedule, from_ms};

use super::Inner;
use super::claim::Taken;
use super::entry::{Listed, Root};
use super::item::{Attrs, Item, key, n, registry_pk, s};
use super::jobs::ReadJob;
use super::table::TTL;
use crate::{NewJob, Result, StoreError};

/// The most bytes of a snapshot a job may cost on average (its record and its share of its
/// template) for its group to be carried: about where the write (a unit a KB) costs what the
/// read it saves (half a read unit, a tenth of a write unit's price) does.
pub(super) const BYTES_A_JOB: usize = 100;

/// The attribute that marks an entry with a snapshot beside it (a claim looks for none else).
pub(super) const MARK: &str = "snap";

/// A snapshot's sort key.
pub(super) const SNAPSHOT_SK: &str = "c";

/// The snapshot item's key for the entry root `root`.
pub(super) fn snapshot_key(root: &Root) -> Item {
    key(format!("c#{}#{}", root.pk, root.key), SNAPSHOT_SK)
}

/// What a claim fires a snapshotted job with.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Snapped {
    pub(super) namespace: Arc<str>,
    pub(super) spec: Arc<JobSpec>,
    pub(super) payload: Payload,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Payload {
    None,
    Inline(Arc<str>),
    /// In its own item, at version 0 (`payload.rs`).
    Apart,
}

/// A spec's JSON with its schedule left out: what jobs of one template share.
fn template_of(spec: &JobSpec) -> String {
    let mut value = serde_json::to_value(spec).expect("job spec serializes");
    if let Some(fields) = value.as_object_mut() {
        fields.remove("schedule");
    }
    value.to_string()
}

/// The spec a template and a schedule make.
fn spec_of(template: &serde_json::Value, schedule: &Schedule) -> Result<JobSpec> {
    let mut value = template.clone();
    if let Some(fields) = value.as_object_mut() {
        fields.insert(
            "schedule".into(),
            serde_json::to_value(schedule).expect("schedule serializes"),
        );
    }
    serde_json::from_value(value).map_err(|e| StoreError::Corrupt(format!("snapshot spec: {e}")))
}

fn put_u32(bytes: &mut Vec<u8>, value: usize) {
    bytes.extend_from_slice(&u32::try_from(value).unwrap_or(u32::MAX).to_be_bytes());
}

/// One job's record: id, template, schedule (flag 0: `at` its fire time; 1: JSON follows),
/// payload (0 none, 1 inline JSON follows, 2 apart).
fn record(job: &NewJob, template: u16, fire: i64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(24);
    bytes.extend_from_slice(job.id.as_bytes());
    bytes.extend_from_slice(&template.to_be_bytes());
    if job.spec.schedule == Schedule::at(from_ms(fire)) {
        bytes.push(0);
    } else {
        let schedule = serde_json::to_string(&job.spec.schedule).expect("schedule serializes");
        bytes.push(1);
        put_u32(&mut bytes, schedule.len());
        bytes.extend_from_slice(schedule.as_bytes());
    }
    match job.payload.as_deref() {
        None => bytes.push(0),
        Some(payload) if super::payload::lives_out(payload) => bytes.push(2),
        Some(payload) => {
            bytes.push(1);
            put_u32(&mut bytes, payload.len());
            bytes.extend_from_slice(payload.as_bytes());
        }
    }
    bytes
}

/// A create batch's fired entry `root` listing `window` (of `jobs`), and the snapshot beside it
/// when one pays (the entry then carries [`MARK`]).
pub(super) fn fired_entry(
    inner: &Inner,
    root: &Root,
    window: &[Listed],
    jobs: &HashMap<JobId, &NewJob>,
) -> (Item, Option<Item>) {
    // It expires no later than the first of its jobs' items may.
    let ttl = inner.snapshot_ttl(window[0].fire);
    let snapshot = snapshot_item(root, window, jobs, ttl);
    let mut entry = super::entry::root_item(root, window, None);
    if snapshot.is_some() {
        entry.insert(MARK.into(), n(1));
    }
    (entry, snapshot)
}

/// The snapshot of the jobs `window` (one fired entry of a create batch, `root`) lists, of
/// `jobs` by id, expiring at `ttl` (seconds); `None` when no group of them pays for its bytes.
pub(super) fn snapshot_item(
    root: &Root,
    window: &[Listed],
    jobs: &HashMap<JobId, &NewJob>,
    ttl: i64,
) -> Option<Item> {
    // Group by (namespace, template), in the window's order.
    let mut groups: Vec<((&str, String), Vec<&Listed>)> = Vec::new();
    for listed in window {
        let Some(job) = jobs.get(&listed.id) else {
            continue;
        };
        // A claim takes a carried job's due time to be its listed fire time: a job whose
        // schedule's jitter fires it later than it falls due is read from its item instead.
        if job.first_due.as_millisecond() != listed.fire {
            continue;
        }
        let slot = (job.namespace.as_str(), template_of(&job.spec));
        match groups.iter_mut().find(|(g, _)| *g == slot) {
            Some((_, members)) => members.push(listed),
            None => groups.push((slot, vec![listed])),
        }
    }
    let (mut templates, mut namespaces, mut records) = (Vec::new(), Vec::new(), Vec::new());
    let (mut size, mut carried) = (0usize, 0usize);
    for ((namespace, template), members) in groups {
        let Ok(index) = u16::try_from(templates.len()) else {
            break;
        };
        let mut bytes = Vec::new();
        for listed in &members {
            bytes.extend(record(jobs[&listed.id], index, listed.fire));
        }
        let group_size = template.len() + namespace.len() + bytes.len();
        if group_size > BYTES_A_JOB * members.len() {
            continue;
        }
        size += group_size;
        carried += members.len();
        templates.push(s(template));
        namespaces.push(s(namespace));
        records.extend(bytes);
    }
    // Its write units (a started KB each) must be at most a tenth of the jobs it carries: each
    // saves half a read unit, and a read unit costs a fifth of a write unit.
    // (Its keys and attribute names are about 100 bytes more.)
    if carried == 0 || (size + 100).div_ceil(1024) * 10 > carried {
        return None;
    }
    let mut item = snapshot_key(root);
    item.insert("tpl".into(), AttributeValue::L(templates));
    item.insert("tns".into(), AttributeValue::L(namespaces));
    item.insert("jobs".into(), AttributeValue::B(Blob::new(records)));
    item.insert(TTL.into(), n(ttl));
    Some(item)
}

/// The jobs a snapshot carries, by id, with their listed fire times supplied by `fire_of` (a
/// job the claim did not take is left out). A snapshot past its expiry (`now_ms`) carries none.
pub(super) fn decode(
    item: &Item,
    now_ms: i64,
    fire_of: impl Fn(JobId) -> Option<i64>,
) -> Result<HashMap<JobId, Snapped>> {
    let mut out = HashMap::new();
    if item
        .opt_num(TTL)?
        .is_none_or(|ttl| ttl.saturating_mul(1000) <= now_ms)
    {
        return Ok(out);
    }
    let strings = |name: &str| -> Result<Vec<String>> {
        match item.get(name) {
            Some(AttributeValue::L(values)) => values
                .iter()
                .map(|v| {
                    v.as_s()
                        .cloned()
                        .map_err(|_| StoreError::Corrupt(format!("snapshot {name}")))
                })
                .collect(),
            other => Err(StoreError::Corrupt(format!("snapshot {name}: {other:?}"))),
        }
    };
    let namespaces: Vec<Arc<str>> = strings("tns")?.into_iter().map(Arc::from).collect();
    let templates: Vec<serde_json::Value> = strings("tpl")?
        .iter()
        .map(|t| {
            serde_json::from_str(t)
                .map_err(|e| StoreError::Corrupt(format!("snapshot template: {e}")))
        })
        .collect::<Result<_>>()?;
    let bytes = match item.get("jobs") {
        Some(AttributeValue::B(blob)) => blob.as_ref(),
        other => return Err(StoreError::Corrupt(format!("snapshot jobs: {other:?}"))),
    };
    let corrupt = || StoreError::Corrupt("snapshot record".into());
    let mut cursor = Cursor { bytes, at: 0 };
    while !cursor.done() {
        let id = JobId::from_slice(cursor.take(16)?).map_err(|_| corrupt())?;
        let template = u16::from_be_bytes(cursor.take(2)?.try_into().expect("2 bytes")) as usize;
        let schedule = match cursor.take(1)?[0] {
            0 => None,
            1 => Some(
                serde_json::from_str::<Schedule>(cursor.text()?)
                    .map_err(|e| StoreError::Corrupt(format!("snapshot schedule: {e}")))?,
            ),
            _ => return Err(corrupt()),
        };
        let payload = match cursor.take(1)?[0] {
            0 => Payload::None,
            1 => Payload::Inline(Arc::from(cursor.text()?)),
            2 => Payload::Apart,
            _ => return Err(corrupt()),
        };
        let Some(fire) = fire_of(id) else { continue };
        let (Some(spec), Some(namespace)) = (templates.get(template), namespaces.get(template))
        else {
            return Err(corrupt());
        };
        let schedule = schedule.unwrap_or_else(|| Schedule::at(from_ms(fire)));
        let spec = spec_of(spec, &schedule)?;
        out.insert(
            id,
            Snapped {
                namespace: namespace.clone(),
                spec: Arc::new(spec),
                payload,
            },
        );
    }
    Ok(out)
}

/// Whether a claim may fire the jobs of the entry it took from its snapshot: an entry of the
/// fired lane, written with a snapshot, that no lease held before this one (the module's opening
/// comment says why that suffices).
pub(super) fn fresh(taken: &Taken, is_queue: bool) -> bool {
    !is_queue && taken.entry.snapshot && taken.entry.ltok == 0 && taken.entry.owner.is_none()
}

/// What the snapshots of the fresh entries taken carry (`snapshot.rs`), by job: the jobs listed
/// at version 0 of a snapshot read (eventually consistent: one written too lately to be seen
/// leaves its jobs to be read from their items), unexpired at `now`.
pub(super) async fn read_snapshots(
    inner: &Inner,
    taken: &[Taken],
    is_queue: bool,
    now: i64,
) -> Result<HashMap<JobId, Snapped>> {
    let mut fires: HashMap<String, HashMap<JobId, i64>> = HashMap::new();
    for t in taken.iter().filter(|t| fresh(t, is_queue)) {
        let key = snapshot_key(&t.entry.root);
        let pk = key["pk"].as_s().expect("a string key").clone();
        let of_root = fires.entry(pk).or_default();
        of_root.extend(
            t.jobs
                .iter()
                .filter(|j| j.version == 0)
                .map(|j| (j.id, j.fire)),
        );
    }
    let mut carried = HashMap::new();
    if fires.is_empty() {
        return Ok(carried);
    }
    let keys: Vec<Item> = fires
        .keys()
        .map(|pk| key(pk.clone(), SNAPSHOT_SK))
        .collect();
    for item in inner.get_many_as(keys, false).await? {
        let Some(of_root) = fires.get(item.str("pk")?) else {
            continue;
        };
        carried.extend(decode(&item, now, |id| of_root.get(&id).copied())?);
    }
    Ok(carried)
}

/// The occurrence of a job a fresh entry lists, as its snapshot tells it: at version 0, nothing
/// run yet. `None` when its payload item is no longer at version 0 (an edit voided the claim).
pub(super) async fn snapped_occurrence(
    inner: &Inner,
    snapped: &Snapped,
    listed: &Listed,
    token: i64,
    lapses: i64,
) -> Result<Option<Occurrence>> {
    let payload = match &snapped.payload {
        Payload::None => None,
        Payload::Inline(payload) => Some(payload.clone()),
        Payload::Apart => match inner.claimed_payload(listed.id, 0, listed.version).await? {
            Some(payload) => Some(payload.into()),
            None => return Ok(None),
        },
    };
    Ok(Some(Occurrence {
        job_id: listed.id,
        namespace: snapped.namespace.clone(),
        due: from_ms(listed.fire),
        fire_at: from_ms(listed.fire),
        attempt: lapses as u32 + 1,
        token: hourglass_core::FencingToken::from_i64(token),
        runs_done: 0,
        spec: snapped.spec.clone(),
        payload,
        lapsed_owner: None,
    }))
}

/// Whether a change of the job `read` may go ahead as far as its create is concerned: `false`
/// when it must read the job again first, an error while its create batch is still being
/// written. An active job that no entry lists may be one whose create has written its item but
/// not yet its entry: a change now would leave that entry, when it comes, listing the job as
/// created, and its snapshot firing it so (`snapshot.rs`). Its batch's registry item, written
/// after its entries, tells: while it is missing (for up to [`KEY_GRACE_MS`](super::jobs::KEY_GRACE_MS) after the create
/// began, as a key waits for its create), the change is refused; once it is seen, the job is read
/// again, and a read after it finds the entry if there is one. `registered` keeps what was seen
/// across the caller's tries.
pub(super) async fn settled_create(
    inner: &Inner,
    read: &ReadJob,
    now: i64,
    registered: &mut bool,
) -> Result<bool> {
    if *registered
        || read.record.state != JobState::Active
        || read.root.is_none()
        || read.listing.is_some()
    {
        return Ok(true);
    }
    let home = &read.home;
    let Some(reg) = home.opt_str("reg")? else {
        return Ok(true);
    };
    if now.saturating_sub(home.num("cr")?) >= super::jobs::KEY_GRACE_MS {
        return Ok(true);
    }
    if inner
        .get(key(registry_pk(home.str("ns")?), reg))
        .await?
        .is_none()
    {
        return Err(StoreError::Unavailable(format!(
            "job {} is still being created; try again",
            read.record.id
        )));
    }
    *registered = true;
    Ok(false)
}

/// Reads a snapshot's packed records.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(len);
        let slice = end
            .and_then(|end| self.bytes.get(self.at..end))
            .ok_or_else(|| StoreError::Corrupt("snapshot record cut short".into()))?;
        self.at += len;
        Ok(slice)
    }

    /// A length (4 bytes) and that many bytes of UTF-8.
    fn text(&mut self) -> Result<&'a str> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")) as usize;
        std::str::from_utf8(self.take(len)?)
            .map_err(|_| StoreError::Corrupt("snapshot text".into()))
    }
}

#[cfg(test)]
mod tests {
    use hourglass_core::{ScheduleKind, Target, WebhookTarget};

    use super::*;
    use crate::dynamodb::item::Lane;

    fn new_job(namespace: &str, fire: i64, payload: Option<&str>) -> NewJob {
        NewJob {
            id: uuid::Uuid::now_v7(),
            namespace: namespace.into(),
            key: None,
            spec: JobSpec {
                job_type: None,
                schedule: Schedule::at(from_ms(fire)),
                target: Target::Webhook(WebhookTarget {
                    url: "https://example.com/hook".parse().unwrap(),
                    headers: Default::default(),
                    rate_limit: None,
                    batch: None,
                }),
                retry: Default::default(),
                misfire: Default::default(),
                overlap: Default::default(),
                backfill: None,
                labels: Default::default(),
                on_failure: None,
                on_success: None,
                callback_of: None,
                callback_key: None,
                occurrence_of: None,
            },
            payload: payload.map(str::to_owned),
            fingerprint: 1,
            first_due: from_ms(fire),
            now: from_ms(0),
        }
    }

    fn listed(jobs: &[NewJob]) -> Vec<Listed> {
        jobs.iter()
            .map(|j| Listed {
                id: j.id,
                fire: j.first_due.as_millisecond(),
                version: 0,
            })
            .collect()
    }

    #[test]
    fn a_snapshot_gives_back_each_jobs_namespace_spec_and_payload() {
        let base = 1_900_000_000_000;
        let mut jobs: Vec<NewJob> = (0..20).map(|i| new_job("ns", base + i, None)).collect();
        jobs[0].payload = Some(r#"{"a":1}"#.into());
        jobs[1].payload = Some("x".repeat(300));
        jobs[2].spec.schedule = Schedule::unbounded(ScheduleKind::Every {
            interval: std::time::Duration::from_secs(5),
            anchor: from_ms(base + 2),
        });
        // Sub-millisecond: not `at` its listed fire time, so kept whole.
        jobs[3].spec.schedule =
            Schedule::at(from_ms(base + 3) + jiff::SignedDuration::from_nanos(7));
        let window = listed(&jobs);
        let by_id: HashMap<JobId, &NewJob> = jobs.iter().map(|j| (j.id, j)).collect();
        let root = Root::new(Lane::Fired, 0, base);
        let item = snapshot_item(&root, &window, &by_id, base / 1000 + 60).expect("carried");
        let fires: HashMap<JobId, i64> = window.iter().map(|l| (l.id, l.fire)).collect();
        let carried = decode(&item, base, |id| fires.get(&id).copied()).unwrap();
        assert_eq!(carried.len(), 20);
        for job in &jobs {
            let snapped = &carried[&job.id];
            assert_eq!(*snapped.spec, job.spec);
            assert_eq!(&*snapped.namespace, "ns");
            let payload = match &snapped.payload {
                Payload::None => None,
                Payload::Inline(p) => Some(p.to_string()),
                Payload::Apart => Some("x".repeat(300)),
            };
            assert_eq!(payload, job.payload);
        }
        assert_eq!(carried[&jobs[1].id].payload, Payload::Apart);
        // Only the jobs asked for; none once expired.
        let one = decode(&item, base, |id| (id == jobs[5].id).then_some(base + 5)).unwrap();
        assert_eq!(one.len(), 1);
        assert!(
            decode(&item, (base / 1000 + 60) * 1000, |id| fires
                .get(&id)
                .copied())
            .unwrap()
            .is_empty()
        );
    }

    #[test]
    fn a_group_is_carried_only_while_it_pays_for_its_bytes() {
        let base = 1_900_000_000_000;
        // A lone job: its template alone is about its whole budget.
        let mut lone = vec![new_job("ns", base, None)];
        lone[0].spec.job_type = Some("a-type-name-long-enough-to-tip-the-budget".into());
        let by_id: HashMap<JobId, &NewJob> = lone.iter().map(|j| (j.id, j)).collect();
        let root = Root::new(Lane::Fired, 0, base);
        assert!(snapshot_item(&root, &listed(&lone), &by_id, 1).is_none());
        // Twenty that share it, and two with payloads too big to pay: only the twenty.
        let mut jobs: Vec<NewJob> = (0..20).map(|i| new_job("ns", base + i, None)).collect();
        let heavy = "y".repeat(200);
        for i in 0..2 {
            let mut job = new_job("ns", base + 20 + i, Some(&heavy));
            job.spec.job_type = Some("heavy".into());
            jobs.push(job);
        }
        let by_id: HashMap<JobId, &NewJob> = jobs.iter().map(|j| (j.id, j)).collect();
        let window = listed(&jobs);
        let item = snapshot_item(&root, &window, &by_id, i64::MAX / 2000).unwrap();
        let fires: HashMap<JobId, i64> = window.iter().map(|l| (l.id, l.fire)).collect();
        let carried = decode(&item, base, |id| fires.get(&id).copied()).unwrap();
        assert_eq!(carried.len(), 20);
        assert!(!carried.contains_key(&jobs[20].id));
    }
}
