//! Due entries: the table's own time index, and the unit a claim leases.
//!
//! An entry lists jobs of one lane (fired by the engine, or one pull queue) that fall due at or
//! after the time its sort key starts with: `(job id, fire time, job version)` for each, packed
//! in one binary attribute ([`LISTING`]: about 8 bytes a job of a create batch, so that an entry
//! of 100 is under the KB each of its writes is billed by). A create batch writes one entry for its fired jobs
//! per time window (at most [`WINDOW_MS`] wide and [`MAX_LISTED`] jobs), and so does a completion
//! call for the retries and next occurrences it reschedules; an edit, a release or a dead letter
//! with a next occurrence writes a new entry of its own. A create batch's queue messages share
//! entries too, by queue and job type (a claimer filters on the entry's type), at most
//! [`QUEUE_LISTED`] an entry (each message's payload size beside the listing, for byte budgets):
//! a pull that takes all of an entry's due messages leases it whole, one write for them all.
//!
//! A job's item names the entry that schedules it (`epk`, `ekey`); an entry's listing of a job
//! is valid only while the job item still names it and is at the listed version. An edit or a
//! transition, in the transaction that changes the job item, takes the job out of the entry it
//! leaves: deletes the entry if it was its last job, else appends the job's id to the entry's
//! `gone` list and counts it in `gen`, with no condition on the listing, so that changes of many
//! jobs of one entry at once (a batch cancelled) do not conflict. A lease is conditioned on the
//! listing and the count it read, so it never takes a job changed after its read of the entry.
//!
//! **A claim** leases a whole entry with one conditional update (owner, expiry, and the lease
//! counter `ltok`); the occurrence token is the job's version and the lease counter together
//! (see [`claim_token`]), and takes every job of it due within [`WINDOW_MS`] past its horizon.
//! When the limit takes only part of an entry, the rest is split off into a *part* of the same
//! root (its sort key keeps the root's prefix, so a job's parts are found from the job item), in
//! one transaction with the lease. A create batch's fired entry may have a *snapshot* of its jobs
//! beside it, which its first lease fires them from (`snapshot.rs`): the `gone` marks and the
//! lease's conditions are what keep that copy from ever firing a job changed since.
//!
//! Sort keys: `<root fire ms, 20 digits>#<root uid>#<part>`, part `0` for the root. A part's own
//! jobs may fall due later than its sort key says: the key is a lower bound, and a claim checks
//! each job's own fire time.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use hourglass_core::JobId;

use super::item::{Attrs, Item, Lane, n, ord, s};
use crate::{Result, StoreError};

/// The widest time span one entry of a create batch covers.
pub(super) const WINDOW_MS: i64 = 1_000;
/// The most jobs one entry lists (3.2 KB of listing: a few write units to lease or delete).
pub(super) const MAX_LISTED: usize = 100;
/// The most queue messages one entry lists: with their payload sizes (36 bytes a message), an
/// entry stays within one write unit, so that a pull taking only some of its messages (a worker
/// leasing one at a time) splits off at most a kilobyte.
pub(super) const QUEUE_LISTED: usize = 24;
/// Bits of an occurrence token that hold the entry's lease counter.
pub(super) const LEASE_BITS: u32 = 20;
const LEASE_MASK: i64 = (1 << LEASE_BITS) - 1;

/// The occurrence token of a claim: the job's version above, the entry's lease counter below.
/// Every edit, transition and move raises the version; every lease of an entry raises its
/// counter; a part split off an entry inherits the counter. So a claim made after another of the
/// same job always carries a higher token.
pub(super) fn claim_token(version: i64, ltok: i64) -> i64 {
    (version << LEASE_BITS) | (ltok & LEASE_MASK)
}

/// The (job version, lease counter) a token was made of.
pub(super) fn split_token(token: i64) -> (i64, i64) {
    (token >> LEASE_BITS, token & LEASE_MASK)
}

/// The token a job record shows for a job at `version`: below every claim made at that version,
/// above every claim made before it.
pub(super) fn record_token(version: i64) -> i64 {
    version << LEASE_BITS
}

/// One job as an entry lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Listed {
    pub(super) id: JobId,
    pub(super) fire: i64,
    pub(super) version: i64,
}

/// The attribute of an entry's listing, packed: in id order, each job's id sharing its leading
/// bytes with the one before (`ids.rs`), its fire time as an offset from its root's (a varint:
/// an entry spans at most a second), and its version when not 0 (flagged in the id's head).
/// About 8 bytes a job for a create batch's jobs, against 32 in the fixed listing (`jobs`) that
/// entries written before it hold, which is still read; a write of a listing always packs it.
pub(super) const LISTING: &str = "jl";
/// The head flag of a listed job whose version follows.
const VERSIONED: u8 = 0x80;
const FIXED_LISTING: &str = "jobs";

