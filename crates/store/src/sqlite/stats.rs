//! Counts: the whole-store gauges for metrics and the per-queue statistics. Leased queue messages
//! are not in the due index, so both count them from the lease schedule, one row lookup each.

use std::collections::{BTreeMap, HashMap};

use hourglass_core::{JobState, from_ms};
use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{corrupt, unavailable};
use super::leases::{FIRED, LeaseSchedule};
use crate::rules::state_from_code;
use crate::{QueueStats, Result, StoreGauges};

/// The leased messages of some queues, as queue statistics count them.
#[derive(Debug, Default, Clone, Copy)]
struct LeasedCounts {
    /// Leases still running.
    in_flight: u64,
    /// Lapsed leases: their messages are available again, each since its lease's expiry.
    lapsed: u64,
    oldest_lapsed: Option<i64>,
}

impl LeasedCounts {
    fn add(self, other: Self) -> Self {
        Self {
            in_flight: self.in_flight + other.in_flight,
            lapsed: self.lapsed + other.lapsed,
            oldest_lapsed: self
                .oldest_lapsed
                .into_iter()
                .chain(other.oldest_lapsed)
                .min(),
        }
    }
}

/// Counts, per queue key, the leases the schedule knows on these queues (all for `None`), each
/// checked against its row: an entry whose lease has ended counts nothing. One row lookup per
/// lease, on a reader connection.
fn leased_counts(
    conn: &Connection,
    leases: &LeaseSchedule,
    queue_keys: Option<&[i64]>,
    now: i64,
) -> Result<HashMap<i64, LeasedCounts>> {
    let mut look = conn
        .prepare_cached(
            "SELECT fire_ms FROM jobs
             WHERE seq = ?1 AND id = ?2 AND state = 0 AND lease_owner IS NOT NULL
               AND queue_key = ?3",
        )
        .map_err(unavailable)?;
    let mut out: HashMap<i64, LeasedCounts> = HashMap::new();
    for (key, job, seq) in leases.leased(queue_keys) {
        let expiry: Option<i64> = look
            .query_row(params![seq, job.as_bytes().as_slice(), key], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        let Some(expiry) = expiry else { continue };
        let counts = out.entry(key).or_default();
        if expiry > now {
            counts.in_flight += 1;
        } else {
            counts.lapsed += 1;
            counts.oldest_lapsed = Some(counts.oldest_lapsed.map_or(expiry, |o| o.min(expiry)));
        }
    }
    Ok(out)
}

pub(super) fn gauges(conn: &Connection, leases: &LeaseSchedule, now: i64) -> Result<StoreGauges> {
    let mut gauges = StoreGauges {
        jobs_by_state: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
        ..Default::default()
    };
    let mut by_state = conn
        .prepare_cached("SELECT state, COUNT(*) FROM jobs GROUP BY state")
        .map_err(unavailable)?;
    let mut rows = by_state.query([]).map_err(unavailable)?;
    while let Some(row) = rows.next().map_err(unavailable)? {
        let state = state_from_code(row.get(0).map_err(corrupt)?)?;
        let n: i64 = row.get(1).map_err(corrupt)?;
        if let Some(slot) = gauges.jobs_by_state.iter_mut().find(|(s, _)| *s == state) {
            slot.1 = n as u64;
        }
    }
    drop(rows);
    // Unclaimed, and claims whose lease lapsed (backlog again, as they should be): claimed rows
    // are not in the due index, and the lease schedule's entries due for a look are the claims
    // that may have lapsed, each checked against its row.
    let (backlog, oldest): (i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT COUNT(*), MIN(fire_ms) FROM jobs
             WHERE state = 0 AND queue IS NULL AND lease_owner IS NULL AND fire_ms <= ?1",
        )
        .map_err(unavailable)?
        .query_row([now], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(unavailable)?;
    let mut lapsed_look = conn
        .prepare_cached(
            "SELECT fire_ms FROM jobs
             WHERE seq = ?1 AND id = ?2 AND state = 0 AND lease_owner IS NOT NULL
               AND queue IS NULL AND fire_ms <= ?3",
        )
        .map_err(unavailable)?;
    let mut lapsed = 0u64;
    let mut oldest_lapsed: Option<i64> = None;
    for (job, seq) in leases.due_by(FIRED, now) {
        let expiry: Option<i64> = lapsed_look
            .query_row(params![seq, job.as_bytes().as_slice(), now], |r| r.get(0))
            .optional()
            .map_err(unavailable)?;
        if let Some(expiry) = expiry {
            lapsed += 1;
            oldest_lapsed = Some(oldest_lapsed.map_or(expiry, |o| o.min(expiry)));
        }
    }
    gauges.due_backlog = backlog as u64 + lapsed;
    gauges.oldest_backlog = oldest.into_iter().chain(oldest_lapsed).min().map(from_ms);
    type QueueRow = (Option<i64>, Option<i64>, Option<i64>);
    let (available, scheduled, oldest): QueueRow = conn
        .prepare_cached(
            "SELECT SUM(fire_ms <= ?1), SUM(fire_ms > ?1),
                    MIN(CASE WHEN fire_ms <= ?1 THEN fire_ms END)
             FROM jobs WHERE state = 0 AND queue_key IS NOT NULL AND lease_owner IS NULL",
        )
        .map_err(unavailable)?
        .query_row([now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(unavailable)?;
    let leased = leased_counts(conn, leases, None, now)?
        .into_values()
        .fold(LeasedCounts::default(), LeasedCounts::add);
    gauges.queue_available = available.unwrap_or(0) as u64 + leased.lapsed;
    gauges.queue_in_flight = leased.in_flight;
    gauges.queue_scheduled = scheduled.unwrap_or(0) as u64;
    gauges.oldest_queue_available = oldest
        .into_iter()
        .chain(leased.oldest_lapsed)
        .min()
        .map(from_ms);
    Ok(gauges)
}

pub(super) fn queue_stats(
    conn: &Connection,
    leases: &LeaseSchedule,
    namespace: &str,
    queue: Option<String>,
    now: i64,
) -> Result<Vec<QueueStats>> {
    let mut names = HashMap::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT key, name FROM queues WHERE namespace = ?1 AND (?2 IS NULL OR name = ?2)",
        )
        .map_err(unavailable)?;
    let mut rows = stmt.query(params![namespace, queue]).map_err(unavailable)?;
    while let Some(row) = rows.next().map_err(unavailable)? {
        let key: i64 = row.get(0).map_err(corrupt)?;
        names.insert(key, row.get::<_, String>(1).map_err(corrupt)?);
    }
    drop(rows);
    let mut by_name = BTreeMap::new();
    let mut stmt = conn
        .prepare_cached(
            // Unleased messages, from the due index. fire_ms is when each became
            // available.
            "SELECT j.queue_key, SUM(j.fire_ms <= ?2), SUM(j.fire_ms > ?2),
                    MIN(CASE WHEN j.fire_ms <= ?2 THEN j.fire_ms END)
             FROM queues q JOIN jobs j ON j.queue_key = q.key
             WHERE q.namespace = ?1 AND (?3 IS NULL OR q.name = ?3)
               AND j.state = 0 AND j.lease_owner IS NULL
             GROUP BY j.queue_key",
        )
        .map_err(unavailable)?;
    let mut rows = stmt
        .query(params![namespace, now, queue])
        .map_err(unavailable)?;
    while let Some(row) = rows.next().map_err(unavailable)? {
        let count = |i: usize| -> Result<u64> {
            Ok(row.get::<_, Option<i64>>(i).map_err(corrupt)?.unwrap_or(0) as u64)
        };
        let Some(name) = names.get(&row.get::<_, i64>(0).map_err(corrupt)?) else {
            continue;
        };
        by_name.insert(
            name.clone(),
            QueueStats {
                name: name.clone(),
                available: count(1)?,
                in_flight: 0,
                scheduled: count(2)?,
                oldest_available: row.get::<_, Option<i64>>(3).map_err(corrupt)?.map(from_ms),
            },
        );
    }
    drop(rows);
    // Leased messages: in flight, or available again since their lease lapsed.
    let keys: Vec<i64> = names.keys().copied().collect();
    for (key, leased) in leased_counts(conn, leases, Some(&keys), now)? {
        let name = &names[&key];
        let stats = by_name.entry(name.clone()).or_insert_with(|| QueueStats {
            name: name.clone(),
            available: 0,
            in_flight: 0,
            scheduled: 0,
            oldest_available: None,
        });
        stats.available += leased.lapsed;
        stats.in_flight += leased.in_flight;
        stats.oldest_available = stats
            .oldest_available
            .into_iter()
            .chain(leased.oldest_lapsed.map(from_ms))
            .min();
    }
    let mut out: Vec<QueueStats> = by_name.into_values().collect();
    if out.is_empty()
        && let Some(name) = queue
    {
        out.push(QueueStats {
            name,
            available: 0,
            in_flight: 0,
            scheduled: 0,
            oldest_available: None,
        });
    }
    Ok(out)
}
