//! What every handler shares: the node's [`AppState`] (the engine's door, limits, keys,
//! metrics, connections and body budgets) and the body bound of the small endpoints. A leaf
//! beside the routes: extractors, middleware and handlers read it; it reads none of them.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use hourglass_engine::{Scheduler, Secrets, TargetPolicy};
use prometheus_client::registry::Registry;

use crate::auth::Auth;
use crate::metrics::ApiMetrics;
use crate::wire::{self, Limits};

/// The body of every other endpoint that takes one (queue leases, acks of up to 1,000 receipts,
/// previews, secret rotation).
pub const SMALL_BODY_BYTES: usize = 256 * 1024;

#[derive(Clone)]
pub struct AppState {
    /// Every read and change of jobs, dead letters and queues.
    pub scheduler: Scheduler,
    pub limits: Limits,
    pub policy: TargetPolicy,
    pub auth: Arc<Auth>,
    pub secrets: Secrets,
    pub registry: Arc<Registry>,
    /// False until the node is serving and again once shutdown begins.
    pub ready: Arc<AtomicBool>,
    /// The API's own metrics, in `registry` beside the engine's.
    pub metrics: ApiMetrics,
    /// The bus and cloud connections, with this node's publish counts.
    pub targets: Arc<hourglass_targets::Router>,
    /// Bytes of request bodies held now, against the node's budget and each key's share.
    pub bodies: Arc<crate::budget::Budgets>,
}

impl AppState {
    /// What a target in `namespace` is checked against.
    pub fn target_rules<'a>(&'a self, namespace: &'a str) -> wire::TargetRules<'a> {
        wire::TargetRules {
            policy: &self.policy,
            connections: self.targets.connections(),
            namespace,
        }
    }
}
