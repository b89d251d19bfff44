//! The operator's policy per namespace, owned by the engine in one shape: how many jobs a
//! namespace may create a second and hold, how many deliveries it may start a second, and its own
//! delivery caps. A namespace's own entry overrides the default field by field. The API asks
//! [`crate::Scheduler::admit_creates`] and [`crate::Scheduler::admit_stored`] before it creates;
//! the dispatcher reads the delivery rate and caps. Rates are kept per node.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::pipeline::rates::Rates;

/// A namespace's quotas; `None` is unlimited (or, for the caps, the node's setting).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamespaceQuota {
    pub creates_per_second: Option<u32>,
    pub deliveries_per_second: Option<u32>,
    /// Jobs the store may hold for the namespace, in every state (finished ones count until
    /// retention deletes them).
    pub max_jobs: Option<u64>,
    /// The namespace's own cap on deliveries at once to one destination, in place of the node's
    /// `destination_concurrency` / `connection_concurrency`.
    pub destination_concurrency: Option<usize>,
    /// The namespace's own cap on the node's delivery slots, in place of the node's
    /// `namespace_concurrency`.
    pub namespace_concurrency: Option<usize>,
}

impl NamespaceQuota {
    /// These quotas, with `default`'s wherever these set none.
    fn or(self, default: Self) -> Self {
        Self {
            creates_per_second: self.creates_per_second.or(default.creates_per_second),
            deliveries_per_second: self.deliveries_per_second.or(default.deliveries_per_second),
            max_jobs: self.max_jobs.or(default.max_jobs),
            destination_concurrency: self
                .destination_concurrency
                .or(default.destination_concurrency),
            namespace_concurrency: self.namespace_concurrency.or(default.namespace_concurrency),
        }
    }
}

/// The operator's quotas: a default for every namespace, and namespaces of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotas {
    pub default: NamespaceQuota,
    pub namespaces: HashMap<String, NamespaceQuota>,
}

impl Quotas {
    /// What `namespace` may do: its own entry, the default for every field it leaves out.
    pub fn of(&self, namespace: &str) -> NamespaceQuota {
        match self.namespaces.get(namespace) {
            Some(own) => own.or(self.default),
            None => self.default,
        }
    }

    /// Whether any namespace has a delivery rate (so the dispatcher can skip the lock otherwise).
    pub(crate) fn any_delivery_rate(&self) -> bool {
        self.default.deliveries_per_second.is_some()
            || self
                .namespaces
                .values()
                .any(|q| q.deliveries_per_second.is_some())
    }

    /// The namespaces with a share of the delivery slots of their own, and that share.
    pub(crate) fn namespace_caps(&self) -> HashMap<String, usize> {
        self.namespaces
            .keys()
            .filter_map(|name| Some((name.clone(), self.of(name).namespace_concurrency?)))
            .collect()
    }
}

/// Why a create was refused: the namespace is past a quota. Nothing was taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaRefusal {
    /// Past `creates_per_second` on this node.
    Rate { rate: u32, retry_after: Duration },
    /// The request's `adding` jobs would take the namespace past `max_jobs`; it holds `held`.
    Stored {
        max: u64,
        held: u64,
        adding: usize,
        retry_after: Duration,
    },
}

/// How long a namespace's stored-job count is trusted before it is counted again (creates on
/// this node are added meanwhile; creates on other nodes show at the next count).
pub(crate) const JOB_COUNT_TTL: Duration = Duration::from_secs(5);

/// The create side of the quotas: each namespace's create rate and stored-job count.
#[derive(Default)]
pub(crate) struct Admission {
    pub(crate) quotas: Quotas,
    creates: Rates<String>,
    /// Per namespace with `max_jobs`: its count, as last read from the store plus this node's
    /// creates since, and when it was read.
    counts: Mutex<HashMap<String, (u64, Instant)>>,
}

impl Admission {
    pub(crate) fn new(quotas: Quotas) -> Self {
        Self {
            quotas,
            ..Self::default()
        }
    }

    /// Admits `jobs` creates in `namespace` under its `creates_per_second`.
    pub(crate) fn creates(&self, namespace: &str, jobs: usize) -> Result<(), QuotaRefusal> {
        let Some(rate) = self.quotas.of(namespace).creates_per_second else {
            return Ok(());
        };
        let jobs = u32::try_from(jobs).unwrap_or(u32::MAX);
        self.creates
            .admit(namespace, rate, jobs, Instant::now())
            .map_err(|wait| QuotaRefusal::Rate {
                rate: rate.max(1),
                retry_after: wait,
            })
    }

