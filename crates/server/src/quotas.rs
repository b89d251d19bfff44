//! The operator's per-namespace quotas at the API. The policy and its counting are the engine's
//! (`hourglass_engine::Quotas`, one shape for creates, stored jobs and deliveries); here a create
//! asks it first and a refusal becomes the answer: `429 rate_limited` past `creates_per_second`,
//! `429 quota_exceeded` past `max_jobs`, each with `Retry-After`, and nothing of the request
//! stored. So one tenant's flood of creates cannot take the store's write capacity from the others.

pub use hourglass_engine::{NamespaceQuota, Quotas};
use hourglass_engine::{QuotaRefusal, Scheduler};

use crate::error::{ApiError, ErrorCode};

/// Admits `jobs` creates in `namespace`: its create rate first, then its stored-jobs quota.
pub async fn admit(scheduler: &Scheduler, namespace: &str, jobs: usize) -> Result<(), ApiError> {
    scheduler
        .admit_creates(namespace, jobs)
        .map_err(|r| refusal(namespace, r))?;
    scheduler
        .admit_stored(namespace, jobs)
        .await?
        .map_err(|r| refusal(namespace, r))
}

/// The 429 for a refused create.
fn refusal(namespace: &str, refused: QuotaRefusal) -> ApiError {
    let (mut e, wait) = match refused {
        QuotaRefusal::Rate { rate, retry_after } => {
            let wait = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            let message = format!(
                "namespace {namespace:?} may create {rate} jobs a second on this node; retry in {wait} s"
            );
            (ApiError::new(ErrorCode::RateLimited, message), wait)
        }
        QuotaRefusal::Stored {
            max,
            held,
            adding,
            retry_after,
        } => {
            let message = format!(
                "namespace {namespace:?} may hold {max} jobs and holds {held}; this request would add {adding}. Finished jobs count until retention deletes them"
            );
            (
                ApiError::new(ErrorCode::QuotaExceeded, message),
                retry_after.as_secs().max(1),
            )
        }
    };
    e.retry_after = Some(wait);
    e
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_rate_refusal_says_when_to_retry_in_whole_seconds() {
        let e = refusal(
            "acme",
            QuotaRefusal::Rate {
                rate: 10,
                retry_after: Duration::from_millis(1600),
            },
        );
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert_eq!(e.retry_after, Some(2));
        assert_eq!(
            e.message,
            "namespace \"acme\" may create 10 jobs a second on this node; retry in 2 s"
        );
        let soon = refusal(
            "acme",
            QuotaRefusal::Rate {
                rate: 1000,
                retry_after: Duration::from_millis(1),
            },
        );
        assert_eq!(soon.retry_after, Some(1), "never less than a second");
    }

    #[test]
    fn a_stored_jobs_refusal_names_the_quota_and_the_count() {
        let e = refusal(
            "acme",
            QuotaRefusal::Stored {
                max: 3,
                held: 3,
                adding: 2,
                retry_after: Duration::from_secs(5),
            },
        );
        assert_eq!(e.code, ErrorCode::QuotaExceeded);
        assert_eq!(e.retry_after, Some(5));
        assert!(
            e.message.contains("may hold 3 jobs and holds 3"),
            "{}",
            e.message
        );
    }
}
