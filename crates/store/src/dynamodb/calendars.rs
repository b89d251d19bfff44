//! Each namespace's named calendars: one item each in the namespace's calendar partition, the
//! exclusions as JSON. Read and written only by the API (a job keeps its own copy of its
//! calendar in its spec), so the fire path never reads them.
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | calendar | `c#<namespace>` | `<name>` |

use super::Inner;
use super::item::{Attrs, key, n, s};
use super::table::{Change, Query};
use crate::{AuditRecord, CalendarRecord, Result};

fn calendars_pk(namespace: &str) -> String {
    format!("c#{namespace}")
}

/// Writes the calendar; with an entry to write, the two in one transaction.
pub(super) async fn put(
    inner: &Inner,
    record: &CalendarRecord,
    audit: Option<&AuditRecord>,
) -> Result<()> {
    let mut item = key(calendars_pk(&record.namespace), &record.name);
    item.insert("cal".into(), s(record.encode()));
    item.insert("at".into(), n(record.updated_at.as_millisecond()));
    let Some(entry) = audit else {
        return inner.put(item).await;
    };
    let actions = vec![
        super::table::put(&inner.table, item),
        super::audit::put_action(inner, entry),
    ];
    match inner.transact(actions).await? {
        Ok(()) => Ok(()),
        Err(_) => Err(crate::StoreError::Unavailable(
            "dynamodb: a calendar's write was cancelled; try again".into(),
        )),
    }
}

pub(super) async fn get(
    inner: &Inner,
    namespace: &str,
    name: &str,
) -> Result<Option<CalendarRecord>> {
    let Some(item) = inner.get(key(calendars_pk(namespace), name)).await? else {
        return Ok(None);
    };
    CalendarRecord::decode(
        namespace.into(),
        name.into(),
        item.str("cal")?,
        item.num("at")?,
    )
    .map(Some)
}

pub(super) async fn list(inner: &Inner, namespace: &str) -> Result<Vec<CalendarRecord>> {
    let mut out = Vec::new();
    for item in inner.query(&Query::new(calendars_pk(namespace))).await? {
        out.push(CalendarRecord::decode(
            namespace.into(),
            item.str("sk")?.to_owned(),
            item.str("cal")?,
            item.num("at")?,
        )?);
    }
    Ok(out)
}

/// Deletes the calendar if there is one; with an entry to write, the two in one transaction
/// (cancelled, entry and all, when there is no calendar).
pub(super) async fn delete(
    inner: &Inner,
    namespace: &str,
    name: &str,
    audit: Option<&AuditRecord>,
) -> Result<bool> {
    let mut change = Change::new(key(calendars_pk(namespace), name));
    change.when("attribute_exists(#pk)", &["pk"], vec![]);
    let Some(entry) = audit else {
        return inner.delete_if(change).await;
    };
    let actions = vec![
        change.into_delete(&inner.table),
        super::audit::put_action(inner, entry),
    ];
    Ok(inner.transact(actions).await?.is_ok())
}
