//! Each namespace's webhook signing secrets, with the overlap of a rotation.

use hourglass_core::from_ms;
use jiff::Timestamp;

use super::PostgresStore;
use super::codec::col;
use crate::{Result, SigningSecrets};

pub(super) async fn signing_secrets(
    store: &PostgresStore,
    namespace: &str,
) -> Result<Option<SigningSecrets>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT signing_secret, previous_secret, previous_until_ms
                 FROM namespaces WHERE name = $1",
                )
                .await?;
            let Some(row) = client.query_opt(&stmt, &[&namespace]).await? else {
                return Ok(None);
            };
            let current: Option<String> = col(&row, 0)?;
            let previous: Option<String> = col(&row, 1)?;
            let until: Option<i64> = col(&row, 2)?;
            Ok(current.map(|current| SigningSecrets {
                current,
                previous: previous.zip(until.map(from_ms)),
            }))
        })
        .await
}

pub(super) async fn init_signing_secret(
    store: &PostgresStore,
    namespace: &str,
    secret: &str,
) -> Result<String> {
    store
        .bounded(async {
            let client = store.client().await?;
            // The no-op update makes RETURNING answer the row either way.
            let stmt = client
                .prepare_cached(
                    "INSERT INTO namespaces (name, signing_secret) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE
                 SET signing_secret = COALESCE(namespaces.signing_secret,
                                               excluded.signing_secret)
                 RETURNING signing_secret",
                )
                .await?;
            let row = client.query_one(&stmt, &[&namespace, &secret]).await?;
            col(&row, 0)
        })
        .await
}

pub(super) async fn rotate_signing_secret(
    store: &PostgresStore,
    namespace: &str,
    secret: &str,
    previous_until: Option<Timestamp>,
    audit: Option<crate::AuditRecord>,
) -> Result<()> {
    let until = previous_until.map(|t| t.as_millisecond());
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO namespaces (name, signing_secret) VALUES ($1, $2)
                 ON CONFLICT (name) DO UPDATE SET
                     previous_secret = CASE WHEN $3::bigint IS NULL THEN NULL
                                            ELSE namespaces.signing_secret END,
                     previous_until_ms = CASE WHEN namespaces.signing_secret IS NULL THEN NULL
                                              ELSE $3::bigint END,
                     signing_secret = excluded.signing_secret",
                )
                .await?;
            tx.execute(&stmt, &[&namespace, &secret, &until]).await?;
            super::audit::append_in(&tx, audit.as_ref()).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
}

pub(super) async fn signing_namespaces(store: &PostgresStore) -> Result<Vec<String>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT name FROM namespaces WHERE signing_secret IS NOT NULL ORDER BY name",
                )
                .await?;
            client
                .query(&stmt, &[])
                .await?
                .iter()
                .map(|row| col(row, 0))
                .collect()
        })
        .await
}

pub(super) async fn replace_signing_secrets(
    store: &PostgresStore,
    namespace: &str,
    expected: &SigningSecrets,
    replacement: &SigningSecrets,
) -> Result<bool> {
    let (old_current, old_previous, old_until) = expected.columns();
    let (current, previous, until) = replacement.columns();
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "UPDATE namespaces
                 SET signing_secret = $2, previous_secret = $3, previous_until_ms = $4
                 WHERE name = $1 AND signing_secret = $5
                   AND previous_secret IS NOT DISTINCT FROM $6
                   AND previous_until_ms IS NOT DISTINCT FROM $7::bigint",
                )
                .await?;
            let changed = client
                .execute(
                    &stmt,
                    &[
                        &namespace,
                        &current,
                        &previous,
                        &until,
                        &old_current,
                        &old_previous,
                        &old_until,
                    ],
                )
                .await?;
            Ok(changed == 1)
        })
        .await
}
