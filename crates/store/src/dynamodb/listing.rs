//! Listing and counting a namespace's jobs: its registry (one item of ids per create batch,
//! written last by `jobs.rs`) read in id order, the jobs it names read and filtered, their claims
//! and settled deliveries folded in; across namespaces, a scan. And keeping a registry item
//! from expiring before a job it lists (`keep_listed`).

use std::collections::HashMap;

use hourglass_core::JobId;

use super::Inner;
use super::entry::Root;
use super::item::{Attrs, Item, job_id, job_key, key, n, registry_pk};
use super::jobs::fold;
use super::table::{Change, Query, TTL};
use crate::{JobQuery, JobRecord, Result, StoreError};

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
        // Labels are not indexed here: a selector filters the namespace's jobs as they are read
        // (see README, "Labels": every job read costs its read units, matched or not).
        && hourglass_core::labels::matches_all(&query.labels, &job.spec.labels)
        && query
            .anchor
            .as_deref()
            .is_none_or(|a| crate::anchors::anchor_of(&job.spec) == Some(a))
}

/// How long before a listing's `after` id a registry item may start and still hold later ids:
/// the ids of one create request are made within its handling, seconds apart.
const REGISTRY_SPAN_MS: i64 = 10 * 60 * 1000;

/// Job records of job items whose labels satisfy `query`'s selectors, claims and settlements
/// folded in. The labels are in the job's own item: a job they leave out costs no read of its
/// claims.
async fn folded(inner: &Inner, items: Vec<Item>, query: &JobQuery) -> Result<Vec<JobRecord>> {
    let mut roots = HashMap::with_capacity(items.len());
    for item in &items {
        roots.insert(job_id(item.str("id")?)?, Root::of_job(item)?);
    }
    let mut records = inner.records(items).await?;
    records.retain(|r| hourglass_core::labels::matches_all(&query.labels, &r.spec.labels));
    for record in &mut records {
        let root = roots.get(&record.id).cloned().flatten();
        fold(inner, record, root.as_ref()).await?;
    }
    Ok(records)
}

pub(super) async fn list_jobs(inner: &Inner, query: JobQuery) -> Result<Vec<JobRecord>> {
    let mut out = Vec::new();
    if query.limit == 0 {
        return Ok(out);
    }
    let Some(namespace) = query.namespace.clone() else {
        // Across namespaces: a scan (admin only; see the module's opening comment).
        let mut items = Vec::new();
        for item in inner.scan("j#", &[]).await? {
            let id = job_id(item.str("id")?)?;
            if query.after.is_none_or(|after| id > after) {
                items.push((id, item));
            }
        }
        items.sort_by_key(|(id, _)| *id);
        for chunk in items.chunks(100) {
            let items = chunk.iter().map(|(_, i)| i.clone()).collect();
            let mut jobs = folded(inner, items, &query).await?;
            jobs.sort_by_key(|j| j.id);
            for job in jobs {
                if matches(&query, &job) {
                    out.push(job);
                    if out.len() == query.limit {
                        return Ok(out);
                    }
                }
            }
        }
        return Ok(out);
    };
    // The namespace's registry in id order: an item holds ids no smaller than its sort key's,
    // so once a page of registry items is read, every pending id below the last item's first
    // id is final in order.
    let start = query.after.map(|after| {
        let ms = after.get_timestamp().map_or(0, |t| {
            let (secs, nanos) = t.to_unix();
            secs as i64 * 1000 + i64::from(nanos / 1_000_000)
        });
        uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            (ms.saturating_sub(REGISTRY_SPAN_MS).max(0) / 1000) as u64,
            0,
        ))
        .to_string()
    });
    let mut pending = std::collections::BTreeSet::new();
    let mut cursor = start;
    loop {
        let mut page_query = Query::new(registry_pk(&namespace)).limit(100);
        if let Some(cursor) = &cursor {
            page_query = page_query.above(cursor.clone());
        }
        let page = inner.query(&page_query).await?;
        for item in &page {
            for id in registry_ids(item)? {
                if query.after.is_none_or(|after| id > after) {
                    pending.insert(id);
                }
            }
        }
        let done = page.len() < 100;
        let bound = match page.last() {
            Some(last) if !done => Some(job_id(
                last.str("sk")?.split_once('#').map_or("", |(id, _)| id),
            )?),
            _ => None,
        };
        cursor = page
            .last()
            .map(|l| l.str("sk").map(str::to_owned))
            .transpose()?;
        // Ids below the bound (all of them on the last page) are final: read them in order.
        let ready: Vec<JobId> = match bound {
            Some(bound) => pending
                .iter()
                .copied()
                .take_while(|id| *id < bound)
                .collect(),
            None => pending.iter().copied().collect(),
        };
        for chunk in ready.chunks(100) {
            for id in chunk {
                pending.remove(id);
            }
            let items = inner
                .get_many_as(chunk.iter().map(|id| job_key(*id)).collect(), false)
                .await?;
            let mut jobs = folded(inner, items, &query).await?;
            jobs.sort_by_key(|j| j.id);
            for job in jobs {
                if job.namespace == namespace && matches(&query, &job) {
                    out.push(job);
                    if out.len() == query.limit {
                        return Ok(out);
                    }
                }
            }
        }
        if done {
            return Ok(out);
        }
    }
}

