//! Rows to records and back: the job and dead-letter columns a read selects, how each is decoded
//! (a value that does not decode is corrupt data, not an outage), and the errors of SQLite calls.

use std::sync::Arc;

use hourglass_core::{FencingToken, JobId, JobSpec, ScheduleKind, from_ms};
use rusqlite::{Connection, Row};

use crate::rules::state_from_code;
use crate::{DeadLetter, JobRecord, KeyedTrigger, Result, StoreError};

/// A payload longer than this many bytes is stored in `job_payloads` under its job's row number,
/// the job row holding `payload_out = 1` instead. Every claim and every completion rewrites the
/// whole job row (SQLite rebuilds a changed row's record), so a large payload kept inline was
/// copied twice a fire, and once past a page its overflow pages were freed, written again and
/// sent to the WAL each time. Out of line it is written once, at create or edit, and read by the
/// claims. Small payloads stay inline: the side row costs an insert and a lookup.
pub(super) const INLINE_PAYLOAD_MAX: usize = 256;

/// A `jobs` row's payload, wherever it is stored (in a query over `jobs`, not aliased).
macro_rules! payload_column {
    () => {
        "CASE WHEN payload_out THEN (SELECT job_payloads.payload FROM job_payloads \
         WHERE job_payloads.seq = jobs.seq) ELSE payload END"
    };
}
pub(super) use payload_column;

/// A payload split as a job row stores it: the inline value, and the value for `job_payloads`.
pub(super) fn place_payload(payload: Option<&str>) -> (Option<&str>, Option<&str>) {
    match payload {
        Some(p) if p.len() > INLINE_PAYLOAD_MAX => (None, Some(p)),
        inline => (inline, None),
    }
}

/// The columns [`job_from_row`] decodes. While claimed, `fire_ms` is the lease's expiry: the two
/// `CASE` columns are the fire time of a job no claim holds, and the expiry of one a claim holds.
pub(super) const JOB_COLUMNS: &str = concat!(
    "id, namespace, key, state, spec, ",
    payload_column!(),
    ", due_ms, attempt, runs, skipped, created_ms, updated_ms, lease_token, trigger_key, \
     trigger_due_ms, CASE WHEN state = 0 AND lease_owner IS NULL THEN fire_ms END, last_error, \
     CASE WHEN state = 0 AND lease_owner IS NOT NULL THEN fire_ms END"
);

pub(super) const DEAD_LETTER_COLUMNS: &str =
    "id, namespace, job_id, due_ms, attempts, reason, spec, payload, created_ms";

/// Filters on SQLite parameters (`?1`, `?2`, ...).
pub(super) type Filters<'a> = crate::filters::Filters<'a, dyn rusqlite::ToSql>;

