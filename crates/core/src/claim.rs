//! Fencing tokens and claims: how a store tells a current claim on a job's occurrence from a
//! stale one.

use std::fmt;

use crate::JobId;

/// A job's fencing token. A store raises it on every claim, edit and lifecycle change of the job,
/// so tokens order those events: a claim whose token is below the job's current one was made
/// before a later change and is stale, and the store refuses what it would write.
///
/// Stores keep it as an integer (a column, an attribute, a field); they convert at their edge
/// with [`FencingToken::from_i64`] and [`FencingToken::as_i64`], and so does a queue receipt,
/// which carries it. Nothing else does arithmetic on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(i64);

impl FencingToken {
    /// The token a store kept as `value`.
    pub const fn from_i64(value: i64) -> Self {
        Self(value)
    }

    /// The integer a store keeps.
    pub const fn as_i64(self) -> i64 {
        self.0
    }

    /// The token right after this one: the lowest that a change made after this token's claim
    /// can carry, so fencing below it voids that claim and nothing later.
    pub const fn next(self) -> Self {
        Self(self.0.saturating_add(1))
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A claim on a job's pending occurrence: the job and the fencing token the claim got. What is
/// written under a claim (a completion, a lease extension, a release) applies only while its
/// token is still the job's current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Claim {
    pub job_id: JobId,
    pub token: FencingToken,
}

impl Claim {
    pub const fn new(job_id: JobId, token: FencingToken) -> Self {
        Self { job_id, token }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_order_as_their_integers_and_print_as_them() {
        let (a, b) = (FencingToken::from_i64(7), FencingToken::from_i64(8));
        assert!(a < b);
        assert_eq!(a.next(), b);
        assert_eq!(b.as_i64(), 8);
        assert_eq!(a.to_string(), "7");
        assert_eq!(
            FencingToken::from_i64(i64::MAX).next(),
            FencingToken::from_i64(i64::MAX)
        );
    }
}
