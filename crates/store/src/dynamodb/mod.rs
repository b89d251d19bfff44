//! The DynamoDB store: one table that many nodes, or serverless functions, share.
//!
//! The layout (layout 2; `item.rs` has the full table of item kinds) is shaped by how DynamoDB
//! bills: a write unit for every started KB of every item written, twice that inside a
//! transaction, and again for every secondary index the write touches; TTL deletions free.
//! A fired one-off should cost about one write (its creation) plus small shares of writes made
//! for many jobs at once. So:
//!
//! - **No secondary index.** A job item (`j#<id>`) is found by its id. What is looked up by
//!   time is kept in **due entries** (`entry.rs`): items in a lane's shard partitions, sorted by
//!   fire time, each listing the jobs of one create batch that fall due within a second (up to
//!   100; a pull queue's, of one job type, up to 24). A claim reads the entries due by its
//!   horizon, one Query per shard; of the fired lane only the shards where the planner's last
//!   probe saw work due (`floors.rs`).
//! - **A claim leases an entry**, not a job: one conditional write on the entry, whatever the
//!   number of jobs it lists, and takes all of them that fall due within a second past its
//!   horizon (`Store::claim_reach`); a queue pull that takes all of an entry's due messages
//!   leases it whole too. The occurrence token is the job's version (raised by every change of
//!   the job item) with the entry's lease counter; a completion is fenced by both. An extension
//!   that would shorten the lease of an entry's other claims splits its own off (`parts.rs`).
//! - **A fresh entry's jobs are fired from its snapshot** (`snapshot.rs`): a create batch writes,
//!   beside each fired entry of ten jobs or more, one small item with what a claim needs to fire
//!   them (their namespaces, specs as shared templates, small payloads). The first lease of the
//!   entry reads it instead of the job items (half a read unit each, whatever their size): an
//!   edit or transition takes its job out of the entry, and only a lease holder changes a job
//!   otherwise, so the copy is good while the entry was never leased. Later leases read the jobs.
//! - **A delivered one-off is settled, not rewritten** (`complete.rs`): one settlement item
//!   records the completions, and runs, of all the jobs of an entry that one call completes (the
//!   engine gathers them for `Store::completion_linger`). Retries and recurring jobs' next
//!   occurrences change the job item under its version and move the job to a new entry, shared
//!   by those of one call due within a second; dead letters and edits do so in a transaction.
//!   `history=off` in the store URL records no runs.
//! - **Retention is DynamoDB's time to live**: finished job items, runs and settlements carry
//!   `ttl`; a one-off's item carries it from its creation (its due time plus the retention and a
//!   day), since its settled delivery never rewrites it. With `retention` unset nothing expires
//!   and [`Store::purge`] deletes by scanning.
//! - **A namespace's jobs are listed from its registry**: one item per create batch with the
//!   batch's ids (`n#<ns>`), written last, after the jobs and their entries.
//! - **Events** (`events()`): DynamoDB has no `NOTIFY`. While anyone listens, a poller sends
//!   [`StoreEvent::Resync`] every `poll_interval` (the planner and queue long polls re-read the
//!   entries), and reads the fence log: edits and lifecycle changes append a fence entry in the
//!   same transaction, which the poller turns into [`StoreEvent::Fenced`].
//!
//! What DynamoDB cannot do cheaply, and what this backend does instead (ARCHITECTURE.md lists
//! them): listing jobs across namespaces, `count_jobs` without a namespace and `gauges` scan the
//! table; a namespace's listing reads its registry and the jobs it names; reading an active job
//! also reads its entry and its root's settlements. Payloads over 256 bytes live in items of
//! their own (`payload.rs`), read once a claim. An audit entry (`audit.rs`) is one more Put in
//! the transaction of the change it records; a create batch (not one transaction here) writes it
//! in its last request and an anchor's move or delete after its last job, so a crash before that
//! leaves those changes without their entry. COSTS.md (deploy/aws) has each operation's cost.

