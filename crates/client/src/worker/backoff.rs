//! Capped exponential backoff with equal jitter, for retrying a node that is unavailable.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            failures: 0,
        }
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// The wait before the next try: `Retry-After` when the node sent one (capped at `max`),
    /// else between half and all of `initial · 2^failures`, capped at `max`. The jitter keeps a
    /// fleet of workers from returning to a recovering node in step.
    pub fn next(&mut self, retry_after: Option<Duration>) -> Duration {
        let exponent = self.failures.min(20);
        self.failures = self.failures.saturating_add(1);
        if let Some(wait) = retry_after {
            return wait.min(self.max);
        }
        let ceiling = self.initial.saturating_mul(1 << exponent).min(self.max);
        let half = ceiling / 2;
        half + half.mul_f64(random_fraction())
    }
}

/// A number in [0, 1) from the standard library's randomly keyed hasher: jitter needs no more
/// than that, and it spares a dependency.
fn random_fraction() -> f64 {
    let bits = RandomState::new().build_hasher().finish() >> 11;
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_within_bounds_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let waits: Vec<Duration> = (0..8).map(|_| backoff.next(None)).collect();
        assert!(waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100));
        assert!(waits[2] >= Duration::from_millis(200) && waits[2] <= Duration::from_millis(400));
        for wait in &waits {
            assert!(*wait <= Duration::from_secs(1), "{wait:?} beyond the cap");
        }
        assert!(waits[7] >= Duration::from_millis(500));
        backoff.reset();
        assert!(backoff.next(None) <= Duration::from_millis(100));
    }

    #[test]
    fn honours_retry_after_up_to_the_cap() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
        assert_eq!(
            backoff.next(Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            backoff.next(Some(Duration::from_secs(60))),
            Duration::from_secs(10)
        );
    }
}
