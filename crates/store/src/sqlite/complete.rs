//! Completions: each applies the plan `rules.rs` made of it ([`plan_completion`]) under its
//! fencing token, and the batch's runs are inserted many rows a statement.

use hourglass_core::{Claim, Completion, JobId};
use jiff::Timestamp;
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::codec::{encode_spec, payload_column, unavailable};
use crate::rules::{PlannedRun, RowChange, RunOutcome, plan_completion, state_code};
use crate::{Applied, Result};

/// One `runs` row, inserted with others of its batch.
struct RunRow<'a> {
    job_id: JobId,
    due_ms: i64,
    run: PlannedRun<'a>,
}

/// Runs rows go in by this many a statement, the rest one by one: one statement per row cost
/// about as much again as the row's own insert. `OR FAIL`, so that SQLite keeps no statement
/// journal of the pages a many-row insert touches: a failure fails the whole write request,
/// whose savepoint the writer rolls back (`writer.rs`), as the claims' updates do.
const RUNS_PER_INSERT: usize = 64;
const RUN_COLUMNS: usize = 9;

fn insert_runs_sql(rows: usize) -> String {
    let row = format!("({})", ["?"; RUN_COLUMNS].join(", "));
    format!(
        "INSERT OR FAIL INTO runs (job_id, due_ms, attempt, started_ms, latency_ms, status, error, outcome,
                           response)
         VALUES {}",
        vec![row; rows].join(", ")
    )
}

/// Binds `r` to the run's columns after the first `at` parameters.
fn bind_run(
    stmt: &mut rusqlite::CachedStatement<'_>,
    at: usize,
    r: &RunRow<'_>,
) -> rusqlite::Result<()> {
    let a = r.run.attempt;
    stmt.raw_bind_parameter(at + 1, r.job_id.as_bytes().as_slice())?;
    stmt.raw_bind_parameter(at + 2, r.due_ms)?;
    stmt.raw_bind_parameter(at + 3, a.attempt)?;
    stmt.raw_bind_parameter(at + 4, a.started_at.as_millisecond())?;
    stmt.raw_bind_parameter(at + 5, a.latency_ms)?;
    stmt.raw_bind_parameter(at + 6, a.status)?;
    stmt.raw_bind_parameter(at + 7, a.error.as_deref())?;
    stmt.raw_bind_parameter(at + 8, r.run.outcome.as_str())?;
    stmt.raw_bind_parameter(at + 9, a.response.as_deref())
}

fn insert_runs(conn: &Connection, rows: &[RunRow<'_>]) -> Result<()> {
    static CHUNK_SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| insert_runs_sql(RUNS_PER_INSERT));
    static ONE_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| insert_runs_sql(1));
    let mut chunks = rows.chunks_exact(RUNS_PER_INSERT);
    let insert = |sql: &str, chunk: &[RunRow<'_>]| -> Result<()> {
        let mut stmt = conn.prepare_cached(sql).map_err(unavailable)?;
        for (i, row) in chunk.iter().enumerate() {
            bind_run(&mut stmt, i * RUN_COLUMNS, row).map_err(unavailable)?;
        }
        stmt.raw_execute().map_err(unavailable)?;
        Ok(())
    };
    for chunk in &mut chunks {
        insert(&CHUNK_SQL, chunk)?;
    }
    for row in chunks.remainder() {
        insert(&ONE_SQL, std::slice::from_ref(row))?;
    }
    Ok(())
}