mod anchors;
mod audit;
mod calendars;
mod callback;
mod claim;
mod complete;
mod entry;
mod floors;
mod history;
mod ids;
mod item;
mod jobs;
mod listing;
mod nodes;
mod parts;
mod payload;
mod run_items;
mod settled;
mod snapshot;
mod table;

pub use self::table::RequestCounts;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::Credentials;
use aws_smithy_http_client::tls;
use hourglass_core::{Completion, JobId, Occurrence};
use jiff::Timestamp;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::{
    Applied, AuditRecord, ClaimScope, Created, DeadLetter, JobQuery, JobRecord, JobUpdate, Lease,
    NewJob, NodeBeat, Purged, QueueStats, Release, Result, RunCursor, RunRecord, SigningSecrets,
    Store, StoreError, StoreEvent, StoreGauges, Transition,
};

/// Where the table is and how to use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamoOptions {
    pub table: String,
    /// Due-index partitions per lane, used when this store creates the table; an existing table
    /// keeps the count it was created with (stored in the table).
    pub shards: u32,
    /// How often a listening store re-reads the due index and the fence log for other writers'
    /// changes.
    pub poll_interval: Duration,
    /// Region, endpoint and credentials: `None` takes them from the standard AWS chain
    /// (`AWS_REGION`, `AWS_ENDPOINT_URL`, the environment's keys, a profile, the function's or
    /// instance's role).
    pub region: Option<String>,
    pub endpoint_url: Option<String>,
    pub credentials: Option<(String, String)>,
    /// How long finished jobs and runs are kept: items carry DynamoDB's `ttl` from this, and
    /// [`Store::purge`] has nothing to do. `None` keeps them until `purge` deletes them.
    pub retention: Option<Duration>,
    /// Whether runs are recorded (`history=off` in the URL: none are, and a job's runs list is
    /// empty; its counters, last error and dead letters are kept). Runs are a write unit a fire
    /// for recurring jobs and retries, and most of a settlement's bytes.
    pub history: bool,
}

/// Due-index partitions per lane when the URL does not say: 8 × ~1,000 writes a second per
/// partition, while an idle due-time probe costs 8 small reads.
pub const DEFAULT_SHARDS: u32 = 8;
/// At most this many (a claim or a probe reads every shard).
pub const MAX_SHARDS: u32 = 64;

impl DynamoOptions {
    pub fn new(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            shards: DEFAULT_SHARDS,
            poll_interval: Duration::from_secs(1),
            region: None,
            endpoint_url: None,
            credentials: None,
            retention: None,
            history: true,
        }
    }

    /// Reads `dynamodb://TABLE[?shards=N&poll=DURATION&history=on|off]`.
    pub fn from_url(url: &str) -> std::result::Result<Self, String> {
        let rest = url
            .strip_prefix("dynamodb://")
            .ok_or_else(|| format!("a DynamoDB store is named dynamodb://TABLE, not {url:?}"))?;
        let (table, query) = rest.split_once('?').unwrap_or((rest, ""));
        if !table::valid_table_name(table) {
            return Err(format!(
                "{table:?} is not a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ - .)"
            ));
        }
        let mut options = Self::new(table);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "shards" => {
                    options.shards = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_SHARDS).contains(n))
                        .ok_or_else(|| {
                            format!("shards must be a number from 1 to {MAX_SHARDS}, not {value:?}")
                        })?
                }
                "poll" => {
                    options.poll_interval = hourglass_core::duration::parse_duration(value, "poll")
                        .map_err(|e| e.message)?;
                    if options.poll_interval < Duration::from_millis(100) {
                        return Err("poll must be at least 100ms".into());
                    }
                }
                "history" => {
                    options.history = match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(format!("history is on or off, not {value:?}")),
                    }
                }
                other => {
                    return Err(format!(
                        "unknown setting {other:?} in the store URL (known: shards, poll, history)"
                    ));
                }
            }
        }
        Ok(options)
    }
}

