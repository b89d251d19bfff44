//! Circuit breakers per namespace and destination: after `breaker_failures` consecutive failed
//! deliveries (no answer, a timeout, a 5xx or a 429) the destination's breaker opens for
//! `breaker_open_for`. While it is open, its occurrences are not sent: they are handed back to
//! the store due when it closes, without counting an attempt, so a receiver that is down costs
//! no retries, no dead letters and no slots. When the time is up, one delivery goes out as a
//! probe; its success closes the breaker, its failure opens it again. An answer that is not a
//! failure (a 2xx, or a 4xx: the receiver is up and has an opinion) closes it at once.
//!
//! A destination nothing is sent to any more is forgotten once it has been idle for
//! [`Breakers::idle_ms`] (at least ten minutes, and twice the open time): tenants choose
//! destinations, and hosts that never answer must not pile up state until a restart.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::Route;

/// How often occurrences that arrive while a probe is out come back to look.
const PROBE_RECHECK_MS: i64 = 2_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Failing, but not yet `threshold` times in a row.
    Closed { failures: u32 },
    /// Nothing goes out until `until`.
    Open { since: i64, until: i64 },
    /// One delivery is out to find out; others come back at `recheck`.
    Probing { since: i64, recheck: i64 },
}

/// What the dispatcher does with an occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    Go,
    /// Hand it back, due at this unix ms.
    Defer(i64),
}

/// Entries past which the map is swept of idle destinations (then at twice what stayed).
const PRUNE_AT: usize = 4096;

pub(crate) struct Breakers {
    /// Consecutive failures that open a breaker; 0 turns breakers off.
    threshold: u32,
    open_ms: i64,
    states: Mutex<States>,
}

/// Only destinations with recent failures: a success removes the entry, and so does idleness.
#[derive(Default)]
struct States {
    /// Each destination's state, and the unix ms it was last consulted or fed.
    by_key: HashMap<Route, (State, i64)>,
    /// The size at which the next sweep runs.
    prune_at: usize,
}

impl Breakers {
    pub(crate) fn new(threshold: u32, open_for: Duration) -> Self {
        Self {
            threshold,
            open_ms: i64::try_from(open_for.as_millis()).unwrap_or(i64::MAX),
            states: Mutex::new(States {
                by_key: HashMap::new(),
                prune_at: PRUNE_AT,
            }),
        }
    }

    /// Each change is one insert or remove, so a poisoned lock is used as it is.
    fn states(&self) -> MutexGuard<'_, States> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long a destination's entry outlives its last use: long enough that an open breaker's
    /// handed-back occurrences return to it (they come back when it closes), and more.
    fn idle_ms(&self) -> i64 {
        self.open_ms.saturating_mul(2).max(10 * 60_000)
    }

    pub(crate) fn admit(&self, key: &Route, now: i64) -> Admit {
        if self.threshold == 0 {
            return Admit::Go;
        }
        let mut states = self.states();
        let Some((state, used)) = states.by_key.get_mut(key) else {
            return Admit::Go;
        };
        *used = now;
        match *state {
            State::Closed { .. } => Admit::Go,
            State::Open { until, .. } | State::Probing { recheck: until, .. } if now < until => {
                Admit::Defer(until)
            }
            // Time to probe (or the last probe's answer is overdue): this one goes.
            State::Open { since, .. } | State::Probing { since, .. } => {
                *state = State::Probing {
                    since,
                    recheck: now.saturating_add(PROBE_RECHECK_MS.min(self.open_ms)),
                };
                Admit::Go
            }
        }
    }

    /// Records how a delivery to `key` ended; answers whether the breaker opened or closed.
    pub(crate) fn record(&self, key: &Route, failed: bool, now: i64) -> bool {
        if self.threshold == 0 {
            return false;
        }
        let mut states = self.states();
        if !failed {
            let was_open = states
                .by_key
                .remove(key)
                .map(|(state, _)| state)
                .is_some_and(|s| !matches!(s, State::Closed { .. }));
            if was_open {
                tracing::info!(
                    namespace = &*key.namespace,
                    destination = key.destination,
                    "breaker closed: the destination answers again"
                );
            }
            return was_open;
        }
        let until = now.saturating_add(self.open_ms);
        let next = match states.by_key.get(key).map(|(state, _)| *state) {
            None => State::Closed { failures: 1 },
            Some(State::Closed { failures }) => State::Closed {
                failures: failures.saturating_add(1),
            },
            Some(State::Open { since, .. } | State::Probing { since, .. }) => {
                State::Open { since, until }
            }
        };
        let (next, opened) = match next {
            State::Closed { failures } if failures >= self.threshold => {
                tracing::warn!(
                    namespace = &*key.namespace,
                    destination = key.destination,
                    failures,
                    open_for_ms = self.open_ms,
                    "breaker opened: deliveries to this destination wait"
                );
                (State::Open { since: now, until }, true)
            }
            other => (other, false),
        };
        if states.by_key.insert(key.clone(), (next, now)).is_none()
            && states.by_key.len() >= states.prune_at
        {
            let idle_since = now.saturating_sub(self.idle_ms());
            states.by_key.retain(|_, (_, used)| *used > idle_since);
            states.prune_at = (states.by_key.len() * 2).max(PRUNE_AT);
        }
        opened
    }