pub(super) fn unavailable(e: rusqlite::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// A spec as stored: its JSON packed (`crate::packed`), in a BLOB.
pub(super) fn encode_spec(spec: &JobSpec) -> Vec<u8> {
    crate::packed::pack(&serde_json::to_string(spec).expect("job spec serializes"))
}

/// A stored spec: a packed BLOB, or the JSON TEXT of a row written before specs were packed.
pub(super) fn decode_spec(stored: &[u8]) -> Result<JobSpec> {
    let json = crate::packed::unpack(stored).map_err(corrupt)?;
    // Validating the text at once is cheaper than serde_json checking each string it reads.
    serde_json::from_str(std::str::from_utf8(&json).map_err(corrupt)?).map_err(corrupt)
}

/// Claimed specs as decoded before, by their stored bytes, so that a claim of jobs sharing a spec
/// (a tenant's reminders to one endpoint, a queue's messages, a cron wave) decodes it once
/// instead of parsing its JSON and its URL again for each job. A one-off's bytes are keyed with
/// its instant's number zeroed: such specs differ only in their `at` (`packed::one_off_instant`),
/// which is put in a copy of the decoded one. Bounded in entries and in bytes (a spec may carry
/// 16 KiB of webhook headers): emptied when either bound is reached.
#[derive(Default)]
pub(super) struct SpecCache {
    inner: std::sync::Mutex<CachedSpecs>,
}

#[derive(Default)]
struct CachedSpecs {
    decoded: std::collections::HashMap<Vec<u8>, Arc<JobSpec>>,
    /// What the entries hold, as [`SpecCache::cost`] counts it.
    bytes: usize,
}

impl SpecCache {
    /// Distinct specs kept; a claim of more distinct ones than this decodes the rest as before.
    const CAPACITY: usize = 4096;
    /// Bytes kept, as [`Self::cost`] counts them.
    const CAPACITY_BYTES: usize = 16 << 20;

    /// About what an entry holds: its key, and its decoded spec (the unpacked text's strings,
    /// at most four times the packed bytes, and the structs around them).
    fn cost(key: &[u8]) -> usize {
        key.len() * 5 + 512
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().decoded.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CachedSpecs> {
        self.inner.lock().expect("spec cache poisoned")
    }

    pub(super) fn decode(&self, stored: &[u8]) -> Result<Arc<JobSpec>> {
        let one_off = crate::packed::one_off_instant(stored);
        let mut key = stored.to_vec();
        if let Some((range, _)) = &one_off {
            key[range.start + 1..range.end].fill(0);
        }
        let cached = self.lock().decoded.get(&key).cloned();
        let Some(spec) = cached else {
            let spec = Arc::new(decode_spec(stored)?);
            let cost = Self::cost(&key);
            let mut cache = self.lock();
            if cache.decoded.len() >= Self::CAPACITY || cache.bytes + cost > Self::CAPACITY_BYTES {
                cache.decoded.clear();
                cache.bytes = 0;
            }
            if cost <= Self::CAPACITY_BYTES && cache.decoded.insert(key, spec.clone()).is_none() {
                cache.bytes += cost;
            }
            return Ok(spec);
        };
        Ok(match one_off {
            None => spec,
            Some((_, ns)) => {
                let at = jiff::Timestamp::from_nanosecond(ns).map_err(corrupt)?;
                let mut own = JobSpec::clone(&spec);
                own.schedule.kind = ScheduleKind::At(at);
                Arc::new(own)
            }
        })
    }
}

/// The bytes of column `i` of `row`, TEXT or BLOB.
pub(super) fn column_bytes<'r>(row: &'r Row<'_>, i: usize) -> Result<&'r [u8]> {
    row.get_ref(i).map_err(corrupt)?.as_bytes().map_err(corrupt)
}

pub(super) fn id_from_blob(bytes: Vec<u8>) -> Result<JobId> {
    JobId::from_slice(&bytes).map_err(corrupt)
}

fn job_from_row(row: &Row<'_>) -> Result<JobRecord> {
    let get_err = |e: rusqlite::Error| corrupt(e);
    Ok(JobRecord {
        id: id_from_blob(row.get(0).map_err(get_err)?)?,
        namespace: row.get(1).map_err(get_err)?,
        key: row.get(2).map_err(get_err)?,
        state: state_from_code(row.get(3).map_err(get_err)?)?,
        spec: decode_spec(column_bytes(row, 4)?)?,
        payload: row.get(5).map_err(get_err)?,
        next_due: row.get::<_, Option<i64>>(6).map_err(get_err)?.map(from_ms),
        next_attempt: row.get::<_, Option<i64>>(15).map_err(get_err)?.map(from_ms),
        attempt: row.get(7).map_err(get_err)?,
        runs: row.get::<_, i64>(8).map_err(get_err)? as u64,
        skipped: row.get::<_, i64>(9).map_err(get_err)? as u64,
        created_at: from_ms(row.get(10).map_err(get_err)?),
        updated_at: from_ms(row.get(11).map_err(get_err)?),
        token: FencingToken::from_i64(row.get(12).map_err(get_err)?),
        last_trigger: match (
            row.get::<_, Option<String>>(13).map_err(get_err)?,
            row.get::<_, Option<i64>>(14).map_err(get_err)?,
        ) {
            (Some(key), Some(due)) => Some(KeyedTrigger {
                key,
                due: from_ms(due),
            }),
            _ => None,
        },
        last_error: row.get(16).map_err(get_err)?,
        leased_until: row.get::<_, Option<i64>>(17).map_err(get_err)?.map(from_ms),
    })
}

pub(super) fn query_jobs(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> Result<Vec<JobRecord>> {
    let mut stmt = conn.prepare_cached(sql).map_err(unavailable)?;
    let mut rows = stmt.query(params).map_err(unavailable)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(unavailable)? {
        out.push(job_from_row(row)?);
    }
    Ok(out)
}

/// Loads one job, scoped to a namespace unless `namespace` is `None`.
pub(super) fn load_job(
    conn: &Connection,
    namespace: Option<&str>,
    id: JobId,
) -> Result<Option<JobRecord>> {
    let sql =
        format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1 AND (?2 IS NULL OR namespace = ?2)");
    Ok(
        query_jobs(conn, &sql, &[&id.as_bytes().as_slice(), &namespace])?
            .into_iter()
            .next(),
    )
}

pub(super) fn dead_letter_from_row(row: &Row<'_>) -> Result<DeadLetter> {
    Ok(DeadLetter {
        id: row.get(0).map_err(corrupt)?,
        namespace: row.get(1).map_err(corrupt)?,
        job_id: id_from_blob(row.get(2).map_err(corrupt)?)?,
        due: from_ms(row.get(3).map_err(corrupt)?),
        attempts: row.get(4).map_err(corrupt)?,
        reason: row.get(5).map_err(corrupt)?,
        spec: decode_spec(column_bytes(row, 6)?)?,
        payload: row.get(7).map_err(corrupt)?,
        created_at: from_ms(row.get(8).map_err(corrupt)?),
    })
}