pub(super) struct Inner {
    client: Client,
    table: String,
    shards: u32,
    counts: RequestCounts,
    /// Events of this store's own writes go straight to its listeners; other writers' are
    /// polled (`history::poll_events`).
    events: broadcast::Sender<StoreEvent>,
    /// Queue names this process already recorded for their namespace's queue list.
    known_queues: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
    retention_ms: Option<i64>,
    /// Whether runs are recorded (`DynamoOptions::history`).
    history: bool,
    /// The claims this store handed out and has not seen end, by entry.
    claims: std::sync::Mutex<Claims>,
    /// Which shards of the fired lane a claim must read (`floors.rs`).
    floors: floors::Floors,
    /// Entries (pk, sk) a claim of this process is leasing or lately leased: a concurrent
    /// claim passes them by instead of racing it (`claim.rs`).
    leasing: std::sync::Mutex<claim::LeaseBook>,
}

/// Where a claim came from: its entry's key and the lease counter it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Held {
    pub(super) pk: String,
    pub(super) sk: String,
    pub(super) ltok: i64,
}

#[derive(Default)]
pub(super) struct Claims {
    by_claim: std::collections::HashMap<(JobId, i64), Held>,
    /// Claims not yet ended, per lease of an entry, and when it was taken.
    open: std::collections::HashMap<Held, (usize, std::time::Instant)>,
    last_pruned: Option<std::time::Instant>,
}

/// How long the store remembers a lease whose claims never all ended here (the engine drops a
/// fenced claim without a store call). A claim forgotten is still completed correctly: the
/// completion then reads its job and its entry (`complete::lease_holds`).
const HELD_AT_MOST: Duration = Duration::from_secs(3600);

/// How long after its retention a one-off's item outlives its due time, for a delivery that is
/// late (nodes down, or retrying).
const TTL_GRACE_MS: i64 = 24 * 3600 * 1000;

pub struct DynamoStore {
    inner: Arc<Inner>,
    poller: JoinHandle<()>,
}

impl Drop for DynamoStore {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

impl DynamoStore {
    /// Connects, creates the table if it is missing (on-demand capacity) or checks the one that
    /// is there, and starts the event poller.
    pub async fn open(options: DynamoOptions) -> Result<Self> {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            // Throttling and transient failures are retried with backoff by the SDK: a store
            // call either succeeds or reports an outage.
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(3))
                    .operation_attempt_timeout(Duration::from_secs(5))
                    .operation_timeout(Duration::from_secs(15))
                    .build(),
            );
        if let Some(region) = &options.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(url) = &options.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some((id, secret)) = &options.credentials {
            loader = loader.credentials_provider(Credentials::new(
                id.clone(),
                secret.clone(),
                None,
                None,
                "hourglass-options",
            ));
        }
        let sdk = loader.load().await;
        if sdk.region().is_none() {
            return Err(StoreError::Unavailable(
                "no AWS region: set AWS_REGION (or a profile's region) for the DynamoDB store"
                    .into(),
            ));
        }
        let client = Client::new(&sdk);
        let shards = table::prepare(&client, &options).await?;
        let (events, _) = broadcast::channel(1024);
        let inner = Arc::new(Inner {
            client,
            table: options.table.clone(),
            shards,
            counts: RequestCounts::default(),
            known_queues: Default::default(),
            events,
            retention_ms: options.retention.map(|r| r.as_millis() as i64),
            history: options.history,
            claims: Default::default(),
            floors: floors::Floors::new(shards, options.poll_interval),
            leasing: Default::default(),
        });
        let poller = tokio::spawn(history::poll_events(
            Arc::downgrade(&inner),
            options.poll_interval,
        ));
        Ok(Self { inner, poller })
    }

    /// The requests sent so far.
    pub fn request_counts(&self) -> &RequestCounts {
        &self.inner.counts
    }

    /// Due-index partitions per lane.
    pub fn shards(&self) -> u32 {
        self.inner.shards
    }
}