/// The job ids a registry item lists.
fn registry_ids(item: &Item) -> Result<Vec<JobId>> {
    match item.get("ids") {
        Some(aws_sdk_dynamodb::types::AttributeValue::B(blob)) if blob.as_ref().len() % 16 == 0 => {
            Ok(blob
                .as_ref()
                .chunks_exact(16)
                .map(|c| JobId::from_slice(c).expect("16 bytes"))
                .collect())
        }
        other => Err(StoreError::Corrupt(format!("registry ids {other:?}"))),
    }
}

pub(super) async fn count_jobs(inner: &Inner, namespace: Option<&str>) -> Result<u64> {
    let Some(namespace) = namespace else {
        return Ok(inner.scan("j#", &["pk"]).await?.len() as u64);
    };
    // The registry lists every job created. With retention on, a registry item expires with
    // the last of its jobs, and its ids are the count (a cancelled job counts until its batch
    // expires: a quota's count is a soft one). Without it, `purge` deletes jobs and leaves the
    // registry: the jobs it lists are looked up.
    let mut ids = Vec::new();
    for item in inner.query(&Query::new(registry_pk(namespace))).await? {
        ids.extend(registry_ids(&item)?);
    }
    if inner.retention_ms.is_some() {
        return Ok(ids.len() as u64);
    }
    let found = inner
        .get_many_as(ids.iter().map(|id| job_key(*id)).collect(), false)
        .await?;
    Ok(found.len() as u64)
}

/// Keeps a job's registry item (what lists it in its namespace) from expiring before the job
/// does: when a change moves the job item's expiry past the one its registry item had when the
/// job was created, or removes it, the registry item's follows (a job item of an older version
/// of this store names none).
pub(super) async fn keep_listed(inner: &Inner, home: &Item, ttl: Option<i64>) -> Result<()> {
    let (Some(sk), Some(listed_until)) = (home.opt_str("reg")?, home.opt_num("regttl")?) else {
        return Ok(());
    };
    if ttl.is_some_and(|t| t <= listed_until) {
        return Ok(());
    }
    let mut change = Change::new(key(registry_pk(home.str("ns")?), sk));
    match ttl {
        Some(ttl) => {
            change.when("#ttl < {}", &[TTL], vec![n(ttl)]);
            change.set(TTL, n(ttl));
        }
        None => {
            change.when("attribute_exists(#ttl)", &[TTL], vec![]);
            change.remove(TTL);
        }
    }
    // A failed condition: another job of the batch moved it already.
    inner.update(change, false).await.map(|_| ())
}
