//! The shared store's schema: versioned migrations applied under an advisory lock, and the
//! check of this node's clock against the database server's.

use std::time::{SystemTime, UNIX_EPOCH};

use deadpool_postgres::Object;

use super::CLOCK_SKEW_WARNING;
use super::codec::{col, describe};
use crate::{Result, StoreError};

/// Schema versions, in order; `hourglass_migrations` records the applied ones. All pending ones
/// run in one transaction under an advisory lock, so nodes starting together apply each once.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, runs, dead letters, namespaces. Due-time indexes as in the embedded store: fired
    // targets and queues each get their own, so neither scans the other's rows.
    r#"
    CREATE TABLE jobs (
        id            UUID PRIMARY KEY,
        namespace     TEXT NOT NULL,
        key           TEXT,
        job_type      TEXT,
        queue         TEXT,
        state         SMALLINT NOT NULL,
        spec          TEXT NOT NULL,
        payload       TEXT,
        fingerprint   BIGINT NOT NULL,
        due_ms        BIGINT,
        -- When the next attempt runs. While claimed: the lease expiry.
        fire_ms       BIGINT,
        attempt       BIGINT NOT NULL DEFAULT 0,
        runs          BIGINT NOT NULL DEFAULT 0,
        skipped       BIGINT NOT NULL DEFAULT 0,
        lease_owner   TEXT,
        -- The fire time before the claim, restored when a claim is released unfired.
        lease_fire_ms BIGINT,
        lease_token   BIGINT NOT NULL DEFAULT 0,
        created_ms    BIGINT NOT NULL,
        updated_ms    BIGINT NOT NULL
    );
    CREATE UNIQUE INDEX jobs_namespace_key ON jobs (namespace, key) WHERE key IS NOT NULL;
    CREATE INDEX jobs_namespace ON jobs (namespace, id);
    CREATE INDEX jobs_due ON jobs (fire_ms) WHERE state = 0 AND queue IS NULL;
    CREATE INDEX jobs_queue_due ON jobs (namespace, queue, fire_ms)
        WHERE state = 0 AND queue IS NOT NULL;
    -- Retention: finished jobs by last change, so the sweep never scans live ones.
    CREATE INDEX jobs_finished ON jobs (updated_ms) WHERE state >= 2;

    CREATE TABLE runs (
        id          BIGINT GENERATED ALWAYS AS IDENTITY,
        job_id      UUID NOT NULL,
        due_ms      BIGINT NOT NULL,
        attempt     BIGINT NOT NULL,
        started_ms  BIGINT NOT NULL,
        latency_ms  BIGINT NOT NULL,
        status      BIGINT,
        error       TEXT,
        outcome     TEXT NOT NULL
    );
    CREATE INDEX runs_job ON runs (job_id, started_ms);
    CREATE INDEX runs_started ON runs (started_ms);

    CREATE TABLE dead_letters (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        namespace   TEXT NOT NULL,
        job_id      UUID NOT NULL,
        due_ms      BIGINT NOT NULL,
        attempts    BIGINT NOT NULL,
        reason      TEXT NOT NULL,
        spec        TEXT NOT NULL,
        payload     TEXT,
        created_ms  BIGINT NOT NULL
    );
    CREATE INDEX dead_letters_namespace ON dead_letters (namespace, id);

    CREATE TABLE namespaces (
        name               TEXT PRIMARY KEY,
        signing_secret     TEXT,
        -- The secret a rotation replaced, honoured until previous_until_ms (the overlap).
        previous_secret    TEXT,
        previous_until_ms  BIGINT
    );
    "#,
    // 2: the job's last trigger made with an idempotency key, and the due time of the occurrence
    // it made, so a retried trigger answers the same delivery id instead of firing again.
    "ALTER TABLE jobs ADD COLUMN trigger_key TEXT;
     ALTER TABLE jobs ADD COLUMN trigger_due_ms BIGINT;",
    // 3: the start of what the target answered to a failed attempt, kept with its run.
    "ALTER TABLE runs ADD COLUMN response TEXT;",
    // 4: the error of the job's latest failed attempt (at most 1 KiB), written by the completion
    // that records that attempt's run and cleared by a delivery, so a job shows why it is
    // retrying without a read of its runs. Existing jobs start without one.
    "ALTER TABLE jobs ADD COLUMN last_error TEXT;",
    // 5: node heartbeats (`nodes.rs`): one row per node, replaced every few seconds, so
    // `GET /v1/nodes` lists the cluster's live nodes.
    "CREATE TABLE nodes (
         id             TEXT PRIMARY KEY,
         version        TEXT NOT NULL,
         started_ms     BIGINT NOT NULL,
         beat_ms        BIGINT NOT NULL,
         claims_held    BIGINT NOT NULL,
         live_until_ms  BIGINT NOT NULL
     );",
    // 6: each namespace's named calendars (`calendars.rs`), their exclusions as JSON text.
    "CREATE TABLE calendars (
         namespace  TEXT NOT NULL,
         name       TEXT NOT NULL,
         calendar   TEXT NOT NULL,
         updated_ms BIGINT NOT NULL,
         PRIMARY KEY (namespace, name)
     );",
    // 7: the audit log (`audit.rs`): one row per API request that changed something.
    "CREATE TABLE audit_log (
         id           BIGSERIAL PRIMARY KEY,
         namespace    TEXT NOT NULL,
         at_ms        BIGINT NOT NULL,
         key_id       TEXT NOT NULL,
         action       TEXT NOT NULL,
         jobs         TEXT NOT NULL,
         job_count    BIGINT NOT NULL,
         dead_letter  BIGINT,
         fields       TEXT NOT NULL
     );
     CREATE INDEX audit_log_namespace ON audit_log(namespace, at_ms, id);",
    // 8: job labels, indexed (`jobs.rs`; the spec keeps the labels too, this table only finds
    // them). A selector reads `job_labels_pair` (an equality) or `job_labels_key` (an existence)
    // in id order from a listing's cursor; the primary key answers whether a job has a label,
    // and lets a deleted job's labels go with it (the cascade). Jobs made before have none.
    "CREATE TABLE job_labels (
         job_id      UUID NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
         label_key   TEXT NOT NULL,
         label_value TEXT NOT NULL,
         namespace   TEXT NOT NULL,
         PRIMARY KEY (job_id, label_key)
     );
     CREATE INDEX job_labels_pair ON job_labels (namespace, label_key, label_value, job_id);
     CREATE INDEX job_labels_key ON job_labels (namespace, label_key, job_id);",
    // 9: anchors (`anchors.rs`): each namespace's named instants, and each job's anchor name
    // (copied from its spec's schedule), indexed so that a move reads only its own jobs.
    "CREATE TABLE anchors (
         namespace  TEXT NOT NULL,
         name       TEXT NOT NULL,
         at_ms      BIGINT NOT NULL,
         updated_ms BIGINT NOT NULL,
         PRIMARY KEY (namespace, name)
     );
     ALTER TABLE jobs ADD COLUMN anchor TEXT;
     CREATE INDEX jobs_anchor ON jobs (namespace, anchor, state) WHERE anchor IS NOT NULL;",
    // 10: the calendar or anchor an audit entry's put or delete concerns (`audit.rs`); empty
    // for the entries written before, none of which concerned one.
    "ALTER TABLE audit_log ADD COLUMN name TEXT;",
];

