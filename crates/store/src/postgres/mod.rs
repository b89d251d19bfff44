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
//!
//! The schema and its migrations are in `schema.rs`, NOTIFY and LISTEN in `notify.rs`, rows to
//! records in `codec.rs`, TLS in `tls.rs`; the `Store` methods below hand each call to the module
//! of its concern (`jobs`, `claim`, `complete`, `stats`, `history`, `secrets`, `nodes`,
//! `audit`).

mod anchors;
mod audit;
mod calendars;
mod claim;
mod codec;
mod complete;
mod history;
mod jobs;
mod nodes;
mod notify;
mod schema;
mod secrets;
mod stats;
#[cfg(test)]
mod tests;
mod tls;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use hourglass_core::{Claim, Completion, JobId, Occurrence};
use jiff::Timestamp;
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;

use self::notify::{EVENT_BUFFER, listen};
use self::schema::{check_clock, migrate};
use crate::{
    Applied, AuditRecord, ClaimScope, Created, DeadLetter, JobQuery, JobRecord, JobUpdate, Lease,
    NewJob, NodeBeat, Purged, QueueStats, Release, Result, RunCursor, RunRecord, SigningSecrets,
    Store, StoreError, StoreEvent, StoreGauges, Transition,
};

/// A node whose clock differs from the database server's by more than this gets a warning at
/// start: leases and due times are compared in node time.
pub const CLOCK_SKEW_WARNING: Duration = Duration::from_millis(250);

/// How to reach the database, and the limits that keep a node responsive when it cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// A libpq-style URL (`postgres://user:pass@host:5432/db`) or `key=value` string. TLS as
    /// the URL asks: `sslmode` (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`; none
    /// means no TLS) and `sslrootcert` (see `tls.rs`).
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
    /// Where this crate's unit tests make a call die (`crate::failpoint`); empty elsewhere.
    failpoints: crate::failpoint::Failpoints,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
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
        let invalid = |e: String| StoreError::Misconfigured(format!("invalid database url: {e}"));
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
            return Err(StoreError::Misconfigured(format!(
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
            failpoints: Default::default(),
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
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn events(&self) -> Option<broadcast::Receiver<StoreEvent>> {
        Some(self.events.subscribe())
    }

    async fn create_jobs(
        &self,
        jobs: Vec<NewJob>,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<Created>> {
        jobs::create_jobs(self, jobs, audit).await
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        claim::claim_due(self, scope, horizon, limit, lease).await
    }

    async fn extend_claims(
        &self,
        claims: Vec<Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        claim::extend_claims(self, claims, until, now).await
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        complete::complete(self, batch, now).await
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        claim::release(self, claims).await
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        claim::next_due(self, scope).await
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        stats::queue_stats(self, namespace, queue, now).await
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        jobs::get_job(self, namespace, id).await
    }

    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        jobs::get_job_by_key(self, namespace, key).await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        jobs::list_jobs(self, query).await
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        jobs::count_jobs(self, namespace).await
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        jobs::update_job(self, namespace, id, update, audit).await
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        jobs::transition(self, namespace, id, transition, audit).await
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        history::runs(self, namespace, id, before, limit).await
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        history::dead_letters(self, namespace, after, limit).await
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        history::get_dead_letter(self, namespace, id).await
    }

    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        history::delete_dead_letter(self, namespace, id, audit).await
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        history::purge(self, before, limit).await
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        history::purge_dead_letters(self, before, limit).await
    }

    async fn append_audit(&self, record: AuditRecord) -> Result<()> {
        audit::append(self, record).await
    }

    async fn audit_entries(&self, query: crate::AuditQuery) -> Result<Vec<crate::AuditEntry>> {
        audit::read(self, query).await
    }

    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64> {
        audit::purge(self, before, limit).await
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        stats::gauges(self, now).await
    }

    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()> {
        nodes::heartbeat(self, beat).await
    }

    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        nodes::nodes(self, now).await
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        secrets::signing_secrets(self, namespace).await
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        secrets::init_signing_secret(self, namespace, secret).await
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        secrets::rotate_signing_secret(self, namespace, secret, previous_until, audit).await
    }

    async fn signing_namespaces(&self) -> Result<Vec<String>> {
        secrets::signing_namespaces(self).await
    }

    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool> {
        secrets::replace_signing_secrets(self, namespace, expected, replacement).await
    }

    async fn put_calendar(
        &self,
        record: &crate::CalendarRecord,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        calendars::put(self, record, audit).await
    }

    async fn get_calendar(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<crate::CalendarRecord>> {
        calendars::get(self, namespace, name).await
    }

    async fn list_calendars(&self, namespace: &str) -> Result<Vec<crate::CalendarRecord>> {
        calendars::list(self, namespace).await
    }

    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        calendars::delete(self, namespace, name, audit).await
    }

    async fn put_anchor(
        &self,
        record: &crate::AnchorRecord,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<JobRecord>> {
        anchors::put(self, record, audit).await
    }

    async fn get_anchor(&self, namespace: &str, name: &str) -> Result<Option<crate::AnchorRecord>> {
        anchors::get(self, namespace, name).await
    }

    async fn list_anchors(&self, namespace: &str) -> Result<Vec<crate::AnchorRecord>> {
        anchors::list(self, namespace).await
    }

    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: crate::AnchorDelete,
        audit: Option<AuditRecord>,
    ) -> Result<crate::AnchorDeleted> {
        anchors::delete(self, namespace, name, how, audit).await
    }
}
