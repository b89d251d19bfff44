//! When each lease runs out: of a leased queue message, and of an occurrence the engine claimed
//! to fire.
//!
//! A leased row is not in its due index (`jobs_queue_due` holds unleased queue rows only since
//! migration 6, `jobs_due` unleased fired rows only since migration 11), so a claim costs the
//! writer one index delete and a completion none, where before the claim moved the row within
//! the index to its lease expiry and the completion took it out again. What the index no longer
//! tells, when a lease lapses, this schedule does: one entry per leased row, saying when to look
//! at it. Fired claims' entries are filed under [`FIRED`] in place of a queue key. An entry also
//! gives a completion its row number, so it updates the row without the id index.
//!
//! The row stays the truth; an entry is only "look at this row then". An entry left behind by a
//! completion whose commit failed, by a release, by a cancel or by an edit costs one look and is
//! dropped, and an extended lease is put back at its new expiry. What must never happen is a
//! leased row without an entry due at or before its expiry, or its lapse would go unnoticed until
//! the next restart:
//! - a claim adds the entry inside its own transaction, before the commit, due at the new
//!   expiry; for a lapsed lease taken again, due at once, since a commit that fails leaves the
//!   lapsed lease in the row (the look finds the new lease and moves the entry to its expiry);
//! - an extension to an earlier expiry moves the entry earlier, also inside its transaction;
//! - an entry is removed only after the commit that ended its lease, and only while it still
//!   belongs to that lease (the same token), never a newer lease of the same job;
//! - a claim judges the entries it takes against rows as its transaction sees them, which
//!   includes earlier requests of the same write group; if the claim or the group's commit
//!   fails, every entry it took goes back as it was, due for a look (a completion it saw, or a
//!   new lease it moved the entry to, may have been rolled back with it);
//! - a look honours an entry only while its row is still of the entry's kind (on the entry's
//!   queue, or fired): an edit that moves a leased job to another queue or between a queue and a
//!   fired target leaves a stale entry behind, and the job's next lease is not this one's to
//!   take;
//! - at open there are no leases: every lease of a previous process is released.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use hourglass_core::{Claim, JobId};

/// One leased message: its row, its queue, its lease's token, and when to look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub seq: i64,
    pub queue_key: i64,
    pub token: i64,
    pub check_at: i64,
}

/// The key fired claims' entries are filed under. Queue keys are row numbers, never below 1.
pub(super) const FIRED: i64 = i64::MIN;

#[derive(Default)]
pub(super) struct LeaseSchedule {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_job: HashMap<JobId, Entry, BuildHasherDefault<IdHasher>>,
    /// (queue key, check time, job as a number): a queue's due entries come first in its range.
    due: BTreeSet<(i64, i64, u128)>,
}

/// Job ids are UUIDv7: their last 8 bytes are random but for the two variant bits, so they are a
/// hash already. SipHash cost more than the rest of recording a lease.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // A `Uuid` hashes as its 16 bytes; the random ones end up spread over the whole word.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Inner {
    fn add(&mut self, job: JobId, entry: Entry) {
        self.remove(job);
        self.due
            .insert((entry.queue_key, entry.check_at, job.as_u128()));
        self.by_job.insert(job, entry);
    }

    fn remove(&mut self, job: JobId) -> Option<Entry> {
        let entry = self.by_job.remove(&job)?;
        self.due
            .remove(&(entry.queue_key, entry.check_at, job.as_u128()));
        Some(entry)
    }
}

