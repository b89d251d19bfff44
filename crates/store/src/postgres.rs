//! The shared store: PostgreSQL, so several nodes can serve one set of jobs.
//!
//! Claims are one statement per batch (`FOR UPDATE SKIP LOCKED`, so nodes claiming at once never
//! wait on each other's rows), and keep the embedded store's trick: a claim moves the row's fire
//! time to the lease expiry (remembering the old one for a release), so an abandoned claim becomes
//! due again by itself and the due index never skips claimed rows. Every completion, release and
//! extension is fenced by the lease token. Completions are one statement per batch (`unnest` of
//! column arrays).
//!
//! Writes that make something due (creates, edits, transitions, retries, releases) `NOTIFY` in
//! their own transaction; each store keeps one `LISTEN` connection that reconnects on failure and
//! turns notifications into [`StoreEvent`]s.
//!
//! Times are integer unix milliseconds passed in by the caller (the node's clock), never the
//! database's `now()`: nodes are assumed to run NTP-synchronised clocks. At open the store
//! compares the local clock with the database server's and warns when they differ by more than
//! [`CLOCK_SKEW_WARNING`].

mod tls;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use deadpool_postgres::{
    GenericClient, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use hourglass_core::{Completion, JobId, JobSpec, JobState, Occurrence, from_ms};
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::rules::{
    RowChange, TransitionPlan, plan_completion, plan_transition, plan_update, state_code,
    state_from_code,
};
use crate::{
    Applied, ClaimScope, Created, DeadLetter, DueEvent, JobQuery, JobRecord, JobUpdate,
    KeyedTrigger, Lease, NewJob, PURGE_DEAD_LETTERS, Purged, QueueStats, Release, Result,
    RunCursor, RunRecord, SigningSecrets, Store, StoreError, StoreEvent, StoreGauges, Transition,
};

/// A node whose clock differs from the database server's by more than this gets a warning at
/// start: leases and due times are compared in node time.
pub const CLOCK_SKEW_WARNING: Duration = Duration::from_millis(250);
/// Events waiting for slow receivers; a receiver that falls further behind gets `Lagged` and
/// re-checks everything.
const EVENT_BUFFER: usize = 1024;
/// PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; events are split below that.
const NOTIFY_PAYLOAD_MAX: usize = 7000;
const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How to reach the database, and the limits that keep a node responsive when it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// A libpq-style URL (`postgres://user:pass@host:5432/db`) or `key=value` string. TLS is not
    /// supported yet: use a trusted network or a local proxy.
    pub url: String,
    /// Schema holding Hourglass's tables, created if missing; `None` uses the connection's
    /// search path (normally `public`). Letters, digits and `_`, at most 40 characters.
    pub schema: Option<String>,
    /// Connections in the pool (the LISTEN connection comes on top).
    pub pool_size: usize,
    /// How long a call waits for a pooled connection (or to open one) before it fails with
    /// `Unavailable`: while the database is down, the API answers 503 within this time.
    pub acquire_timeout: Duration,
    /// Server-side limit of one statement; the client also gives up on a whole call a little
    /// after it (the database may be unreachable rather than slow).
    pub statement_timeout: Duration,
}

impl PostgresOptions {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: None,
            pool_size: 16,
            acquire_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_secs(5),
        }
    }
}

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
];

const JOB_COLUMNS: &str = "id, namespace, key, state, spec, payload, due_ms, attempt, runs, \
                           skipped, created_ms, updated_ms, lease_token, trigger_key, \
                           trigger_due_ms";
const DEAD_LETTER_COLUMNS: &str =
    "id, namespace, job_id, due_ms, attempts, reason, spec, payload, created_ms";

