//! Each namespace's anchors, and what moves and deletes do to the jobs that refer to them.
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | anchor | `an#<namespace>` | `<name>` |
//!
//! (Not `a#`: that is the namespace's audit log, whose entries a listing of anchors would read,
//! and whose retention sweep would take anchors for old entries.)
//!
//! **Not atomic.** A DynamoDB transaction holds at most 100 items and an anchor may have 10,000
//! jobs, so a move writes the anchor item first, then re-times its jobs one edit each (the edit
//! transaction every `PATCH` uses, which raises the job's version and appends a fence entry:
//! each moved job is fenced as an edit is). While a move runs, a reader may see some jobs at
//! their new times and others at the old ones, and a claim of a job not yet moved may still
//! fire its old time. A move that fails half way (an outage) leaves the rest at their old
//! times: the answer is an error, and putting the anchor again moves them (a move re-times
//! every live job on the anchor, moved or not). Finding the jobs reads the namespace's listing
//! (every job of the namespace, as `GET /v1/jobs?anchor=` does here: there is no index by
//! anchor), so a move costs a read of the namespace plus one edit per moved job.
//!
//! A create checks the anchor exists and re-bases its jobs on the instant it reads; a move that
//! lands between that read and the jobs' write does not see them, so after writing, the create
//! reads the anchor again and re-times its jobs if it moved. The bound of
//! [`MAX_JOBS_PER_ANCHOR`] counts every job ever created on the anchor (`made`, raised by each
//! create under a condition), finished or not: counting the live ones would read the namespace.
//! Deleting the anchor and putting it again starts the count afresh.

use hourglass_core::anchor::MAX_JOBS_PER_ANCHOR;

use super::Inner;
use super::item::{Attrs, key, n};
use super::table::{Change, Query};
use crate::anchors::{anchor_of, cancel_reason, is_live, move_update, rebase_new};
use crate::{
    AnchorDelete, AnchorDeleted, AnchorRecord, AuditRecord, JobQuery, JobRecord, NewJob, Result,
    StoreError, Transition,
};

fn anchors_pk(namespace: &str) -> String {
    format!("an#{namespace}")
}

/// Times a job is edited again when it changes under a move (a completion, a claim).
const RACES: usize = 5;

fn decode(namespace: &str, name: String, item: &super::item::Item) -> Result<AnchorRecord> {
    Ok(AnchorRecord {
        namespace: namespace.to_owned(),
        name,
        at: hourglass_core::from_ms(item.num("at")?),
        updated_at: hourglass_core::from_ms(item.num("upd")?),
    })
}

pub(super) async fn get(
    inner: &Inner,
    namespace: &str,
    name: &str,
) -> Result<Option<AnchorRecord>> {
    let Some(item) = inner.get(key(anchors_pk(namespace), name)).await? else {
        return Ok(None);
    };
    decode(namespace, name.to_owned(), &item).map(Some)
}

pub(super) async fn list(inner: &Inner, namespace: &str) -> Result<Vec<AnchorRecord>> {
    let mut out = Vec::new();
    for item in inner.query(&Query::new(anchors_pk(namespace))).await? {
        out.push(decode(namespace, item.str("sk")?.to_owned(), &item)?);
    }
    Ok(out)
}

/// The live jobs of the namespace on anchor `name`, from its listing.
async fn live_jobs(inner: &Inner, namespace: &str, name: &str) -> Result<Vec<JobRecord>> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = super::listing::list_jobs(
            inner,
            JobQuery {
                namespace: Some(namespace.to_owned()),
                anchor: Some(name.to_owned()),
                after,
                limit: 1000,
                ..JobQuery::default()
            },
        )
        .await?;
        let full = page.len() == 1000;
        after = page.last().map(|j| j.id);
        out.extend(page.into_iter().filter(|j| is_live(j.state)));
        if !full {
            return Ok(out);
        }
    }
}