/// Applies each completion's plan ([`plan_completion`]) under its fencing token. `rows` holds the
/// row number of each completion's job where the lease schedule knows it: the update then finds
/// the row by it instead of through the id index (and checks the id).
fn complete_in_tx(
    conn: &Connection,
    batch: Vec<Completion>,
    rows: Vec<Option<i64>>,
    now: i64,
) -> Result<Vec<Applied>> {
    let mut out = Vec::with_capacity(batch.len());
    let mut runs = Vec::with_capacity(batch.len());
    let mut overlapped = Vec::new();
    let mut callbacks = Vec::new();
    // Prepared once for the batch: looking a statement up in the cache hashes its text. In each,
    // the last two parameters say whether to write `last_error`, and what.
    let mut retry = conn
        .prepare_cached(
            "UPDATE jobs SET fire_ms = ?3, attempt = attempt + 1, lease_owner = NULL,
                             lease_fire_ms = NULL, updated_ms = ?4,
                             lease_token = lease_token + 1,
                             last_error = CASE WHEN ?6 THEN ?7 ELSE last_error END
             WHERE seq = COALESCE(?5, (SELECT seq FROM jobs WHERE id = ?1))
               AND id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    let mut advance = conn
        .prepare_cached(
            "UPDATE jobs SET due_ms = ?3, fire_ms = ?10, attempt = 0,
                 runs = runs + ?4, skipped = skipped + ?5, lease_owner = NULL,
                 lease_fire_ms = NULL, updated_ms = ?6, lease_token = lease_token + 1,
                 last_error = CASE WHEN ?8 THEN ?9 ELSE last_error END
             WHERE seq = COALESCE(?7, (SELECT seq FROM jobs WHERE id = ?1))
               AND id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    let mut finish = conn
        .prepare_cached(
            "UPDATE jobs SET state = ?3, fire_ms = NULL, runs = runs + ?4,
                 skipped = skipped + ?5, lease_owner = NULL, lease_fire_ms = NULL,
                 updated_ms = ?6, attempt = COALESCE(?8, attempt),
                 lease_token = lease_token + 1,
                 last_error = CASE WHEN ?9 THEN ?10 ELSE last_error END
             WHERE seq = COALESCE(?7, (SELECT seq FROM jobs WHERE id = ?1))
               AND id = ?1 AND lease_token = ?2 AND state = 0",
        )
        .map_err(unavailable)?;
    for (c, row) in batch.iter().zip(rows) {
        let id = c.job_id.as_bytes().as_slice();
        let plan = plan_completion(c);
        let (write_error, error) = plan.last_error.as_columns();
        let changed = match plan.row {
            RowChange::Retry { fire } => retry
                .execute(params![
                    id,
                    c.token.as_i64(),
                    fire,
                    now,
                    row,
                    write_error,
                    error
                ])
                .map_err(unavailable)?,
            RowChange::Advance {
                due,
                fire,
                ran,
                skipped,
            } => advance
                .execute(params![
                    id,
                    c.token.as_i64(),
                    due,
                    ran as i64,
                    skipped as i64,
                    now,
                    row,
                    write_error,
                    error,
                    fire,
                ])
                .map_err(unavailable)?,
            RowChange::Finish {
                state,
                ran,
                skipped,
                attempt,
            } => finish
                .execute(params![
                    id,
                    c.token.as_i64(),
                    state_code(state),
                    ran as i64,
                    skipped as i64,
                    now,
                    row,
                    attempt,
                    write_error,
                    error,
                ])
                .map_err(unavailable)?,
        };
        if changed == 0 {
            out.push(Applied::StaleLease);
            continue;
        }
        if let Some(run) = plan.run {
            // Under the occurrence's origin (an `allow` job's, for the job it handed one to).
            let (job_id, due) = c.run_of();
            runs.push(RunRow {
                job_id,
                due_ms: due.as_millisecond(),
                run,
            });
        }
        if let Some((due_ms, attempt)) = crate::rules::overlap_run(c) {
            overlapped.push((c.job_id, due_ms, attempt));
        }
        if let Some(letter) = plan.dead_letter {
            // Under the occurrence's origin, as its runs: its delivery id is the parent's.
            let (letter_job, letter_due) = c.run_of();
            conn.prepare_cached(concat!(
                "INSERT INTO dead_letters (namespace, job_id, due_ms, attempts, reason, spec, payload, created_ms)
                 SELECT namespace, ?6, ?2, ?3, ?4, spec, ",
                payload_column!(),
                ", ?5 FROM jobs WHERE id = ?1"
            ))
            .map_err(unavailable)?
            .execute(params![
                id,
                letter_due.as_millisecond(),
                letter.attempts,
                letter.reason,
                now,
                letter_job.as_bytes().as_slice(),
            ])
            .map_err(unavailable)?;
        }
        if let Some(callback) = &c.callback {
            callbacks.push(callback);
        }
        out.push(Applied::Yes);
    }
    insert_runs(conn, &runs)?;
    // The callback jobs of the applied completions, in the same transaction: a crash leaves
    // both the completion and its callback, or neither.
    if !callbacks.is_empty() {
        let jobs = callbacks
            .into_iter()
            .map(|cb| {
                let job = crate::NewJob::callback(cb, hourglass_core::from_ms(now));
                let spec = encode_spec(&job.spec);
                (job, spec)
            })
            .collect();
        super::jobs::create_in_tx(conn, jobs)?;
    }
    let overlapped: Vec<RunRow<'_>> = overlapped
        .iter()
        .map(|(job_id, due_ms, attempt)| RunRow {
            job_id: *job_id,
            due_ms: *due_ms,
            run: PlannedRun {
                attempt,
                outcome: RunOutcome::Skipped,
            },
        })
        .collect();
    insert_runs(conn, &overlapped)?;
    Ok(out)
}

impl SqliteStore {
    /// [`Store::complete`]: applies the batch in the writer, then drops the lease schedule's
    /// entries of the leases it ended.
    pub(super) async fn complete_batch(
        &self,
        batch: Vec<Completion>,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        let now = now.as_millisecond();
        let leases: Vec<Claim> = batch.iter().map(Completion::claim).collect();
        let rows = self.leases.rows_of(leases.iter().map(|c| c.job_id));
        let applied = self
            .write(move |conn| complete_in_tx(conn, batch, rows, now))
            .await?;
        // Committed: these leases have ended. (A stale completion ended nothing.)
        self.leases.forget(
            leases
                .into_iter()
                .zip(&applied)
                .filter(|(_, a)| **a == Applied::Yes)
                .map(|(lease, _)| lease),
        );
        Ok(applied)
    }
}
