//! The claims this node holds, shared by the planner, timer, dispatcher, renewer and completer,
//! and the fences that take them back.
//!
//! A claim stays held from the planner's claim until the completer has written its outcome. Past
//! the timer an occurrence may wait a long while before it is sent — for its destination's slot,
//! a delivery slot, a rate or a quota, or in a batch line — so a pause, cancel or edit must reach
//! it there too. Every fence (this node's change, another node's through store events, a renewal
//! the store refused) marks the job's older claims here as lost, and whatever sends checks
//! [`Held::still_ours`] (through [`crate::deliver::ClaimCheck`]) immediately before it sends.
//!
//! A fence can arrive while the claim it voids is still on its way back from the store (the
//! claim committed just before the change did). While the planner has a claim in flight, fences
//! are therefore also kept aside and applied to the claims it adds, so none slips between.

use std::collections::HashMap;
use std::sync::Mutex;

use hourglass_core::{Claim, FencingToken, JobId, Occurrence};
use hourglass_store::Applied;
use tokio::sync::Notify;

/// The claims this node holds — in the timer, waiting for a slot, being delivered, or waiting to
/// be written — each with the lease expiry (ms) it has in the store: what the renewer keeps
/// alive. The planner adds, the completer removes once the outcome is durable (or dropped).
#[derive(Default)]
pub(crate) struct Held {
    state: Mutex<State>,
    /// Wakes the renewer when claims arrive after an idle spell, so an idle node has no timer.
    pub(super) arrived: Notify,
}

#[derive(Default)]
struct State {
    /// By job: a job almost always has one claim here, rarely two (a lapsed claim of an
    /// occurrence this node claimed again before the first one's end was written).
    jobs: HashMap<JobId, JobClaims>,
    /// Claims the planner has asked the store for and not yet added.
    claiming: u32,
    /// Fences seen while `claiming > 0`, applied to the claims added next.
    fences_while_claiming: Vec<(JobId, FencingToken)>,
}

/// One held claim: its fencing token and its lease expiry in ms ([`LOST`] once it is not ours).
#[derive(Clone, Copy)]
struct Hold {
    token: FencingToken,
    until: i64,
}

/// A job's claims, the first inline (no allocation for the usual one).
struct JobClaims {
    first: Hold,
    more: Vec<Hold>,
}

impl JobClaims {
    fn iter_mut(&mut self) -> impl Iterator<Item = &mut Hold> {
        std::iter::once(&mut self.first).chain(self.more.iter_mut())
    }

    fn get_mut(&mut self, token: FencingToken) -> Option<&mut Hold> {
        self.iter_mut().find(|c| c.token == token)
    }

    fn put(&mut self, hold: Hold) {
        match self.get_mut(hold.token) {
            Some(held) => *held = hold,
            None => self.more.push(hold),
        }
    }

    /// Removes the claim with `token`; answers whether none is left.
    fn remove(&mut self, token: FencingToken) -> bool {
        if self.first.token == token {
            match self.more.pop() {
                Some(last) => self.first = last,
                None => return true,
            }
        } else {
            self.more.retain(|c| c.token != token);
        }
        false
    }

    /// Marks the claims with a token below `below` as lost.
    fn fence(&mut self, below: FencingToken) {
        for hold in self.iter_mut().filter(|h| h.token < below) {
            hold.until = LOST;
        }
    }
}

/// The planner's claim in flight: fences seen until it ends are applied to what it adds.
pub(super) struct Claiming<'a> {
    held: &'a Held,
}

