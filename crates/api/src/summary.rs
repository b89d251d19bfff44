//! `GET /v1/summary`: the figures the dashboard charts, read from the node's own counters and
//! the store's sampled figures instead of scraped from `/metrics`. Node-wide and store-wide
//! (every namespace's), so an admin's. Keys sorted, as the answer was first written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "The figures the dashboard charts: this node's, and the whole store's.")
)]
pub struct Summary {
    pub node: NodeFigures,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::SummaryStore))]
    pub store: StoreFigures,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        as = SummaryNode,
        description = "This node's figures since it started (each node counts its own).",
    )
)]
pub struct NodeFigures {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::DeliveryCounts))]
    pub deliveries: BTreeMap<String, u64>,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::LatenessFigures))]
    pub fire_lateness: Lateness,
    /// Occurrences this node has claimed and not yet completed.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub in_flight: i64,
    /// Claimed occurrences waiting in this node's timer for their due instant.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub timer_queue: i64,
}

/// A histogram of seconds late; the implicit `+Inf` bucket is `count`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Cumulative, by upper bound, as Prometheus buckets are.
    pub buckets: Vec<LatenessBucket>,
    pub count: u64,
    pub sum_seconds: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatenessBucket {
    /// Observations at or under `le`.
    pub count: u64,
    /// The bucket's upper bound, in seconds.
    pub le: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreFigures {
    /// Occurrences due and not yet claimed.
    pub due_backlog: i64,
    /// How long the oldest of them has been due.
    pub due_backlog_age_seconds: f64,
    /// Jobs by state.
    pub jobs: BTreeMap<String, i64>,
    pub queue_messages: QueueFigures,
}

/// Queue messages by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFigures {
    pub available: i64,
    pub in_flight: i64,
    pub scheduled: i64,
}