/// `jobs` of an entry of `root`, packed as [`LISTING`] holds them.
pub(super) fn encode_listing(root: &Root, jobs: &[Listed]) -> AttributeValue {
    let base = root.base();
    let mut sorted = jobs.to_vec();
    sorted.sort_by_key(|j| j.id);
    let mut writer = super::ids::Writer::with_capacity(sorted.len());
    for job in &sorted {
        writer.id(job.id, if job.version != 0 { VERSIONED } else { 0 });
        writer.signed(job.fire.wrapping_sub(base));
        if job.version != 0 {
            writer.signed(job.version);
        }
    }
    AttributeValue::B(Blob::new(writer.bytes))
}

fn decode_packed(bytes: &[u8], base: i64) -> Result<Vec<Listed>> {
    let mut reader = super::ids::Reader::new(bytes, "entry listing");
    let mut jobs = Vec::with_capacity(bytes.len() / 8);
    while !reader.done() {
        let (id, flags) = reader.id()?;
        if flags & !VERSIONED != 0 {
            return Err(StoreError::Corrupt("entry listing flags".into()));
        }
        let versioned = flags & VERSIONED != 0;
        let fire = base.wrapping_add(reader.signed()?);
        let version = if versioned { reader.signed()? } else { 0 };
        jobs.push(Listed { id, fire, version });
    }
    Ok(jobs)
}

fn decode_fixed(bytes: &[u8]) -> Result<Vec<Listed>> {
    if !bytes.len().is_multiple_of(32) {
        return Err(StoreError::Corrupt(format!(
            "entry listing of {} bytes",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|c| {
            let num = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
            Listed {
                id: JobId::from_slice(&c[..16]).expect("16 bytes"),
                fire: num(&c[16..24]),
                version: num(&c[24..32]),
            }
        })
        .collect())
}

/// An entry item's listing: the attribute that holds it, the value as read, and the jobs.
fn decode_listing(item: &Item, root: &Root) -> Result<(&'static str, AttributeValue, Vec<Listed>)> {
    let (attr, value) = match (item.get(LISTING), item.get(FIXED_LISTING)) {
        (Some(value), _) => (LISTING, value),
        (None, Some(value)) => (FIXED_LISTING, value),
        (None, None) => return Err(StoreError::Corrupt("entry without a listing".into())),
    };
    let AttributeValue::B(blob) = value else {
        return Err(StoreError::Corrupt(format!("entry listing {value:?}")));
    };
    let jobs = match attr {
        LISTING => decode_packed(blob.as_ref(), root.base())?,
        _ => decode_fixed(blob.as_ref())?,
    };
    Ok((attr, value.clone(), jobs))
}

/// A queue entry's payload sizes, in the order of its listing (4 bytes each).
pub(super) const SIZES: &str = "sizes";

fn encode_sizes(sizes: &[usize]) -> AttributeValue {
    let mut bytes = Vec::with_capacity(sizes.len() * 4);
    for size in sizes {
        bytes.extend_from_slice(&u32::try_from(*size).unwrap_or(u32::MAX).to_be_bytes());
    }
    AttributeValue::B(Blob::new(bytes))
}

/// Each listed job's payload size: from `sizes`, or (an entry of one message, as this store wrote
/// them before entries were shared) the entry's `bytes`.
fn decode_sizes(item: &Item, jobs: &[Listed]) -> Result<HashMap<JobId, usize>> {
    match item.get(SIZES) {
        Some(AttributeValue::B(blob)) if blob.as_ref().len() == jobs.len() * 4 => Ok(jobs
            .iter()
            .zip(blob.as_ref().chunks_exact(4))
            .map(|(j, c)| {
                (
                    j.id,
                    u32::from_be_bytes(c.try_into().expect("4 bytes")) as usize,
                )
            })
            .collect()),
        Some(other) => Err(StoreError::Corrupt(format!("entry sizes {other:?}"))),
        None => {
            let bytes = item.opt_num("bytes")?.unwrap_or(0) as usize;
            Ok(jobs.iter().map(|j| (j.id, bytes)).collect())
        }
    }
}

/// An entry's list of the ids of jobs an edit or a transition took out of it (16 bytes each),
/// and the count of such changes: appended to and counted unconditionally, so that changes of
/// several jobs of one entry at once do not conflict (`jobs::unlist`).
pub(super) const GONE: &str = "gone";
pub(super) const GEN: &str = "gen";

fn decode_gone(value: Option<&AttributeValue>) -> Result<Vec<JobId>> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let AttributeValue::L(ids) = value else {
        return Err(StoreError::Corrupt(format!("entry gone list {value:?}")));
    };
    ids.iter()
        .map(|id| match id {
            AttributeValue::B(blob) => JobId::from_slice(blob.as_ref())
                .map_err(|_| StoreError::Corrupt("entry gone id".into())),
            other => Err(StoreError::Corrupt(format!("entry gone id {other:?}"))),
        })
        .collect()
}

/// Where an entry's root is: its partition and the sort-key prefix every part of it shares.
/// A job item holds its entry's root as `epk` and `ekey`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Root {
    pub(super) pk: String,
    pub(super) key: String,
}

