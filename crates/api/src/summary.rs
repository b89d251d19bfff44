//! `GET /v1/summary`: the figures the dashboard charts, read from the node's own counters and
//! the store's sampled figures instead of scraped from `/metrics`. Node-wide and store-wide
//! (every namespace's), so an admin's. Keys sorted, as the answer was first written.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// This node, since it started.
    pub node: NodeFigures,
    /// The whole store, sampled at most every `store_figures_ttl`.
    pub store: StoreFigures,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFigures {
    /// Finished delivery attempts by outcome (`delivered`, `retry`, `dead`, ...).
    pub deliveries: BTreeMap<String, u64>,
    /// How late occurrences were sent, as a histogram.
    pub fire_lateness: Lateness,
    /// Occurrences claimed and not yet completed.
    pub in_flight: i64,
    /// Occurrences waiting in the timer for their due time.
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
