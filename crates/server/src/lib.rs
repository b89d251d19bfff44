//! The Hourglass node as a library: the HTTP/JSON API and the assembly of store, engine and API
//! into a running node.
//!
//! Architecture Invariant: only this crate knows HTTP routes and turns the API's shapes (the
//! `hourglass-api` contract: requests, answers, error codes) into core drafts and back. The engine
//! and store are reached through their own types.

pub mod api;
pub mod auth;
pub mod budget;
pub mod dashboard;
pub mod error;
mod extract;
mod guard;
pub mod metrics;
pub mod node;
mod pages;
pub mod queues;
pub mod quotas;
mod respond;
pub mod routes;
pub mod serve;
pub mod state;
pub mod wire;

pub use node::{
    ApiOnly, Node, NodeConfig, SHARED_LEASE_TTL, StartError, StoreBackend, TickOutcome, tick,
};
pub use serve::HttpConfig;