    /// Open breakers (probing included), for metrics.
    pub(crate) fn open(&self) -> usize {
        self.states()
            .by_key
            .values()
            .filter(|(s, _)| !matches!(s, State::Closed { .. }))
            .count()
    }

    /// The destinations of `namespace` whose breaker is open, each with the unix ms it opened
    /// at, oldest first.
    pub(crate) fn open_since(&self, namespace: &str) -> Vec<(String, i64)> {
        let mut open: Vec<(String, i64)> = self
            .states()
            .by_key
            .iter()
            .filter(|(key, _)| &*key.namespace == namespace)
            .filter_map(|(key, (state, _))| match *state {
                State::Open { since, .. } | State::Probing { since, .. } => {
                    Some((key.destination.clone(), since))
                }
                State::Closed { .. } => None,
            })
            .collect();
        open.sort_by_key(|(_, since)| *since);
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(destination: &str) -> Route {
        Route {
            namespace: "ns".into(),
            destination: destination.into(),
        }
    }

    #[test]
    fn opens_after_the_threshold_and_a_probe_closes_it() {
        let b = Breakers::new(3, Duration::from_secs(30));
        let k = &to("https://a:443");
        for t in 0..2 {
            b.record(k, true, t);
            assert_eq!(b.admit(k, t), Admit::Go);
        }
        b.record(k, true, 10);
        assert_eq!(b.admit(k, 11), Admit::Defer(30_010));
        assert_eq!(b.open_since("ns"), vec![("https://a:443".to_string(), 10)]);
        assert!(
            b.open_since("other").is_empty(),
            "another namespace's breakers"
        );
        // Time is up: one probe goes, the others come back to look shortly.
        assert_eq!(b.admit(k, 30_010), Admit::Go);
        assert_eq!(b.admit(k, 30_011), Admit::Defer(32_010));
        b.record(k, false, 30_500);
        assert_eq!(b.admit(k, 30_501), Admit::Go);
        assert_eq!(b.open(), 0);
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_successes_reset_the_count() {
        let b = Breakers::new(2, Duration::from_secs(10));
        let k = &to("k");
        b.record(k, true, 0);
        b.record(k, false, 1);
        b.record(k, true, 2);
        assert_eq!(b.admit(k, 3), Admit::Go, "the success reset the count");
        b.record(k, true, 4);
        assert_eq!(b.admit(k, 5), Admit::Defer(10_004));
        assert_eq!(b.admit(k, 10_004), Admit::Go);
        b.record(k, true, 10_100);
        assert_eq!(b.admit(k, 10_101), Admit::Defer(20_100));
        assert_eq!(
            b.open_since("ns"),
            vec![("k".to_string(), 4)],
            "open since the first opening"
        );
    }

    /// Regression (issue 39): breakers of destinations that never succeed were kept until
    /// restart (+11–16 MB per 30,000 new failing hosts). Idle ones are now swept as new ones come.
    #[test]
    fn idle_destinations_are_forgotten() {
        let b = Breakers::new(3, Duration::from_secs(30));
        let idle = b.idle_ms();
        for i in 0..PRUNE_AT * 3 {
            b.record(&to(&format!("https://h{i}.example:443")), true, 0);
        }
        // One destination keeps failing, and stays open.
        let busy = &to("https://busy.example:443");
        for t in 0..3 {
            b.record(busy, true, idle - 10 + t);
        }
        assert_eq!(b.admit(busy, idle), Admit::Defer(idle - 8 + 30_000));
        for i in 0..PRUNE_AT {
            b.record(&to(&format!("https://new{i}.example:443")), true, idle + 1);
        }
        let left = b.states().by_key.len();
        assert!(left <= PRUNE_AT + 1, "{left} destinations kept");
        assert_eq!(b.admit(busy, idle + 2), Admit::Defer(idle - 8 + 30_000));
        assert_eq!(b.admit(&to("https://h0.example:443"), idle + 2), Admit::Go);
    }

    #[test]
    fn a_threshold_of_zero_turns_breakers_off() {
        let b = Breakers::new(0, Duration::from_secs(10));
        for t in 0..100 {
            b.record(&to("k"), true, t);
        }
        assert_eq!(b.admit(&to("k"), 100), Admit::Go);
    }
}
