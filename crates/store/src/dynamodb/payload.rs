//! Payloads over [`INLINE_MAX`] bytes live in an item of their own (`p#<job id>`), out of the job
//! item. DynamoDB bills a write by the size of the whole item (a write unit a started KB, the
//! larger of the item before and after), and every claim and completion rewrites the job item:
//! with a 4 KiB payload inline each of them would cost five units instead of one (ten for a
//! completion's transaction), with a 256 KiB one 256. Out of the job item a payload is written
//! once, at create or edit, and read once a claim with a strongly consistent read (a read unit a
//! started 4 KB; on demand a read unit costs a fifth of a write unit).
//!
//! The job item names the version of its payload ([`VERSION`]: the job's token when the payload
//! was written, which only grows), and the payload item carries the same number. A reader that
//! finds the payload item at another version, or gone, read the job before an edit and the
//! payload after it: it reads the job again (an edit writes both items in one transaction).

use hourglass_core::JobId;

use super::Inner;
use super::item::{Attrs, Item, job_from_item, job_key, n, payload_key, s};
use crate::{JobRecord, Result, StoreError};

/// Payloads longer than this many bytes are stored out of the job item. A job item without its
/// payload is well under a KB (its spec, keys, counters and index attributes), so a payload of a
/// few hundred bytes is what tips each of its writes into a second write unit.
pub(super) const INLINE_MAX: usize = 256;

/// The job item's attribute naming its payload item's version; absent when the payload is inline
/// (or there is none).
pub(super) const VERSION: &str = "pout";

/// How often a read that raced an edit is tried again before the call reports the store
/// unavailable.
const RACES: usize = 5;

pub(super) fn lives_out(payload: &str) -> bool {
    payload.len() > INLINE_MAX
}

/// The payload item of `id` at `version`.
pub(super) fn payload_item(id: JobId, payload: &str, version: i64) -> Item {
    let mut item = payload_key(id);
    item.insert("payload".into(), s(payload));
    item.insert("v".into(), n(version));
    item
}

/// The version of the payload a job item keeps in its own item, if it does.
pub(super) fn version_of(job: &Item) -> Result<Option<i64>> {
    job.opt_num(VERSION)
}

/// A payload item's job, version and text.
fn parts(mut item: Item) -> Result<(JobId, i64, String)> {
    let pk = item.str("pk")?;
    let id = pk
        .strip_prefix("p#")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| StoreError::Corrupt(format!("payload item key {pk:?}")))?;
    let version = item.num("v")?;
    match item.remove("payload") {
        Some(aws_sdk_dynamodb::types::AttributeValue::S(text)) => Ok((id, version, text)),
        _ => Err(StoreError::Corrupt(format!("payload item of job {id}"))),
    }
}

fn missing(id: JobId, version: i64) -> StoreError {
    StoreError::Corrupt(format!(
        "job {id} names payload version {version}, which its payload item lacks"
    ))
}

impl Inner {
    /// The payload of job `id` at `version`, read strongly consistent; `None` when its item holds
    /// another version or is gone (the job was edited since the version was read).
    pub(super) async fn read_payload(&self, id: JobId, version: i64) -> Result<Option<String>> {
        let Some(item) = self.get(payload_key(id)).await? else {
            return Ok(None);
        };
        let (_, held, text) = parts(item)?;
        Ok((held == version).then_some(text))
    }

    /// The payload at `version` of job `id` as held by a claim at `token`. `None` when the job
    /// moved past that token (an edit wrote another payload and voided the claim); an error when
    /// it did not and still the payload item lacks that version.
    pub(super) async fn claimed_payload(
        &self,
        id: JobId,
        version: i64,
        token: i64,
    ) -> Result<Option<String>> {
        if let Some(payload) = self.read_payload(id, version).await? {
            return Ok(Some(payload));
        }
        let job = self.get(job_key(id)).await?;
        match job.map(|item| item.num("tok")).transpose()? {
            Some(now) if now == token => Err(missing(id, version)),
            _ => Ok(None),
        }
    }

    /// Job `id` with its payload, and the version of its payload item if it has one; `None` when
    /// there is no such job.
    pub(super) async fn read_job(&self, id: JobId) -> Result<Option<(JobRecord, Option<i64>)>> {
        let mut missed = None;
        for _ in 0..RACES {
            let Some(item) = self.get(job_key(id)).await? else {
                return Ok(None);
            };
            let mut record = job_from_item(&item)?;
            let Some(version) = version_of(&item)? else {
                return Ok(Some((record, None)));
            };
            if missed == Some(version) {
                // The job still names the version its payload item did not have: not a race.
                return Err(missing(id, version));
            }
            if let Some(payload) = self.read_payload(id, version).await? {
                record.payload = Some(payload);
                return Ok(Some((record, Some(version))));
            }
            missed = Some(version);
        }
        Err(StoreError::Unavailable(format!(
            "dynamodb: job {id}'s payload kept changing under the read; try again"
        )))
    }

    /// Job records from job items, each with its payload: those kept in their own items are read
    /// in batches, and a job edited between the two reads is read again. A job deleted meanwhile
    /// is left out.
    pub(super) async fn records(&self, items: Vec<Item>) -> Result<Vec<JobRecord>> {
        let mut records = Vec::with_capacity(items.len());
        let mut versions = Vec::with_capacity(items.len());
        for item in &items {
            records.push(job_from_item(item)?);
            versions.push(version_of(item)?);
        }
        let wanted: Vec<Item> = records
            .iter()
            .zip(&versions)
            .filter(|(_, v)| v.is_some())
            .map(|(r, _)| payload_key(r.id))
            .collect();
        if wanted.is_empty() {
            return Ok(records);
        }
        let mut found = std::collections::HashMap::with_capacity(wanted.len());
        for item in self.get_many(wanted).await? {
            let (id, version, text) = parts(item)?;
            found.insert(id, (version, text));
        }
        let mut out = Vec::with_capacity(records.len());
        for (mut record, version) in records.into_iter().zip(versions) {
            let Some(version) = version else {
                out.push(record);
                continue;
            };
            match found.remove(&record.id) {
                Some((v, payload)) if v == version => {
                    record.payload = Some(payload);
                    out.push(record);
                }
                // Edited between the reads: this one again, whole.
                _ => {
                    if let Some((again, _)) = self.read_job(record.id).await? {
                        out.push(again);
                    }
                }
            }
        }
        Ok(out)
    }
}