pub struct PostgresStore {
    pool: Pool,
    /// The NOTIFY channel: one per schema, so separate installations in one database (and
    /// parallel tests) do not hear each other.
    channel: String,
    events: broadcast::Sender<StoreEvent>,
    /// The LISTEN connection's task; aborted when the store is dropped.
    listener: JoinHandle<()>,
    /// A whole call gives up after this, even if the database never answers.
    call_timeout: Duration,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

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
fn describe(e: &tokio_postgres::Error) -> String {
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
fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T> {
    row.try_get(idx).map_err(corrupt)
}

fn valid_schema(schema: &str) -> bool {
    !schema.is_empty()
        && schema.len() <= 40
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !schema.starts_with(|c: char| c.is_ascii_digit())
}

impl PostgresStore {
    /// Connects, creates or migrates the schema, checks the clock against the server's, and
    /// starts listening for other nodes' events.
    pub async fn open(options: PostgresOptions) -> Result<Self> {
        let invalid = |e: String| StoreError::Unavailable(format!("invalid database url: {e}"));
        let split = tls::split_url(&options.url).map_err(invalid)?;
        let mut config: tokio_postgres::Config =
            split.url.parse().map_err(|e| invalid(format!("{e}")))?;
        config.ssl_mode(split.mode.wire());
        let connector = tls::connector(split.mode, split.root_cert.as_deref()).map_err(invalid)?;
        if !split.mode.encrypts() && !tls::all_local(&config) {
            tracing::warn!(
                "the connection to the database is not encrypted: add sslmode=verify-full (or \
                 require) to the database url"
            );
        }
        if let Some(schema) = &options.schema
            && !valid_schema(schema)
        {
            return Err(StoreError::Unavailable(format!(
                "invalid schema name {schema:?}: letters, digits and _, at most 40 characters"
            )));
        }
        // Session settings ride on the startup packet, so every pooled connection has them
        // without a round trip. A session stuck in a transaction (its node paused) loses its
        // row locks after a while instead of blocking everyone.
        let statement_ms = options.statement_timeout.as_millis().max(1);
        let mut session = format!(
            "-c statement_timeout={statement_ms} -c idle_in_transaction_session_timeout={}",
            statement_ms * 2
        );
        if let Some(schema) = &options.schema {
            session.push_str(&format!(" -c search_path={schema}"));
        }
        if let Some(existing) = config.get_options() {
            session = format!("{existing} {session}");
        }
        if config.get_application_name().is_none() {
            config.application_name("hourglass");
        }
        config
            .options(session)
            .connect_timeout(options.acquire_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10));

        let manager = Manager::from_config(
            config.clone(),
            connector.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.acquire_timeout))
            .create_timeout(Some(options.acquire_timeout))
            .recycle_timeout(Some(options.acquire_timeout))
            .build()
            .map_err(|e| StoreError::Unavailable(format!("database pool: {e}")))?;

        let mut client = pool.get().await?;
        let schema = migrate(&mut client, options.schema.as_deref()).await?;
        check_clock(&client).await?;
        drop(client);

        let channel = format!("hourglass_due_{schema}");
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let (listening_tx, listening_rx) = oneshot::channel();
        let listener = tokio::spawn(listen(
            config,
            connector,
            channel.clone(),
            events.clone(),
            listening_tx,
        ));
        match tokio::time::timeout(options.acquire_timeout * 2, listening_rx).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                listener.abort();
                return Err(StoreError::Unavailable(format!("cannot listen: {e}")));
            }
            Ok(Err(_)) | Err(_) => {
                listener.abort();
                return Err(StoreError::Unavailable(
                    "timed out starting to listen".into(),
                ));
            }
        }
        Ok(Self {
            pool,
            channel,
            events,
            listener,
            call_timeout: options.statement_timeout + options.acquire_timeout,
        })
    }

    /// Runs one store call with a client-side deadline: a database that stopped answering (a
    /// network partition, not a refusal) must not hang the API or the engine.
    async fn bounded<T>(&self, call: impl Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(
                "the database did not answer in time".into(),
            )),
        }
    }

    async fn client(&self) -> Result<Object> {
        Ok(self.pool.get().await?)
    }

    /// Ends a transaction that changed one job's definition or state (`row` is the job as
    /// updated, `JOB_COLUMNS`): tells other nodes that its claims are fenced
    /// and when it fires next, commits, and answers the stored job.
    async fn commit_job_change(
        &self,
        tx: deadpool_postgres::Transaction<'_>,
        id: JobId,
        row: &Row,
        fire: Option<i64>,
    ) -> Result<JobRecord> {
        let record = job_from_row(row)?;
        let mut due = Due {
            fenced: vec![(id, record.token)],
            ..Due::default()
        };
        if let Some(fire) = fire {
            due.add(&record.namespace, record.spec.target.queue(), fire);
        }
        self.notify(&tx, &due).await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Sends `due`'s events inside the caller's transaction: delivered to listeners only if it
    /// commits.
    async fn notify(&self, tx: &impl GenericClient, due: &Due) -> Result<()> {
        for payload in due.payloads() {
            let stmt = tx.prepare_cached("SELECT pg_notify($1, $2)").await?;
            tx.execute(&stmt, &[&self.channel, &payload]).await?;
        }
        Ok(())
    }
}