impl Claiming<'_> {
    /// Records the claims the store granted, with lease expiry `lease_until` (ms).
    pub(super) fn add(self, claimed: &[Occurrence], lease_until: i64) {
        self.add_keys(claimed.iter().map(Occurrence::claim), lease_until);
    }

    fn add_keys(self, claimed: impl IntoIterator<Item = Claim>, lease_until: i64) {
        let mut state = self.held.lock();
        let state = &mut *state;
        for Claim { job_id, token } in claimed {
            let hold = Hold {
                token,
                until: lease_until,
            };
            state
                .jobs
                .entry(job_id)
                .and_modify(|c| c.put(hold))
                .or_insert(JobClaims {
                    first: hold,
                    more: Vec::new(),
                });
        }
        for &(job_id, below) in &state.fences_while_claiming {
            if let Some(claims) = state.jobs.get_mut(&job_id) {
                claims.fence(below);
            }
        }
        self.held.arrived.notify_one();
        // Dropping `self` ends the claim.
    }
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        let mut state = self.held.lock();
        state.claiming -= 1;
        if state.claiming == 0 {
            state.fences_while_claiming.clear();
        }
    }
}

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing under this lock can panic halfway through a change.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called before asking the store for claims; the answer's claims go through
    /// [`Claiming::add`].
    pub(super) fn claiming(&self) -> Claiming<'_> {
        self.lock().claiming += 1;
        Claiming { held: self }
    }

    /// Holds one claim, as the planner would (tests of what checks claims).
    #[cfg(test)]
    pub(crate) fn hold_for_test(&self, claim: Claim, lease_until: i64) {
        self.claiming().add_keys([claim], lease_until);
    }

    pub(super) fn remove(&self, done: impl IntoIterator<Item = Claim>) {
        let mut state = self.lock();
        for Claim { job_id, token } in done {
            if let Some(claims) = state.jobs.get_mut(&job_id)
                && claims.remove(token)
            {
                state.jobs.remove(&job_id);
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().jobs.is_empty()
    }

    /// How many claims are held: what this node's heartbeat reports.
    pub(crate) fn count(&self) -> u64 {
        self.lock()
            .jobs
            .values()
            .map(|claims| 1 + claims.more.len() as u64)
            .sum()
    }

    /// A pause, cancel or edit of the job (here or on another node) made its claims with a token
    /// below `below` stale: they are no longer this node's to send.
    pub(crate) fn fence(&self, job_id: JobId, below: FencingToken) {
        let mut state = self.lock();
        if let Some(claims) = state.jobs.get_mut(&job_id) {
            claims.fence(below);
        }
        if state.claiming > 0 {
            state.fences_while_claiming.push((job_id, below));
        }
    }

    /// Applies the store's answers to a renewal of `claims`, under one lock: a renewed claim
    /// gets expiry `until_ms`; one the store refused (another node holds the occurrence now, or
    /// an edit fenced it) is marked lost. A lease never comes back, so a lost claim is not renewed
    /// again (a node back from a pause may hold thousands, and renewing them every round would
    /// only load the database), and nothing sends it after. It stays held until the completer has
    /// seen its end, as every claim does. Answers the claims newly found lost (a claim completed
    /// meanwhile is no longer held, and is not among them).
    pub(super) fn renewed(
        &self,
        claims: &[Claim],
        applied: Vec<Applied>,
        until_ms: i64,
    ) -> Vec<Claim> {
        let mut state = self.lock();
        let mut lost = Vec::new();
        for (&claim, result) in claims.iter().zip(applied) {
            let Some(hold) = state
                .jobs
                .get_mut(&claim.job_id)
                .and_then(|c| c.get_mut(claim.token))
            else {
                continue;
            };
            match result {
                Applied::Yes if hold.until != LOST => hold.until = until_ms,
                // Fenced here after the renewal was sent: the fence stands.
                Applied::Yes => {}
                Applied::StaleLease if hold.until != LOST => {
                    hold.until = LOST;
                    lost.push(claim);
                }
                Applied::StaleLease => {}
            }
        }
        lost
    }

    /// The held claims whose lease expiry is at or before `before_ms`, lost ones left out.
    pub(super) fn expiring(&self, before_ms: i64) -> Vec<Claim> {
        let mut state = self.lock();
        let mut due = Vec::new();
        for (&job_id, claims) in &mut state.jobs {
            for hold in claims.iter_mut() {
                if hold.until != LOST && hold.until <= before_ms {
                    due.push(Claim::new(job_id, hold.token));
                }
            }
        }
        due
    }

    /// Whether this node may still send the occurrence it claimed with `claim`: the claim is
    /// held, no fence has voided it, the store did not refuse its renewal, and its lease has not
    /// run out by `now_ms` (a node that was stopped past its leases: another node may hold the
    /// occurrence by now).
    pub(crate) fn still_ours(&self, claim: Claim, now_ms: i64) -> bool {
        self.lock()
            .jobs
            .get_mut(&claim.job_id)
            .and_then(|c| c.get_mut(claim.token))
            .is_some_and(|hold| hold.until > now_ms)
    }
}

/// The lease expiry of a claim that is no longer this node's: fenced by a change to its job, or
/// refused at renewal.
const LOST: i64 = i64::MIN;

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: u128) -> JobId {
        JobId::from_u128(n)
    }

    fn t(token: i64) -> FencingToken {
        FencingToken::from_i64(token)
    }

    fn c(job_id: JobId, token: i64) -> Claim {
        Claim::new(job_id, t(token))
    }

    #[test]
    fn a_fence_voids_the_older_claims_of_its_job_only() {
        let held = Held::default();
        let (a, b) = (job(1), job(2));
        held.claiming().add_keys([c(a, 3), c(b, 3)], 1_000);
        assert!(held.still_ours(c(a, 3), 0));
        held.fence(a, t(4));
        assert!(!held.still_ours(c(a, 3), 0));
        assert!(held.still_ours(c(b, 3), 0));
        // A claim made after the change (a token at or above the fence's) is ours.
        held.claiming().add_keys([c(a, 5)], 1_000);
        assert!(held.still_ours(c(a, 5), 0));
        held.fence(a, t(5));
        assert!(held.still_ours(c(a, 5), 0));
        // The voided claim is not renewed, and a renewal answered after the fence does not
        // revive it.
        let mut expiring = held.expiring(2_000);
        expiring.sort();
        let mut expected = vec![c(a, 5), c(b, 3)];
        expected.sort();
        assert_eq!(expiring, expected);
        held.renewed(&[c(a, 3)], vec![Applied::Yes], 9_000);
        assert!(!held.still_ours(c(a, 3), 0));
        // Removing the claims one by one empties the record.
        held.remove([c(a, 3), c(a, 5), c(b, 3)]);
        assert!(held.is_empty());
    }

    #[test]
    fn a_fence_that_arrives_before_the_claim_it_voids_still_voids_it() {
        let held = Held::default();
        let a = job(1);
        let claiming = held.claiming();
        // The store granted the claim (token 3), then the job was cancelled (token 4) and its
        // fence arrived before the planner recorded the claim.
        held.fence(a, t(4));
        claiming.add_keys([c(a, 3)], 1_000);
        assert!(!held.still_ours(c(a, 3), 0));
        // Once no claim is in flight, earlier fences are not kept.
        held.claiming().add_keys([c(a, 2)], 1_000);
        assert!(held.still_ours(c(a, 2), 0));
    }

    #[test]
    fn a_claim_past_its_lease_or_not_held_is_not_ours() {
        let held = Held::default();
        let a = job(1);
        held.claiming().add_keys([c(a, 3)], 1_000);
        assert!(held.still_ours(c(a, 3), 999));
        assert!(!held.still_ours(c(a, 3), 1_000));
        assert!(!held.still_ours(c(a, 4), 0));
        assert!(!held.still_ours(c(job(2), 3), 0));
    }
}