impl LeaseSchedule {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("lease schedule poisoned")
    }

    /// Records a lease, replacing any earlier entry of the job.
    pub fn add(&self, job: JobId, entry: Entry) {
        self.lock().add(job, entry);
    }

    /// Records a claim's leases.
    pub fn add_all(&self, leases: impl IntoIterator<Item = (JobId, Entry)>) {
        let mut inner = self.lock();
        for (job, entry) in leases {
            inner.add(job, entry);
        }
    }

    /// Brings the job's check forward to `at` if it is due later, under the same lease.
    pub fn check_by(&self, job: JobId, token: i64, at: i64) {
        let mut inner = self.lock();
        if let Some(entry) = inner.by_job.get(&job).copied()
            && entry.token == token
            && at < entry.check_at
        {
            inner.add(
                job,
                Entry {
                    check_at: at,
                    ..entry
                },
            );
        }
    }

    /// Drops the entries of leases that have ended, each only if it still belongs to the lease
    /// with that token.
    pub fn forget(&self, ended: impl IntoIterator<Item = Claim>) {
        let mut inner = self.lock();
        for Claim { job_id, token } in ended {
            if inner
                .by_job
                .get(&job_id)
                .is_some_and(|e| e.token == token.as_i64())
            {
                inner.remove(job_id);
            }
        }
    }

    /// The row numbers of these jobs, where a lease of theirs is known: an ack then finds its row
    /// without the id index.
    pub fn rows_of(&self, jobs: impl IntoIterator<Item = JobId>) -> Vec<Option<i64>> {
        let inner = self.lock();
        jobs.into_iter()
            .map(|job| inner.by_job.get(&job).map(|e| e.seq))
            .collect()
    }

    /// Takes the queue's earliest entry if it is due at `now`.
    pub fn pop_due(&self, queue_key: i64, now: i64) -> Option<(JobId, Entry)> {
        let mut inner = self.lock();
        let &(_, _, job) = inner
            .due
            .range((queue_key, i64::MIN, 0)..=(queue_key, now, u128::MAX))
            .next()?;
        let job = JobId::from_u128(job);
        inner.remove(job).map(|entry| (job, entry))
    }

    /// The entries under `queue_key` due for a look at `now`, as (job, row): the leases that
    /// may have lapsed.
    pub fn due_by(&self, queue_key: i64, now: i64) -> Vec<(JobId, i64)> {
        let inner = self.lock();
        inner
            .due
            .range((queue_key, i64::MIN, 0)..=(queue_key, now, u128::MAX))
            .filter_map(|&(_, _, job)| {
                let job = JobId::from_u128(job);
                inner.by_job.get(&job).map(|e| (job, e.seq))
            })
            .collect()
    }

    /// The first entry under `queue_key` after `after` (a check time and a job, exclusive), in
    /// check order: a walk over the entries that holds the lock one step at a time.
    pub fn entry_after(
        &self,
        queue_key: i64,
        after: Option<(i64, u128)>,
    ) -> Option<(JobId, Entry)> {
        use std::ops::Bound::{Excluded, Included};
        let inner = self.lock();
        let start = match after {
            Some((at, job)) => Excluded((queue_key, at, job)),
            None => Included((queue_key, i64::MIN, 0)),
        };
        let &(_, _, job) = inner
            .due
            .range((start, Included((queue_key, i64::MAX, u128::MAX))))
            .next()?;
        let job = JobId::from_u128(job);
        inner.by_job.get(&job).map(|e| (job, *e))
    }

    /// When the queue's next lease may run out.
    pub fn next_check(&self, queue_key: i64) -> Option<i64> {
        self.lock()
            .due
            .range((queue_key, i64::MIN, 0)..=(queue_key, i64::MAX, u128::MAX))
            .next()
            .map(|&(_, at, _)| at)
    }

    /// The leases known on these queues (all queues for `None`; fired claims are no queue's), as
    /// (queue, job, row). A queue's entries are one range of the due set, so asking for one queue
    /// reads only its own (under the lock that claims wait for), not every message in flight.
    pub fn leased(&self, queue_keys: Option<&[i64]>) -> Vec<(i64, JobId, i64)> {
        let inner = self.lock();
        let with_row = |&(key, _, job): &(i64, i64, u128)| {
            let job = JobId::from_u128(job);
            inner.by_job.get(&job).map(|e| (key, job, e.seq))
        };
        match queue_keys {
            None => inner
                .due
                .range((FIRED + 1, i64::MIN, 0)..)
                .filter_map(with_row)
                .collect(),
            Some(keys) => keys
                .iter()
                .flat_map(|&key| {
                    inner
                        .due
                        .range((key, i64::MIN, 0)..=(key, i64::MAX, u128::MAX))
                })
                .filter_map(with_row)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_core::FencingToken;

    fn job(n: u128) -> JobId {
        JobId::from_u128(n)
    }

    fn entry(queue_key: i64, token: i64, check_at: i64) -> Entry {
        Entry {
            seq: 7,
            queue_key,
            token,
            check_at,
        }
    }

    #[test]
    fn entries_come_due_per_queue_in_time_order() {
        let s = LeaseSchedule::default();
        s.add(job(1), entry(1, 1, 300));
        s.add(job(2), entry(1, 1, 100));
        s.add(job(3), entry(2, 1, 50));
        assert_eq!(s.next_check(1), Some(100));
        assert_eq!(s.pop_due(1, 99), None, "nothing on queue 1 is due at 99");
        assert_eq!(s.pop_due(1, 300).map(|(j, _)| j), Some(job(2)));
        assert_eq!(s.pop_due(1, 300).map(|(j, _)| j), Some(job(1)));
        assert_eq!(s.pop_due(1, 300), None);
        assert_eq!(
            s.next_check(2),
            Some(50),
            "the other queue's entry is untouched"
        );
    }

    #[test]
    fn leases_are_listed_per_queue_or_all() {
        let s = LeaseSchedule::default();
        s.add(job(1), entry(1, 1, 300));
        s.add(job(2), entry(2, 1, 100));
        s.add(job(3), entry(1, 1, 100));
        assert_eq!(s.leased(Some(&[1])), vec![(1, job(3), 7), (1, job(1), 7)]);
        assert_eq!(s.leased(Some(&[2, 3])), vec![(2, job(2), 7)]);
        s.add(job(4), entry(FIRED, 1, 50));
        let mut all = s.leased(None);
        all.sort();
        assert_eq!(
            all,
            vec![(1, job(1), 7), (1, job(3), 7), (2, job(2), 7)],
            "fired claims are no queue's"
        );
        assert_eq!(s.due_by(FIRED, 49), vec![]);
        assert_eq!(s.due_by(FIRED, 50), vec![(job(4), 7)]);
        assert_eq!(s.due_by(1, 100), vec![(job(3), 7)]);
    }

    #[test]
    fn a_new_lease_replaces_the_old_entry_and_survives_the_old_leases_end() {
        let s = LeaseSchedule::default();
        s.add(job(1), entry(1, 1, 100));
        s.add(job(1), entry(1, 2, 200));
        assert_eq!(s.next_check(1), Some(200), "one entry a job");
        s.forget([Claim::new(job(1), FencingToken::from_i64(1))]);
        assert_eq!(
            s.next_check(1),
            Some(200),
            "the ack of lease 1 leaves lease 2's entry"
        );
        s.forget([Claim::new(job(1), FencingToken::from_i64(2))]);
        assert_eq!(s.next_check(1), None);
    }

    #[test]
    fn checks_only_move_earlier_and_only_under_the_same_lease() {
        let s = LeaseSchedule::default();
        s.add(job(1), entry(1, 3, 500));
        s.check_by(job(1), 3, 800);
        assert_eq!(
            s.next_check(1),
            Some(500),
            "a later expiry keeps the earlier check"
        );
        s.check_by(job(1), 2, 100);
        assert_eq!(
            s.next_check(1),
            Some(500),
            "an older lease's token moves nothing"
        );
        s.check_by(job(1), 3, 100);
        assert_eq!(s.next_check(1), Some(100));
        assert_eq!(s.rows_of([job(1), job(2)]), vec![Some(7), None]);
        assert_eq!(s.leased(Some(&[2])), vec![]);
        assert_eq!(s.leased(None), vec![(1, job(1), 7)]);
    }
}
