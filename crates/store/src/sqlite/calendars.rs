//! Each namespace's named calendars, one row each, the exclusions as JSON.

use rusqlite::{Connection, OptionalExtension, params};

use super::codec::unavailable;
use crate::{CalendarRecord, Result};

pub(super) fn put(conn: &Connection, record: &CalendarRecord) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO calendars (namespace, name, calendar, updated_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(namespace, name) DO UPDATE
         SET calendar = excluded.calendar, updated_ms = excluded.updated_ms",
    )
    .map_err(unavailable)?
    .execute(params![
        record.namespace,
        record.name,
        record.encode(),
        record.updated_at.as_millisecond()
    ])
    .map_err(unavailable)?;
    Ok(())
}

pub(super) fn get(
    conn: &Connection,
    namespace: &str,
    name: &str,
) -> Result<Option<CalendarRecord>> {
    let row = conn
        .prepare_cached(
            "SELECT calendar, updated_ms FROM calendars WHERE namespace = ?1 AND name = ?2",
        )
        .map_err(unavailable)?
        .query_row(params![namespace, name], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()
        .map_err(unavailable)?;
    row.map(|(json, ms)| CalendarRecord::decode(namespace.into(), name.into(), &json, ms))
        .transpose()
}

pub(super) fn list(conn: &Connection, namespace: &str) -> Result<Vec<CalendarRecord>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, calendar, updated_ms FROM calendars WHERE namespace = ?1
             ORDER BY name",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![namespace], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .map_err(unavailable)?;
    let mut out = vec![];
    for row in rows {
        let (name, json, ms) = row.map_err(unavailable)?;
        out.push(CalendarRecord::decode(namespace.into(), name, &json, ms)?);
    }
    Ok(out)
}

pub(super) fn delete(conn: &Connection, namespace: &str, name: &str) -> Result<bool> {
    let n = conn
        .prepare_cached("DELETE FROM calendars WHERE namespace = ?1 AND name = ?2")
        .map_err(unavailable)?
        .execute(params![namespace, name])
        .map_err(unavailable)?;
    Ok(n > 0)
}
