//! Node heartbeats: one row per node, replaced by each heartbeat. The same statement drops the
//! rows of nodes whose last heartbeat lapsed before this one was written (nodes long gone), so
//! the table stays as small as the cluster.

use hourglass_core::from_ms;
use jiff::Timestamp;

use super::PostgresStore;
use super::codec::col;
use crate::{NodeBeat, Result};

pub(super) async fn heartbeat(store: &PostgresStore, beat: &NodeBeat) -> Result<()> {
    let claims = i64::try_from(beat.claims_held).unwrap_or(i64::MAX);
    let (started, at, until) = (
        beat.started_at.as_millisecond(),
        beat.beat_at.as_millisecond(),
        beat.live_until.as_millisecond(),
    );
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "WITH gone AS (
                         DELETE FROM nodes WHERE live_until_ms < $4 AND id <> $1
                     )
                     INSERT INTO nodes (id, version, started_ms, beat_ms, claims_held,
                                        live_until_ms)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (id) DO UPDATE SET
                         version = excluded.version,
                         started_ms = excluded.started_ms,
                         beat_ms = excluded.beat_ms,
                         claims_held = excluded.claims_held,
                         live_until_ms = excluded.live_until_ms",
                )
                .await?;
            client
                .execute(
                    &stmt,
                    &[&beat.id, &beat.version, &started, &at, &claims, &until],
                )
                .await?;
            Ok(())
        })
        .await
}

pub(super) async fn nodes(store: &PostgresStore, now: Timestamp) -> Result<Vec<NodeBeat>> {
    let now = now.as_millisecond();
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT id, version, started_ms, beat_ms, claims_held, live_until_ms
                     FROM nodes WHERE live_until_ms > $1 ORDER BY id",
                )
                .await?;
            let rows = client.query(&stmt, &[&now]).await?;
            rows.iter()
                .map(|row| {
                    Ok(NodeBeat {
                        id: col(row, 0)?,
                        version: col(row, 1)?,
                        started_at: from_ms(col(row, 2)?),
                        beat_at: from_ms(col(row, 3)?),
                        claims_held: col::<i64>(row, 4)?.max(0) as u64,
                        live_until: from_ms(col(row, 5)?),
                    })
                })
                .collect()
        })
        .await
}
