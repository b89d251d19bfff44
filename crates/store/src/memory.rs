//! A store that keeps everything in this process's memory: nothing survives it.
//!
//! What it is for:
//! - **Tests in paused time.** Every operation runs to its end under one lock and answers at
//!   once: no threads, no I/O, no timers, and no clock of its own. Every "now" it uses is one the
//!   caller passed in (a [`Lease`]'s `now`, a completion's `now`, a transition's `now`), so a test
//!   that pauses tokio's clock and derives the engine's wall clock from it controls time
//!   completely: awaiting the store never lets paused time jump ahead.
//! - **A reference for new backends.** Each operation is written out in plain Rust, in the order
//!   a backend must do it, with the same decisions as the SQL backends (`rules.rs` where
//!   they are shared). A new backend (DynamoDB is next) can read here what a call must change,
//!   and then pass the same `conformance` suite.
//!
//! The model is the SQL backends' row: a job's `fire` is when its next attempt runs, or, while a
//! claim holds it, the claim's lease expiry; the claim keeps the occurrence's own fire time
//! beside it, to hand out and to restore on release. One ordered index over
//! `(lane, fire, creation order)` of the active jobs answers claims, due-time probes and
//! counts; a lane is either "fired by the engine" or one queue of one namespace. A lease that
//! lapsed needs no sweep: its job sits in the index at the expiry, which has passed.
//!
//! Each call is one transaction: it takes the lock, decides everything that can fail before it
//! changes anything, then applies. A call that panics while holding the lock (a bug here)
//! poisons it, and every later call answers [`StoreError::Unavailable`] instead of reading state
//! that may be half changed.
//!
//! [`Store::events`] answers `None`, as for the embedded SQLite store: a store only one process
//! can see has no other writers to hear from, and the API pokes its own engine directly.
//!
//! This file holds the store and its `Store` methods, each handing its call, with the locked
//! state, to the module of its concern: `jobs.rs` (creating, reading, editing, lifecycle),
//! `claim.rs` (claims, their leases and releases), `complete.rs` (completions, runs and dead
//! letters they record), `history.rs` (runs and dead letters read, deleted and purged),
//! `stats.rs` (queue counts and gauges), `secrets.rs` (signing secrets), `audit.rs` (the audit
//! log); `state.rs` holds the tables and their due index.

mod anchors;
mod audit;
mod claim;
mod complete;
mod history;
mod jobs;
mod secrets;
mod state;
mod stats;

use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use hourglass_core::{Claim, Completion, JobId, Occurrence};
use jiff::Timestamp;

use self::state::{Job, State};

use crate::{
    Applied, AuditEntry, AuditQuery, AuditRecord, ClaimScope, Created, DeadLetter, JobQuery,
    JobRecord, JobUpdate, Lease, NewJob, NodeBeat, Purged, QueueStats, Release, Result, RunCursor,
    RunRecord, SigningSecrets, Store, StoreError, StoreGauges, Transition,
};

