//! The fault layer: one node's view of the shared in-memory store. Every call first waits while
//! the node is paused and never returns once the node has crashed; then, while faults are on, it
//! may take a while (seeded latency), fail before it changes anything, or, for a write, commit
//! and lose its answer (the caller sees an error for a write that happened). A write announces
//! what it changed to every node at its commit, as PostgreSQL's `NOTIFY` does, so several nodes
//! over one in-memory store behave like nodes sharing a database.
//!
//! Every method forwards to the inner store through `read` or `write`, so a method added to
//! `Store` is one more forwarding line here.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use hourglass_core::{Claim, Completion, JobId, JobState, Occurrence};
use hourglass_store::{
    Applied, AuditEntry, AuditQuery, AuditRecord, CalendarRecord, ClaimScope, Created, DeadLetter,
    DueEvent, JobQuery, JobRecord, JobUpdate, Lease, MemoryStore, NewJob, NodeBeat, Purged,
    QueueStats, Release, Result, RunCursor, RunRecord, SigningSecrets, Store, StoreError,
    StoreEvent, StoreGauges, Transition,
};
use jiff::Timestamp;

use crate::world::{LeaseEvent, World};

/// Chance that a store call fails before it changes anything.
const FAIL_BEFORE: f64 = 0.02;
/// Chance that a write commits and its answer is lost.
const LOSE_ANSWER: f64 = 0.02;
/// Chance that a call is slow, and how slow (ms).
const SLOW: f64 = 0.2;
const SLOW_MS: (u64, u64) = (1, 40);

pub struct FaultStore {
    pub inner: Arc<MemoryStore>,
    pub world: Arc<World>,
    pub node: usize,
    pub incarnation: u64,
}

impl FaultStore {
    async fn latency(&self) {
        if self.world.faults() && self.world.chance(SLOW) {
            tokio::time::sleep(self.world.ms(SLOW_MS.0, SLOW_MS.1)).await;
        }
    }

    /// Runs `op` as a call that changes nothing.
    async fn read<T>(&self, op: impl Future<Output = Result<T>>) -> Result<T> {
        self.write(op, |_| {}).await
    }

    /// Runs `op`, announcing what it committed with `announce`.
    async fn write<T>(
        &self,
        op: impl Future<Output = Result<T>>,
        announce: impl FnOnce(&T),
    ) -> Result<T> {
        self.world.gate(self.node, self.incarnation).await;
        self.latency().await;
        if self.world.faults() && self.world.chance(FAIL_BEFORE) {
            return Err(StoreError::Unavailable("simulated: call failed".into()));
        }
        let answer = op.await;
        if let Ok(value) = &answer {
            announce(value);
        }
        self.latency().await;
        // A node that crashed meanwhile never hears the answer.
        self.world.gate(self.node, self.incarnation).await;
        if answer.is_ok() && self.world.faults() && self.world.chance(LOSE_ANSWER) {
            return Err(StoreError::Unavailable("simulated: answer lost".into()));
        }
        answer
    }

    fn announce_due(&self, at: Timestamp) {
        self.world.announce(StoreEvent::Due(DueEvent {
            namespace: crate::NAMESPACE.into(),
            queue: None,
            at,
        }));
    }

    /// A job changed by an edit or a transition: its older claims are stale, and its next
    /// occurrence may be due sooner.
    fn announce_changed(&self, record: &JobRecord) {
        self.world.lease([LeaseEvent::Fenced { job: record.id }]);
        self.world.announce(StoreEvent::Fenced {
            job_id: record.id,
            token: record.token,
        });
        if record.state == JobState::Active
            && let Some(at) = record.next_attempt.or(record.next_due)
        {
            self.announce_due(at);
        }
    }
}

