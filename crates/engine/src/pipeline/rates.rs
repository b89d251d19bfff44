//! One rate primitive for every rate the node keeps: a namespace's creates (refused past its
//! quota with how long to wait: [`Rates::admit`]), its deliveries and a webhook target's
//! `rate_limit` (waiting for a reserved start: [`Rates::reserve`]). Each allows a burst of one
//! second's worth; past it, a delivery waits its turn (in the order it came due) and a create is
//! refused; nobody else is affected.
//!
//! A generic cell rate algorithm: one theoretical arrival time per key, moved on by `1 / rate`
//! per event, so waiting deliveries never race each other for tokens and a wait is known at
//! once. A create is admitted while the key's budget holds any part of an event, and a batch of
//! them goes into debt, paid back before the key's next: a batch is never refused for its size
//! alone, and the long-run rate never exceeds the quota.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Entries past which the map is swept of keys whose budget is full again.
const PRUNE_AT: usize = 4096;

/// Budgets by key `K` (a namespace's name, a [`Route`](super::Route)).
pub(crate) struct Rates<K> {
    /// Per key: when the next event would start at the steady rate.
    next: Mutex<HashMap<K, Instant>>,
}

impl<K> Default for Rates<K> {
    fn default() -> Self {
        Self {
            next: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq> Rates<K> {
    /// One instant per key, each write whole: a poisoned lock is used as it is.
    fn next(&self) -> MutexGuard<'_, HashMap<K, Instant>> {
        self.next.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves a start for one event under `key`'s budget of `rate` a second: how long it must
    /// wait first (zero to go now). Events of one key with different rates each count at their
    /// own.
    pub(crate) fn reserve<Q>(&self, key: &Q, rate: u32, now: Instant) -> Duration
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.take(key, rate, 1, now, true) {
            Ok(wait) | Err(wait) => wait,
        }
    }

    /// Takes `events` now under `key`'s budget of `rate` a second while the budget holds any
    /// part of an event (as a token bucket admits while it is above zero), or answers how long
    /// until it does, taking nothing.
    pub(crate) fn admit<Q>(
        &self,
        key: &Q,
        rate: u32,
        events: u32,
        now: Instant,
    ) -> Result<(), Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.take(key, rate, events, now, false).map(drop)
    }

    fn take<Q>(
        &self,
        key: &Q,
        rate: u32,
        events: u32,
        now: Instant,
        queue: bool,
    ) -> Result<Duration, Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let rate = rate.max(1);
        let interval = Duration::from_secs(1) / rate;
        // A burst of one second's worth: `rate` events may start at once.
        let tolerance = interval * (rate - 1);
        let mut next = self.next();
        // An entry in the past is a full burst again, the same as no entry: drop them when the
        // map grows, so keys that tenants choose (destinations) cannot pile up.
        if next.len() >= PRUNE_AT {
            next.retain(|_, t| *t > now);
        }
        let theoretical = next.get(key).copied().map_or(now, |t| t.max(now));
        let allowed_at = theoretical.checked_sub(tolerance).unwrap_or(now);
        let wait = allowed_at.saturating_duration_since(now);
        if !queue && wait >= interval {
            return Err(wait - interval);
        }
        next.insert(
            key.to_owned(),
            theoretical + interval.saturating_mul(events.max(1)),
        );
        Ok(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_burst_one_second_then_wait_for_the_steady_rate() {
        let rates = Rates::<String>::default();
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..15).map(|_| rates.reserve("acme", 10, t0)).collect();
        assert!(waits[..10].iter().all(|w| w.is_zero()), "{waits:?}");
        assert_eq!(waits[10], Duration::from_millis(100));
        assert_eq!(waits[14], Duration::from_millis(500));
        assert!(
            rates.reserve("globex", 10, t0).is_zero(),
            "a key of its own"
        );
        // Idle for a while: the burst is available again.
        let later = t0 + Duration::from_secs(5);
        assert!(rates.reserve("acme", 10, later).is_zero());
    }

    #[test]
    fn creates_are_refused_past_the_burst_and_a_batch_is_paid_back_first() {
        let rates = Rates::<String>::default();
        let t0 = Instant::now();
        for _ in 0..10 {
            assert_eq!(rates.admit("acme", 10, 1, t0), Ok(()));
        }
        // The eleventh of the second is refused and takes nothing; a moment later the budget
        // holds part of an event again.
        assert!(rates.admit("acme", 10, 1, t0).is_err());
        assert!(rates.admit("acme", 10, 1, t0).is_err());
        assert_eq!(
            rates.admit("acme", 10, 1, t0 + Duration::from_millis(1)),
            Ok(())
        );
        // A batch larger than the burst is admitted, then paid back before the next create.
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(rates.admit("acme", 10, 50, t1), Ok(()));
        let refused = rates.admit("acme", 10, 1, t1 + Duration::from_secs(1));
        assert_eq!(refused, Err(Duration::from_secs(3)));
        assert!(
            rates
                .admit("acme", 10, 1, t1 + Duration::from_secs(4))
                .is_err()
        );
        assert_eq!(
            rates.admit("acme", 10, 1, t1 + Duration::from_millis(4001)),
            Ok(())
        );
    }
}
