//! The test harness the crates share, written once: PostgreSQL for tests ([`postgres`]: a schema
//! or a database of a test's own on the server `scripts/with-postgres` provides, and throwaway
//! clusters a test may stop and start), a webhook receiver that records every request
//! ([`receiver`]), and the [`percentile`] the tests' summaries and `hourglass-bench` report.
//!
//! It knows no Hourglass crate (a test turns a [`postgres::Schema`] into its store's options
//! itself), so any crate's tests can use it, the store's included, without a dependency cycle.
//! Nothing shipped depends on it: it is a dev-dependency, and a dependency of `hourglass-bench`
//! for [`percentile`] alone.

pub mod postgres;
pub mod receiver;

pub use receiver::{Delivery, Receiver};

/// Nearest-rank percentile of sorted, non-empty values: the smallest value with at least `q` of
/// the sample at or below it. Panics on an empty slice (a caller says what "no values" means).
pub fn percentile(sorted: &[i64], q: f64) -> i64 {
    assert!(!sorted.is_empty(), "the percentile of no values");
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentile_is_the_nearest_rank() {
        let values: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&values, 0.5), 50);
        assert_eq!(percentile(&values, 0.99), 99);
        assert_eq!(percentile(&values, 0.999), 100);
        assert_eq!(percentile(&values, 0.0), 1);
        assert_eq!(percentile(&values, 1.0), 100);
        assert_eq!(percentile(&[7], 0.5), 7);
        // Few values: p99 of ten is the largest.
        let ten: Vec<i64> = (0..10).collect();
        assert_eq!(percentile(&ten, 0.9), 8);
        assert_eq!(percentile(&ten, 0.99), 9);
    }
}