/// The in-memory backend. Cheap to create; share it behind an `Arc` like any other store.
#[derive(Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    nodes: crate::nodes::NodeTable,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| {
            StoreError::Unavailable(
                "the memory store's lock is poisoned by an earlier panic".into(),
            )
        })
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn create_jobs(
        &self,
        mut jobs: Vec<NewJob>,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<Created>> {
        let mut state = self.state()?;
        anchors::prepare(&state, &mut jobs)?;
        let created = jobs::create_jobs(&mut state, jobs)?;
        if let Some(entry) = crate::audit::of_created(audit, &created) {
            state.audit.append(entry)?;
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
        claim::claim_due(&mut *self.state()?, scope, horizon, limit, lease)
    }

    async fn extend_claims(
        &self,
        claims: Vec<Claim>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        claim::extend_claims(&mut *self.state()?, claims, until, now)
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        complete::complete(&mut *self.state()?, batch, now)
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        claim::release(&mut *self.state()?, claims)
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        claim::next_due(&*self.state()?, scope)
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        stats::queue_stats(&*self.state()?, namespace, queue, now)
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        Ok(self.state()?.job_in(namespace, id).map(Job::record))
    }

    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        jobs::get_job_by_key(&*self.state()?, namespace, key)
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        jobs::list_jobs(&*self.state()?, query)
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        jobs::count_jobs(&*self.state()?, namespace)
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        let mut state = self.state()?;
        let updated = jobs::update_job(&mut state, namespace, id, update)?;
        if let Some(entry) = audit {
            state.audit.append(entry)?;
        }
        Ok(updated)
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
        audit: Option<AuditRecord>,
    ) -> Result<JobRecord> {
        jobs::transition(&mut *self.state()?, namespace, id, transition, audit)
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        history::runs(&*self.state()?, namespace, id, before, limit)
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        history::dead_letters(&*self.state()?, namespace, after, limit)
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        history::get_dead_letter(&*self.state()?, namespace, id)
    }

    async fn delete_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        let mut state = self.state()?;
        let deleted = history::delete_dead_letter(&mut state, namespace, id)?;
        if let Some(entry) = audit.filter(|_| deleted) {
            state.audit.append(entry)?;
        }
        Ok(deleted)
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        history::purge(&mut *self.state()?, before, limit)
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        history::purge_dead_letters(&mut *self.state()?, before, limit)
    }

    async fn append_audit(&self, record: AuditRecord) -> Result<()> {
        self.state()?.audit.append(record)
    }

    async fn audit_entries(&self, query: AuditQuery) -> Result<Vec<AuditEntry>> {
        self.state()?.audit.read(query)
    }

    async fn purge_audit(&self, before: Timestamp, limit: usize) -> Result<u64> {
        self.state()?.audit.purge(before, limit)
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        stats::gauges(&*self.state()?, now)
    }

    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()> {
        self.nodes.beat(beat)
    }

    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        self.nodes.live(now)
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        secrets::signing_secrets(&*self.state()?, namespace)
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        secrets::init_signing_secret(&mut *self.state()?, namespace, secret)
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        let mut state = self.state()?;
        secrets::rotate_signing_secret(&mut state, namespace, secret, previous_until)?;
        if let Some(entry) = audit {
            state.audit.append(entry)?;
        }
        Ok(())
    }

    async fn signing_namespaces(&self) -> Result<Vec<String>> {
        Ok(secrets::signing_namespaces(&*self.state()?))
    }

    async fn replace_signing_secrets(
        &self,
        namespace: &str,
        expected: &SigningSecrets,
        replacement: &SigningSecrets,
    ) -> Result<bool> {
        secrets::replace_signing_secrets(&mut *self.state()?, namespace, expected, replacement)
    }

    async fn put_calendar(
        &self,
        record: &crate::CalendarRecord,
        audit: Option<AuditRecord>,
    ) -> Result<()> {
        let key = (record.namespace.clone(), record.name.clone());
        let mut state = self.state()?;
        state.calendars.insert(key, record.clone());
        if let Some(entry) = audit {
            state.audit.append(entry)?;
        }
        Ok(())
    }

    async fn get_calendar(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<crate::CalendarRecord>> {
        let key = (namespace.to_owned(), name.to_owned());
        Ok(self.state()?.calendars.get(&key).cloned())
    }

    async fn list_calendars(&self, namespace: &str) -> Result<Vec<crate::CalendarRecord>> {
        let state = self.state()?;
        let from = (namespace.to_owned(), String::new());
        Ok(state
            .calendars
            .range(from..)
            .take_while(|((ns, _), _)| ns == namespace)
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn delete_calendar(
        &self,
        namespace: &str,
        name: &str,
        audit: Option<AuditRecord>,
    ) -> Result<bool> {
        let key = (namespace.to_owned(), name.to_owned());
        let mut state = self.state()?;
        let deleted = state.calendars.remove(&key).is_some();
        if let Some(entry) = audit.filter(|_| deleted) {
            state.audit.append(entry)?;
        }
        Ok(deleted)
    }

    async fn put_anchor(
        &self,
        record: &crate::AnchorRecord,
        audit: Option<AuditRecord>,
    ) -> Result<Vec<JobRecord>> {
        let mut state = self.state()?;
        let moved = anchors::put(&mut state, record)?;
        if let Some(entry) = audit {
            state
                .audit
                .append(entry.naming(moved.iter().map(|job| job.id)))?;
        }
        Ok(moved)
    }

    async fn get_anchor(&self, namespace: &str, name: &str) -> Result<Option<crate::AnchorRecord>> {
        let key = (namespace.to_owned(), name.to_owned());
        Ok(self.state()?.anchors.get(&key).cloned())
    }

    async fn list_anchors(&self, namespace: &str) -> Result<Vec<crate::AnchorRecord>> {
        let state = self.state()?;
        let from = (namespace.to_owned(), String::new());
        Ok(state
            .anchors
            .range(from..)
            .take_while(|((ns, _), _)| ns == namespace)
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn delete_anchor(
        &self,
        namespace: &str,
        name: &str,
        how: crate::AnchorDelete,
        audit: Option<AuditRecord>,
    ) -> Result<crate::AnchorDeleted> {
        let mut state = self.state()?;
        let deleted = anchors::delete(&mut state, namespace, name, how)?;
        if let (crate::AnchorDeleted::Deleted { cancelled }, Some(mut entry)) = (&deleted, audit) {
            entry.count = u32::try_from(*cancelled).unwrap_or(u32::MAX);
            state.audit.append(entry)?;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hourglass_core::from_ms;

    use super::*;

    fn keyed(key: &str, fingerprint: i64) -> NewJob {
        let due = from_ms(1_000);
        NewJob {
            id: uuid::Uuid::now_v7(),
            namespace: "a".into(),
            key: Some(key.into()),
            spec: hourglass_core::JobSpec {
                job_type: None,
                schedule: hourglass_core::Schedule::at(due),
                target: hourglass_core::Target::Queue(hourglass_core::QueueTarget {
                    name: "q".into(),
                }),
                retry: Default::default(),
                misfire: Default::default(),
                overlap: Default::default(),
                backfill: None,
                labels: Default::default(),
                on_failure: None,
                on_success: None,
                callback_of: None,
                callback_key: None,
                occurrence_of: None,
            },
            payload: None,
            fingerprint,
            first_due: due,
            now: due,
        }
    }

    /// A key used twice in one batch: the second job is the first one again, or a conflict that
    /// leaves the whole batch unwritten, as it would be in the SQL backends' one transaction.
    #[tokio::test]
    async fn a_key_repeated_within_a_batch_is_the_same_job_or_a_conflict() {
        let store = MemoryStore::new();
        let (first, again) = (keyed("k", 1), keyed("k", 1));
        let first_id = first.id;
        let created = store.create_jobs(vec![first, again], None).await.unwrap();
        assert!(matches!(&created[0], Created::New(r) if r.id == first_id));
        assert!(matches!(&created[1], Created::Existing(r) if r.id == first_id));
        assert_eq!(store.count_jobs(None).await.unwrap(), 1);

        let (fresh, other) = (keyed("j", 1), keyed("j", 2));
        let fresh_id = fresh.id;
        match store.create_jobs(vec![fresh, other], None).await {
            Err(StoreError::KeyConflict {
                index: 1, existing, ..
            }) => assert_eq!(existing, fresh_id),
            other => panic!("expected a conflict with the batch's first job, got {other:?}"),
        }
        assert_eq!(store.count_jobs(None).await.unwrap(), 1, "nothing written");
        assert_eq!(
            store
                .next_due(ClaimScope::Queue {
                    namespace: "a",
                    queue: "q",
                    types: None,
                    max_bytes: None,
                })
                .await
                .unwrap(),
            Some(from_ms(1_000))
        );
    }

    /// A panic while the lock is held leaves state that may be half changed: every later call
    /// says the store is unavailable rather than answer from it.
    #[tokio::test]
    async fn a_poisoned_lock_makes_the_store_unavailable() {
        let store = Arc::new(MemoryStore::new());
        let holder = store.clone();
        let panicked = std::thread::spawn(move || {
            let _guard = holder.state.lock();
            panic!("a bug while the lock is held");
        })
        .join();
        assert!(panicked.is_err());
        assert!(matches!(
            store.count_jobs(None).await,
            Err(StoreError::Unavailable(_))
        ));
    }
}
