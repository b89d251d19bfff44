//! Delivery rates: the operator's quota per namespace (at most `deliveries_per_second`
//! deliveries a second start for a namespace on this node), and a webhook target's `rate_limit`
//! (at most that many a second from a namespace to the target's destination, for a receiver with
//! limits of its own). Each allows a burst of one second's worth. Past it, occurrences wait their
//! turn (in the order they came due) instead of going out; nobody else is affected.
//!
//! Each delivery reserves its start time (a generic cell rate algorithm: one theoretical arrival
//! time per namespace, moved on by `1 / rate` per delivery), so waiting deliveries never race
//! each other for tokens, and the wait is known at once.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Delivery quotas per namespace; `None` is unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryQuotas {
    pub default: Option<u32>,
    pub namespaces: HashMap<String, u32>,
}

impl DeliveryQuotas {
    fn rate(&self, namespace: &str) -> Option<u32> {
        self.namespaces.get(namespace).copied().or(self.default)
    }
}

/// Entries past which the map is swept of budgets that are full again.
const PRUNE_AT: usize = 4096;

pub(crate) struct DeliveryRates {
    quotas: DeliveryQuotas,
    /// Per namespace with a quota, and per namespace and destination with a rate limit: when the
    /// next delivery would start at the steady rate.
    next: Mutex<HashMap<String, Instant>>,
}

impl DeliveryRates {
    pub(crate) fn new(quotas: DeliveryQuotas) -> Self {
        Self {
            quotas,
            next: Mutex::new(HashMap::new()),
        }
    }

    /// One instant per namespace, each write whole: a poisoned lock is used as it is.
    fn next(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.next.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves a start for one delivery of `namespace`: how long it must wait first (zero to
    /// go now).
    pub(crate) fn reserve(&self, namespace: &str, now: Instant) -> Duration {
        match self.quotas.rate(namespace) {
            Some(rate) => self.reserve_at(namespace, rate, now),
            None => Duration::ZERO,
        }
    }

    /// Reserves a start for one delivery under `key`'s budget of `rate` a second (deliveries of
    /// one key with different rates each count at their own).
    pub(crate) fn reserve_at(&self, key: &str, rate: u32, now: Instant) -> Duration {
        let rate = rate.max(1);
        let interval = Duration::from_secs(1) / rate;
        // A burst of one second's worth: `rate` deliveries may start at once.
        let tolerance = interval * (rate - 1);
        let mut next = self.next();
        // An entry in the past is a full burst again, the same as no entry: drop them when the
        // map grows, so keys that tenants choose (destinations) cannot pile up.
        if next.len() >= PRUNE_AT {
            next.retain(|_, t| *t > now);
        }
        let theoretical = next.get(key).copied().map_or(now, |t| t.max(now));
        let allowed_at = theoretical.checked_sub(tolerance).unwrap_or(now);
        next.insert(key.to_string(), theoretical + interval);
        allowed_at.saturating_duration_since(now)
    }

    /// Whether any namespace has a quota (so the dispatcher can skip the lock otherwise).
    pub(crate) fn any_quota(&self) -> bool {
        self.quotas.default.is_some() || !self.quotas.namespaces.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_one_second_then_the_steady_rate() {
        let rates = DeliveryRates::new(DeliveryQuotas {
            default: None,
            namespaces: HashMap::from([("acme".to_string(), 10)]),
        });
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..15).map(|_| rates.reserve("acme", t0)).collect();
        assert!(waits[..10].iter().all(|w| w.is_zero()), "{waits:?}");
        assert_eq!(waits[10], Duration::from_millis(100));
        assert_eq!(waits[14], Duration::from_millis(500));
        assert!(rates.reserve("globex", t0).is_zero(), "no quota");
        // Idle for a while: the burst is available again.
        let later = t0 + Duration::from_secs(5);
        assert!(rates.reserve("acme", later).is_zero());
    }
}