/// Applies pending migrations and returns the schema the tables live in.
async fn migrate(client: &mut Object, schema: Option<&str>) -> Result<String> {
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

fn unix_ms_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Warns when this machine's clock and the database server's disagree: every node compares
/// leases and due times in its own clock, so skew between nodes shortens or stretches leases and
/// moves fire times by as much.
async fn check_clock(client: &Object) -> Result<()> {
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

/// Keeps one LISTEN connection open for the store's lifetime, reconnecting with capped backoff,
/// and turns notifications into events. After a reconnect it sends [`StoreEvent::Resync`]:
/// notifications sent while it was away are lost.
async fn listen(
    config: tokio_postgres::Config,
    connector: MakeRustlsConnect,
    channel: String,
    events: broadcast::Sender<StoreEvent>,
    listening: oneshot::Sender<std::result::Result<(), String>>,
) {
    let mut listening = Some(listening);
    let mut backoff = Duration::from_millis(100);
    loop {
        match config.connect(connector.clone()).await {
            Err(e) => {
                if let Some(tx) = listening.take() {
                    let _ = tx.send(Err(describe(&e)));
                    return;
                }
                tracing::warn!(error = %describe(&e), retry_in_ms = backoff.as_millis() as u64, "listen connection failed");
            }
            Ok((client, mut connection)) => {
                let listen_sql = format!("LISTEN \"{channel}\"");
                // The connection does the I/O for the LISTEN request too, so drive both. The
                // client stays alive while listening: dropping it would end the connection.
                let subscribed = {
                    let subscribe = client.batch_execute(&listen_sql);
                    tokio::pin!(subscribe);
                    loop {
                        tokio::select! {
                            result = &mut subscribe => break result.map_err(|e| describe(&e)),
                            message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                                match message {
                                    Some(Ok(_)) => {}
                                    Some(Err(e)) => break Err(describe(&e)),
                                    None => break Err("connection closed".into()),
                                }
                            }
                        }
                    }
                };
                match subscribed {
                    Ok(()) => {
                        backoff = Duration::from_millis(100);
                        match listening.take() {
                            Some(tx) => {
                                let _ = tx.send(Ok(()));
                            }
                            None => {
                                tracing::info!("listen connection restored");
                                let _ = events.send(StoreEvent::Resync);
                            }
                        }
                        loop {
                            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                                Some(Ok(AsyncMessage::Notification(n))) => {
                                    for event in parse_events(n.payload()) {
                                        // No receivers is fine: nobody is waiting.
                                        let _ = events.send(event);
                                    }
                                }
                                Some(Ok(_)) => {}
                                Some(Err(e)) => {
                                    tracing::warn!(error = %describe(&e), "listen connection lost");
                                    break;
                                }
                                None => {
                                    tracing::warn!("listen connection closed");
                                    break;
                                }
                            }
                        }
                    }
                    Err(e) => {
                        if let Some(tx) = listening.take() {
                            let _ = tx.send(Err(e));
                            return;
                        }
                        tracing::warn!(error = %e, "listen failed");
                    }
                }
                drop(client);
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(LISTEN_BACKOFF_MAX);
    }
}

/// The earliest due time per kind of target in one transaction, and the jobs whose claims it made
/// stale: what that transaction NOTIFYs.
#[derive(Default)]
struct Due {
    fired: Option<(String, i64)>,
    queues: HashMap<(String, String), i64>,
    /// Jobs whose claims became stale, with their new token.
    fenced: Vec<(JobId, i64)>,
}

impl Due {
    fn add(&mut self, namespace: &str, queue: Option<&str>, at_ms: i64) {
        match queue {
            None => {
                if self.fired.as_ref().is_none_or(|(_, at)| at_ms < *at) {
                    self.fired = Some((namespace.to_owned(), at_ms));
                }
            }
            Some(queue) => {
                let at = self
                    .queues
                    .entry((namespace.to_owned(), queue.to_owned()))
                    .or_insert(at_ms);
                *at = (*at).min(at_ms);
            }
        }
    }

    /// JSON arrays of `{"n": namespace, "q": queue|null, "at": ms}` and `{"fence": id, "token":
    /// t}`, each
    /// under PostgreSQL's payload limit.
    fn payloads(&self) -> Vec<String> {
        let mut items: Vec<String> = Vec::new();
        if let Some((namespace, at)) = &self.fired {
            items.push(json!({"n": namespace, "q": null, "at": at}).to_string());
        }
        for ((namespace, queue), at) in &self.queues {
            items.push(json!({"n": namespace, "q": queue, "at": at}).to_string());
        }
        for (id, token) in &self.fenced {
            items.push(json!({ "fence": id, "token": token }).to_string());
        }
        let mut out = Vec::new();
        let mut current = String::new();
        for item in items {
            if !current.is_empty() && current.len() + item.len() + 2 > NOTIFY_PAYLOAD_MAX {
                current.push(']');
                out.push(std::mem::take(&mut current));
            }
            current.push(if current.is_empty() { '[' } else { ',' });
            current.push_str(&item);
        }
        if !current.is_empty() {
            current.push(']');
            out.push(current);
        }
        out
    }
}

/// A notification from another store of the same version; anything unreadable becomes a
/// [`StoreEvent::Resync`] (a hint lost is a re-check, never a miss).
fn parse_events(payload: &str) -> Vec<StoreEvent> {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(payload) else {
        return vec![StoreEvent::Resync];
    };
    items
        .iter()
        .map(|item| {
            if let Some(id) = item.get("fence").and_then(Value::as_str) {
                return match (id.parse(), item.get("token").and_then(Value::as_i64)) {
                    (Ok(job_id), Some(token)) => StoreEvent::Fenced { job_id, token },
                    _ => StoreEvent::Resync,
                };
            }
            match (
                item.get("n").and_then(Value::as_str),
                item.get("at").and_then(Value::as_i64),
            ) {
                (Some(namespace), Some(at)) => StoreEvent::Due(DueEvent {
                    namespace: namespace.to_owned(),
                    queue: item.get("q").and_then(Value::as_str).map(str::to_owned),
                    at: from_ms(at),
                }),
                _ => StoreEvent::Resync,
            }
        })
        .collect()
}

fn encode_spec(spec: &JobSpec) -> String {
    serde_json::to_string(spec).expect("job spec serializes")
}

fn decode_spec(text: &str) -> Result<JobSpec> {
    serde_json::from_str(text).map_err(corrupt)
}

fn job_from_row(row: &Row) -> Result<JobRecord> {
    let spec: String = col(row, 4)?;
    Ok(JobRecord {
        id: col(row, 0)?,
        namespace: col(row, 1)?,
        key: col(row, 2)?,
        state: state_from_code(col::<i16>(row, 3)? as i64)?,
        spec: decode_spec(&spec)?,
        payload: col(row, 5)?,
        next_due: col::<Option<i64>>(row, 6)?.map(from_ms),
        attempt: col::<i64>(row, 7)? as u32,
        runs: col::<i64>(row, 8)? as u64,
        skipped: col::<i64>(row, 9)? as u64,
        created_at: from_ms(col(row, 10)?),
        updated_at: from_ms(col(row, 11)?),
        token: col(row, 12)?,
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
    })
}

fn dead_letter_from_row(row: &Row) -> Result<DeadLetter> {
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
async fn load_job(
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

/// Positional parameters for a statement built from optional filters.
#[derive(Default)]
struct Filters<'a> {
    clauses: Vec<String>,
    params: Vec<&'a (dyn ToSql + Sync)>,
}

impl<'a> Filters<'a> {
    /// Adds `column op $n` for a present value.
    fn add<T: ToSql + Sync>(&mut self, column_op: &str, value: Option<&'a T>) {
        if let Some(value) = value {
            self.params.push(value);
            self.clauses
                .push(format!("{column_op} ${}", self.params.len()));
        }
    }

    fn where_clause(&self) -> String {
        if self.clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", self.clauses.join(" AND "))
        }
    }

    fn next_param(&self) -> usize {
        self.params.len() + 1
    }
}

/// Locks, in id order and in `tx`, the rows of the claims `(ids[i], tokens[i])` that still hold
/// that lease. Every statement that updates several claimed rows at once (completions, lease
/// renewals, releases) takes its locks this way first: two such statements on overlapping rows
/// (a node completing a batch while renewing its leases) then wait for each other instead of
/// deadlocking, which PostgreSQL would only break after a `deadlock_timeout`, long enough for a
/// short lease to lapse.
///
/// A row whose lease has moved on (another node took it over, an edit fenced it) is not locked:
/// the statement would leave it alone anyway, and waiting for its new owner's transactions would
/// tie a stalled node's clean-up to the healthy node's work. A node back from a pause holds
/// thousands of such claims; when they were locked too, its renewals and completions queued
/// behind the node that took them over and ran into the statement timeout (seen in CI, where
/// the multi-node test's two surviving nodes then kept losing claims to each other).
async fn lock_in_id_order(tx: &impl GenericClient, ids: &[JobId], tokens: &[i64]) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "SELECT j.id FROM jobs j
             JOIN unnest($1::uuid[], $2::bigint[]) AS c(id, token)
               ON j.id = c.id AND j.lease_token = c.token
             WHERE j.state = 0
             ORDER BY j.id FOR UPDATE OF j",
        )
        .await?;
    tx.query(&stmt, &[&ids, &tokens]).await?;
    Ok(())
}