/// Re-times `job` to the anchor at `record.at`, again on what it became when it changes under
/// the edit; `None` when it finished meanwhile.
async fn move_one(
    inner: &Inner,
    record: &AnchorRecord,
    job: JobRecord,
) -> Result<Option<JobRecord>> {
    let mut job = job;
    for _ in 0..RACES {
        let Some(update) = move_update(&job, &record.name, record.at, record.updated_at) else {
            return Ok(None);
        };
        match super::jobs::update_job(inner, Some(&record.namespace), job.id, update, None).await {
            Ok(moved) => return Ok(Some(moved)),
            Err(StoreError::Changed) => {
                match super::jobs::get_job(inner, Some(&record.namespace), job.id).await? {
                    Some(again) => job = again,
                    None => return Ok(None),
                }
            }
            Err(StoreError::InvalidState { .. } | StoreError::NotFound) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Unavailable(
        "dynamodb: a job kept changing under the anchor's move; put the anchor again".into(),
    ))
}

/// Moves the anchor and its jobs; `audit`, naming the jobs moved, is put after the last of them
/// (not atomic: see the module's and `audit.rs`'s documentation).
pub(super) async fn put(
    inner: &Inner,
    record: &AnchorRecord,
    audit: Option<AuditRecord>,
) -> Result<Vec<JobRecord>> {
    let mut change = Change::new(key(anchors_pk(&record.namespace), &record.name));
    change.set("at", n(record.at.as_millisecond()));
    change.set("upd", n(record.updated_at.as_millisecond()));
    inner.update(change, false).await?;
    let mut moved = Vec::new();
    for job in live_jobs(inner, &record.namespace, &record.name).await? {
        if let Some(job) = move_one(inner, record, job).await? {
            moved.push(job);
        }
    }
    if let Some(entry) = audit {
        let entry = entry.naming(moved.iter().map(|job| job.id));
        super::audit::append(inner, entry).await?;
    }
    Ok(moved)
}

pub(super) async fn delete(
    inner: &Inner,
    namespace: &str,
    name: &str,
    how: AnchorDelete,
    audit: Option<AuditRecord>,
) -> Result<AnchorDeleted> {
    if get(inner, namespace, name).await?.is_none() {
        return Ok(AnchorDeleted::NotFound);
    }
    let live = live_jobs(inner, namespace, name).await?;
    let now = match how {
        AnchorDelete::IfUnused => match live.first() {
            Some(job) => return Ok(AnchorDeleted::InUse(job.id)),
            None => jiff::Timestamp::UNIX_EPOCH,
        },
        AnchorDelete::Cancel { now } => now,
    };
    // The anchor first: no create can add a job to it after this.
    let mut change = Change::new(key(anchors_pk(namespace), name));
    change.when("attribute_exists(#pk)", &["pk"], vec![]);
    inner.delete_if(change).await?;
    let reason = cancel_reason(name);
    let mut cancelled = 0;
    for job in live {
        let cancel = Transition::Cancel { now };
        let cancelled_one =
            super::jobs::transition(inner, Some(namespace), job.id, cancel, Some(&reason), None);
        match cancelled_one.await {
            Ok(_) => cancelled += 1,
            Err(StoreError::InvalidState { .. } | StoreError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(mut entry) = audit {
        entry.count = u32::try_from(cancelled).unwrap_or(u32::MAX);
        super::audit::append(inner, entry).await?;
    }
    Ok(AnchorDeleted::Deleted { cancelled })
}

/// Before a create's write: re-bases the batch's anchored jobs on their anchors as read now,
/// and counts them against each anchor's bound. Answers the anchors read, to check again after.
pub(super) async fn prepare(inner: &Inner, jobs: &mut [NewJob]) -> Result<Vec<AnchorRecord>> {
    let mut read: Vec<(AnchorRecord, u64)> = Vec::new();
    for job in jobs.iter_mut() {
        let Some(name) = anchor_of(&job.spec).map(str::to_owned) else {
            continue;
        };
        let i = match read
            .iter()
            .position(|(a, _)| a.namespace == job.namespace && a.name == name)
        {
            Some(i) => i,
            None => {
                let record = get(inner, &job.namespace, &name)
                    .await?
                    .ok_or_else(|| StoreError::UnknownAnchor { name: name.clone() })?;
                read.push((record, 0));
                read.len() - 1
            }
        };
        rebase_new(job, read[i].0.at);
        read[i].1 += 1;
    }
    for (record, adding) in &read {
        let mut change = Change::new(key(anchors_pk(&record.namespace), &record.name));
        change.bump_by("made", *adding as i64);
        change.when(
            "attribute_exists(#pk) AND (attribute_not_exists(#made) OR #made <= {})",
            &["pk", "made"],
            vec![n(MAX_JOBS_PER_ANCHOR.saturating_sub(*adding) as i64)],
        );
        if inner.update(change, false).await?.is_none() {
            return Err(match get(inner, &record.namespace, &record.name).await? {
                Some(_) => StoreError::AnchorFull {
                    name: record.name.clone(),
                },
                None => StoreError::UnknownAnchor {
                    name: record.name.clone(),
                },
            });
        }
    }
    Ok(read.into_iter().map(|(a, _)| a).collect())
}

/// After a create's write: the jobs of anchors that moved since [`prepare`] read them are moved
/// too (a move that ran meanwhile did not see them).
pub(super) async fn settle(
    inner: &Inner,
    read: &[AnchorRecord],
    created: &[JobRecord],
) -> Result<()> {
    for before in read {
        let Some(now) = get(inner, &before.namespace, &before.name).await? else {
            continue;
        };
        if now.at == before.at {
            continue;
        }
        for job in created.iter().filter(|j| {
            j.namespace == before.namespace && anchor_of(&j.spec) == Some(before.name.as_str())
        }) {
            move_one(inner, &now, job.clone()).await?;
        }
    }
    Ok(())
}