impl Root {
    /// A new root in `lane`'s shard `shard`, for jobs due at or after `fire`.
    pub(super) fn new(lane: Lane<'_>, shard: u32, fire: i64) -> Self {
        Self {
            pk: lane.partition(shard),
            key: format!("{}#{:016x}", ord(fire), rand::random::<u64>()),
        }
    }

    pub(super) fn of_job(job: &Item) -> Result<Option<Self>> {
        Ok(match (job.opt_str("epk")?, job.opt_str("ekey")?) {
            (Some(pk), Some(key)) => Some(Self {
                pk: pk.to_owned(),
                key: key.to_owned(),
            }),
            _ => None,
        })
    }

    /// The fire time its key starts with, which its listings count from.
    pub(super) fn base(&self) -> i64 {
        super::item::fire_of_entry_sk(&self.key)
    }

    /// The partition of the settlements written for this root's jobs (`complete.rs`).
    pub(super) fn settlements(&self) -> String {
        format!("s#{}#{}", self.pk, self.key)
    }

    pub(super) fn part_sk(&self, part: &str) -> String {
        format!("{}#{part}", self.key)
    }
}

/// An entry (a root or a part) as read.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) root: Root,
    pub(super) sk: String,
    /// The jobs it lists, less those marked gone.
    pub(super) jobs: Vec<Listed>,
    /// The listing attribute (its name, [`LISTING`] or the fixed one of older entries, and its
    /// value as read), and how many changes marked jobs of it gone (`gen`): what a lease is
    /// conditioned on.
    pub(super) listing_attr: &'static str,
    pub(super) listing: AttributeValue,
    pub(super) gone_count: i64,
    pub(super) owner: Option<String>,
    pub(super) until: Option<i64>,
    pub(super) ltok: i64,
    /// Leases of this queue message that lapsed unacknowledged: failed attempts the job item
    /// has not counted.
    pub(super) lapses: i64,
    /// A queue entry's job type (for type filters) and its messages' payload sizes (for byte
    /// budgets).
    pub(super) job_type: Option<String>,
    pub(super) sizes: HashMap<JobId, usize>,
    /// Whether its create wrote a snapshot of its jobs beside it (`snapshot.rs`).
    pub(super) snapshot: bool,
}

impl Entry {
    pub(super) fn from_item(item: &Item) -> Result<Self> {
        let sk = item.str("sk")?.to_owned();
        let (key, _) = sk
            .rsplit_once('#')
            .ok_or_else(|| StoreError::Corrupt(format!("entry sort key {sk:?}")))?;
        let root = Root {
            pk: item.str("pk")?.to_owned(),
            key: key.to_owned(),
        };
        let (listing_attr, listing, listed) = decode_listing(item, &root)?;
        let gone = decode_gone(item.get(GONE))?;
        Ok(Self {
            sizes: decode_sizes(item, &listed)?,
            jobs: listed
                .into_iter()
                .filter(|j| !gone.contains(&j.id))
                .collect(),
            root,
            listing_attr,
            listing,
            gone_count: item.opt_num(GEN)?.unwrap_or(0),
            owner: item.opt_str("lown")?.map(str::to_owned),
            until: item.opt_num("luntil")?,
            ltok: item.opt_num("ltok")?.unwrap_or(0),
            lapses: item.opt_num("lapses")?.unwrap_or(0),
            job_type: item.opt_str("jtype")?.map(str::to_owned),
            snapshot: item.opt_num(super::snapshot::MARK)?.is_some(),
            sk,
        })
    }

    pub(super) fn key(&self) -> Item {
        super::item::key(self.root.pk.clone(), &self.sk)
    }

