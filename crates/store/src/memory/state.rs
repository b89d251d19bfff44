//! The memory store's tables: jobs with their due index, runs, dead letters and signing
//! secrets, and the few ways to change them that keep the index in step.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use hourglass_core::{FencingToken, JobId, JobSpec, JobState, from_ms};

use crate::{ClaimScope, DeadLetter, JobRecord, KeyedTrigger, NewJob, RunOutcome};

/// Which claims see a job: the engine's (`Fired`), or one queue's workers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Lane {
    Fired,
    Queue { namespace: String, queue: String },
}

impl Lane {
    pub(super) fn of(scope: ClaimScope<'_>) -> Self {
        match scope {
            ClaimScope::Fired => Lane::Fired,
            ClaimScope::Queue {
                namespace, queue, ..
            } => Lane::Queue {
                namespace: namespace.to_owned(),
                queue: queue.to_owned(),
            },
        }
    }
}

/// An entry of the due index: lane, fire time (ms), creation order, job.
pub(super) type DueEntry = (Lane, i64, u64, JobId);

/// The claim holding a job. (Who holds it is never asked: the SQL backends keep the lease's
/// owner for operators, but every decision goes by the token and the lease expiry.)
#[derive(Debug, Clone)]
pub(super) struct Held {
    /// The occurrence's own fire time, handed out by the claim and restored if a later claim
    /// takes the job over after this lease lapsed.
    pub(super) own_fire: i64,
    /// Whose lease it is, to name when another owner takes it over after it lapsed.
    pub(super) owner: std::sync::Arc<str>,
}

/// One job, as the SQL backends keep its row. Times are whole milliseconds, like theirs, so a
/// read answers exactly what they would.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub(super) id: JobId,
    /// Creation order: ties in the due index go to the older job.
    pub(super) seq: u64,
    pub(super) namespace: String,
    pub(super) key: Option<String>,
    pub(super) fingerprint: i64,
    pub(super) state: JobState,
    pub(super) spec: Arc<JobSpec>,
    pub(super) payload: Option<String>,
    /// Nominal due time of the pending (or last) occurrence.
    pub(super) due: Option<i64>,
    /// When the next attempt runs; while claimed, the lease expiry. `None` leaves the due index
    /// (paused, finished).
    pub(super) fire: Option<i64>,
    pub(super) attempt: u32,
    pub(super) runs: u64,
    pub(super) skipped: u64,
    pub(super) created: i64,
    pub(super) updated: i64,
    /// The fencing token: raised by every claim, edit and transition.
    pub(super) token: i64,
    pub(super) lease: Option<Held>,
    /// The last trigger made with an idempotency key, and when it was due.
    pub(super) trigger: Option<(String, i64)>,
    /// The error of the latest failed attempt, until a delivery.
    pub(super) last_error: Option<String>,
}

impl Job {
    pub(super) fn lane(&self) -> Lane {
        match self.spec.target.queue() {
            None => Lane::Fired,
            Some(queue) => Lane::Queue {
                namespace: self.namespace.clone(),
                queue: queue.to_owned(),
            },
        }
    }

    /// The job's place in the due index: active jobs with a fire time only.
    pub(super) fn due_entry(&self) -> Option<DueEntry> {
        match (self.state, self.fire) {
            (JobState::Active, Some(fire)) => Some((self.lane(), fire, self.seq, self.id)),
            _ => None,
        }
    }

    pub(super) fn visible_in(&self, namespace: Option<&str>) -> bool {
        namespace.is_none_or(|ns| ns == self.namespace)
    }

    pub(super) fn record(&self) -> JobRecord {
        JobRecord {
            id: self.id,
            namespace: self.namespace.clone(),
            key: self.key.clone(),
            state: self.state,
            spec: (*self.spec).clone(),
            payload: self.payload.clone(),
            next_due: self.due.map(from_ms),
            next_attempt: match (self.state, &self.lease) {
                (JobState::Active, None) => self.fire.map(from_ms),
                _ => None,
            },
            attempt: self.attempt,
            runs: self.runs,
            skipped: self.skipped,
            created_at: from_ms(self.created),
            updated_at: from_ms(self.updated),
            token: FencingToken::from_i64(self.token),
            last_trigger: self.trigger.as_ref().map(|(key, due)| KeyedTrigger {
                key: key.clone(),
                due: from_ms(*due),
            }),
            // While claimed, the fire time is the lease's expiry.
            leased_until: match (self.state, &self.lease) {
                (JobState::Active, Some(_)) => self.fire.map(from_ms),
                _ => None,
            },
            last_error: self.last_error.clone(),
        }
    }

    /// A claim's fence holds: the job still carries the claim's token and is active. (Like the
    /// SQL backends, a completion or release does not also ask for a live lease: the token is the
    /// fence.)
    pub(super) fn fenced_by(&self, token: FencingToken) -> bool {
        self.token == token.as_i64() && self.state == JobState::Active
    }
}

#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) job_id: JobId,
    pub(super) due: i64,
    pub(super) attempt: u32,
    pub(super) started: i64,
    pub(super) latency_ms: u32,
    pub(super) status: Option<u16>,
    pub(super) error: Option<String>,
    pub(super) response: Option<String>,
    pub(super) outcome: RunOutcome,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Secrets {
    pub(super) current: String,
    pub(super) previous: Option<String>,
    pub(super) previous_until: Option<i64>,
}