/// The claim statements' shared tail: move the fire time to the lease expiry (keeping the old
/// one), take the owner and a fresh token. `$4` lease expiry, `$5` owner.
const CLAIM_UPDATE: &str = "
    UPDATE jobs j SET fire_ms = $4, lease_owner = $5,
                      -- The occurrence's own fire time: fire_ms when unclaimed; for a lapsed
                      -- lease (fire_ms is its expiry) the time the first claim kept.
                      lease_fire_ms = CASE WHEN j.lease_owner IS NULL THEN j.fire_ms
                                           ELSE COALESCE(j.lease_fire_ms, j.fire_ms) END,
                      lease_token = j.lease_token + 1,
                      attempt = j.attempt + CASE WHEN $6 AND j.lease_owner IS NOT NULL
                                                 THEN 1 ELSE 0 END
    FROM due WHERE j.id = due.id
    RETURNING j.id, j.namespace, j.spec, j.payload, j.due_ms, j.lease_fire_ms, j.attempt,
              j.lease_token, j.runs";

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn events(&self) -> Option<broadcast::Receiver<StoreEvent>> {
        Some(self.events.subscribe())
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<Created>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        self.bounded(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let n = jobs.len();
            let (mut ids, mut namespaces, mut keys, mut types, mut queues) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            let (mut specs, mut payloads, mut prints, mut dues, mut nows) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            for job in &jobs {
                ids.push(job.id);
                namespaces.push(job.namespace.as_str());
                keys.push(job.key.as_deref());
                types.push(job.spec.job_type.as_deref());
                queues.push(job.spec.target.queue());
                specs.push(encode_spec(&job.spec));
                payloads.push(job.payload.as_deref());
                prints.push(job.fingerprint);
                dues.push(job.first_due.as_millisecond());
                nows.push(job.now.as_millisecond());
            }
            // A key already taken is skipped here (waiting for a concurrent insert of the same key
            // to commit or roll back) and sorted out below.
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO jobs (id, namespace, key, job_type, queue, state, spec, payload,
                                       fingerprint, due_ms, fire_ms, created_ms, updated_ms)
                     SELECT id, namespace, key, job_type, queue, 0, spec, payload, fingerprint,
                            due_ms, due_ms, now_ms, now_ms
                     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
                                 $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[])
                          AS n(id, namespace, key, job_type, queue, spec, payload, fingerprint,
                               due_ms, now_ms)
                     ON CONFLICT (namespace, key) WHERE key IS NOT NULL DO NOTHING
                     RETURNING id",
                )
                .await?;
            let inserted: HashSet<JobId> = tx
                .query(
                    &stmt,
                    &[
                        &ids,
                        &namespaces,
                        &keys,
                        &types,
                        &queues,
                        &specs,
                        &payloads,
                        &prints,
                        &dues,
                        &nows,
                    ],
                )
                .await?
                .iter()
                .map(|row| col(row, 0))
                .collect::<Result<_>>()?;
            let mut existing: HashMap<(String, String), (JobRecord, i64)> = HashMap::new();
            if inserted.len() < n {
                let (mut ns, mut ks) = (Vec::new(), Vec::new());
                for job in jobs.iter().filter(|j| !inserted.contains(&j.id)) {
                    ns.push(job.namespace.as_str());
                    ks.push(job.key.as_deref().unwrap_or_default());
                }
                let stmt = tx
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLUMNS}, fingerprint, key FROM jobs
                         WHERE key IS NOT NULL
                           AND (namespace, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
                    ))
                    .await?;
                for row in tx.query(&stmt, &[&ns, &ks]).await? {
                    let record = job_from_row(&row)?;
                    let print: i64 = col(&row, 15)?;
                    let key: String = col(&row, 16)?;
                    existing.insert((record.namespace.clone(), key), (record, print));
                }
            }
            let mut due = Due::default();
            let mut out = Vec::with_capacity(n);
            for (index, job) in jobs.into_iter().enumerate() {
                if inserted.contains(&job.id) {
                    due.add(
                        &job.namespace,
                        job.spec.target.queue(),
                        job.first_due.as_millisecond(),
                    );
                    out.push(Created::New(job.into_record()));
                    continue;
                }
                let key = job.key.clone().unwrap_or_default();
                let Some((record, print)) = existing.get(&(job.namespace.clone(), key.clone()))
                else {
                    // The key's holder was cancelled (freeing the key) between the two statements.
                    return Err(StoreError::Unavailable(
                        "a concurrent change to a job with the same key; retry".into(),
                    ));
                };
                if *print != job.fingerprint {
                    return Err(StoreError::KeyConflict {
                        index,
                        key,
                        existing: record.id,
                    });
                }
                out.push(Created::Existing(record.clone()));
            }
            self.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        let now = lease.now.as_millisecond();
        let lease_until = now.saturating_add(hourglass_core::duration_ms(lease.ttl));
        let horizon = horizon.as_millisecond();
        let limit = limit as i64;
        self.bounded(async {
            let client = self.client().await?;
            // A row still leased (its fire time is the lease expiry) is claimable only once that
            // expiry has passed by the claimer's clock, even when it lies within the horizon.
            let rows = match scope {
                ClaimScope::Fired => {
                    let stmt = client
                        .prepare_cached(&format!(
                            "WITH due AS MATERIALIZED (
                                 SELECT id FROM jobs
                                 WHERE state = 0 AND queue IS NULL AND fire_ms <= $1
                                   AND (lease_owner IS NULL OR fire_ms <= $2)
                                 ORDER BY fire_ms LIMIT $3
                                 FOR UPDATE SKIP LOCKED)
                             {CLAIM_UPDATE}"
                        ))
                        .await?;
                    client
                        .query(
                            &stmt,
                            &[&horizon, &now, &limit, &lease_until, &lease.owner, &false],
                        )
                        .await?
                }
                ClaimScope::Queue {
                    namespace,
                    queue,
                    types,
                } => {
                    // A queue message still marked as leased is here because its lease ran out
                    // unacked: that lease was a failed attempt ($6).
                    let stmt = client
                        .prepare_cached(&format!(
                            "WITH due AS MATERIALIZED (
                                 SELECT id FROM jobs
                                 WHERE state = 0 AND namespace = $7 AND queue = $8
                                   AND fire_ms <= $1 AND (lease_owner IS NULL OR fire_ms <= $2)
                                   AND ($9::text[] IS NULL OR job_type = ANY($9))
                                 ORDER BY fire_ms LIMIT $3
                                 FOR UPDATE SKIP LOCKED)
                             {CLAIM_UPDATE}"
                        ))
                        .await?;
                    client
                        .query(
                            &stmt,
                            &[
                                &horizon,
                                &now,
                                &limit,
                                &lease_until,
                                &lease.owner,
                                &true,
                                &namespace,
                                &queue,
                                &types,
                            ],
                        )
                        .await?
                }
            };
            let mut claimed = rows
                .iter()
                .map(|row| {
                    let spec: String = col(row, 2)?;
                    let namespace: String = col(row, 1)?;
                    Ok(Occurrence {
                        job_id: col(row, 0)?,
                        namespace: namespace.into(),
                        spec: Arc::new(decode_spec(&spec)?),
                        payload: col::<Option<String>>(row, 3)?.map(Into::into),
                        due: from_ms(col(row, 4)?),
                        fire_at: from_ms(col(row, 5)?),
                        attempt: col::<i64>(row, 6)? as u32 + 1,
                        token: col(row, 7)?,
                        runs_done: col::<i64>(row, 8)? as u64,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            // RETURNING keeps no order; callers get the earliest first, like the claim chose.
            claimed.sort_by_key(|o| o.fire_at);
            Ok(claimed)
        })
        .await
    }

    async fn extend_claims(
        &self,
        claims: Vec<(JobId, i64)>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let (until, now) = (until.as_millisecond(), now.as_millisecond());
        self.bounded(async {
            let mut client = self.client().await?;
            let (ids, tokens): (Vec<JobId>, Vec<i64>) = claims.iter().copied().unzip();
            let tx = client.transaction().await?;
            lock_in_id_order(&tx, &ids, &tokens).await?;
            let stmt = tx
                .prepare_cached(
                    "UPDATE jobs j SET fire_ms = $3, updated_ms = $4
                     FROM unnest($1::uuid[], $2::bigint[]) AS c(id, token)
                     WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 0
                       AND j.lease_owner IS NOT NULL
                     RETURNING j.id, j.lease_token",
                )
                .await?;
            let extended: HashSet<(JobId, i64)> = tx
                .query(&stmt, &[&ids, &tokens, &until, &now])
                .await?
                .iter()
                .map(|row| Ok((col(row, 0)?, col(row, 1)?)))
                .collect::<Result<_>>()?;
            tx.commit().await?;
            Ok(claims
                .iter()
                .map(|claim| {
                    if extended.contains(claim) {
                        Applied::Yes
                    } else {
                        Applied::StaleLease
                    }
                })
                .collect())
        })
        .await
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let now = now.as_millisecond();
        self.bounded(async {
            // One row per completion's plan, as column arrays. kind: 0 retry at `at`, 1 advance
            // to the next occurrence at `at`, 2 finish in `final_state`.
            let n = batch.len();
            let mut ids = Vec::with_capacity(n);
            let mut tokens = Vec::with_capacity(n);
            let mut dues = Vec::with_capacity(n);
            let mut kinds: Vec<i16> = Vec::with_capacity(n);
            let mut ats: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut ran: Vec<i64> = Vec::with_capacity(n);
            let mut skipped_counts: Vec<i64> = Vec::with_capacity(n);
            let mut final_states: Vec<i16> = Vec::with_capacity(n);
            let mut attempts: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut started: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut latencies: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut statuses: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut errors: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut outcomes: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut reasons: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut letter_attempts: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut final_attempts: Vec<Option<i64>> = Vec::with_capacity(n);
            for c in &batch {
                let plan = plan_completion(c);
                ids.push(c.job_id);
                tokens.push(c.token);
                dues.push(c.due.as_millisecond());
                let (kind, runs, skipped, state, final_attempt) = match plan.row {
                    RowChange::Retry { .. } => (0, 0, 0, JobState::Active, None),
                    RowChange::Advance { ran, skipped, .. } => {
                        (1, ran, skipped, JobState::Active, None)
                    }
                    RowChange::Finish {
                        state,
                        ran,
                        skipped,
                        attempt,
                    } => (2, ran, skipped, state, attempt),
                };
                kinds.push(kind);
                ats.push(plan.row.fire());
                ran.push(runs as i64);
                skipped_counts.push(skipped as i64);
                final_states.push(state_code(state) as i16);
                final_attempts.push(final_attempt.map(i64::from));
                let attempt = plan.run.map(|r| r.attempt);
                outcomes.push(plan.run.map(|r| r.outcome.as_str()));
                reasons.push(plan.dead_letter.map(|d| d.reason));
                letter_attempts.push(plan.dead_letter.map(|d| i64::from(d.attempts)));
                attempts.push(attempt.map(|a| a.attempt as i64));
                started.push(attempt.map(|a| a.started_at.as_millisecond()));
                latencies.push(attempt.map(|a| a.latency_ms as i64));
                statuses.push(attempt.and_then(|a| a.status.map(i64::from)));
                errors.push(attempt.and_then(|a| a.error.as_deref()));
            }
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            lock_in_id_order(&tx, &ids, &tokens).await?;
            // Each row is applied only under its current token; the applied ones record their run
            // and dead letter in the same statement.
            let stmt = tx
                .prepare_cached(
                    "WITH c AS (
                         SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[],
                                              $4::smallint[], $5::bigint[], $6::bigint[],
                                              $7::bigint[], $8::smallint[], $9::bigint[],
                                              $10::bigint[], $11::bigint[], $12::bigint[],
                                              $13::text[], $14::text[], $15::text[],
                                              $17::bigint[], $18::bigint[])
                             WITH ORDINALITY
                             AS c(id, token, due_ms, kind, at_ms, ran, skipped, final_state,
                                  attempt, started_ms, latency_ms, status, error, outcome,
                                  reason, final_attempt, letter_attempts, ord)
                     ),
                     done AS (
                         UPDATE jobs j SET
                             state = CASE WHEN c.kind = 2 THEN c.final_state ELSE j.state END,
                             due_ms = CASE WHEN c.kind = 1 THEN c.at_ms ELSE j.due_ms END,
                             fire_ms = CASE WHEN c.kind = 2 THEN NULL ELSE c.at_ms END,
                             attempt = CASE c.kind WHEN 0 THEN j.attempt + 1
                                                   WHEN 1 THEN 0
                                                   ELSE COALESCE(c.final_attempt, j.attempt) END,
                             runs = j.runs + c.ran,
                             skipped = j.skipped + c.skipped,
                             lease_owner = NULL, lease_fire_ms = NULL, updated_ms = $16
                         FROM c
                         WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 0
                         RETURNING c.ord, j.namespace, j.queue, j.spec, j.payload
                     ),
                     recorded AS (
                         INSERT INTO runs (job_id, due_ms, attempt, started_ms, latency_ms, status,
                                           error, outcome)
                         SELECT c.id, c.due_ms, c.attempt, c.started_ms, c.latency_ms, c.status,
                                c.error, c.outcome
                         FROM c JOIN done ON done.ord = c.ord
                         WHERE c.attempt IS NOT NULL
                     ),
                     lettered AS (
                         INSERT INTO dead_letters (namespace, job_id, due_ms, attempts, reason,
                                                   spec, payload, created_ms)
                         SELECT done.namespace, c.id, c.due_ms, c.letter_attempts, c.reason,
                                done.spec, done.payload, $16
                         FROM c JOIN done ON done.ord = c.ord
                         WHERE c.reason IS NOT NULL
                     )
                     SELECT ord, namespace, queue FROM done",
                )
                .await?;
            let rows = tx
                .query(
                    &stmt,
                    &[
                        &ids,
                        &tokens,
                        &dues,
                        &kinds,
                        &ats,
                        &ran,
                        &skipped_counts,
                        &final_states,
                        &attempts,
                        &started,
                        &latencies,
                        &statuses,
                        &errors,
                        &outcomes,
                        &reasons,
                        &now,
                        &final_attempts,
                        &letter_attempts,
                    ],
                )
                .await?;
            let mut applied = vec![Applied::StaleLease; n];
            let mut due = Due::default();
            for row in &rows {
                let i = col::<i64>(row, 0)? as usize - 1;
                applied[i] = Applied::Yes;
                // A retry or the next occurrence may be due before anyone's planned wake-up.
                if kinds[i] != 2
                    && let Some(at) = ats[i]
                {
                    let namespace: String = col(row, 1)?;
                    let queue: Option<String> = col(row, 2)?;
                    due.add(&namespace, queue.as_deref(), at);
                }
            }
            self.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(applied)
        })
        .await
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        if claims.is_empty() {
            return Ok(());
        }
        self.bounded(async {
            let ids: Vec<JobId> = claims.iter().map(|c| c.job_id).collect();
            let tokens: Vec<i64> = claims.iter().map(|c| c.token).collect();
            let fires: Vec<i64> = claims.iter().map(|c| c.fire_at.as_millisecond()).collect();
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            lock_in_id_order(&tx, &ids, &tokens).await?;
            let stmt = tx
                .prepare_cached(
                    "UPDATE jobs j SET fire_ms = r.fire_ms, lease_owner = NULL,
                                       lease_fire_ms = NULL
                     FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS r(id, token, fire_ms)
                     WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 0
                     RETURNING j.namespace, j.queue, j.fire_ms",
                )
                .await?;
            let mut due = Due::default();
            for row in tx.query(&stmt, &[&ids, &tokens, &fires]).await? {
                let namespace: String = col(&row, 0)?;
                let queue: Option<String> = col(&row, 1)?;
                due.add(&namespace, queue.as_deref(), col(&row, 2)?);
            }
            // Released claims are due at once: other nodes should take them now.
            self.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        self.bounded(async {
            let client = self.client().await?;
            let row = match scope {
                ClaimScope::Fired => {
                    let stmt = client
                        .prepare_cached(
                            "SELECT MIN(fire_ms) FROM jobs WHERE state = 0 AND queue IS NULL",
                        )
                        .await?;
                    client.query_one(&stmt, &[]).await?
                }
                ClaimScope::Queue {
                    namespace, queue, ..
                } => {
                    let stmt = client
                        .prepare_cached(
                            "SELECT MIN(fire_ms) FROM jobs
                             WHERE state = 0 AND namespace = $1 AND queue = $2",
                        )
                        .await?;
                    client.query_one(&stmt, &[&namespace, &queue]).await?
                }
            };
            Ok(col::<Option<i64>>(&row, 0)?.map(from_ms))
        })
        .await
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        let now = now.as_millisecond();
        self.bounded(async {
            let client = self.client().await?;
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

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        self.bounded(async {
            let client = self.client().await?;
            load_job(&client, namespace, id, false).await
        })
        .await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        self.bounded(async {
            let client = self.client().await?;
            let state = query.state.map(|s| state_code(s) as i16);
            let due_before = query.due_before.map(|t| t.as_millisecond());
            let due_after = query.due_after.map(|t| t.as_millisecond());
            let limit = query.limit as i64;
            // Only the filters given, so each combination gets a plan that uses its index.
            let mut filters = Filters::default();
            filters.add("namespace =", query.namespace.as_ref());
            filters.add("state =", state.as_ref());
            filters.add("job_type =", query.job_type.as_ref());
            filters.add("due_ms <", due_before.as_ref());
            filters.add("due_ms >=", due_after.as_ref());
            filters.add("id >", query.after.as_ref());
            let sql = format!(
                "SELECT {JOB_COLUMNS} FROM jobs{} ORDER BY id LIMIT ${}",
                filters.where_clause(),
                filters.next_param()
            );
            let mut params = filters.params;
            params.push(&limit);
            let stmt = client.prepare_cached(&sql).await?;
            client
                .query(&stmt, &params)
                .await?
                .iter()
                .map(job_from_row)
                .collect()
        })
        .await
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        self.bounded(async {
            let client = self.client().await?;
            let mut filters = Filters::default();
            filters.add("namespace =", namespace.as_ref());
            let sql = format!("SELECT COUNT(*) FROM jobs{}", filters.where_clause());
            let stmt = client.prepare_cached(&sql).await?;
            let row = client.query_one(&stmt, &filters.params).await?;
            Ok(col::<i64>(&row, 0)? as u64)
        })
        .await
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
    ) -> Result<JobRecord> {
        self.bounded(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let job = load_job(&tx, namespace, id, true)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (state, due_ms, fire) = plan_update(&job, &update)?;
            let stmt = tx
                .prepare_cached(&format!(
                    "UPDATE jobs SET spec = $2, payload = $3, job_type = $4, state = $5,
                                     due_ms = $6, fire_ms = $7, attempt = 0, lease_owner = NULL,
                                     lease_fire_ms = NULL, lease_token = lease_token + 1,
                                     updated_ms = $8, queue = $9
                     WHERE id = $1
                     RETURNING {JOB_COLUMNS}"
                ))
                .await?;
            let row = tx
                .query_one(
                    &stmt,
                    &[
                        &id,
                        &encode_spec(&update.spec),
                        &update.payload,
                        &update.spec.job_type,
                        &(state_code(state) as i16),
                        &due_ms,
                        &fire,
                        &update.now.as_millisecond(),
                        &update.spec.target.queue(),
                    ],
                )
                .await?;
            self.commit_job_change(tx, id, &row, fire).await
        })
        .await
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
    ) -> Result<JobRecord> {
        self.bounded(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let job = load_job(&tx, namespace, id, true)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (state, due_ms, fire, clear_key, trigger_key, now) =
                match plan_transition(&job, transition)? {
                    TransitionPlan::Unchanged => return Ok(job),
                    TransitionPlan::Apply {
                        state,
                        due,
                        fire,
                        clear_key,
                        trigger_key,
                        now,
                    } => (state, due, fire, clear_key, trigger_key, now),
                };
            let stmt = tx
                .prepare_cached(&format!(
                    "UPDATE jobs SET state = $2, due_ms = $3, fire_ms = $4, attempt = 0,
                                     lease_owner = NULL, lease_fire_ms = NULL,
                                     lease_token = lease_token + 1, updated_ms = $5,
                                     key = CASE WHEN $6 THEN NULL ELSE key END,
                                     trigger_key = COALESCE($7, trigger_key),
                                     trigger_due_ms = CASE WHEN $7::text IS NULL
                                                      THEN trigger_due_ms ELSE $5 END
                     WHERE id = $1
                     RETURNING {JOB_COLUMNS}"
                ))
                .await?;
            let row = tx
                .query_one(
                    &stmt,
                    &[
                        &id,
                        &(state_code(state) as i16),
                        &due_ms,
                        &fire,
                        &now,
                        &clear_key,
                        &trigger_key,
                    ],
                )
                .await?;
            self.commit_job_change(tx, id, &row, fire).await
        })
        .await
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        let before = before.unwrap_or(RunCursor::NEWEST);
        self.bounded(async {
            let client = self.client().await?;
            if load_job(&client, namespace, id, false).await?.is_none() {
                return Err(StoreError::NotFound);
            }
            let stmt = client
                .prepare_cached(
                    "SELECT due_ms, attempt, started_ms, latency_ms, status, error, outcome, id
                     FROM runs WHERE job_id = $1 AND (started_ms, id) < ($3, $4)
                     ORDER BY started_ms DESC, id DESC LIMIT $2",
                )
                .await?;
            client
                .query(
                    &stmt,
                    &[&id, &(limit as i64), &before.started_ms, &before.seq],
                )
                .await?
                .iter()
                .map(|row| {
                    Ok(RunRecord {
                        cursor: RunCursor {
                            started_ms: col(row, 2)?,
                            seq: col(row, 7)?,
                        },
                        job_id: id,
                        due: from_ms(col(row, 0)?),
                        attempt: col::<i64>(row, 1)? as u32,
                        started_at: from_ms(col(row, 2)?),
                        latency_ms: col::<i64>(row, 3)? as u32,
                        status: col::<Option<i64>>(row, 4)?.map(|s| s as u16),
                        error: col(row, 5)?,
                        outcome: col(row, 6)?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        self.bounded(async {
            let client = self.client().await?;
            let after = after.unwrap_or(0);
            let limit = limit as i64;
            let mut filters = Filters::default();
            filters.add("namespace =", namespace.as_ref());
            filters.add("id >", Some(&after));
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters{} ORDER BY id LIMIT ${}",
                filters.where_clause(),
                filters.next_param()
            );
            let mut params = filters.params;
            params.push(&limit);
            let stmt = client.prepare_cached(&sql).await?;
            client
                .query(&stmt, &params)
                .await?
                .iter()
                .map(dead_letter_from_row)
                .collect()
        })
        .await
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        self.bounded(async {
            let client = self.client().await?;
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters
                     WHERE id = $1 AND ($2::text IS NULL OR namespace = $2)"
                ))
                .await?;
            match client.query_opt(&stmt, &[&id, &namespace]).await? {
                Some(row) => Ok(Some(dead_letter_from_row(&row)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn delete_dead_letter(&self, namespace: Option<&str>, id: i64) -> Result<bool> {
        self.bounded(async {
            let client = self.client().await?;
            let stmt = client
                .prepare_cached(
                    "DELETE FROM dead_letters WHERE id = $1 AND ($2::text IS NULL OR namespace = $2)",
                )
                .await?;
            Ok(client.execute(&stmt, &[&id, &namespace]).await? > 0)
        })
        .await
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        let (before, limit) = (before.as_millisecond(), limit as i64);
        self.bounded(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            // Every node sweeps; SKIP LOCKED lets two sweeps split the work instead of queueing.
            let stmt = tx
                .prepare_cached(
                    "WITH gone AS (
                         DELETE FROM jobs WHERE id IN (
                             SELECT id FROM jobs WHERE state >= 2 AND updated_ms < $1
                             ORDER BY updated_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
                         RETURNING id),
                     gone_runs AS (
                         DELETE FROM runs WHERE job_id IN (SELECT id FROM gone) RETURNING 1)
                     SELECT (SELECT COUNT(*) FROM gone), (SELECT COUNT(*) FROM gone_runs)",
                )
                .await?;
            let row = tx.query_one(&stmt, &[&before, &limit]).await?;
            let mut purged = Purged {
                jobs: col::<i64>(&row, 0)? as u64,
                runs: col::<i64>(&row, 1)? as u64,
            };
            // Old runs of jobs that live on (recurring ones), by row address: no id index needed.
            let stmt = tx
                .prepare_cached(
                    "WITH old AS (
                         DELETE FROM runs WHERE ctid = ANY(ARRAY(
                             SELECT ctid FROM runs WHERE started_ms < $1 LIMIT $2))
                         RETURNING 1)
                     SELECT COUNT(*) FROM old",
                )
                .await?;
            let row = tx.query_one(&stmt, &[&before, &limit]).await?;
            purged.runs += col::<i64>(&row, 0)? as u64;
            tx.commit().await?;
            Ok(purged)
        })
        .await
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        let (before, limit) = (before.as_millisecond(), limit as i64);
        self.bounded(async {
            let client = self.client().await?;
            let stmt = client.prepare_cached(PURGE_DEAD_LETTERS).await?;
            Ok(client.execute(&stmt, &[&before, &limit]).await?)
        })
        .await
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        let now = now.as_millisecond();
        self.bounded(async {
            let client = self.client().await?;
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

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        self.bounded(async {
            let client = self.client().await?;
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

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        self.bounded(async {
            let client = self.client().await?;
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

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
    ) -> Result<()> {
        let until = previous_until.map(|t| t.as_millisecond());
        self.bounded(async {
            let client = self.client().await?;
            let stmt = client
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
            client
                .execute(&stmt, &[&namespace, &secret, &until])
                .await?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_payloads_round_trip_and_stay_under_the_limit() {
        let mut due = Due::default();
        due.add("a", None, 20);
        due.add("b", None, 10);
        due.add("a", Some("q"), 5);
        due.add("a", Some("q"), 7);
        let id = uuid::Uuid::now_v7();
        due.fenced.push((id, 4));
        let payloads = due.payloads();
        assert_eq!(payloads.len(), 1);
        let mut events = parse_events(&payloads[0]);
        events.sort_by_key(|e| format!("{e:?}"));
        assert_eq!(
            events,
            vec![
                StoreEvent::Due(DueEvent {
                    namespace: "a".into(),
                    queue: Some("q".into()),
                    at: from_ms(5)
                }),
                StoreEvent::Due(DueEvent {
                    namespace: "b".into(),
                    queue: None,
                    at: from_ms(10)
                }),
                StoreEvent::Fenced {
                    job_id: id,
                    token: 4
                },
            ]
        );

        let mut many = Due::default();
        for i in 0..2000 {
            many.add("namespace", Some(&format!("queue-{i}")), i);
        }
        let payloads = many.payloads();
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|p| p.len() < 8000));
        let total: usize = payloads.iter().map(|p| parse_events(p).len()).sum();
        assert_eq!(total, 2000);
        assert_eq!(parse_events("not json"), vec![StoreEvent::Resync]);
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(valid_schema("hourglass"));
        assert!(valid_schema("hg_test_01"));
        assert!(!valid_schema(""));
        assert!(!valid_schema("1abc"));
        assert!(!valid_schema("a; DROP TABLE jobs"));
        assert!(!valid_schema(&"x".repeat(41)));
    }
}
