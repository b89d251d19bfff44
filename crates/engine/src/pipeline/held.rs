//! The claims this node holds, shared by the planner, timer, renewer and completer.

use std::collections::HashMap;
use std::sync::Mutex;

use hourglass_core::{JobId, Occurrence};
use hourglass_store::Applied;
use tokio::sync::Notify;

/// The claims this node holds — in the timer, waiting for a slot, being delivered, or waiting to
/// be written — each with the lease expiry (ms) it has in the store: what the renewer keeps
/// alive. The planner adds, the completer removes once the outcome is durable (or dropped).
#[derive(Default)]
pub(crate) struct Held {
    claims: Mutex<HashMap<(JobId, i64), i64>>,
    /// Wakes the renewer when claims arrive after an idle spell, so an idle node has no timer.
    pub(super) arrived: Notify,
}

impl Held {
    pub(super) fn add(&self, claimed: &[Occurrence], lease_until: i64) {
        let mut claims = self.claims.lock().expect("held claims poisoned");
        for occ in claimed {
            claims.insert((occ.job_id, occ.token), lease_until);
        }
        drop(claims);
        self.arrived.notify_one();
    }

    pub(super) fn remove(&self, done: impl IntoIterator<Item = (JobId, i64)>) {
        let mut claims = self.claims.lock().expect("held claims poisoned");
        for key in done {
            claims.remove(&key);
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.claims.lock().expect("held claims poisoned").is_empty()
    }

    /// Applies the store's answers to a renewal of `claims`, under one lock: a renewed claim
    /// gets expiry `until_ms`; one the store refused (another node holds the occurrence now, or
    /// an edit fenced it) is marked lost. A lease never comes back, so a lost claim is not renewed
    /// again (a node back from a pause may hold thousands, and renewing them every round would
    /// only load the database), and the timer drops it if it has not fired yet. It stays held
    /// until the completer has seen its end, as every claim does. Answers the claims newly found
    /// lost (a claim completed meanwhile is no longer held, and is not among them).
    pub(super) fn renewed(
        &self,
        claims: &[(JobId, i64)],
        applied: Vec<Applied>,
        until_ms: i64,
    ) -> Vec<(JobId, i64)> {
        let mut held = self.claims.lock().expect("held claims poisoned");
        let mut lost = Vec::new();
        for (key, result) in claims.iter().zip(applied) {
            let Some(until) = held.get_mut(key) else {
                continue;
            };
            match result {
                Applied::Yes => *until = until_ms,
                Applied::StaleLease if *until != LOST => {
                    *until = LOST;
                    lost.push(*key);
                }
                Applied::StaleLease => {}
            }
        }
        lost
    }

    /// The held claims whose lease expiry is at or before `before_ms`, lost ones left out.
    pub(super) fn expiring(&self, before_ms: i64) -> Vec<(JobId, i64)> {
        self.claims
            .lock()
            .expect("held claims poisoned")
            .iter()
            .filter(|(_, until)| **until != LOST && **until <= before_ms)
            .map(|(key, _)| *key)
            .collect()
    }

    /// Whether this claim's lease has run out by `now_ms` as far as this node knows (it was
    /// neither completed nor renewed in time, or the store said it is lost): another node may
    /// hold the occurrence by now.
    pub(super) fn lapsed(&self, job_id: JobId, token: i64, now_ms: i64) -> bool {
        self.claims
            .lock()
            .expect("held claims poisoned")
            .get(&(job_id, token))
            .is_some_and(|until| *until <= now_ms)
    }
}

/// The lease expiry of a held claim the store refused to renew: it is no longer this node's.
const LOST: i64 = i64::MIN;
