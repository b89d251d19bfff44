//! Per-namespace quotas the operator sets: how many jobs a namespace may create per second on
//! this node. Past its quota a create answers `429 rate_limited` with `Retry-After` and changes
//! nothing, so one tenant's flood of creates cannot take the store's write capacity from the
//! others.
//!
//! Each namespace with a quota has a token bucket holding up to one second of its rate. A request
//! is admitted while the bucket is above zero and takes one token per job, going into debt for a
//! batch larger than what is left; later requests wait until the debt is paid back at the
//! namespace's rate. So a batch is never refused for its size alone, and the long-run rate never
//! exceeds the quota.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hourglass_engine::Scheduler;
use tokio::time::Instant;

use crate::error::{ApiError, ErrorCode};

/// A namespace's quotas; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamespaceQuota {
    pub creates_per_second: Option<u32>,
    pub deliveries_per_second: Option<u32>,
    /// Jobs the store may hold for the namespace, in every state (finished ones count until
    /// retention deletes them).
    pub max_jobs: Option<u64>,
    /// The namespace's own cap on deliveries at once to one destination, in place of the node's
    /// `destination_concurrency` (used per namespace only, not as a default).
    pub destination_concurrency: Option<usize>,
    /// The namespace's own cap on the node's delivery slots, in place of the node's
    /// `namespace_concurrency` (used per namespace only, not as a default).
    pub namespace_concurrency: Option<usize>,
}

/// The operator's quotas: a default for every namespace, and namespaces of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotas {
    pub default: NamespaceQuota,
    pub namespaces: HashMap<String, NamespaceQuota>,
}

impl Quotas {
    /// The namespaces with a destination cap of their own, as the engine takes them.
    pub fn destination_caps(&self) -> HashMap<String, usize> {
        self.namespaces
            .iter()
            .filter_map(|(name, q)| q.destination_concurrency.map(|cap| (name.clone(), cap)))
            .collect()
    }

    /// The namespaces with a share of the delivery slots of their own, and that share.
    pub fn namespace_caps(&self) -> HashMap<String, usize> {
        self.namespaces
            .iter()
            .filter_map(|(name, q)| q.namespace_concurrency.map(|cap| (name.clone(), cap)))
            .collect()
    }

    /// The delivery quotas, as the engine takes them.
    pub fn deliveries(&self) -> hourglass_engine::DeliveryQuotas {
        hourglass_engine::DeliveryQuotas {
            default: self.default.deliveries_per_second,
            namespaces: self
                .namespaces
                .iter()
                .filter_map(|(name, q)| {
                    q.deliveries_per_second
                        .or(self.default.deliveries_per_second)
                        .map(|rate| (name.clone(), rate))
                })
                .collect(),
        }
    }

    fn for_namespace(&self, namespace: &str) -> NamespaceQuota {
        self.namespaces
            .get(namespace)
            .copied()
            .unwrap_or(self.default)
    }
}

/// How long a namespace's stored-job count is trusted before it is counted again (creates on
/// this node are added meanwhile; creates on other nodes show at the next count).
const JOB_COUNT_TTL: Duration = Duration::from_secs(5);

/// The stored-jobs quota: each namespace's count, as last read from the store plus this node's
/// creates since.
pub struct JobsLimiter {
    quotas: Quotas,
    counts: Mutex<HashMap<String, (u64, Instant)>>,
}

