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

mod state;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use hourglass_core::{Completion, JobId, JobState, Occurrence, duration_ms, from_ms};
use jiff::Timestamp;

use self::state::{Held, Job, Lane, Run, Secrets, State};

use crate::rules::{
    LastError, RowChange, TransitionPlan, Visibility, plan_completion, plan_transition, plan_update,
};
use crate::{
    Applied, ClaimScope, Created, DeadLetter, JobQuery, JobRecord, JobUpdate, Lease, NewJob,
    NodeBeat, Purged, QueueStats, Release, Result, RunCursor, RunRecord, SigningSecrets, Store,
    StoreError, StoreGauges, Transition,
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

/// Applies one completion under its fence; `false` when the token is stale.
fn complete_one(state: &mut State, c: Completion, now: i64) -> bool {
    let Some(job) = state.jobs.get(&c.job_id) else {
        return false;
    };
    if !job.fenced_by(c.token) {
        return false;
    }
    let plan = plan_completion(&c);
    let row = plan.row.clone();
    let last_error = plan.last_error;
    state.change(c.job_id, |job| {
        match row {
            RowChange::Retry { fire } => {
                job.fire = Some(fire);
                job.attempt += 1;
            }
            RowChange::Advance { due, ran, skipped } => {
                job.due = Some(due);
                job.fire = Some(due);
                job.attempt = 0;
                job.runs += ran;
                job.skipped += skipped;
            }
            RowChange::Finish {
                state,
                ran,
                skipped,
                attempt,
            } => {
                job.state = state;
                job.fire = None;
                job.attempt = attempt.unwrap_or(job.attempt);
                job.runs += ran;
                job.skipped += skipped;
            }
        }
        job.lease = None;
        // A completion ends its claim: the same token cannot settle the occurrence again.
        job.token += 1;
        job.updated = now;
        if let LastError::Write(error) = last_error {
            job.last_error = error.map(str::to_owned);
        }
    });
    if let Some(run) = &plan.run {
        state.record_run(Run {
            job_id: c.job_id,
            due: c.due.as_millisecond(),
            attempt: run.attempt.attempt,
            started: run.attempt.started_at.as_millisecond(),
            latency_ms: run.attempt.latency_ms,
            status: run.attempt.status,
            error: run.attempt.error.clone(),
            response: run.attempt.response.clone(),
            outcome: run.outcome.as_str(),
        });
    }
    if let Some(letter) = &plan.dead_letter
        && let Some(job) = state.jobs.get(&c.job_id)
    {
        state.letters_recorded += 1;
        let letter = DeadLetter {
            id: state.letters_recorded,
            namespace: job.namespace.clone(),
            job_id: c.job_id,
            due: c.due,
            attempts: letter.attempts,
            reason: letter.reason.to_string(),
            spec: (*job.spec).clone(),
            payload: job.payload.clone(),
            created_at: from_ms(now),
        };
        state.dead_letters.insert(letter.id, letter);
    }
    true
}

/// A decision of [`Store::create_jobs`] about one job of the batch, made before anything is
/// written.
enum Creation {
    New,
    /// The key is held, with the same fingerprint, by this stored job.
    Existing(Box<JobRecord>),
    /// The key is taken, with the same fingerprint, by the job at this index of the same batch.
    SameAs(usize),
}

#[async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn create_jobs(&self, jobs: Vec<NewJob>) -> Result<Vec<Created>> {
        let mut state = self.state()?;
        // All or nothing: decide every job first, so that a conflict changes nothing.
        let mut decisions = Vec::with_capacity(jobs.len());
        // The keys taken by earlier jobs of this batch, and by which one.
        let mut batch_keys: HashMap<(&str, &str), usize> = HashMap::new();
        let mut batch_ids = BTreeSet::new();
        for (index, job) in jobs.iter().enumerate() {
            if let Some(key) = &job.key {
                let stored = state
                    .keys
                    .get(&(job.namespace.clone(), key.clone()))
                    .and_then(|id| state.jobs.get(id));
                let earlier = batch_keys.get(&(job.namespace.as_str(), key.as_str()));
                let (holder, fingerprint, decision) = match (stored, earlier) {
                    (Some(held), _) => (
                        held.id,
                        held.fingerprint,
                        Creation::Existing(Box::new(held.record())),
                    ),
                    (None, Some(&i)) => (jobs[i].id, jobs[i].fingerprint, Creation::SameAs(i)),
                    (None, None) => {
                        batch_keys.insert((&job.namespace, key), index);
                        (job.id, job.fingerprint, Creation::New)
                    }
                };
                if fingerprint != job.fingerprint {
                    return Err(StoreError::KeyConflict {
                        index,
                        key: key.clone(),
                        existing: holder,
                    });
                }
                if !matches!(decision, Creation::New) {
                    decisions.push(decision);
                    continue;
                }
            }
            // Ids are the caller's (uuid v7); a repeated one is refused like a primary key.
            if state.jobs.contains_key(&job.id) || !batch_ids.insert(job.id) {
                return Err(StoreError::Unavailable(format!(
                    "job id {} is already used",
                    job.id
                )));
            }
            decisions.push(Creation::New);
        }
        // Nothing below can fail.
        let mut out: Vec<Created> = Vec::with_capacity(jobs.len());
        for (job, decision) in jobs.into_iter().zip(decisions) {
            let created = match decision {
                Creation::New => {
                    state.insert_job(&job);
                    Created::New(job.into_record())
                }
                Creation::Existing(record) => Created::Existing(*record),
                Creation::SameAs(i) => Created::Existing(out[i].record().clone()),
            };
            out.push(created);
        }
        Ok(out)
    }

    async fn claim_due(
        &self,
        scope: ClaimScope<'_>,
        horizon: Timestamp,
        limit: usize,
        lease: &Lease,
    ) -> Result<Vec<Occurrence>> {
        let mut state = self.state()?;
        let now = lease.now.as_millisecond();
        let until = now.saturating_add(duration_ms(lease.ttl));
        let (is_queue, types) = match scope {
            ClaimScope::Fired => (false, None),
            ClaimScope::Queue { types, .. } => (true, types),
        };
        // Due by the horizon; a job still leased (its fire time is the lease expiry) only once
        // that expiry has passed by the claimer's clock, however soon within the horizon.
        let max_bytes = scope.max_bytes();
        let mut picked = Vec::new();
        let mut bytes = 0usize;
        for (_, fire, _, id) in state.due_in(Lane::of(scope), horizon.as_millisecond()) {
            if picked.len() >= limit || !crate::under_byte_budget(max_bytes, bytes) {
                break;
            }
            let Some(job) = state.jobs.get(id) else {
                return Err(StoreError::Corrupt(format!(
                    "due index names missing job {id}"
                )));
            };
            if job.lease.is_some() && *fire > now {
                continue;
            }
            if let Some(types) = types
                && !job
                    .spec
                    .job_type
                    .as_ref()
                    .is_some_and(|t| types.contains(t))
            {
                continue;
            }
            if job.due.is_none() {
                return Err(StoreError::Corrupt(format!(
                    "active job {id} has no due time"
                )));
            }
            bytes += job.payload.as_deref().map_or(0, str::len);
            picked.push(*id);
        }
        let mut claimed = Vec::with_capacity(picked.len());
        let owner: std::sync::Arc<str> = lease.owner.as_str().into();
        for id in picked {
            let occurrence = state.change(id, |job| {
                let own_fire = match &job.lease {
                    None => job.fire.unwrap_or_default(),
                    Some(held) => held.own_fire,
                };
                let lapsed_owner = job
                    .lease
                    .as_ref()
                    .map(|held| held.owner.clone())
                    .filter(|previous| *previous != owner);
                // A queue message still leased is here because its lease ran out unacked: that
                // lease was a failed attempt. (The engine's own lapsed claims are not: the node
                // that held them may never have fired them.)
                if is_queue && job.lease.is_some() {
                    job.attempt += 1;
                }
                job.lease = Some(Held {
                    own_fire,
                    owner: owner.clone(),
                });
                job.fire = Some(until);
                job.token += 1;
                Occurrence {
                    job_id: job.id,
                    namespace: job.namespace.as_str().into(),
                    due: from_ms(job.due.unwrap_or(own_fire)),
                    fire_at: from_ms(own_fire),
                    attempt: job.attempt + 1,
                    token: job.token,
                    runs_done: job.runs,
                    spec: job.spec.clone(),
                    payload: job.payload.as_deref().map(Into::into),
                    lapsed_owner,
                }
            });
            claimed.extend(occurrence);
        }
        // Earliest own fire time first (a lapsed lease was picked at its expiry).
        claimed.sort_by_key(|o| o.fire_at);
        Ok(claimed)
    }

    async fn extend_claims(
        &self,
        claims: Vec<(JobId, i64)>,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Vec<Applied>> {
        let mut state = self.state()?;
        let (until, now) = (until.as_millisecond(), now.as_millisecond());
        Ok(claims
            .into_iter()
            .map(|(id, token)| {
                let extended = state.change(id, |job| {
                    // Only a claim still held: a released or completed one has nothing to extend.
                    let held = job.fenced_by(token) && job.lease.is_some();
                    if held {
                        job.fire = Some(until);
                        job.updated = now;
                    }
                    held
                });
                if extended == Some(true) {
                    Applied::Yes
                } else {
                    Applied::StaleLease
                }
            })
            .collect())
    }

    async fn complete(&self, batch: Vec<Completion>, now: Timestamp) -> Result<Vec<Applied>> {
        let mut state = self.state()?;
        let now = now.as_millisecond();
        Ok(batch
            .into_iter()
            .map(|c| {
                if complete_one(&mut state, c, now) {
                    Applied::Yes
                } else {
                    Applied::StaleLease
                }
            })
            .collect())
    }

    async fn release(&self, claims: Vec<Release>) -> Result<()> {
        let mut state = self.state()?;
        for c in claims {
            state.change(c.job_id, |job| {
                if job.fenced_by(c.token) {
                    job.fire = Some(c.fire_at.as_millisecond());
                    job.lease = None;
                }
            });
        }
        Ok(())
    }

    async fn next_due(&self, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
        // Claimed jobs count at their lease expiry; a queue scope's type filter is ignored.
        let state = self.state()?;
        Ok(state
            .due_in(Lane::of(scope), i64::MAX)
            .next()
            .map(|(_, fire, ..)| from_ms(*fire)))
    }

    async fn queue_stats(
        &self,
        namespace: &str,
        queue: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<QueueStats>> {
        let state = self.state()?;
        let now = now.as_millisecond();
        // Queue names in byte order, as the SQL backends sort them.
        let mut by_name: BTreeMap<&str, Visibility> = BTreeMap::new();
        for (lane, fire, _, id) in state.queue_entries(Some(namespace)) {
            let Lane::Queue { queue: name, .. } = lane else {
                continue;
            };
            if queue.is_some_and(|wanted| wanted != name) {
                continue;
            }
            let leased = state.jobs.get(id).is_some_and(|job| job.lease.is_some());
            by_name.entry(name).or_default().count(*fire, leased, now);
        }
        let mut out: Vec<QueueStats> = by_name
            .into_iter()
            .map(|(name, v)| QueueStats {
                name: name.to_owned(),
                available: v.available,
                in_flight: v.in_flight,
                scheduled: v.scheduled,
                oldest_available: v.oldest_available.map(from_ms),
            })
            .collect();
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
    }

    async fn get_job(&self, namespace: Option<&str>, id: JobId) -> Result<Option<JobRecord>> {
        Ok(self.state()?.job_in(namespace, id).map(Job::record))
    }

    async fn get_job_by_key(&self, namespace: &str, key: &str) -> Result<Option<JobRecord>> {
        let state = self.state()?;
        let slot = (namespace.to_owned(), key.to_owned());
        Ok(state
            .keys
            .get(&slot)
            .and_then(|id| state.job_in(Some(namespace), *id))
            .map(Job::record))
    }

    async fn list_jobs(&self, query: JobQuery) -> Result<Vec<JobRecord>> {
        let state = self.state()?;
        let from = query.after.map_or(Bound::Unbounded, Bound::Excluded);
        let before = query.due_before.map(|t| t.as_millisecond());
        let after = query.due_after.map(|t| t.as_millisecond());
        Ok(state
            .jobs
            .range((from, Bound::Unbounded))
            .map(|(_, job)| job)
            .filter(|job| job.visible_in(query.namespace.as_deref()))
            .filter(|job| query.state.is_none_or(|s| s == job.state))
            .filter(|job| {
                query
                    .job_type
                    .as_ref()
                    .is_none_or(|t| job.spec.job_type.as_ref() == Some(t))
            })
            // A job without a due time is in no due window (as NULL compares in SQL).
            .filter(|job| before.is_none_or(|b| job.due.is_some_and(|d| d < b)))
            .filter(|job| after.is_none_or(|a| job.due.is_some_and(|d| d >= a)))
            .filter(|job| {
                query
                    .queue
                    .as_deref()
                    .is_none_or(|q| job.spec.target.queue() == Some(q))
            })
            .take(query.limit)
            .map(Job::record)
            .collect())
    }

    async fn count_jobs(&self, namespace: Option<&str>) -> Result<u64> {
        let state = self.state()?;
        Ok(state
            .jobs
            .values()
            .filter(|job| job.visible_in(namespace))
            .count() as u64)
    }

    async fn update_job(
        &self,
        namespace: Option<&str>,
        id: JobId,
        update: JobUpdate,
    ) -> Result<JobRecord> {
        let mut state = self.state()?;
        let job = state.job_in(namespace, id).ok_or(StoreError::NotFound)?;
        let (new_state, due, fire) = plan_update(&job.record(), &update)?;
        let JobUpdate {
            spec, payload, now, ..
        } = update;
        state
            .change(id, |job| {
                job.spec = Arc::new(spec);
                job.payload = payload;
                job.state = new_state;
                job.due = due;
                job.fire = fire;
                job.attempt = 0;
                job.lease = None;
                job.token += 1;
                job.updated = now.as_millisecond();
                job.record()
            })
            .ok_or(StoreError::NotFound)
    }

    async fn transition(
        &self,
        namespace: Option<&str>,
        id: JobId,
        transition: Transition,
    ) -> Result<JobRecord> {
        let mut state = self.state()?;
        let job = state.job_in(namespace, id).ok_or(StoreError::NotFound)?;
        let record = job.record();
        let (new_state, due, fire, clear_key, trigger_key, now) =
            match plan_transition(&record, transition)? {
                TransitionPlan::Unchanged => return Ok(record),
                TransitionPlan::Apply {
                    state,
                    due,
                    fire,
                    clear_key,
                    trigger_key,
                    now,
                } => (state, due, fire, clear_key, trigger_key, now),
            };
        if clear_key && let Some(key) = &record.key {
            let slot = (record.namespace.clone(), key.clone());
            if state.keys.get(&slot) == Some(&id) {
                state.keys.remove(&slot);
            }
        }
        state
            .change(id, |job| {
                job.state = new_state;
                job.due = due;
                job.fire = fire;
                job.attempt = 0;
                job.lease = None;
                job.token += 1;
                job.updated = now;
                if clear_key {
                    job.key = None;
                }
                if let Some(key) = trigger_key {
                    job.trigger = Some((key, now));
                }
                job.record()
            })
            .ok_or(StoreError::NotFound)
    }

    async fn runs(
        &self,
        namespace: Option<&str>,
        id: JobId,
        before: Option<RunCursor>,
        limit: usize,
    ) -> Result<Vec<RunRecord>> {
        let state = self.state()?;
        if state.job_in(namespace, id).is_none() {
            return Err(StoreError::NotFound);
        }
        let Some(history) = state.runs_by_job.get(&id) else {
            return Ok(Vec::new());
        };
        let before = before.unwrap_or(RunCursor::NEWEST);
        let end = Bound::Excluded((before.started_ms, before.seq));
        Ok(history
            .range((Bound::Unbounded, end))
            .rev()
            .take(limit)
            .filter_map(|&(started_ms, seq)| {
                let run = state.runs.get(&seq)?;
                Some(RunRecord {
                    cursor: RunCursor { started_ms, seq },
                    job_id: id,
                    due: from_ms(run.due),
                    attempt: run.attempt,
                    started_at: from_ms(run.started),
                    latency_ms: run.latency_ms,
                    status: run.status,
                    error: run.error.clone(),
                    response: run.response.clone(),
                    outcome: run.outcome.to_owned(),
                })
            })
            .collect())
    }

    async fn dead_letters(
        &self,
        namespace: Option<&str>,
        after: Option<i64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let state = self.state()?;
        let from = Bound::Excluded(after.unwrap_or(0));
        Ok(state
            .dead_letters
            .range((from, Bound::Unbounded))
            .map(|(_, letter)| letter)
            .filter(|letter| namespace.is_none_or(|ns| ns == letter.namespace))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn get_dead_letter(
        &self,
        namespace: Option<&str>,
        id: i64,
    ) -> Result<Option<DeadLetter>> {
        let state = self.state()?;
        Ok(state
            .dead_letters
            .get(&id)
            .filter(|letter| namespace.is_none_or(|ns| ns == letter.namespace))
            .cloned())
    }

    async fn delete_dead_letter(&self, namespace: Option<&str>, id: i64) -> Result<bool> {
        let mut state = self.state()?;
        let found = state
            .dead_letters
            .get(&id)
            .is_some_and(|letter| namespace.is_none_or(|ns| ns == letter.namespace));
        if found {
            state.dead_letters.remove(&id);
        }
        Ok(found)
    }

    async fn purge(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        let mut state = self.state()?;
        let before = before.as_millisecond();
        let mut purged = Purged::default();
        // Finished jobs last changed before the cutoff, longest finished first, with their runs.
        let mut finished: Vec<(i64, u64, JobId)> = state
            .jobs
            .values()
            .filter(|job| job.state.is_terminal() && job.updated < before)
            .map(|job| (job.updated, job.seq, job.id))
            .collect();
        finished.sort_unstable();
        for (_, _, id) in finished.into_iter().take(limit) {
            purged.runs += state.delete_job(id);
            purged.jobs += 1;
        }
        // Then old runs of any job (recurring ones live on), in the order they were recorded.
        let old: Vec<i64> = state
            .runs
            .iter()
            .filter(|(_, run)| run.started < before)
            .map(|(seq, _)| *seq)
            .take(limit)
            .collect();
        purged.runs += old.len() as u64;
        for seq in old {
            state.delete_run(seq);
        }
        Ok(purged)
    }

    async fn purge_dead_letters(&self, before: Timestamp, limit: usize) -> Result<u64> {
        let mut state = self.state()?;
        let before = before.as_millisecond();
        // Only the `limit` oldest letters are looked at, as the SQL sweep does.
        let old: Vec<i64> = state
            .dead_letters
            .values()
            .take(limit)
            .filter(|letter| letter.created_at.as_millisecond() < before)
            .map(|letter| letter.id)
            .collect();
        for id in &old {
            state.dead_letters.remove(id);
        }
        Ok(old.len() as u64)
    }

    async fn gauges(&self, now: Timestamp) -> Result<StoreGauges> {
        let state = self.state()?;
        let now = now.as_millisecond();
        let mut gauges = StoreGauges {
            jobs_by_state: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
            ..Default::default()
        };
        for job in state.jobs.values() {
            if let Some(slot) = gauges
                .jobs_by_state
                .iter_mut()
                .find(|(s, _)| *s == job.state)
            {
                slot.1 += 1;
            }
        }
        // Fire times passed: unclaimed occurrences, and claims whose lease lapsed (backlog again).
        for (_, fire, ..) in state.due_in(Lane::Fired, now) {
            gauges.due_backlog += 1;
            gauges.oldest_backlog = gauges.oldest_backlog.or(Some(from_ms(*fire)));
        }
        let mut queues = Visibility::default();
        for (_, fire, _, id) in state.queue_entries(None) {
            let leased = state.jobs.get(id).is_some_and(|job| job.lease.is_some());
            queues.count(*fire, leased, now);
        }
        gauges.queue_available = queues.available;
        gauges.queue_in_flight = queues.in_flight;
        gauges.queue_scheduled = queues.scheduled;
        gauges.oldest_queue_available = queues.oldest_available.map(from_ms);
        Ok(gauges)
    }

    async fn heartbeat(&self, beat: &NodeBeat) -> Result<()> {
        self.nodes.beat(beat)
    }

    async fn nodes(&self, now: Timestamp) -> Result<Vec<NodeBeat>> {
        self.nodes.live(now)
    }

    async fn signing_secrets(&self, namespace: &str) -> Result<Option<SigningSecrets>> {
        let state = self.state()?;
        Ok(state.secrets.get(namespace).map(|s| SigningSecrets {
            current: s.current.clone(),
            previous: s.previous.clone().zip(s.previous_until.map(from_ms)),
        }))
    }

    async fn init_signing_secret(&self, namespace: &str, secret: &str) -> Result<String> {
        let mut state = self.state()?;
        let secrets = state
            .secrets
            .entry(namespace.to_owned())
            .or_insert_with(|| Secrets {
                current: secret.to_owned(),
                ..Secrets::default()
            });
        Ok(secrets.current.clone())
    }

    async fn rotate_signing_secret(
        &self,
        namespace: &str,
        secret: &str,
        previous_until: Option<Timestamp>,
    ) -> Result<()> {
        let mut state = self.state()?;
        let until = previous_until.map(|t| t.as_millisecond());
        let rotated = match state.secrets.remove(namespace) {
            // The replaced secret stays valid until `until`; without one it stops at once.
            Some(old) => Secrets {
                current: secret.to_owned(),
                previous: until.map(|_| old.current),
                previous_until: until,
            },
            // Nothing to keep.
            None => Secrets {
                current: secret.to_owned(),
                ..Secrets::default()
            },
        };
        state.secrets.insert(namespace.to_owned(), rotated);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
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
        let created = store.create_jobs(vec![first, again]).await.unwrap();
        assert!(matches!(&created[0], Created::New(r) if r.id == first_id));
        assert!(matches!(&created[1], Created::Existing(r) if r.id == first_id));
        assert_eq!(store.count_jobs(None).await.unwrap(), 1);

        let (fresh, other) = (keyed("j", 1), keyed("j", 2));
        let fresh_id = fresh.id;
        match store.create_jobs(vec![fresh, other]).await {
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
