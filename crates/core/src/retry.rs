//! Retry policy: exponential backoff with jitter, bounded attempts.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::schedule::serde_duration_ms;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Total attempts per occurrence, the first one included. After the last failed attempt the
    /// occurrence is dead-lettered.
    pub max_attempts: u32,
    /// The backoff before the second attempt; it doubles per attempt up to `max_backoff`.
    #[serde(with = "serde_duration_ms")]
    pub initial_backoff: Duration,
    #[serde(with = "serde_duration_ms")]
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(15 * 60),
        }
    }
}

/// An upper bound on a server's Retry-After that we honour, so a broken receiver cannot park an
/// occurrence for years.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

impl RetryPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// True when `attempt` (1-based) was the last one allowed.
    pub fn exhausted(&self, attempt: u32) -> bool {
        attempt >= self.max_attempts
    }

    /// The wait after failed attempt number `attempt` (1-based). `jitter` in [0, 1) picks a point
    /// in the upper half of the exponential step ("equal jitter"): retries of many occurrences that
    /// failed together spread out, yet no wait is shorter than half the nominal backoff.
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(62);
        let nominal = self
            .initial_backoff
            .checked_mul(1u32 << exp.min(31))
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff);
        let half = nominal / 2;
        // `mul_f64` panics on NaN; a jitter that is not a number counts as none.
        let jitter = if jitter.is_nan() {
            0.0
        } else {
            jitter.clamp(0.0, 1.0)
        };
        // Float rounding may land a hair above the nominal step; never above it.
        (half + half.mul_f64(jitter)).min(nominal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let p = RetryPolicy {
            max_attempts: 20,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        };
        assert_eq!(p.backoff(1, 1.0), Duration::from_secs(1));
        assert_eq!(p.backoff(2, 1.0), Duration::from_secs(2));
        assert_eq!(p.backoff(3, 0.0), Duration::from_secs(2));
        assert_eq!(p.backoff(10, 1.0), Duration::from_secs(60));
        assert_eq!(p.backoff(500, 1.0), Duration::from_secs(60));
    }

    proptest! {
        #[test]
        fn backoff_is_bounded_and_monotone_in_nominal(
            attempt in 1u32..100,
            jitter in 0.0f64..1.0,
            initial_ms in 1u64..10_000,
            max_ms in 1u64..10_000_000,
        ) {
            let p = RetryPolicy {
                max_attempts: 100,
                initial_backoff: Duration::from_millis(initial_ms),
                max_backoff: Duration::from_millis(max_ms.max(initial_ms)),
            };
            let d = p.backoff(attempt, jitter);
            prop_assert!(d <= p.max_backoff);
            prop_assert!(d >= p.backoff(attempt, 0.0));
            // The lower edge never shrinks as attempts grow.
            prop_assert!(p.backoff(attempt + 1, 0.0) >= p.backoff(attempt, 0.0));
        }
    }
}