#[derive(Default)]
pub(super) struct State {
    /// By id, which is also the listing order.
    pub(super) jobs: BTreeMap<JobId, Job>,
    /// (namespace, key) of every job holding a key. A cancelled job gives its key up; a purged
    /// one too, with its row.
    pub(super) keys: HashMap<(String, String), JobId>,
    pub(super) due: BTreeSet<DueEntry>,
    pub(super) jobs_created: u64,
    /// By recording order (the cursor's `seq`), which is also the order retention takes them in.
    pub(super) runs: BTreeMap<i64, Run>,
    /// Each job's runs as (started, seq): its history, newest last.
    pub(super) runs_by_job: HashMap<JobId, BTreeSet<(i64, i64)>>,
    pub(super) runs_recorded: i64,
    /// By id, in recording order.
    pub(super) dead_letters: BTreeMap<i64, DeadLetter>,
    pub(super) letters_recorded: i64,
    pub(super) secrets: HashMap<String, Secrets>,
    /// By (namespace, name).
    pub(super) calendars: BTreeMap<(String, String), crate::CalendarRecord>,
    /// By (namespace, name).
    pub(super) anchors: BTreeMap<(String, String), crate::AnchorRecord>,
    pub(super) audit: super::audit::AuditLog,
}

impl State {
    /// Changes a job through `change`, keeping the due index in step with it. Every change of a
    /// stored job goes through here.
    pub(super) fn change<R>(&mut self, id: JobId, change: impl FnOnce(&mut Job) -> R) -> Option<R> {
        let job = self.jobs.get_mut(&id)?;
        let before = job.due_entry();
        let answer = change(job);
        let after = job.due_entry();
        if before != after {
            if let Some(entry) = before {
                self.due.remove(&entry);
            }
            if let Some(entry) = after {
                self.due.insert(entry);
            }
        }
        Some(answer)
    }

    pub(super) fn job_in(&self, namespace: Option<&str>, id: JobId) -> Option<&Job> {
        self.jobs.get(&id).filter(|job| job.visible_in(namespace))
    }

    /// The lane's due entries with a fire time at or before `until`, earliest first.
    pub(super) fn due_in(&self, lane: Lane, until: i64) -> impl Iterator<Item = &DueEntry> {
        let from = (lane.clone(), i64::MIN, 0, JobId::nil());
        let to = (lane, until, u64::MAX, JobId::max());
        self.due.range(from..=to)
    }

    /// The due entries of every queue of one namespace (all namespaces for `None`).
    pub(super) fn queue_entries<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a DueEntry> {
        let start = (
            Lane::Queue {
                namespace: namespace.unwrap_or_default().to_owned(),
                queue: String::new(),
            },
            i64::MIN,
            0,
            JobId::nil(),
        );
        self.due
            .range((Bound::Included(start), Bound::Unbounded))
            .take_while(move |(lane, ..)| match (lane, namespace) {
                (Lane::Queue { namespace: ns, .. }, Some(wanted)) => ns == wanted,
                (Lane::Queue { .. }, None) => true,
                (Lane::Fired, _) => false,
            })
    }

    pub(super) fn insert_job(&mut self, job: &NewJob) {
        self.jobs_created += 1;
        let (now, due) = (job.now.as_millisecond(), job.first_due.as_millisecond());
        let stored = Job {
            id: job.id,
            seq: self.jobs_created,
            namespace: job.namespace.clone(),
            key: job.key.clone(),
            fingerprint: job.fingerprint,
            state: JobState::Active,
            spec: Arc::new(job.spec.clone()),
            payload: job.payload.clone(),
            due: Some(due),
            fire: Some(job.first_fire().as_millisecond()),
            attempt: 0,
            runs: 0,
            skipped: 0,
            created: now,
            updated: now,
            token: 0,
            lease: None,
            trigger: None,
            last_error: None,
        };
        if let Some(key) = &job.key {
            self.keys
                .insert((job.namespace.clone(), key.clone()), job.id);
        }
        if let Some(entry) = stored.due_entry() {
            self.due.insert(entry);
        }
        self.jobs.insert(job.id, stored);
    }

    /// Deletes a job with its run history; answers how many runs went with it.
    pub(super) fn delete_job(&mut self, id: JobId) -> u64 {
        let Some(job) = self.jobs.remove(&id) else {
            return 0;
        };
        if let Some(entry) = job.due_entry() {
            self.due.remove(&entry);
        }
        if let Some(key) = job.key {
            let slot = (job.namespace, key);
            if self.keys.get(&slot) == Some(&id) {
                self.keys.remove(&slot);
            }
        }
        let runs = self.runs_by_job.remove(&id).unwrap_or_default();
        for (_, seq) in &runs {
            self.runs.remove(seq);
        }
        runs.len() as u64
    }

    pub(super) fn record_run(&mut self, run: Run) {
        self.runs_recorded += 1;
        let seq = self.runs_recorded;
        self.runs_by_job
            .entry(run.job_id)
            .or_default()
            .insert((run.started, seq));
        self.runs.insert(seq, run);
    }

    pub(super) fn delete_run(&mut self, seq: i64) {
        if let Some(run) = self.runs.remove(&seq)
            && let Some(history) = self.runs_by_job.get_mut(&run.job_id)
        {
            history.remove(&(run.started, seq));
            if history.is_empty() {
                self.runs_by_job.remove(&run.job_id);
            }
        }
    }
}