/// Applies pending migrations and returns the schema the tables live in.
pub(super) async fn migrate(client: &mut Object, schema: Option<&str>) -> Result<String> {
    let tx = client.transaction().await?;
    tx.batch_execute("SET LOCAL statement_timeout = 0").await?;
    let lock_name = match schema {
        Some(schema) => schema.to_owned(),
        None => {
            let row = tx.query_one("SELECT current_schema()::text", &[]).await?;
            col::<Option<String>>(&row, 0)?.ok_or_else(|| {
                StoreError::Unavailable(
                    "the connection has no schema to create tables in (check search_path)".into(),
                )
            })?
        }
    };
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('hourglass migrations ' || $1::text))",
        &[&lock_name],
    )
    .await?;
    if let Some(schema) = schema {
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS hourglass_migrations (
             version    INTEGER PRIMARY KEY,
             applied_ms BIGINT NOT NULL
         )",
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM hourglass_migrations",
            &[],
        )
        .await?;
    let applied = col::<i32>(&row, 0)? as usize;
    if applied > MIGRATIONS.len() {
        return Err(StoreError::Unavailable(format!(
            "the database has schema version {applied}, newer than this binary's {}",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.batch_execute(sql).await.map_err(|e| {
            StoreError::Unavailable(format!(
                "schema migration {} failed: {}",
                i + 1,
                describe(&e)
            ))
        })?;
        tx.execute(
            "INSERT INTO hourglass_migrations (version, applied_ms) VALUES ($1, $2)",
            &[&(i as i32 + 1), &unix_ms_now()],
        )
        .await?;
        tracing::info!(version = i + 1, schema = %lock_name, "applied schema migration");
    }
    tx.commit().await?;
    Ok(lock_name)
}

/// The machine's clock, read directly: for a migration's record and for comparing this
/// machine's clock with the database server's, which is the point of `check_clock`.
#[allow(
    clippy::disallowed_methods,
    reason = "compares the machine's own clock with the database's; no scheduling decision"
)]
fn unix_ms_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Warns when this machine's clock and the database server's disagree: every node compares
/// leases and due times in its own clock, so skew between nodes shortens or stretches leases and
/// moves fire times by as much.
pub(super) async fn check_clock(client: &Object) -> Result<()> {
    let before = unix_ms_now();
    let row = client
        .query_one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[],
        )
        .await?;
    let after = unix_ms_now();
    let server: i64 = col(&row, 0)?;
    let skew_ms = server - (before + after) / 2;
    if skew_ms.unsigned_abs() > CLOCK_SKEW_WARNING.as_millis() as u64 {
        tracing::warn!(
            skew_ms,
            round_trip_ms = after - before,
            "this node's clock differs from the database server's; keep clocks synchronised (ntp): leases and due times are compared in node time"
        );
    } else {
        tracing::debug!(skew_ms, "clock agrees with the database server");
    }
    Ok(())
}