    /// Sets its listing to `jobs` (some of its own) in `change`, packed (an older entry's fixed
    /// listing goes), with their count, and a queue entry's their payload sizes.
    pub(super) fn set_listing(&self, change: &mut super::table::Change, jobs: &[Listed]) {
        change.set(LISTING, encode_listing(&self.root, jobs));
        if self.listing_attr != LISTING {
            change.remove(self.listing_attr);
        }
        change.set("cnt", n(jobs.len() as i64));
        if !Lane::is_fired(&self.root.pk) {
            change.set(SIZES, sizes_in_listing_order(jobs, &self.sizes));
        }
    }

    /// Conditions `change` on its listing being as read.
    pub(super) fn listing_as_read(&self, change: &mut super::table::Change) {
        let attr = self.listing_attr;
        change.when(
            &format!("#{attr} = {{}}"),
            &[attr],
            vec![self.listing.clone()],
        );
    }

    /// Conditions `change` on its being there (with a listing).
    pub(super) fn listing_exists(&self, change: &mut super::table::Change) {
        let attr = self.listing_attr;
        change.when(&format!("attribute_exists(#{attr})"), &[attr], vec![]);
    }

    /// Whether a lease holds it at `now`.
    pub(super) fn leased_at(&self, now: i64) -> bool {
        self.owner.is_some() && self.until.is_some_and(|until| until > now)
    }

    /// The payload bytes of the jobs `of` it lists.
    pub(super) fn bytes_of(&self, of: &[Listed]) -> usize {
        of.iter().filter_map(|j| self.sizes.get(&j.id)).sum()
    }

    /// Its queue attributes for a new part listing `jobs` of it (`None` for the fired lane).
    pub(super) fn queued<'a>(
        &'a self,
        jobs: &[Listed],
    ) -> Option<(&'a Option<String>, Vec<usize>)> {
        (!Lane::is_fired(&self.root.pk)).then(|| {
            let sizes = jobs
                .iter()
                .map(|j| self.sizes.get(&j.id).copied().unwrap_or(0))
                .collect();
            (&self.job_type, sizes)
        })
    }

    /// The earliest fire time it lists.
    pub(super) fn first_fire(&self) -> Option<i64> {
        self.jobs.iter().map(|j| j.fire).min()
    }
}

/// A new root entry's item listing `jobs` (at least one); a queue entry's with the messages' job
/// type and their payload sizes (`sizes` in the order of `jobs`).
pub(super) fn root_item(
    root: &Root,
    jobs: &[Listed],
    queue: Option<(&Option<String>, &[usize])>,
) -> Item {
    let mut item = super::item::key(root.pk.clone(), &root.part_sk("0"));
    item.insert(LISTING.into(), encode_listing(root, jobs));
    item.insert("cnt".into(), n(jobs.len() as i64));
    if let Some((job_type, sizes)) = queue {
        if let Some(job_type) = job_type {
            item.insert("jtype".into(), s(job_type));
        }
        let by_id: HashMap<JobId, usize> = jobs
            .iter()
            .map(|j| j.id)
            .zip(sizes.iter().copied())
            .collect();
        item.insert(SIZES.into(), sizes_in_listing_order(jobs, &by_id));
    }
    item
}

/// The payload sizes of `jobs` (from `sizes`), in the order a packed listing of them has: id
/// order.
fn sizes_in_listing_order(jobs: &[Listed], sizes: &HashMap<JobId, usize>) -> AttributeValue {
    let mut ids: Vec<JobId> = jobs.iter().map(|j| j.id).collect();
    ids.sort();
    let sizes: Vec<usize> = ids
        .iter()
        .map(|id| sizes.get(id).copied().unwrap_or(0))
        .collect();
    encode_sizes(&sizes)
}

/// Jobs of one lane cut into entries: in fire order, a new entry when the window or the count
/// would be exceeded.
pub(super) fn windows(jobs: Vec<Listed>) -> Vec<Vec<Listed>> {
    windows_of(jobs, MAX_LISTED)
}

/// [`windows`] of at most `max` jobs each.
pub(super) fn windows_of(mut jobs: Vec<Listed>, max: usize) -> Vec<Vec<Listed>> {
    jobs.sort_by_key(|j| (j.fire, j.id));
    let mut out: Vec<Vec<Listed>> = Vec::new();
    for job in jobs {
        let fits = out
            .last()
            .is_some_and(|w| w.len() < max && job.fire - w[0].fire < WINDOW_MS);
        if fits {
            out.last_mut().expect("a window").push(job);
        } else {
            out.push(vec![job]);
        }
    }
    out
}