    /// Whether `namespace`'s count must be read from the store before [`Admission::stored`].
    pub(crate) fn needs_count(&self, namespace: &str) -> bool {
        self.quotas.of(namespace).max_jobs.is_some()
            && !self.counts().get(namespace).is_some_and(|(_, at)| {
                Instant::now().saturating_duration_since(*at) < JOB_COUNT_TTL
            })
    }

    /// The store's count of `namespace`'s jobs, read now.
    pub(crate) fn counted(&self, namespace: &str, stored: u64) {
        self.counts()
            .insert(namespace.to_string(), (stored, Instant::now()));
    }

    /// Admits `jobs` new jobs in `namespace` if it stays within its `max_jobs`.
    pub(crate) fn stored(&self, namespace: &str, jobs: usize) -> Result<(), QuotaRefusal> {
        let Some(max) = self.quotas.of(namespace).max_jobs else {
            return Ok(());
        };
        let mut counts = self.counts();
        let entry = counts
            .entry(namespace.to_string())
            .or_insert((0, Instant::now()));
        let after = entry.0.saturating_add(jobs as u64);
        if after > max {
            return Err(QuotaRefusal::Stored {
                max,
                held: entry.0,
                adding: jobs,
                retry_after: JOB_COUNT_TTL,
            });
        }
        entry.0 = after;
        Ok(())
    }

    /// A count is rewritten whole, so a poisoned lock is used as it is.
    fn counts(&self) -> MutexGuard<'_, HashMap<String, (u64, Instant)>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaces_own_entry_keeps_the_defaults_it_does_not_override() {
        let quotas = Quotas {
            default: NamespaceQuota {
                creates_per_second: Some(10),
                max_jobs: Some(1000),
                deliveries_per_second: Some(50),
                ..NamespaceQuota::default()
            },
            namespaces: HashMap::from([(
                "acme".to_string(),
                NamespaceQuota {
                    destination_concurrency: Some(8),
                    deliveries_per_second: Some(5),
                    ..NamespaceQuota::default()
                },
            )]),
        };
        let acme = quotas.of("acme");
        assert_eq!(acme.creates_per_second, Some(10));
        assert_eq!(acme.max_jobs, Some(1000));
        assert_eq!(acme.deliveries_per_second, Some(5));
        assert_eq!(acme.destination_concurrency, Some(8));
        assert_eq!(quotas.of("globex"), quotas.default);
    }

    #[tokio::test(start_paused = true)]
    async fn a_namespace_with_a_cap_of_its_own_is_still_held_to_the_default_create_rate() {
        let admission = Admission::new(Quotas {
            default: NamespaceQuota {
                creates_per_second: Some(2),
                ..NamespaceQuota::default()
            },
            namespaces: HashMap::from([(
                "acme".to_string(),
                NamespaceQuota {
                    namespace_concurrency: Some(4),
                    ..NamespaceQuota::default()
                },
            )]),
        });
        assert_eq!(admission.creates("acme", 1), Ok(()));
        assert_eq!(admission.creates("acme", 1), Ok(()));
        assert!(matches!(
            admission.creates("acme", 1),
            Err(QuotaRefusal::Rate { rate: 2, .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn stored_jobs_are_counted_from_the_store_then_by_this_nodes_creates() {
        let admission = Admission::new(Quotas {
            default: NamespaceQuota {
                max_jobs: Some(3),
                ..NamespaceQuota::default()
            },
            namespaces: HashMap::new(),
        });
        assert!(admission.needs_count("acme"));
        admission.counted("acme", 1);
        assert!(!admission.needs_count("acme"));
        assert_eq!(admission.stored("acme", 2), Ok(()));
        assert_eq!(
            admission.stored("acme", 1),
            Err(QuotaRefusal::Stored {
                max: 3,
                held: 3,
                adding: 1,
                retry_after: JOB_COUNT_TTL
            })
        );
        tokio::time::advance(JOB_COUNT_TTL).await;
        assert!(admission.needs_count("acme"), "counted again after the TTL");
    }
}
