//! Each namespace's webhook signing secrets, with the overlap of a rotation.

use hourglass_core::from_ms;
use rusqlite::{Connection, OptionalExtension, params};

use super::codec::unavailable;
use crate::{Result, SigningSecrets};

pub(super) fn signing_secrets(
    conn: &Connection,
    namespace: &str,
) -> Result<Option<SigningSecrets>> {
    let row = conn
        .prepare_cached(
            "SELECT signing_secret, previous_secret, previous_until_ms
             FROM namespaces WHERE name = ?1",
        )
        .map_err(unavailable)?
        .query_row(params![namespace], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        })
        .optional()
        .map_err(unavailable)?;
    Ok(match row {
        Some((Some(current), previous, until)) => Some(SigningSecrets {
            current,
            previous: previous.zip(until.map(from_ms)),
        }),
        _ => None,
    })
}

pub(super) fn init_signing_secret(
    conn: &Connection,
    namespace: &str,
    secret: &str,
) -> Result<String> {
    conn.prepare_cached(
        "INSERT INTO namespaces (name, signing_secret) VALUES (?1, ?2)
         ON CONFLICT(name) DO UPDATE
         SET signing_secret = COALESCE(namespaces.signing_secret, excluded.signing_secret)",
    )
    .map_err(unavailable)?
    .execute(params![namespace, secret])
    .map_err(unavailable)?;
    conn.prepare_cached("SELECT signing_secret FROM namespaces WHERE name = ?1")
        .map_err(unavailable)?
        .query_row(params![namespace], |r| r.get(0))
        .map_err(unavailable)
}

pub(super) fn rotate_signing_secret(
    conn: &Connection,
    namespace: &str,
    secret: &str,
    until: Option<i64>,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO namespaces (name, signing_secret) VALUES (?1, ?2)
         ON CONFLICT(name) DO UPDATE SET
             previous_secret = CASE WHEN ?3 IS NULL THEN NULL
                                    ELSE namespaces.signing_secret END,
             previous_until_ms = CASE WHEN namespaces.signing_secret IS NULL THEN NULL
                                      ELSE ?3 END,
             signing_secret = excluded.signing_secret",
    )
    .map_err(unavailable)?
    .execute(params![namespace, secret, until])
    .map_err(unavailable)?;
    Ok(())
}

pub(super) fn signing_namespaces(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT name FROM namespaces WHERE signing_secret IS NOT NULL ORDER BY name",
        )
        .map_err(unavailable)?;
    let names = stmt
        .query_map([], |r| r.get(0))
        .map_err(unavailable)?
        .collect::<rusqlite::Result<Vec<String>>>()
        .map_err(unavailable)?;
    Ok(names)
}

pub(super) fn replace_signing_secrets(
    conn: &Connection,
    namespace: &str,
    expected: &SigningSecrets,
    replacement: &SigningSecrets,
) -> Result<bool> {
    let (old_current, old_previous, old_until) = expected.columns();
    let (current, previous, until) = replacement.columns();
    // `IS` compares NULLs as equal, so an absent previous secret must still be absent.
    let changed = conn
        .prepare_cached(
            "UPDATE namespaces
             SET signing_secret = ?2, previous_secret = ?3, previous_until_ms = ?4
             WHERE name = ?1 AND signing_secret = ?5 AND previous_secret IS ?6
               AND previous_until_ms IS ?7",
        )
        .map_err(unavailable)?
        .execute(params![
            namespace,
            current,
            previous,
            until,
            old_current,
            old_previous,
            old_until
        ])
        .map_err(unavailable)?;
    Ok(changed == 1)
}