/// Of the jobs an entry lists, those whose listing is still valid: the job item names this
/// root and is at the listed version. `homes` are job items by id.
pub(super) fn valid<'a>(
    entry: &'a Entry,
    homes: &'a HashMap<JobId, Item>,
) -> impl Iterator<Item = (&'a Listed, &'a Item)> + 'a {
    entry.jobs.iter().filter_map(move |listed| {
        let home = homes.get(&listed.id)?;
        let here = Root::of_job(home).ok().flatten().as_ref() == Some(&entry.root)
            && home.num("tok").ok() == Some(listed.version)
            && home.num("st").ok()
                == Some(super::item::state_code(hourglass_core::JobState::Active));
        here.then_some((listed, home))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_order_claims_by_version_then_lease() {
        assert!(claim_token(1, 1) > claim_token(0, LEASE_MASK));
        assert!(claim_token(3, 2) > claim_token(3, 1));
        assert!(claim_token(3, 1) > record_token(3));
        assert!(record_token(4) > claim_token(3, LEASE_MASK));
        assert_eq!(split_token(claim_token(7, 9)), (7, 9));
    }

    #[test]
    fn listings_round_trip_packed_and_older_fixed_ones_are_still_read() {
        let root = Root::new(Lane::Fired, 3, 1_900_000_000_000);
        let mut jobs: Vec<Listed> = (0..3)
            .map(|i| Listed {
                id: uuid::Uuid::now_v7(),
                fire: 1_900_000_000_000 + 999 * i - 5,
                version: [0, 1, 1 << 40][i as usize],
            })
            .collect();
        jobs.reverse();
        let mut item = root_item(&root, &jobs, None);
        let entry = Entry::from_item(&item).unwrap();
        jobs.sort_by_key(|j| j.id);
        assert_eq!((entry.listing_attr, &entry.jobs), (LISTING, &jobs));
        // Three jobs made together: far under the fixed listing's 96 bytes.
        let AttributeValue::B(packed) = &item[LISTING] else {
            panic!("a binary listing")
        };
        assert!(packed.as_ref().len() < 64, "{}", packed.as_ref().len());
        // An entry written before the packed listing.
        let mut fixed = Vec::new();
        for job in &jobs {
            fixed.extend_from_slice(job.id.as_bytes());
            fixed.extend_from_slice(&job.fire.to_be_bytes());
            fixed.extend_from_slice(&job.version.to_be_bytes());
        }
        item.remove(LISTING);
        item.insert("jobs".into(), AttributeValue::B(Blob::new(fixed)));
        let entry = Entry::from_item(&item).unwrap();
        assert_eq!((entry.listing_attr, &entry.jobs), ("jobs", &jobs));
        // A listing cut short is corrupt.
        item.insert("jobs".into(), AttributeValue::B(Blob::new(vec![0; 31])));
        assert!(Entry::from_item(&item).is_err());
    }

    #[test]
    fn a_queue_entry_keeps_each_messages_size_through_a_split() {
        let jobs: Vec<Listed> = (0..3)
            .map(|i| Listed {
                id: uuid::Uuid::now_v7(),
                fire: i,
                version: 0,
            })
            .collect();
        let root = Root::new(
            Lane::Queue {
                namespace: "ns",
                queue: "q",
            },
            0,
            0,
        );
        let job_type = Some("x".to_string());
        let item = root_item(&root, &jobs, Some((&job_type, &[10, 20, 30][..])));
        let entry = Entry::from_item(&item).unwrap();
        assert_eq!(entry.bytes_of(&jobs), 60);
        assert_eq!(entry.bytes_of(&jobs[1..]), 50);
        let (kind, sizes) = entry.queued(&jobs[1..]).unwrap();
        assert_eq!((kind.as_deref(), sizes), (Some("x"), vec![20, 30]));
        // The fired lane's entries carry none.
        let fired = Root::new(Lane::Fired, 0, 0);
        let entry = Entry::from_item(&root_item(&fired, &jobs, None)).unwrap();
        assert!(entry.queued(&jobs).is_none());
        assert_eq!(entry.bytes_of(&jobs), 0);
    }

    #[test]
    fn windows_cut_by_span_and_count() {
        let at = |fire| Listed {
            id: uuid::Uuid::now_v7(),
            fire,
            version: 0,
        };
        let mut jobs: Vec<Listed> = (0..150).map(at).collect();
        jobs.push(at(999));
        jobs.push(at(1_500));
        jobs.push(at(5_000));
        let cut: Vec<usize> = windows(jobs).iter().map(Vec::len).collect();
        // 100 by count; 50 more and 999 within a second of the 100th; 1500 and 5000 alone.
        assert_eq!(cut, vec![100, 51, 1, 1]);
        let queued: Vec<Listed> = (0..50).map(at).collect();
        let cut: Vec<usize> = windows_of(queued, QUEUE_LISTED)
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(cut, vec![24, 24, 2]);
    }
}
