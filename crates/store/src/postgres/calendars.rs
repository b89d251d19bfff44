//! Each namespace's named calendars, one row each, the exclusions as JSON text.

use super::PostgresStore;
use super::codec::col;
use crate::{AuditRecord, CalendarRecord, Result};

pub(super) async fn put(
    store: &PostgresStore,
    record: &CalendarRecord,
    audit: Option<AuditRecord>,
) -> Result<()> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO calendars (namespace, name, calendar, updated_ms)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (namespace, name) DO UPDATE
                     SET calendar = EXCLUDED.calendar, updated_ms = EXCLUDED.updated_ms",
                )
                .await?;
            let json = record.encode();
            let ms = record.updated_at.as_millisecond();
            tx.execute(&stmt, &[&record.namespace, &record.name, &json, &ms])
                .await?;
            super::audit::append_in(&tx, audit.as_ref()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
}

pub(super) async fn get(
    store: &PostgresStore,
    namespace: &str,
    name: &str,
) -> Result<Option<CalendarRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT calendar, updated_ms FROM calendars WHERE namespace = $1 AND name = $2",
                )
                .await?;
            let Some(row) = client.query_opt(&stmt, &[&namespace, &name]).await? else {
                return Ok(None);
            };
            let json: String = col(&row, 0)?;
            let ms: i64 = col(&row, 1)?;
            CalendarRecord::decode(namespace.into(), name.into(), &json, ms).map(Some)
        })
        .await
}

pub(super) async fn list(store: &PostgresStore, namespace: &str) -> Result<Vec<CalendarRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT name, calendar, updated_ms FROM calendars WHERE namespace = $1
                     ORDER BY name",
                )
                .await?;
            let rows = client.query(&stmt, &[&namespace]).await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let name: String = col(&row, 0)?;
                let json: String = col(&row, 1)?;
                let ms: i64 = col(&row, 2)?;
                out.push(CalendarRecord::decode(namespace.into(), name, &json, ms)?);
            }
            Ok(out)
        })
        .await
}

pub(super) async fn delete(
    store: &PostgresStore,
    namespace: &str,
    name: &str,
    audit: Option<AuditRecord>,
) -> Result<bool> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare_cached("DELETE FROM calendars WHERE namespace = $1 AND name = $2")
                .await?;
            let deleted = tx.execute(&stmt, &[&namespace, &name]).await? > 0;
            super::audit::append_in(&tx, audit.as_ref().filter(|_| deleted)).await?;
            tx.commit().await?;
            Ok(deleted)
        })
        .await
}
