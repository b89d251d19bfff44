//! Rows to records and back: the job and dead-letter columns a read selects, how each is decoded
//! (a value that does not decode is corrupt data, not an outage), statements built from optional
//! filters, and how driver and pool errors become [`StoreError`]s.

use deadpool_postgres::{GenericClient, PoolError};
use hourglass_core::{FencingToken, JobId, JobSpec, from_ms};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::rules::state_from_code;
use crate::{DeadLetter, JobRecord, KeyedTrigger, Result, StoreError};

/// The columns [`job_from_row`] decodes ([`JOB_COLUMN_COUNT`] of them; a statement selecting more
/// reads its own after them). While claimed, `fire_ms` is the lease's expiry: the two `CASE`
/// columns are the fire time of a job no claim holds, and the expiry of one a claim holds.
pub(super) const JOB_COLUMNS: &str = "id, namespace, key, state, spec, payload, due_ms, attempt, runs, \
                           skipped, created_ms, updated_ms, lease_token, trigger_key, \
                           trigger_due_ms, \
                           CASE WHEN state = 0 AND lease_owner IS NULL THEN fire_ms END, \
                           last_error, \
                           CASE WHEN state = 0 AND lease_owner IS NOT NULL THEN fire_ms END";
pub(super) const JOB_COLUMN_COUNT: usize = 18;
pub(super) const DEAD_LETTER_COLUMNS: &str =
    "id, namespace, job_id, due_ms, attempts, reason, spec, payload, created_ms";

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::Unavailable(describe(&e))
    }
}

impl From<PoolError> for StoreError {
    fn from(e: PoolError) -> Self {
        match e {
            PoolError::Backend(e) => {
                StoreError::Unavailable(format!("cannot connect to the database: {}", describe(&e)))
            }
            PoolError::Timeout(_) => {
                StoreError::Unavailable("timed out waiting for a database connection".into())
            }
            other => StoreError::Unavailable(format!("database pool: {other}")),
        }
    }
}

/// The server's message and SQLSTATE when there is one (tokio-postgres's own text is just
/// "db error"), else the error and its cause.
pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (sqlstate {})", db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// A column of a row, a decoding failure being corrupt data rather than an outage.
pub(super) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    idx: usize,
) -> Result<T> {
    row.try_get(idx).map_err(corrupt)
}

pub(super) fn encode_spec(spec: &JobSpec) -> String {
    serde_json::to_string(spec).expect("job spec serializes")
}

pub(super) fn decode_spec(text: &str) -> Result<JobSpec> {
    serde_json::from_str(text).map_err(corrupt)
}

pub(super) fn job_from_row(row: &Row) -> Result<JobRecord> {
    let spec: String = col(row, 4)?;
    Ok(JobRecord {
        id: col(row, 0)?,
        namespace: col(row, 1)?,
        key: col(row, 2)?,
        state: state_from_code(col::<i16>(row, 3)? as i64)?,
        spec: decode_spec(&spec)?,
        payload: col(row, 5)?,
        next_due: col::<Option<i64>>(row, 6)?.map(from_ms),
        next_attempt: col::<Option<i64>>(row, 15)?.map(from_ms),
        attempt: col::<i64>(row, 7)? as u32,
        runs: col::<i64>(row, 8)? as u64,
        skipped: col::<i64>(row, 9)? as u64,
        created_at: from_ms(col(row, 10)?),
        updated_at: from_ms(col(row, 11)?),
        token: FencingToken::from_i64(col(row, 12)?),
        last_trigger: match (
            col::<Option<String>>(row, 13)?,
            col::<Option<i64>>(row, 14)?,
        ) {
            (Some(key), Some(due)) => Some(KeyedTrigger {
                key,
                due: from_ms(due),
            }),
            _ => None,
        },
        last_error: col(row, 16)?,
        leased_until: col::<Option<i64>>(row, 17)?.map(from_ms),
    })
}

pub(super) fn dead_letter_from_row(row: &Row) -> Result<DeadLetter> {
    let spec: String = col(row, 6)?;
    Ok(DeadLetter {
        id: col(row, 0)?,
        namespace: col(row, 1)?,
        job_id: col(row, 2)?,
        due: from_ms(col(row, 3)?),
        attempts: col::<i64>(row, 4)? as u32,
        reason: col(row, 5)?,
        spec: decode_spec(&spec)?,
        payload: col(row, 7)?,
        created_at: from_ms(col(row, 8)?),
    })
}

/// Loads one job, scoped to a namespace unless `namespace` is `None`; `lock` takes its row lock
/// for the rest of the transaction.
pub(super) async fn load_job(
    client: &impl GenericClient,
    namespace: Option<&str>,
    id: JobId,
    lock: bool,
) -> Result<Option<JobRecord>> {
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1 AND ($2::text IS NULL OR namespace = $2){}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let stmt = client.prepare_cached(&sql).await?;
    match client.query_opt(&stmt, &[&id, &namespace]).await? {
        Some(row) => Ok(Some(job_from_row(&row)?)),
        None => Ok(None),
    }
}

/// Filters on PostgreSQL parameters (`$1`, `$2`, ...).
pub(super) type Filters<'a> = crate::filters::Filters<'a, dyn ToSql + Sync>;