#[async_trait]
impl Store for FaultStore {
    fn backend(&self) -> &'static str {
        "simulated"
    }
    fn events(&self) -> Option<tokio::sync::broadcast::Receiver<StoreEvent>> {
        Some(self.world.events.subscribe())
    }
    async fn create_jobs(
        &self,
        jobs: Vec<NewJob>,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<Vec<Created>> {
        self.write(self.inner.create_jobs(jobs, audit), |created| {
            let earliest = created
                .iter()
                .filter_map(|c| match c {
                    Created::New(r) => r.next_attempt.or(r.next_due),
                    Created::Existing(_) => None,
                })
                .min();
            if let Some(at) = earliest {
                self.announce_due(at);
            }
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
        let op = self.inner.claim_due(scope, horizon, limit, lease);
        let until = self.world.true_of(
            self.node,
            hourglass_core::add_saturating(lease.now, lease.ttl).as_millisecond(),
        );
        self.write(op, |claimed| {
            let at = self.world.true_ms();
            self.world
                .lease(claimed.iter().map(|o| LeaseEvent::Granted {
                    node: self.node,
                    job: o.job_id,
                    token: o.token.as_i64(),
                    at,
                    until,
                }))
        })
        .await
    }
    async fn extend_claims(
        &self,
        claims: Vec<Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        let renewing = claims.clone();
        let until_true = self.world.true_of(self.node, until.as_millisecond());
        let op = self.inner.extend_claims(claims, until, now);
        self.write(op, |applied| {
            let renewed = renewing
                .iter()
                .zip(applied)
                .filter(|(_, a)| **a == Applied::Yes);
            self.world.lease(renewed.map(|(c, _)| LeaseEvent::Renewed {
                job: c.job_id,
                token: c.token.as_i64(),
                until: until_true,
            }))
        })
        .await
    }
    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        // A retry or a next occurrence may be due: every node looks at its next due time.
        let settling: Vec<Claim> = batch.iter().map(Completion::claim).collect();
        let op = self.inner.complete(batch, now);
        self.write(op, |applied| {
            let settled = settling
                .iter()
                .zip(applied)
                .filter(|(_, a)| **a == Applied::Yes);
            self.world.lease(settled.map(|(c, _)| LeaseEvent::Ended {
                job: c.job_id,
                token: c.token.as_i64(),
            }));
            self.world.announce(StoreEvent::Resync)
        })
        .await
    }
    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        let earliest = claims.iter().map(|c| c.fire_at).min();
        let released: Vec<LeaseEvent> = claims
            .iter()
            .map(|c| LeaseEvent::Ended {
                job: c.job_id,
                token: c.token.as_i64(),
            })
            .collect();
        self.write(self.inner.release(claims), |_| {
            self.world.lease(released);
            if let Some(at) = earliest {
                self.announce_due(at);
            }
        })
        .await
    }
    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        self.read(self.inner.next_due(scope)).await
    }
    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        self.read(self.inner.queue_stats(namespace, queue, now))
            .await
    }
    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        self.read(self.inner.get_job(namespace, id)).await
    }
    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        self.read(self.inner.get_job_by_key(namespace, key)).await
    }
    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        self.read(self.inner.list_jobs(query)).await
    }
    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        self.read(self.inner.count_jobs(namespace)).await
    }
    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<JobRecord> {
        let op = self.inner.update_job(namespace, id, update, audit);
        self.write(op, |r| self.announce_changed(r)).await
    }
    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<JobRecord> {
        let op = self.inner.transition(namespace, id, transition, audit);
        self.write(op, |r| self.announce_changed(r)).await
    }
    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        self.read(self.inner.runs(namespace, id, before, limit))
            .await
    }
    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        self.read(self.inner.dead_letters(namespace, after, limit))
            .await
    }
    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        self.read(self.inner.get_dead_letter(namespace, id)).await
    }
    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<bool> {
        let op = self.inner.delete_dead_letter(namespace, id, audit);
        self.write(op, |_| {}).await
    }
    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        self.write(self.inner.purge(before, limit), |_| {}).await
    }
    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        let op = self.inner.purge_dead_letters(before, limit);
        self.write(op, |_| {}).await
    }
    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        self.read(self.inner.gauges(now)).await
    }
    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()> {
        self.write(self.inner.heartbeat(beat), |_| {}).await
    }
    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        self.read(self.inner.nodes(now)).await
    }
    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        self.read(self.inner.signing_secrets(namespace)).await
    }
    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        let op = self.inner.init_signing_secret(namespace, secret);
        self.write(op, |_| {}).await
    }
    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<()> {
        let op = self
            .inner
            .rotate_signing_secret(namespace, secret, previous_until, audit);
        self.write(op, |_| {}).await
    }
    async fn signing_namespaces(&self) -> Result<Vec<String>> {
        self.read(self.inner.signing_namespaces()).await
    }
    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool> {
        let op = self
            .inner
            .replace_signing_secrets(namespace, expected, replacement);
        self.write(op, |_| {}).await
    }
    async fn append_audit(&self, record: AuditRecord) -> Result<()> {
        self.write(self.inner.append_audit(record), |_| {}).await
    }
    async fn audit_entries(&self, query: AuditQuery) -> Result<Vec<AuditEntry>> {
        self.read(self.inner.audit_entries(query)).await
    }
    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64> {
        self.write(self.inner.purge_audit(before, limit), |_| {})
            .await
    }
    async fn put_calendar(
        &self,
        record: &CalendarRecord,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<()> {
        self.write(self.inner.put_calendar(record, audit), |_| {})
            .await
    }
    async fn get_calendar(&self, namespace: &str, name: &str) -> Result<Option<CalendarRecord>> {
        self.read(self.inner.get_calendar(namespace, name)).await
    }
    async fn list_calendars(&self, namespace: &str) -> Result<Vec<CalendarRecord>> {
        self.read(self.inner.list_calendars(namespace)).await
    }
    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<bool> {
        self.write(self.inner.delete_calendar(namespace, name, audit), |_| {})
            .await
    }
    async fn put_anchor(
        &self,
        record: &hourglass_store::AnchorRecord,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<Vec<JobRecord>> {
        let op = self.inner.put_anchor(record, audit);
        self.write(op, |moved| {
            moved.iter().for_each(|r| self.announce_changed(r))
        })
        .await
    }
    async fn get_anchor(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<hourglass_store::AnchorRecord>> {
        self.read(self.inner.get_anchor(namespace, name)).await
    }
    async fn list_anchors(&self, namespace: &str) -> Result<Vec<hourglass_store::AnchorRecord>> {
        self.read(self.inner.list_anchors(namespace)).await
    }
    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: hourglass_store::AnchorDelete,
        audit: Option<hourglass_store::AuditRecord>,
    ) -> Result<hourglass_store::AnchorDeleted> {
        // The scheduler fences the cancelled jobs' claims itself, from a listing after this.
        self.write(
            self.inner.delete_anchor(namespace, name, how, audit),
            |_| {},
        )
        .await
    }
}