impl JobsLimiter {
    pub fn new(quotas: Quotas) -> Self {
        Self {
            quotas,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// A count is rewritten whole, so a poisoned lock is used as it is.
    fn counts(&self) -> MutexGuard<'_, HashMap<String, (u64, Instant)>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits `jobs` new jobs in `namespace` if it stays within its `max_jobs`, or answers
    /// `429 quota_exceeded`. The count comes from the store at most every few seconds.
    pub async fn admit(
        &self,
        scheduler: &Scheduler,
        namespace: &str,
        jobs: usize,
    ) -> Result<(), ApiError> {
        let Some(max) = self.quotas.for_namespace(namespace).max_jobs else {
            return Ok(());
        };
        let now = Instant::now();
        let fresh = self
            .counts()
            .get(namespace)
            .filter(|(_, at)| now.saturating_duration_since(*at) < JOB_COUNT_TTL)
            .is_some();
        if !fresh {
            let stored = scheduler.count(namespace).await?;
            self.counts().insert(namespace.to_string(), (stored, now));
        }
        let mut counts = self.counts();
        let entry = counts.entry(namespace.to_string()).or_insert((0, now));
        let after = entry.0.saturating_add(jobs as u64);
        if after > max {
            let mut e = ApiError::new(
                ErrorCode::QuotaExceeded,
                format!(
                    "namespace {namespace:?} may hold {max} jobs and holds {}; this request would add {jobs}. Finished jobs count until retention deletes them",
                    entry.0
                ),
            );
            e.retry_after = Some(JOB_COUNT_TTL.as_secs());
            return Err(e);
        }
        entry.0 = after;
        Ok(())
    }
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// The create quota's buckets, one per namespace that has created something.
pub struct CreateLimiter {
    quotas: Quotas,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl CreateLimiter {
    pub fn new(quotas: Quotas) -> Self {
        Self {
            quotas,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// A bucket is rewritten whole, so a poisoned lock is used as it is.
    fn buckets(&self) -> MutexGuard<'_, HashMap<String, Bucket>> {
        self.buckets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits `jobs` creates in `namespace`, or answers `429 rate_limited` with how many
    /// seconds to wait.
    pub fn admit(&self, namespace: &str, jobs: usize) -> Result<(), ApiError> {
        let Some(rate) = self.quotas.for_namespace(namespace).creates_per_second else {
            return Ok(());
        };
        let rate = f64::from(rate.max(1));
        let now = Instant::now();
        let mut buckets = self.buckets();
        let bucket = buckets.entry(namespace.to_string()).or_insert(Bucket {
            tokens: rate,
            refilled: now,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.refilled = now;
        if bucket.tokens <= 0.0 {
            let wait = ((-bucket.tokens / rate).ceil() as u64).max(1);
            let mut e = ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "namespace {namespace:?} may create {rate} jobs a second on this node; retry in {wait} s"
                ),
            );
            e.retry_after = Some(wait);
            return Err(e);
        }
        bucket.tokens -= jobs as f64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(rate: u32) -> CreateLimiter {
        CreateLimiter::new(Quotas {
            default: NamespaceQuota::default(),
            namespaces: HashMap::from([(
                "acme".to_string(),
                NamespaceQuota {
                    creates_per_second: Some(rate),
                    deliveries_per_second: None,
                    max_jobs: None,
                    destination_concurrency: None,
                    namespace_concurrency: None,
                },
            )]),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_namespace_over_its_quota_waits_and_others_do_not() {
        let l = limiter(10);
        l.admit("acme", 25).expect("a large batch goes into debt");
        let e = l.admit("acme", 1).expect_err("in debt");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert_eq!(e.retry_after, Some(2), "15 tokens short at 10 a second");
        for _ in 0..100 {
            l.admit("globex", 1000).expect("no quota");
        }
        tokio::time::advance(std::time::Duration::from_millis(1600)).await;
        l.admit("acme", 1).expect("the debt is paid back");
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_applies_to_namespaces_without_their_own() {
        let l = CreateLimiter::new(Quotas {
            default: NamespaceQuota {
                creates_per_second: Some(1),
                deliveries_per_second: None,
                max_jobs: None,
                destination_concurrency: None,
                namespace_concurrency: None,
            },
            namespaces: HashMap::new(),
        });
        l.admit("any", 1).unwrap();
        assert!(l.admit("any", 1).is_err());
        assert!(l.admit("other", 1).is_ok());
    }
}
