//! The `[quotas]` tables of the config file: every namespace's defaults and
//! `[quotas.namespaces.NAME]`, checked and turned into the server's `Quotas`.

use anyhow::bail;
use serde::Deserialize;

/// `[quotas]`: what every namespace may do, unless `[quotas.namespaces.NAME]` says otherwise.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QuotasFile {
    /// Jobs a namespace may create per second on one node.
    creates_per_second: Option<u32>,
    /// Deliveries a namespace may start per second on one node.
    deliveries_per_second: Option<u32>,
    /// Jobs the store may hold for a namespace, in every state.
    max_jobs: Option<u64>,
    #[serde(default)]
    namespaces: std::collections::HashMap<String, NamespaceQuotaFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NamespaceQuotaFile {
    creates_per_second: Option<u32>,
    deliveries_per_second: Option<u32>,
    max_jobs: Option<u64>,
    /// This namespace's own `destination_concurrency`.
    destination_concurrency: Option<usize>,
    /// This namespace's own `namespace_concurrency`.
    namespace_concurrency: Option<usize>,
}

pub(super) fn quotas(file: QuotasFile) -> anyhow::Result<hourglass_server::quotas::Quotas> {
    use hourglass_server::quotas::{NamespaceQuota, Quotas};
    let check = |creates: Option<u32>, deliveries: Option<u32>, max_jobs: Option<u64>, at: &str| {
        for (zero, key) in [
            (creates == Some(0), "creates_per_second"),
            (deliveries == Some(0), "deliveries_per_second"),
            (max_jobs == Some(0), "max_jobs"),
        ] {
            if zero {
                bail!("config {at}.{key} must be at least 1 (leave it out for no quota)");
            }
        }
        Ok(NamespaceQuota {
            creates_per_second: creates,
            deliveries_per_second: deliveries,
            max_jobs,
            destination_concurrency: None,
            namespace_concurrency: None,
        })
    };
    let mut namespaces = std::collections::HashMap::new();
    for (name, q) in file.namespaces {
        let at = format!("quotas.namespaces.{name}");
        let mut quota = check(
            q.creates_per_second,
            q.deliveries_per_second,
            q.max_jobs,
            &at,
        )?;
        if q.destination_concurrency == Some(0) {
            bail!("config {at}.destination_concurrency must be at least 1");
        }
        if q.namespace_concurrency == Some(0) {
            bail!("config {at}.namespace_concurrency must be at least 1");
        }
        quota.destination_concurrency = q.destination_concurrency;
        quota.namespace_concurrency = q.namespace_concurrency;
        namespaces.insert(name, quota);
    }
    Ok(Quotas {
        default: check(
            file.creates_per_second,
            file.deliveries_per_second,
            file.max_jobs,
            "quotas",
        )?,
        namespaces,
    })
}
