//! Counts: the per-queue statistics and the whole-store gauges for metrics, by scanning the due
//! indexes.

use hourglass_core::{JobState, from_ms};
use jiff::Timestamp;

use super::PostgresStore;
use super::codec::col;
use crate::rules::state_from_code;
use crate::{QueueStats, Result, StoreGauges};

pub(super) async fn queue_stats(
    store: &PostgresStore,
    namespace: &str,
    queue: Option<&str>,
    now: Timestamp,
) -> Result<Vec<QueueStats>> {
    let now = now.as_millisecond();
    store
        .bounded(async {
            let client = store.client().await?;
            // A lapsed lease (owner set, fire_ms = its expiry, passed) is available again, and
            // has been since its expiry. Queue names sort bytewise, as in the embedded store.
            let stmt = client
                .prepare_cached(
                    "SELECT queue,
                        COUNT(*) FILTER (WHERE fire_ms <= $2),
                        COUNT(*) FILTER (WHERE fire_ms > $2 AND lease_owner IS NOT NULL),
                        COUNT(*) FILTER (WHERE fire_ms > $2 AND lease_owner IS NULL),
                        MIN(fire_ms) FILTER (WHERE fire_ms <= $2)
                 FROM jobs
                 WHERE state = 0 AND queue IS NOT NULL AND namespace = $1
                   AND ($3::text IS NULL OR queue = $3)
                 GROUP BY queue ORDER BY queue COLLATE \"C\"",
                )
                .await?;
            let mut out = client
                .query(&stmt, &[&namespace, &now, &queue])
                .await?
                .iter()
                .map(|row| {
                    Ok(QueueStats {
                        name: col(row, 0)?,
                        available: col::<i64>(row, 1)? as u64,
                        in_flight: col::<i64>(row, 2)? as u64,
                        scheduled: col::<i64>(row, 3)? as u64,
                        oldest_available: col::<Option<i64>>(row, 4)?.map(from_ms),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            if out.is_empty()
                && let Some(name) = queue
            {
                out.push(QueueStats {
                    name: name.to_owned(),
                    available: 0,
                    in_flight: 0,
                    scheduled: 0,
                    oldest_available: None,
                });
            }
            Ok(out)
        })
        .await
}

pub(super) async fn gauges(store: &PostgresStore, now: Timestamp) -> Result<StoreGauges> {
    let now = now.as_millisecond();
    store
        .bounded(async {
            let client = store.client().await?;
            let mut gauges = StoreGauges {
                jobs_by_state: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
                ..Default::default()
            };
            let stmt = client
                .prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state")
                .await?;
            for row in client.query(&stmt, &[]).await? {
                let state = state_from_code(col::<i16>(&row, 0)? as i64)?;
                let n: i64 = col(&row, 1)?;
                if let Some(slot) = gauges.jobs_by_state.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 = n as u64;
                }
            }
            // Unclaimed only: a claimed occurrence's fire_ms is its lease expiry, in the future
            // while a node holds it; a lapsed claim is backlog again, as it should be.
            let stmt = client
                .prepare_cached(
                    "SELECT COUNT(*), MIN(fire_ms) FROM jobs
                 WHERE state = 0 AND queue IS NULL AND fire_ms <= $1",
                )
                .await?;
            let row = client.query_one(&stmt, &[&now]).await?;
            gauges.due_backlog = col::<i64>(&row, 0)? as u64;
            gauges.oldest_backlog = col::<Option<i64>>(&row, 1)?.map(from_ms);
            let stmt = client
                .prepare_cached(
                    "SELECT COUNT(*) FILTER (WHERE fire_ms <= $1),
                        COUNT(*) FILTER (WHERE fire_ms > $1 AND lease_owner IS NOT NULL),
                        COUNT(*) FILTER (WHERE fire_ms > $1 AND lease_owner IS NULL),
                        MIN(fire_ms) FILTER (WHERE fire_ms <= $1)
                 FROM jobs WHERE state = 0 AND queue IS NOT NULL",
                )
                .await?;
            let row = client.query_one(&stmt, &[&now]).await?;
            gauges.queue_available = col::<i64>(&row, 0)? as u64;
            gauges.queue_in_flight = col::<i64>(&row, 1)? as u64;
            gauges.queue_scheduled = col::<i64>(&row, 2)? as u64;
            gauges.oldest_queue_available = col::<Option<i64>>(&row, 3)?.map(from_ms);
            Ok(gauges)
        })
        .await
}