/// The earliest due time among a write's occurrences, per kind of target and per queue: what
/// its [`StoreEvent::Due`] events carry (one per kind and queue, however many jobs it wrote).
#[derive(Default)]
pub(super) struct Dues {
    fired: Option<(i64, String)>,
    queues: std::collections::BTreeMap<(String, String), i64>,
}

impl Dues {
    pub(super) fn add(&mut self, namespace: &str, queue: Option<&str>, at: i64) {
        match queue {
            None => {
                if self.fired.as_ref().is_none_or(|(t, _)| at < *t) {
                    self.fired = Some((at, namespace.to_owned()));
                }
            }
            Some(queue) => {
                let earliest = self
                    .queues
                    .entry((namespace.to_owned(), queue.to_owned()))
                    .or_insert(at);
                *earliest = (*earliest).min(at);
            }
        }
    }
}

impl Inner {
    /// Tells this store's listeners what its own write made due.
    pub(super) fn announce(&self, dues: Dues) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let due = |namespace, queue, at| {
            StoreEvent::Due(crate::DueEvent {
                namespace,
                queue,
                at: hourglass_core::from_ms(at),
            })
        };
        if let Some((at, namespace)) = dues.fired {
            let _ = self.events.send(due(namespace, None, at));
        }
        for ((namespace, queue), at) in dues.queues {
            let _ = self.events.send(due(namespace, Some(queue), at));
        }
    }

    /// Tells this store's listeners that claims on `job_id` below `token` are stale.
    pub(super) fn fence(&self, job_id: JobId, token: i64) {
        let token = hourglass_core::FencingToken::from_i64(token);
        let _ = self.events.send(StoreEvent::Fenced { job_id, token });
    }

    /// A new entry's root in `lane`, for jobs due from `fire`: in any shard, so that writes
    /// spread over every partition. A fired one lowers its shard's floor (`floors.rs`) before
    /// it is written.
    fn new_root(&self, lane: item::Lane<'_>, fire: i64) -> entry::Root {
        let shard = rand::random::<u32>() % self.shards;
        if lane == item::Lane::Fired {
            self.floors.lower(shard, fire);
        }
        entry::Root::new(lane, shard, fire)
    }

    /// The expiry (seconds) of a job item due at `due`, with retention on: a one-off's outlives
    /// its due time by the retention and a day; a recurring job's has none while it runs.
    pub(super) fn one_off_ttl(&self, recurring: bool, due: i64) -> Option<i64> {
        let retention = self.retention_ms?;
        (!recurring).then(|| due.saturating_add(retention).saturating_add(TTL_GRACE_MS) / 1000)
    }

    /// The expiry (seconds) of the snapshot of an entry whose first job fires at `first`: with
    /// that job's item, were it a one-off, or (retention off) a day after it.
    pub(super) fn snapshot_ttl(&self, first: i64) -> i64 {
        self.one_off_ttl(false, first)
            .unwrap_or(first.saturating_add(TTL_GRACE_MS) / 1000)
    }

    /// The expiry (seconds) of what finished at `at`, with retention on.
    pub(super) fn finished_ttl(&self, at: i64) -> Option<i64> {
        Some(at.saturating_add(self.retention_ms?) / 1000)
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Claims> {
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers claims handed out from the entry `pk`, `sk` under lease counter `ltok`.
    pub(super) fn hold(
        &self,
        pk: &str,
        sk: &str,
        ltok: i64,
        claims: impl Iterator<Item = (JobId, i64)>,
    ) {
        let mut book = self.book();
        let now = std::time::Instant::now();
        if book
            .last_pruned
            .is_none_or(|at| now.duration_since(at) > HELD_AT_MOST / 60)
        {
            book.last_pruned = Some(now);
            book.open
                .retain(|_, (_, since)| now.duration_since(*since) < HELD_AT_MOST);
            let Claims { by_claim, open, .. } = &mut *book;
            by_claim.retain(|_, held| open.contains_key(held));
        }
        let held = Held {
            pk: pk.to_owned(),
            sk: sk.to_owned(),
            ltok,
        };
        let mut count = 0;
        for claim in claims {
            book.by_claim.insert(claim, held.clone());
            count += 1;
        }
        book.open.insert(held, (count, now));
    }

    pub(super) fn held(&self, id: JobId, token: i64) -> Option<Held> {
        self.book().by_claim.get(&(id, token)).cloned()
    }

    /// Claims of the lease still open.
    pub(super) fn held_count(&self, held: &Held) -> usize {
        self.book().open.get(held).map_or(0, |(n, _)| *n)
    }

    /// Moves the claims `moved` (open, of the lease `from`) to the lease `to` of a part split off
    /// the entry: their completions and extensions go there from now on.
    pub(super) fn rehold(&self, from: &Held, to: &Held, moved: &[(JobId, i64)]) {
        let mut book = self.book();
        let mut count = 0;
        for claim in moved {
            if book.by_claim.get(claim) == Some(from) {
                book.by_claim.insert(*claim, to.clone());
                count += 1;
            }
        }
        let now = std::time::Instant::now();
        if let Some((left, _)) = book.open.get_mut(from) {
            *left = left.saturating_sub(count);
        }
        book.open.insert(to.clone(), (count, now));
    }

    /// Forgets claims whose entry was handed back whole.
    pub(super) fn forget(&self, id: JobId, token: i64) {
        let mut book = self.book();
        if let Some(held) = book.by_claim.remove(&(id, token)) {
            book.open.remove(&held);
        }
    }

    /// A claim ended (completed, moved or stale): the last of its entry deletes the entry.
    pub(super) async fn settle_held(&self, id: JobId, token: i64) -> Result<()> {
        let done = {
            let mut book = self.book();
            let Some(held) = book.by_claim.remove(&(id, token)) else {
                return Ok(());
            };
            match book.open.get_mut(&held) {
                Some((left, _)) => {
                    *left = left.saturating_sub(1);
                    if *left == 0 {
                        book.open.remove(&held);
                        Some(held)
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        match done {
            Some(held) => claim::delete_entry(self, &held.pk, &held.sk, held.ltok).await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl Store for DynamoStore {
    fn backend(&self) -> &'static str {
        "dynamodb"
    }

    fn events(&self) -> Option<broadcast::Receiver<StoreEvent>> {
        Some(self.inner.events.subscribe())
    }

    fn claim_reach(&self) -> Duration {
        claim::CLAIM_REACH
    }

    fn completion_linger(&self) -> Option<Duration> {
        Some(complete::SETTLE_LINGER)
    }

    async fn create_jobs(
        &self,
        mut jobs: Vec<NewJob>,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<Created>> {
        let read = anchors::prepare(&self.inner, &mut jobs).await?;
        let created = jobs::create_jobs(&self.inner, jobs, audit.as_ref()).await?;
        if !read.is_empty() {
            let records: Vec<JobRecord> = created.iter().map(|c| c.record().clone()).collect();
            anchors::settle(&self.inner, &read, &records).await?;
        }
        Ok(created)
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        claim::claim_due(&self.inner, scope, horizon, limit, lease).await
    }

    async fn extend_claims(
        &self,
        claims: Vec<hourglass_core::Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        let claims = claims
            .iter()
            .map(|c| (c.job_id, c.token.as_i64()))
            .collect();
        parts::extend_claims(&self.inner, claims, until, now).await
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        complete::complete(&self.inner, batch, now).await
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        claim::release(&self.inner, claims).await
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        claim::next_due(&self.inner, scope).await
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        history::queue_stats(&self.inner, namespace, queue, now).await
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        jobs::get_job(&self.inner, namespace, id).await
    }

    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        jobs::get_job_by_key(&self.inner, namespace, key).await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        listing::list_jobs(&self.inner, query).await
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        listing::count_jobs(&self.inner, namespace).await
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        jobs::update_job(&self.inner, namespace, id, update, audit.as_ref()).await
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        jobs::transition(&self.inner, namespace, id, transition, None, audit.as_ref()).await
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        history::runs(&self.inner, namespace, id, before, limit).await
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        history::dead_letters(&self.inner, namespace, after, limit).await
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        history::get_dead_letter(&self.inner, namespace, id).await
    }

    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        history::delete_dead_letter(&self.inner, namespace, id, audit.as_ref()).await
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        history::purge(&self.inner, before, limit).await
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        history::purge_dead_letters(&self.inner, before, limit).await
    }

    async fn append_audit(&self, record: AuditRecord) -> Result<()> {
        audit::append(&self.inner, record).await
    }

    async fn audit_entries(&self, query: crate::AuditQuery) -> Result<Vec<crate::AuditEntry>> {
        audit::read(&self.inner, query).await
    }

    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64> {
        audit::purge(&self.inner, before, limit).await
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        history::gauges(&self.inner, now).await
    }

    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()> {
        nodes::heartbeat(&self.inner, beat).await
    }

    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        nodes::nodes(&self.inner, now).await
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        history::signing_secrets(&self.inner, namespace).await
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        history::init_signing_secret(&self.inner, namespace, secret).await
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        let audit = audit.as_ref();
        history::rotate_signing_secret(&self.inner, namespace, secret, previous_until, audit).await
    }

    async fn signing_namespaces(&self) -> Result<Vec<String>> {
        history::signing_namespaces(&self.inner).await
    }

    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool> {
        history::replace_signing_secrets(&self.inner, namespace, expected, replacement).await
    }

    async fn put_calendar(
        &self,
        record: &crate::CalendarRecord,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        calendars::put(&self.inner, record, audit.as_ref()).await
    }

    async fn get_calendar(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<crate::CalendarRecord>> {
        calendars::get(&self.inner, namespace, name).await
    }

    async fn list_calendars(&self, namespace: &str) -> Result<Vec<crate::CalendarRecord>> {
        calendars::list(&self.inner, namespace).await
    }

    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        calendars::delete(&self.inner, namespace, name, audit.as_ref()).await
    }

    async fn put_anchor(
        &self,
        record: &crate::AnchorRecord,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<JobRecord>> {
        anchors::put(&self.inner, record, audit).await
    }

    async fn get_anchor(&self, namespace: &str, name: &str) -> Result<Option<crate::AnchorRecord>> {
        anchors::get(&self.inner, namespace, name).await
    }

    async fn list_anchors(&self, namespace: &str) -> Result<Vec<crate::AnchorRecord>> {
        anchors::list(&self.inner, namespace).await
    }

    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: crate::AnchorDelete,
        audit: Option<AuditRecord>,
    ) -> Result<crate::AnchorDeleted> {
        anchors::delete(&self.inner, namespace, name, how, audit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_table_and_its_settings() {
        let options = DynamoOptions::from_url("dynamodb://jobs?shards=4&history=off").unwrap();
        assert_eq!((options.table.as_str(), options.shards), ("jobs", 4));
        assert!(!options.history);
        assert!(DynamoOptions::from_url("dynamodb://jobs").unwrap().history);
        let refused = |url: &str| DynamoOptions::from_url(url).unwrap_err();
        assert!(refused("dynamodb://jobs?history=no").contains("history"));
        assert!(refused("dynamodb://jobs?shards=0").contains("shards"));
        assert!(refused("dynamodb://jobs?colour=red").contains("colour"));
    }
}
