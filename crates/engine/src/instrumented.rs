//! A [`Store`] wrapper that times every operation into `hourglass_store_operation_seconds`, so the
//! API's and the engine's store calls are measured the same way, whatever the backend.

use std::sync::Arc;
use tokio::time::Instant;

use async_trait::async_trait;
use hourglass_core::{Claim, Completion, JobId, Occurrence};
use hourglass_store::{
    Applied, ClaimScope, Created, DeadLetter, JobQuery, JobRecord, JobUpdate, Lease, NewJob,
    Purged, QueueStats, Release, Result, RunCursor, RunRecord, SigningSecrets, Store, StoreGauges,
    Transition,
};
use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    pub op: &'static str,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

pub struct InstrumentedStore {
    inner: Arc<dyn Store>,
    seconds: Family<OpLabels, Histogram>,
}

impl InstrumentedStore {
    pub fn new(inner: Arc<dyn Store>, registry: &mut Registry) -> Self {
        let seconds = Family::<OpLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
            ])
        });
        registry.register(
            "hourglass_store_operation_seconds",
            "Duration of store operations (commit included for writes), by operation and outcome",
            seconds.clone(),
        );
        Self { inner, seconds }
    }

    async fn timed<T>(&self, op: &'static str, call: impl Future<Output = Result<T>>) -> Result<T> {
        let started = Instant::now();
        let result = call.await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.seconds
            .get_or_create(&OpLabels { op, outcome })
            .observe(started.elapsed().as_secs_f64());
        result
    }
}

#[async_trait]
impl Store for InstrumentedStore {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn events(&self) -> Option<tokio::sync::broadcast::Receiver<hourglass_store::StoreEvent>> {
        self.inner.events()
    }

    fn claim_reach(&self) -> std::time::Duration {
        self.inner.claim_reach()
    }

    fn completion_linger(&self) -> Option<std::time::Duration> {
        self.inner.completion_linger()
    }

    async fn create_jobs(
        &self,
        jobs: Vec<NewJob>,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<Vec<Created>> {
        self.timed("create_jobs", self.inner.create_jobs(jobs, audit))
            .await
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        let op = match scope {
            ClaimScope::Fired => "claim_due",
            ClaimScope::Queue { .. } => "lease_queue",
        };
        self.timed(op, self.inner.claim_due(scope, horizon, limit, lease))
            .await
    }

    async fn extend_claims(
        &self,
        claims: Vec<Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        self.timed(
            "extend_claims",
            self.inner.extend_claims(claims, until, now),
        )
        .await
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        self.timed("complete", self.inner.complete(batch, now))
            .await
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        self.timed("release", self.inner.release(claims)).await
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        self.timed("next_due", self.inner.next_due(scope)).await
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        self.timed("queue_stats", self.inner.queue_stats(namespace, queue, now))
            .await
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        self.timed("get_job", self.inner.get_job(namespace, id))
            .await
    }

    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        self.timed("get_job_by_key", self.inner.get_job_by_key(namespace, key))
            .await
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        self.timed("list_jobs", self.inner.list_jobs(query)).await
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        self.timed("count_jobs", self.inner.count_jobs(namespace))
            .await
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<JobRecord> {
        self.timed(
            "update_job",
            self.inner.update_job(namespace, id, update, audit),
        )
        .await
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<JobRecord> {
        self.timed(
            "transition",
            self.inner.transition(namespace, id, transition, audit),
        )
        .await
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        self.timed("runs", self.inner.runs(namespace, id, before, limit))
            .await
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        self.timed(
            "dead_letters",
            self.inner.dead_letters(namespace, after, limit),
        )
        .await
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        self.timed("get_dead_letter", self.inner.get_dead_letter(namespace, id))
            .await
    }

    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<bool> {
        self.timed(
            "delete_dead_letter",
            self.inner.delete_dead_letter(namespace, id, audit),
        )
        .await
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        self.timed("purge", self.inner.purge(before, limit)).await
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        self.timed(
            "purge_dead_letters",
            self.inner.purge_dead_letters(before, limit),
        )
        .await
    }

    async fn append_audit(&self, record: hourglass_store::AuditRecord) -> Result<()> {
        self.timed("append_audit", self.inner.append_audit(record))
            .await
    }

    async fn audit_entries(
        &self,
        query: hourglass_store::AuditQuery,
    ) -> Result<Vec<hourglass_store::AuditEntry>> {
        self.timed("audit_entries", self.inner.audit_entries(query))
            .await
    }

    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64> {
        self.timed("purge_audit", self.inner.purge_audit(before, limit))
            .await
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        self.timed("gauges", self.inner.gauges(now)).await
    }

    async fn heartbeat(&self, beat: &hourglass_store::NodeBeat) -> Result<()> {
        self.timed("heartbeat", self.inner.heartbeat(beat)).await
    }

    async fn nodes(&self, now: Timestamp) -> Result<Vec<hourglass_store::NodeBeat>> {
        self.timed("nodes", self.inner.nodes(now)).await
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        self.timed("signing_secrets", self.inner.signing_secrets(namespace))
            .await
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        self.timed(
            "init_signing_secret",
            self.inner.init_signing_secret(namespace, secret),
        )
        .await
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<()> {
        self.timed(
            "rotate_signing_secret",
            self.inner
                .rotate_signing_secret(namespace, secret, previous_until, audit),
        )
        .await
    }

    async fn signing_namespaces(&self) -> Result<Vec<String>> {
        self.timed("signing_namespaces", self.inner.signing_namespaces())
            .await
    }

    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool> {
        self.timed(
            "replace_signing_secrets",
            self.inner
                .replace_signing_secrets(namespace, expected, replacement),
        )
        .await
    }

    async fn put_calendar(
        &self,
        record: &hourglass_store::CalendarRecord,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<()> {
        self.timed("put_calendar", self.inner.put_calendar(record, audit))
            .await
    }

    async fn get_calendar(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<hourglass_store::CalendarRecord>> {
        self.timed("get_calendar", self.inner.get_calendar(namespace, name))
            .await
    }

    async fn list_calendars(
        &self,
        namespace: &str,
    ) -> Result<Vec<hourglass_store::CalendarRecord>> {
        self.timed("list_calendars", self.inner.list_calendars(namespace))
            .await
    }

    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<bool> {
        self.timed(
            "delete_calendar",
            self.inner.delete_calendar(namespace, name, audit),
        )
        .await
    }

    async fn put_anchor(
        &self,
        record: &hourglass_store::AnchorRecord,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<Vec<JobRecord>> {
        self.timed("put_anchor", self.inner.put_anchor(record, audit))
            .await
    }

    async fn get_anchor(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<hourglass_store::AnchorRecord>> {
        self.timed("get_anchor", self.inner.get_anchor(namespace, name))
            .await
    }

    async fn list_anchors(&self, namespace: &str) -> Result<Vec<hourglass_store::AnchorRecord>> {
        self.timed("list_anchors", self.inner.list_anchors(namespace))
            .await
    }

    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: hourglass_store::AnchorDelete,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<hourglass_store::AnchorDeleted> {
        self.timed(
            "delete_anchor",
            self.inner.delete_anchor(namespace, name, how, audit),
        )
        .await
    }
}
