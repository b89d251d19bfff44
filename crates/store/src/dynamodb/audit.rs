//! The audit log on DynamoDB: one item per entry in its namespace's partition, `a#<ns>`, sorted
//! by `<at ms>#<seq>` (`seq` random, as DynamoDB has no sequences), read newest first with one
//! Query. An entry is one unconditional put of an item under 1 KB (its job ids are bounded by
//! `AUDIT_JOB_IDS`).
//!
//! Where its change is one transaction, the entry is one more Put in that `TransactWriteItems`
//! ([`item`]): an edit or a transition (whose transaction a refusal or a lost race cancels,
//! entry and all), a dead letter's delete, and, with an entry to write, a signing secret's
//! rotation and a calendar's put or delete (made transactions for it: two write units each, as
//! every item of a transaction costs double). Where the change is not one transaction here, the
//! entry is as close to it as this table allows, and a crash in between can still separate them:
//! - a create batch (many unconditional writes, not a transaction: see `jobs::write_new`) puts
//!   its entry in its last request, beside the registry items that make its jobs listed; a
//!   failed batch deletes the entry with the rest of what it wrote, but a writer that dies after
//!   its jobs' items and before that last request leaves them without an entry;
//! - an anchor's move or delete (one edit or cancel per job: see `anchors.rs`) puts its entry on
//!   its own after the last job, naming the jobs it moved or counting those it cancelled.
//!
//! Retention is `ttl`, as for runs; with retention off the sweep deletes by scanning, as
//! `history::purge` does for runs.

use hourglass_core::from_ms;
use jiff::Timestamp;

use super::Inner;
use super::item::{Attrs, Item, key, n, ord, s};
use super::table::Query;
use crate::{AuditAction, AuditCursor, AuditEntry, AuditQuery, AuditRecord, Result, StoreError};

fn audit_pk(namespace: &str) -> String {
    format!("a#{namespace}")
}

fn audit_sk(cursor: AuditCursor) -> String {
    format!("{}#{}", ord(cursor.at_ms), ord(cursor.seq))
}

pub(super) async fn append(inner: &Inner, record: AuditRecord) -> Result<()> {
    inner.put(item(inner, &record)).await
}

/// The item of an entry, to put in its change's transaction (or on its own, [`append`]).
pub(super) fn item(inner: &Inner, record: &AuditRecord) -> Item {
    let at = record.at.as_millisecond();
    let seq = (rand::random::<u64>() >> 1) as i64;
    let cursor = AuditCursor { at_ms: at, seq };
    let mut item = key(audit_pk(&record.namespace), &audit_sk(cursor));
    item.insert("at".into(), n(at));
    item.insert("seq".into(), n(seq));
    item.insert("kid".into(), s(&record.key_id));
    item.insert("act".into(), s(record.action.as_str()));
    item.insert("count".into(), n(i64::from(record.count)));
    if !record.jobs.is_empty() {
        item.insert("jobs".into(), s(record.jobs_text()));
    }
    if let Some(letter) = record.dead_letter {
        item.insert("dl".into(), n(letter));
    }
    if !record.fields.is_empty() {
        item.insert("fields".into(), s(record.fields_text()));
    }
    if let Some(name) = &record.name {
        item.insert("name".into(), s(name));
    }
    if let Some(ttl) = inner.finished_ttl(at) {
        item.insert("ttl".into(), n(ttl));
    }
    item
}

/// `record`'s item as a Put of a transaction.
pub(super) fn put_action(
    inner: &Inner,
    record: &AuditRecord,
) -> aws_sdk_dynamodb::types::TransactWriteItem {
    super::table::put(&inner.table, item(inner, record))
}

fn entry_from_item(namespace: &str, item: &Item) -> Result<AuditEntry> {
    let cursor = AuditCursor {
        at_ms: item.num("at")?,
        seq: item.num("seq")?,
    };
    let action = item.str("act")?;
    Ok(AuditEntry {
        cursor,
        record: AuditRecord {
            at: from_ms(cursor.at_ms),
            namespace: namespace.to_owned(),
            key_id: item.str("kid")?.to_owned(),
            action: AuditAction::parse(action)
                .ok_or_else(|| StoreError::Corrupt(format!("audit action {action:?}")))?,
            jobs: AuditRecord::jobs_from_text(item.opt_str("jobs")?.unwrap_or_default())?,
            count: u32::try_from(item.num("count")?).unwrap_or(u32::MAX),
            dead_letter: item.opt_num("dl")?,
            fields: AuditRecord::fields_from_text(item.opt_str("fields")?.unwrap_or_default()),
            name: item.opt_str("name")?.map(str::to_owned),
        },
    })
}

/// Newest first from the cursor; a job filter reads on, page by page, until it has `limit`
/// entries about the job or the log ends.
pub(super) async fn read(inner: &Inner, query: AuditQuery) -> Result<Vec<AuditEntry>> {
    if query.limit == 0 {
        return Ok(Vec::new());
    }
    let before = query.before.unwrap_or(AuditCursor::NEWEST);
    let mut q = Query::new(audit_pk(&query.namespace))
        .below(audit_sk(before))
        .backward();
    let items = match query.job {
        None => inner.query(&q.limit(query.limit)).await?,
        Some(job) => {
            q = q.limit(usize::MAX);
            let job = job.to_string();
            let mut found = 0;
            let limit = query.limit;
            inner
                .query_while(&q, |item| {
                    if item
                        .opt_str("jobs")
                        .ok()
                        .flatten()
                        .is_some_and(|jobs| jobs.contains(&job))
                    {
                        found += 1;
                    }
                    found < limit
                })
                .await?
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in &items {
        let entry = entry_from_item(&query.namespace, item)?;
        if query.job.is_none_or(|job| entry.record.concerns(job)) {
            out.push(entry);
        }
    }
    Ok(out)
}

/// With retention on, DynamoDB's time to live deletes entries for free; without, the oldest
/// `limit` appended before `before` are found by a scan and deleted.
pub(super) async fn purge(inner: &Inner, before: Timestamp, limit: usize) -> Result<u64> {
    if inner.retention_ms.is_some() || limit == 0 {
        return Ok(0);
    }
    let before = before.as_millisecond();
    let mut old = Vec::new();
    for item in inner.scan("a#", &["pk", "sk", "at"]).await? {
        if item.num("at")? < before {
            old.push(item);
        }
    }
    old.sort_by_key(|item| item.num("at").unwrap_or_default());
    old.truncate(limit);
    let deleted = old.len() as u64;
    let keys = old
        .iter()
        .map(|item| Ok(key(item.str("pk")?.to_owned(), item.str("sk")?)))
        .collect::<Result<Vec<_>>>()?;
    inner.delete_many(keys).await?;
    Ok(deleted)
}
